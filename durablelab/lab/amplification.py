"""Retry amplification: a client that retries inside an activity the engine also retries.

Most HTTP and model clients retry on their own (the OpenAI Python client twice, by
default). Put such a client inside an activity and give the activity a retry policy, and
every engine attempt becomes several requests: with 2 client retries and 3 engine attempts
a failing call reaches the service 3 x 3 = 9 times, where 3 would do. Nest one more layer
(a gateway that retries too) and it multiplies again. During an outage that is load the
service gets exactly when it can least take it.

And the inner retries buy nothing. They happen within one attempt, back to back (here in
the same virtual instant), so they cannot outlast an outage; the engine's retries wait a
durable backoff between attempts and do. `retry_amplification` measures it: one run per
(client retries, engine attempts) against a service that is down for the first `outage`
virtual seconds, counting what the service received.
"""

from __future__ import annotations

import pandas as pd

from ..retry import RetryPolicy
from ..sim.services import Service, ServiceUnavailable


class Outage(Service):
    """A service that answers 503 to every request until the engine's clock reaches
    `until`, and then works: the world of an amplification run (`world(clock)`)."""

    prefix = "ans"

    def __init__(self, clock, until: float):
        super().__init__(honor_keys=True)
        self.clock, self.until = clock, until

    def complete(self, prompt: str, idempotency_key: str | None = None) -> dict:
        if self.clock.now() < self.until:
            self.calls.append({"op": "complete", "args": {"prompt": prompt},
                               "key": idempotency_key})
            raise ServiceUnavailable(f"the model service is down until t={self.until:g}s (503)")
        return self.perform("complete", {"prompt": prompt}, idempotency_key)


def client_call(service: Outage, retries: int, prompt: str, idempotency_key=None) -> dict:
    """A client with its own retries, like an SDK's ``max_retries``: up to `retries` more
    tries, back to back, before it gives up and raises."""
    for attempt in range(retries + 1):
        try:
            return service.complete(prompt, idempotency_key=idempotency_key)
        except ServiceUnavailable:
            if attempt == retries:
                raise
    raise AssertionError("unreachable")


def amplification_workflow(ctx, spec: dict) -> dict:
    """One model call through a client that retries `spec["client_retries"]` times, in an
    activity the engine retries under the run's policy."""
    def call(prompt, idempotency_key=None):
        return client_call(ctx.world, spec["client_retries"], prompt, idempotency_key)
    return ctx.activity("model", call, spec["prompt"])


def retry_amplification(client_retries=(0, 1, 2, 3), engine_attempts=(1, 3, 6),
                        outage: float = 10.0, initial: float = 1.0) -> pd.DataFrame:
    """One run per (client retries, engine attempts) against a service down for the first
    `outage` virtual seconds; a row each with ``client_retries, engine_attempts, status,
    attempts`` (engine attempts used), ``calls`` (requests the service received),
    ``calls_per_attempt`` and ``finished_at`` (virtual seconds after the run's start).

    The engine's policy backs off ``initial * 2 ** (n - 1)`` seconds without jitter, so the
    numbers are exact: with a 10 s outage the engine's fifth attempt (at t=15 s) succeeds.
    """
    from ..engine import Engine
    rows = []
    with Engine() as engine:       # one engine: each run ends before the next starts
        for retries in client_retries:
            for attempts in engine_attempts:
                policy = RetryPolicy(max_attempts=attempts, initial=initial, backoff=2.0,
                                     max_interval=3600, jitter="none")
                started_at = engine.clock.now()
                engine.world = service = Outage(engine.clock, started_at + outage)
                run_id = engine.start(amplification_workflow,
                                      {"prompt": "summarise ticket 42",
                                       "client_retries": retries},
                                      run_id=f"client{retries}/engine{attempts}",
                                      policies=policy)
                engine.run_until_idle()
                run = engine.run(run_id)
                used = len(run.attempts)
                rows.append((retries, attempts, run.status, used, len(service.calls),
                             len(service.calls) / used, run.ended_at - started_at))
    return pd.DataFrame(rows, columns=["client_retries", "engine_attempts", "status",
                                       "attempts", "calls", "calls_per_attempt",
                                       "finished_at"])


def amplification_plot(frame: pd.DataFrame, *, width: float | None = None):
    """Bars of the calls the service received, by engine attempts (groups) and client
    retries (bars), from `retry_amplification`; a hatched bar is a run that failed."""
    from matplotlib.patches import Patch
    from matplotlib.ticker import MaxNLocator
    from ..viz.plots import Figure
    fig = Figure(figsize=(width or 7.5, 3.6))
    ax = fig.add_subplot()
    groups = list(dict.fromkeys(frame.engine_attempts))
    inner = list(dict.fromkeys(frame.client_retries))
    bar = 0.8 / len(inner)
    colours = ["#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00"]
    for k, retries in enumerate(inner):
        part = frame[frame.client_retries == retries]
        xs = [groups.index(a) + (k - (len(inner) - 1) / 2) * bar for a in part.engine_attempts]
        bars = ax.bar(xs, part.calls, bar * 0.95, color=colours[k % len(colours)])
        for rect, status, calls in zip(bars, part.status, part.calls):
            if status != "completed":
                rect.set_hatch("///")
                rect.set_edgecolor("white")
            ax.annotate(str(calls), (rect.get_x() + rect.get_width() / 2, rect.get_height()),
                        ha="center", va="bottom", fontsize=7, xytext=(0, 1),
                        textcoords="offset points")
    ax.set_xticks(range(len(groups)), [f"engine max_attempts={a}" for a in groups])
    ax.set_ylabel("requests the service received")
    ax.set_title("one call during an outage: hatched bars are runs that failed", fontsize=10)
    handles = [Patch(facecolor=colours[k % len(colours)],
                     label=f"{r} client retr{'y' if r == 1 else 'ies'}")
               for k, r in enumerate(inner)]
    handles.append(Patch(facecolor="#888888", hatch="///", edgecolor="white",
                         label="the run failed"))
    ax.legend(handles=handles, frameon=False, fontsize=8, loc="upper left")
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    ax.margins(y=0.15)
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)
    fig.tight_layout()
    return fig


__all__ = ["retry_amplification", "amplification_plot", "Outage", "client_call",
           "amplification_workflow"]
