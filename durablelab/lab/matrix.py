"""The fault matrix: every kind of failure against every retry policy, one run per cell.

A retry policy is a set of answers to questions you rarely ask one at a time: is a 429
retried, and does it wait for Retry-After? Is a 400 retried (it should not be: the same
request gets the same answer)? A 401? What happens to a call that hangs, or to a model
answer that is not JSON? `fault_matrix` asks all of them at once. Its rows are failure
kinds, injected with a `FaultPlan` into a single metered model call; its columns are
policies (your own, or `dl.presets`, which mimic other tools' defaults); each cell is one
run, and says whether the call was retried, how many attempts it took, how the run ended,
how long it took in virtual time, and what it cost: every call that reached the provider
is billed, including answers thrown away.

By default a failure happens ``times=2`` in a row and then the service is fine again: a
blip that a good policy rides out and a policy that gives up too early does not. With
``times=None`` the failure never ends, and the matrix shows how each policy fails.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import pandas as pd

from ..faults import (ConnectionReset, Fail, FaultPlan, Hang, Malformed, RateLimit,
                     ServerError, Timeout)
from ..retry import RetryPolicy
from ..errors import BadType, BadValue

#: the failure kinds of the matrix's rows: a name, and the rule that injects it (made for
#: the activity "model", firing `times` times).
FAILURES = {
    "429 with Retry-After": lambda times: RateLimit("model", times=times, retry_after=30),
    "429 without Retry-After": lambda times: RateLimit("model", times=times),
    "500": lambda times: ServerError("model", times=times, status=500),
    "503": lambda times: ServerError("model", times=times, status=503),
    "400": lambda times: Fail("model", times=times, status=400),
    "401": lambda times: Fail("model", times=times, status=401),
    "timeout": lambda times: Timeout("model", times=times),
    "connection reset": lambda times: ConnectionReset("model", times=times),
    "malformed JSON": lambda times: Malformed("model", times=times, kind="truncated"),
    "schema violation": lambda times: Malformed("model", times=times, kind="schema"),
    "hang": lambda times: Hang("model", times=times),
}


class MeteredModel:
    """The world of a matrix run: a model that answers every call it receives and bills it
    (`calls`, `cost`). It lives outside the worker, so a call whose answer is lost (a
    time-out) or thrown away (a malformed answer) is still billed."""

    def __init__(self, price: float):
        self.price, self.calls = price, 0

    @property
    def cost(self) -> float:
        return self.calls * self.price

    def __call__(self, prompt: str, feedback=None) -> dict:
        self.calls += 1
        return {"answer": f"summary of {prompt}"}


def matrix_workflow(ctx, spec: dict) -> dict:
    """One model call, the cell's policy replacing the default; `spec` carries its time-out."""
    return ctx.activity("model", ctx.world, spec["prompt"],
                        start_to_close=spec["start_to_close"])


@dataclass
class FaultMatrix:
    """What `fault_matrix` found: `frame` a row per (failure, policy) cell with columns
    ``failure, policy, retried, attempts, status, error_class, virtual_duration, calls,
    cost``; `table(metric)` lays one column out as failures by policies."""

    frame: pd.DataFrame
    times: int | None

    def table(self, metric: str = "summary") -> pd.DataFrame:
        """Failures down, policies across. ``"summary"`` gives each cell as text:
        "retried, 3 attempts, completed, $0.03"; any frame column gives its values."""
        frame = self.frame
        if metric == "summary":
            frame = frame.assign(summary=[
                f"{'retried' if r.retried else 'not retried'}, {r.attempts} attempt"
                f"{'s' if r.attempts != 1 else ''}, {r.status}, ${r.cost:.2f}"
                for r in frame.itertuples()])
        elif metric not in frame.columns:
            raise BadValue(f"FaultMatrix.table({metric!r}): use 'summary' or one of "
                             f"{', '.join(frame.columns[2:])}")
        return frame.pivot(index="failure", columns="policy", values=metric).loc[
            list(dict.fromkeys(frame.failure)), list(dict.fromkeys(frame.policy))]

    def plot(self, **options):
        """A heat map of the cells: colour by final status, text the attempts and cost.
        See `durablelab.viz.matrix.matrix_plot`."""
        from ..viz.matrix import matrix_plot
        return matrix_plot(self, **options)


def fault_matrix(policies: dict, failures=None, times: int | None = 2,
                 start_to_close: float = 30.0, price: float = 0.01,
                 timeout: float = 86400.0) -> FaultMatrix:
    """Run one model call per (failure kind, policy) and tabulate what each policy did.

    Args:
        policies: ``{name: RetryPolicy}``, the columns (for example `dl.presets`).
        failures: names from `FAILURES` (the rows); None: all of them, in that order.
        times: how many attempts in a row the failure hits, then the service is fine;
            None: it never stops.
        start_to_close: seconds an attempt may take: what ends a time-out or a hang.
        price: dollars the provider bills per call that reaches it.
        timeout: virtual seconds after which a run is stopped (a policy that retries
            without limit would otherwise never end an endless failure).

    Each run is deterministic (seed 0, virtual time), so the matrix is the same every time.
    """
    from ..engine import Engine
    if not isinstance(policies, Mapping) or not policies:
        raise BadType("fault_matrix(policies=...): give {name: RetryPolicy}, e.g. "
                        "{'mine': dl.RetryPolicy(max_attempts=5)}")
    for name, policy in policies.items():
        if not isinstance(policy, RetryPolicy):
            raise BadType(f"fault_matrix(policies): {name!r} is {policy!r}, not a "
                            f"dl.RetryPolicy")
        if times is None and policy.max_attempts is None and policy.cap(1) == 0:
            raise BadValue(f"fault_matrix(policies): {name!r} retries without limit and "
                             f"without waiting, so against a failure that never ends "
                             f"(times=None) it would retry at one virtual instant forever; "
                             f"give it a wait (initial > 0) or max_attempts, or give the "
                             f"matrix times=N")
    if times is not None and (isinstance(times, bool) or not isinstance(times, int)
                              or times < 1):
        raise BadValue(f"fault_matrix(times={times!r}): give how many attempts in a row the "
                         f"failure hits, an int >= 1, or None for a failure that never ends")
    if isinstance(failures, str):
        raise BadType(f"fault_matrix(failures={failures!r}): give a list of failure kinds, "
                        f"e.g. failures=[{failures!r}]")
    names = list(FAILURES) if failures is None else list(failures)
    unknown = [n for n in names if n not in FAILURES]
    if unknown:
        raise BadValue(f"fault_matrix(failures=...): unknown failure kind {unknown[0]!r} "
                         f"(known: {', '.join(FAILURES)})")
    repeated = next((n for i, n in enumerate(names) if n in names[:i]), None)
    if repeated is not None:
        raise BadValue(f"fault_matrix(failures=...): {repeated!r} is given twice; each kind "
                         f"is one row")
    rows = []
    engine = Engine()
    try:
        for failure in names:
            plan = FaultPlan([FAILURES[failure](times)])
            for policy_name, policy in policies.items():
                model = MeteredModel(price)
                engine.world = model
                run_id = engine.start(matrix_workflow,
                                      {"prompt": "ticket 42", "start_to_close": start_to_close},
                                      run_id=f"{failure}/{policy_name}", faults=plan,
                                      policies=policy, timeout=timeout)
                engine.run_until_idle()
                run = engine.run(run_id)
                attempts = run.attempts[run.attempts.outcome != "crashed"]
                error_class = getattr(run.error, "error_class", None) or (
                    type(run.error).__name__ if run.error is not None else None)
                ended_at = run.ended_at if run.ended_at is not None else engine.clock.now()
                rows.append((failure, policy_name, len(attempts) > 1, len(attempts),
                             run.status, error_class, ended_at - run.started_at,
                             model.calls, model.cost))
    finally:
        engine.close()
    frame = pd.DataFrame(rows, columns=["failure", "policy", "retried", "attempts", "status",
                                        "error_class", "virtual_duration", "calls", "cost"])
    return FaultMatrix(frame, times)


__all__ = ["fault_matrix", "FaultMatrix", "FAILURES", "MeteredModel", "matrix_workflow"]
