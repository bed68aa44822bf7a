"""Retry presets: `RetryPolicy` values that mimic the documented defaults of other tools.

Put a preset beside your own policy in a sweep to see what you would get by not choosing:
``dl.sweep(wf, inputs, policies={"mine": MINE, **dl.presets})``. Each default below is
taken from that tool's documentation (``dl.presets.sources[name]`` quotes it and says
where), and mapped onto durablelab's policy fields. Where the tool does something a
`RetryPolicy` cannot say, the source says so too, rather than pretend:

- LangGraph *adds* up to 1 s of random jitter after the cap, which ``jitter="additive"``
  does too. stamina adds its second before the cap and the OpenAI client *removes* up to
  25 %, which no `RetryPolicy` jitter says, so those presets use ``jitter="none"``: their
  waits are the documented caps.
- durablelab never retries what `dl.classify` calls `NonRetryable` (HTTP 400, 401, 404,
  validation errors), whatever the policy; each tool has its own list.
- ``"prefect-task-retries"`` retries at once, without waiting, as Prefect does when a
  task sets ``retries`` and no ``retry_delay_seconds``.
- ``"tenacity-bare"`` retries forever without waiting. Under a virtual clock an attempt
  takes no time, so such a run would retry at one instant forever: `dl.sweep` refuses a
  policy without limit and without wait, and says how to give it one.
"""

from __future__ import annotations

from collections.abc import Mapping

from .retry import RetryPolicy

_PRESETS = {
    "temporal-default": RetryPolicy(max_attempts=None, initial=1.0, backoff=2.0,
                                    max_interval=100.0, jitter="none"),
    "langgraph-default": RetryPolicy(max_attempts=3, initial=0.5, backoff=2.0,
                                     max_interval=128.0, jitter="additive"),
    "openai-client-default": RetryPolicy(max_attempts=3, initial=0.5, backoff=2.0,
                                         max_interval=8.0, jitter="none"),
    "tenacity-bare": RetryPolicy(max_attempts=None, initial=0.0, backoff=1.0,
                                 max_interval=0.0, jitter="none"),
    "stamina-default": RetryPolicy(max_attempts=10, initial=0.1, backoff=2.0,
                                   max_interval=5.0, jitter="none"),
    "prefect-task-retries": RetryPolicy(max_attempts=4, initial=0.0, backoff=1.0,
                                        max_interval=0.0, jitter="none"),
    "no-retries": RetryPolicy(max_attempts=1),
}

_SOURCES = {
    "temporal-default": (
        "Temporal's default Activity retry policy. temporalio (Python SDK) RetryPolicy: "
        "initial_interval \"Default 1s\", backoff_coefficient \"Default 2.0\", "
        "maximum_interval \"Default 100x of initial interval\", maximum_attempts \"If 0, the "
        "default, there is no maximum\". https://docs.temporal.io/encyclopedia/retry-policies "
        "and temporalio.common.RetryPolicy. No jitter is documented."),
    "langgraph-default": (
        "LangGraph RetryPolicy (langgraph.types): initial_interval: float = 0.5, "
        "backoff_factor: float = 2.0, max_interval: float = 128.0, max_attempts: int = 3, "
        "jitter: bool = True. https://reference.langchain.com/python/langgraph/types/"
        "RetryPolicy. Checked against langgraph 1.2.24 (langgraph/pregel/_retry.py): "
        "max_attempts counts the first attempt; the wait after failure n is "
        "min(max_interval, initial_interval * backoff_factor ** (n - 1)) + "
        "random.uniform(0, 1): the jitter is *added* after the cap, so every wait is up to "
        "1 s longer than the cap. The preset waits the same (jitter=\"additive\"): "
        "0.5-1.5 s, then 1-2 s. Its default retry_on retries 5xx and connection errors, "
        "not an httpx 429; "
        "durablelab retries what dl.classify calls retryable."),
    "openai-client-default": (
        "The OpenAI Python client's own retries: \"Max retries: 2 attempts (3 total requests "
        "including the initial attempt)\", exponential backoff with jitter "
        "(https://www.mintlify.com/openai/openai-python/concepts/retries); openai/_constants.py: "
        "DEFAULT_MAX_RETRIES = 2, INITIAL_RETRY_DELAY = 0.5, MAX_RETRY_DELAY = 8.0, and a "
        "Retry-After of up to MAX_RETRY_AFTER_DELAY = 2 * 60 s is honoured (durablelab waits "
        "at least any retry_after). Its jitter removes up to 25 % of each wait; not modelled "
        "here (jitter=\"none\")."),
    "tenacity-bare": (
        "tenacity's bare @retry: \"the default behavior is to retry forever without waiting\" "
        "(https://pypi.org/project/tenacity/). Unlimited attempts, no wait: dl.sweep refuses "
        "it unless given a wait, since under a virtual clock it would retry at one instant "
        "forever."),
    "stamina-default": (
        "stamina.retry(on=..., attempts: int | None = 10, timeout = 45.0, wait_initial = 0.1, "
        "wait_max = 5.0, wait_jitter = 1.0, wait_exp_base = 2.0); \"min(wait_max, wait_initial "
        "* wait_exp_base^(attempt - 1) + random(0, wait_jitter))\" "
        "(https://tessl.io/registry/tessl/pypi-stamina/files/docs/retry-core.md, "
        "https://pypi.org/project/stamina/). The additive jitter and the 45 s total timeout "
        "are not modelled here (give the activity schedule_to_close=45 for the latter)."),
    "prefect-task-retries": (
        "Prefect's @task(retries=3): \"To enable retries, pass retries and "
        "retry_delay_seconds parameters to your task\"; without retry_delay_seconds the "
        "task is retried at once: the settings PREFECT_TASKS_DEFAULT_RETRIES and "
        "PREFECT_TASKS_DEFAULT_RETRY_DELAY_SECONDS both default to 0 "
        "(https://docs.prefect.io/v3/how-to-guides/workflows/retries; "
        "prefect/settings/models/tasks.py, TasksSettings.default_retry_delay_seconds: "
        "default=0). retries counts the retries, so retries=3 is max_attempts=4, with no "
        "wait and no jitter. Prefect retries any exception (unless retry_condition_fn says "
        "otherwise); durablelab does not retry what dl.classify calls NonRetryable."),
    "no-retries": (
        "No retries at all: one attempt (max_attempts=1), what a bare function call does."),
}


class Presets(Mapping):
    """A read-only mapping of preset names to `RetryPolicy` values, with ``sources``:
    where each tool documents the default it mimics, quoted."""

    def __init__(self, presets: dict, sources: dict):
        self._presets, self.sources = dict(presets), dict(sources)

    def __getitem__(self, name: str) -> RetryPolicy:
        try:
            return self._presets[name]
        except KeyError:
            raise KeyError(f"no retry preset {name!r}; the presets are "
                           f"{', '.join(self._presets)}") from None

    def __iter__(self):
        return iter(self._presets)

    def __len__(self) -> int:
        return len(self._presets)

    def __repr__(self) -> str:
        return "dl.presets(" + ", ".join(self._presets) + ")"


#: The presets, by name; ``presets.sources[name]`` says where each default is documented.
presets = Presets(_PRESETS, _SOURCES)

__all__ = ["presets", "Presets"]
