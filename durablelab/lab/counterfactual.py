"""Counterfactual re-runs: would another retry policy have survived last night?

A run's ``attempts`` frame is a record of what the world did to it: at history position 3
the first two attempts got a 503, at position 5 the model's answer was malformed once, the
worker crashed after the charge's effect. `failures_plan(run)` turns that record into a
`FaultPlan` of rules pinned to exactly those attempts (``Fail(name, error=..., message=...,
position=3, attempts=[1])``, a `Hang` for a time-out, a `Crash` for a crash at a point), and
`counterfactual(run, workflow, policies=...)` runs the same workflow on the same input, with
the same seed, run id and signals, against that plan, under other retry policies.

So the same failures meet different policies: a policy with fewer attempts gives up where
the recorded one went on; one with more attempts goes past the last recorded failure, and
then the activity really runs (in the world you give it). What the record cannot say is
whether those extra attempts would have failed too: a counterfactual answers "would B have
survived *these* failures", not "would the outage have ended". The returned run's
``notes`` say which attempts went past the record. Failures are matched by attempt number,
not by time: a policy that waits longer meets the same failures, later.

Under the run's own policies the counterfactual repeats the run exactly (same attempts,
outcomes, errors and delays), which is how you check that a record is complete.
"""

from __future__ import annotations

import dataclasses
import math
import re
from typing import Any, Callable

from ..faults import CRASH_POINTS, Crash, Fail, FaultPlan, Hang, Latency
from ..errors import BadType, BadValue

#: attempt outcomes that are not failures of the world: nothing to meet again.
NOT_FAILURES = ("ok", "in_flight", "circuit_open", "throttled")
_CRASHED_AT = re.compile(r"worker crashed at (\w+)")
_RETRY_AFTER = re.compile(r"Retry-After: ([0-9.]+) ?s")


def _number(value) -> float | None:
    try:
        value = float(value)
    except (TypeError, ValueError):
        return None
    return value if math.isfinite(value) else None


def failures_plan(run) -> FaultPlan:
    """A `FaultPlan` that meets exactly the failures `run.attempts` records, each rule pinned
    to its attempt (``position=``, ``attempts=``):

    - a failed attempt becomes ``Fail(activity, error=<error_class>, message=<error>)``,
      with the Retry-After its message names, after a `Latency` of the time it took;
    - a time-out becomes a `Hang` (nothing answers, so the same time-out ends it);
    - a crash at a point becomes ``Crash(activity, point=..., times=1)``.

    Refusals by a circuit breaker or a throttle are left out: they are what a policy did,
    not the world.
    A worker death that the run only suffered (another run's crash, ``engine.crash()``)
    left no point in its attempts and is left out too.
    """
    rules = []
    for row in run.attempts.itertuples():
        outcome = row.outcome
        if outcome in NOT_FAILURES or not isinstance(outcome, str):
            continue
        where = {"position": int(row.position), "attempts": int(row.attempt)}
        if outcome == "crashed":
            found = _CRASHED_AT.search(str(row.error or ""))
            if found and found.group(1) in CRASH_POINTS and found.group(1) != "during_wait":
                rules.append(Crash(row.activity, point=found.group(1), times=1, **where))
            continue
        if outcome == "timeout":
            rules.append(Hang(row.activity, **where))
            continue
        error_class = row.error_class if isinstance(row.error_class, str) else "Transient"
        if error_class not in ("NonRetryable", "Transient", "RateLimited", "ModelOutputError"):
            error_class = "Transient"
        message = row.error if isinstance(row.error, str) else None
        retry_after = None
        if error_class == "RateLimited" and message:
            hint = _RETRY_AFTER.search(message)
            retry_after = _number(hint.group(1)) if hint else None
        took = _number(row.ended_at) is not None and _number(row.started_at) is not None \
            and float(row.ended_at) - float(row.started_at)
        if took and took > 0:
            rules.append(Latency(row.activity, seconds=took, **where))
        rules.append(Fail(row.activity, error=error_class, message=message,
                          retry_after=retry_after, **where))
    rules += _wait_crashes(run)
    return FaultPlan(rules)


def _wait_crashes(run) -> list:
    """Crashes during a wait (a timer, a signal wait, a retry backoff) are not attempts;
    `run.crashes` has them, with the position of the wait (or of the retried activity)."""
    crashes = getattr(run, "crashes", None)
    if crashes is None or not len(crashes):
        return []
    names = {int(e.position): e.name for e in run.history.itertuples()}
    names.update({int(a.position): a.activity for a in run.attempts.itertuples()})
    rules = []
    for row in crashes.itertuples():
        if row.run_id == run.run_id and row.point == "during_wait" and _number(row.position):
            position = int(row.position)
            if position in names:
                rules.append(Crash(names[position], point="during_wait", position=position,
                                   times=1))
    return rules


def _signals(run) -> list[tuple[str, Any, str | None]]:
    """The signals the run received, in the order it received them."""
    received = []
    for event in run.history.itertuples():
        if event.kind == "signal_received" and isinstance(event.value, dict):
            received.append((event.name, event.value.get("value"), event.value.get("signal_id")))
    return received


def counterfactual(run, workflow: Callable, policies=None, world=None):
    """Run `workflow` on `run`'s input again, meeting exactly the failures `run.attempts`
    records (see `failures_plan`), under `policies`; returns the new `Run`.

    Use it to ask "would policy B have survived last night?" of a run from a store or one
    loaded from an export (`dl.load`). The re-run happens in a fresh in-memory `Engine`
    with the run's seed, run id (so its idempotency keys are the recorded ones) and the
    signals it received, sent as soon as it starts.

    Args:
        run: the recorded `Run`.
        workflow: the workflow function it ran (the same ``module:qualname``).
        policies: a `RetryPolicy`, or ``{activity glob: RetryPolicy}``, replacing the
            policies the code passes (as `Engine.start(policies=)`); None keeps the code's.
        world: a factory ``world(clock)`` for the simulated world the re-run's code reaches
            as ``ctx.world``; None: no world.

    The returned run's ``notes`` name the attempts that went past the record: those ran
    the activity for real, in `world`.
    """
    from ..engine import Engine
    from ..registry import workflow_name
    name = workflow_name(workflow)
    if getattr(run, "source", "durablelab") == "durablelab" and run.workflow != name:
        raise BadValue(f"counterfactual(run {run.run_id!r}, workflow={name}): the run "
                         f"recorded workflow {run.workflow}; pass that function (a "
                         f"counterfactual changes the policies, not the code)")
    if world is not None and not callable(world):
        raise BadType(f"counterfactual(world={world!r}): world is a factory world(clock) "
                        f"returning the simulated world, or None")
    plan = failures_plan(run)
    engine = Engine()
    try:
        engine.world = world(engine.clock) if world is not None else None
        run_id = engine.start(workflow, run.input, run_id=run.run_id, faults=plan,
                              seed=int(run.seed), policies=policies)
        for signal_name, value, signal_id in _signals(run):
            engine.signal(run_id, signal_name, value, signal_id=signal_id)
        engine.run_until_idle()
        again = engine.run(run_id)
    finally:
        engine.close()
    recorded = {(int(r.position), int(r.attempt)) for r in run.attempts.itertuples()
                if r.outcome not in ("in_flight",)}
    beyond = sorted({(int(r.position), r.activity, int(r.attempt))
                     for r in again.attempts.itertuples()
                     if (int(r.position), int(r.attempt)) not in recorded
                     and r.outcome != "crashed"})
    notes = [f"counterfactual of run {run.run_id!r}: {len(plan)} rule(s) from its attempts, "
             f"policies {'of the code' if policies is None else 'replaced'}"]
    if beyond:
        notes.append("attempts past the record ran the activity for real: " + ", ".join(
            f"{activity} at position {p} (attempt {a})" for p, activity, a in beyond))
    return dataclasses.replace(again, notes=tuple(again.notes) + tuple(notes))


__all__ = ["counterfactual", "failures_plan"]
