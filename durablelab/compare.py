"""Compare runs: one row of metrics per run, to put policies, fault plans and seeds side by
side.

An experiment asks questions such as "did full jitter cut the retries the rate limiter
caused?", "what did the crash cost in re-executed effects?", "how much did replay re-read?".
`compare` answers them from what each run recorded (its history, attempts, wake-ups and
crashes) and nothing else, so it gives the same numbers for runs read from an engine and
for runs read back from an export (`dl.load`), and it never needs the engine or the code.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from .errors import bad_type, bad_value
from .export import as_runs
from .metrics import (RETRY_COLUMNS, RETRY_OUTCOMES, measure, text_bytes, usage_of,
                      value_bytes)
from .run import Run

COLUMNS = ["source", "status", "virtual_duration", "attempts", "activities", "retries",
           *RETRY_COLUMNS, "crashes",
           "effect_reexecutions", "duplicates_prevented", "model_calls", "input_tokens",
           "output_tokens", "tokens", "cost", "wakeups", "events_replayed", "history_events", "history_bytes"]

#: the world's ledgers, added by ``compare(runs, world=...)``.
LEDGER_COLUMNS = ["model_calls_paid", "cost_paid", "effects", "duplicate_effects"]


def compare(runs, world=None) -> pd.DataFrame:
    """A DataFrame of metrics, one row per run, indexed by ``run_id``.

    `runs` is a list of `Run`, a single `Run`, an `Engine` (all its runs) or the path of a
    file written by `dl.export`. Experiments (from `dl.sweep` or `dl.load`: one, a list, or
    ``{label: experiment}``) give their ``cells`` side by side instead, one frame with an
    ``experiment`` column first. Columns for runs (times in seconds of the engine's clock):

    - ``source``: who recorded the run: ``"durablelab"``, ``"temporal"``, ``"dbos"`` or
      ``"langgraph"`` (`Run.source`; an export keeps it).
    - ``status``: running, waiting, completed, failed, continued or diverged.
    - ``virtual_duration``: ``ended_at - started_at``; for an unfinished run,
      ``Run.latest_at - started_at``: the latest instant it recorded (an event, the end of
      an attempt, a wake-up) minus ``started_at``.
    - ``attempts``: activity attempts made: those that reached an outcome (ok or an error)
      and one still in flight in a run that has not ended. A row that a worker crash cut
      short (outcome ``crashed``) is not an attempt: it is counted in ``crashes``. Where a
      source records only an activity's last attempt number (Temporal), that number
      counts, so unrecorded attempts are not lost.
    - ``activities``: activities that had at least one attempt (each position once).
    - ``retries``: ``attempts - activities``: attempts after an activity's first.
    - ``retries_transient``, ``retries_rate_limited``, ``retries_timeout``,
      ``retries_malformed``, ``retries_non_retryable``, ``retries_circuit_open``: the
      retries each kind of failure caused: attempts with that outcome that another attempt
      of the same activity followed. ``retries_non_retryable`` is 0 for durablelab runs,
      which never retry such errors; that is the lesson. ``retries_other``: retries whose
      outcome is none of these or was not recorded. The retries_* columns add up to
      ``retries``.
    - ``crashes``: worker deaths during the run's life (its own `Crash` faults, other runs'
      and ``engine.crash()``), the rows of ``Run.crashes``.
    - ``effect_reexecutions``: attempts whose function ran but whose answer was not
      recorded, so a retry or the recovered worker ran it again: the run's own crashes at
      ``after_effect`` plus attempts that timed out. It counts *possible* duplicate side
      effects, as far as the run's records show: a `Hang` also ends as a time-out though
      its function never ran, and an attempt in flight when another run's crash killed the
      worker leaves no record at all. Whether a duplicate really happened is the service's
      to say: its ledger counts true duplicates (``service.duplicate_effects``), and a
      service that honours idempotency keys has none.
    - ``duplicates_prevented``: the effect re-executions (as above) of activities that
      recorded the idempotency key they passed on: a `dl.agents.react` tool records
      ``{"result", "idempotency_key"}``, and a non-null key there means the repeated effect
      carried the same key as the first, so a service that honours keys answered it from
      its ledger instead of doing it twice.
    - ``model_calls``, ``input_tokens``, ``output_tokens``, ``tokens`` (input + output),
      ``cost``: what the model billed. The activities whose recorded result is a dict with
      a ``"usage"`` dict (``input_tokens``, ``output_tokens``, ``cost``; a missing key
      counts 0), as `dl.sim.SimLLM` returns, plus the broken answers thrown away
      (`ModelOutputError` attempts that carried their usage: ``Run.discarded``), which
      history does not keep but the model billed. An attempt whose answer was lost (a
      time-out) reported no usage and counts nothing; the model's own ledger
      (``llm.usage``) has it.
    - ``wakeups``: how often the workflow code ran from the top (``Run.wakeups`` rows).
    - ``events_replayed``: events handed back from history over all wake-ups: the price of
      replay.
    - ``history_events``: events in history; ``history_bytes``: the size of the history's
      payload: for each event, the UTF-8 bytes of its name plus those of its value as
      compact JSON (a missing value counts 0). It measures what a run stores and replays,
      the same for a run from the engine and one loaded from an export.

    `world`: the simulated world each run met, to add its ledgers (`LEDGER_COLUMNS`):
    ``{run_id: world}``, or one world when there is one run. A world is what
    ``world(clock)`` returns in a sweep: an object or dict whose attributes or items are
    services (`dl.sim.Payments`, ...) and models (`dl.sim.SimLLM`, `dl.agents.FakeChatServer`),
    or one of these alone. Its ledgers count what really happened outside, whatever the
    run's records show:

    - ``model_calls_paid``: requests the models answered (``SimLLM.usage["calls"]``,
      ``FakeChatServer.answered``), broken answers included: what was billed.
    - ``cost_paid``: dollars the models billed (``SimLLM.usage["cost"]``; 0 for a model
      without prices).
    - ``effects``: effects the services created (``len(service.effects)``), repeats
      included.
    - ``duplicate_effects``: effects created again for an idempotency key that already had
      one (``service.duplicate_effects``); a repeat without a key shows only in ``effects``.

    A run the mapping leaves out gets missing values (``<NA>``) there. Raises `BadValue`
    for a world given with several runs and no mapping, or a mapping naming a run that is
    not compared; `BadType` for `world` with experiments (a sweep already counts its
    world's duplicate effects).
    """
    from .experiments import Experiment, compare_experiments
    items = list(runs.values()) if isinstance(runs, dict) else (
        [runs] if isinstance(runs, Experiment) else runs if isinstance(runs, (list, tuple))
        else None)
    if items and all(isinstance(item, Experiment) for item in items):
        if world is not None:
            raise bad_type("dl.compare", "world", "world= goes with runs, not experiments: "
                           "a sweep counts its world's duplicate effects in its own frame "
                           "(the duplicate_effects column); drop world=")
        return compare_experiments(runs)
    runs = as_runs(runs)
    rows = [metrics(run) for run in runs]
    frame = pd.DataFrame(rows, columns=["run_id", *COLUMNS]).set_index("run_id")
    if world is not None:
        worlds = _worlds(world, [run.run_id for run in runs])
        counted = [ledgers(worlds[run.run_id]) if run.run_id in worlds else
                   dict.fromkeys(LEDGER_COLUMNS, pd.NA) for run in runs]
        for column in LEDGER_COLUMNS:
            dtype = "Float64" if column == "cost_paid" else "Int64"
            frame[column] = pd.array([row[column] for row in counted], dtype=dtype)
    return frame


def ledgers(world) -> dict[str, Any]:
    """What a simulated world's ledgers counted (see `compare`'s `world`): model calls
    paid, their cost, effects and duplicate effects, summed over its services and models."""
    paid, cost, effects, duplicates, seen = 0, 0.0, 0, 0, set()
    for _, part in parts(world):
        if id(part) in seen:            # one service under two names counts once
            continue
        seen.add(id(part))
        usage = getattr(part, "usage", None)
        if isinstance(usage, dict) and isinstance(usage.get("calls"), int):     # SimLLM
            paid += usage["calls"]
            cost += float(usage.get("cost", 0.0))
        elif isinstance(getattr(part, "answered", None), int):      # FakeChatServer
            paid += part.answered
        if isinstance(getattr(part, "effects", None), list) and isinstance(
                getattr(part, "duplicate_effects", None), int):     # a Service
            effects += len(part.effects)
            duplicates += part.duplicate_effects
    return {"model_calls_paid": paid, "cost_paid": cost, "effects": effects,
            "duplicate_effects": duplicates}


def _worlds(world, run_ids: list[str]) -> dict:
    """{run_id: world} from compare's `world`: a mapping by run id, or one world for one run."""
    if isinstance(world, dict) and any(key in run_ids for key in world):
        unknown = [key for key in world if key not in run_ids]
        if unknown:
            raise bad_value("dl.compare", "world", f"world= names run {unknown[0]!r}, which "
                            f"is not among the runs compared ({', '.join(run_ids)}); give "
                            f"{{run_id: world}} for the runs compared")
        return dict(world)
    if len(run_ids) != 1:
        raise bad_value("dl.compare", "world", f"one world for {len(run_ids)} runs: its "
                        f"ledgers would be counted for each; give each run its own world, "
                        f"world={{run_id: world}}")
    return {run_ids[0]: world}


def metrics(run: Run) -> dict[str, Any]:
    """The metrics of one run, as a dict (see `compare` for each one's meaning): the ones
    a sweep reports too come from `durablelab.metrics.measure`, from the run's frames as
    plain rows; this adds the ones only `compare` reports (see `_compare_only`)."""
    # Plain lists, not groupby: pandas costs tens of microseconds a call, and a sweep
    # compares thousands of runs.
    history, attempts, wakeups = run.history, run.attempts, run.wakeups
    kinds, values = history["kind"].tolist(), history["value"].tolist()
    # `measure` wants each activity's rows together; a source may interleave them.
    by_position: dict = {}
    for row in zip(attempts["position"].tolist(), attempts["attempt"].tolist(),
                   attempts["outcome"].tolist()):
        if row[2] != "crashed":
            by_position.setdefault(row[0], []).append(row)
    tried = [row for rows in by_position.values() for row in rows]
    usages = [u for u in (usage_of(value) for value, ok, kind in
                          zip(values, history["ok"].tolist(), kinds)
                          if kind == "activity" and ok) if u is not None]
    shared = measure(status=run.status, started_at=run.started_at, ended_at=run.ended_at,
                     instants=_instants(run), attempts=tried, usages=usages,
                     discarded=run.discarded, crashes=len(run.crashes),
                     replayed=wakeups["replayed"].tolist(), history_events=len(history))
    return {"run_id": run.run_id, "source": run.source, **shared,
            **_compare_only(run, tried, kinds, values)}


def _instants(run: Run) -> list:
    """The instants a run's frames recorded (see `Run.latest_at`)."""
    return [*run.history["recorded_at"].tolist(), *run.attempts["ended_at"].tolist(),
            *run.wakeups["woke_at"].tolist()]


def _compare_only(run: Run, tried: list, kinds: list, values: list) -> dict[str, Any]:
    """The metrics a sweep does not report. ``effect_reexecutions`` and
    ``duplicates_prevented`` read the run's own crash points and idempotency keys; a sweep
    has something better, the world's ledger of effects really done twice (its
    ``duplicate_effects``, see `experiments.runner.duplicate_effects`). ``history_bytes``
    encodes every value again: a price a sweep of thousands of runs does not pay."""
    crashes, history = run.crashes, run.history
    timeouts = [position for position, _, outcome in tried if outcome == "timeout"]
    # Where an effect may have run again: the run's own after_effect crashes, and time-outs.
    rerun_at = [position for owner, point, position in
                zip(crashes["run_id"].tolist(), crashes["point"].tolist(),
                    crashes["position"].tolist())
                if owner == run.run_id and point == "after_effect"]
    effect_crashes = len(rerun_at)
    rerun_at += timeouts
    keyed = {position for position, value, kind in zip(history["position"].tolist(), values,
                                                        kinds)
             if kind == "activity" and isinstance(value, dict)
             and isinstance(value.get("idempotency_key"), str)}
    return {
        "effect_reexecutions": effect_crashes + len(timeouts),
        "duplicates_prevented": sum(position in keyed for position in rerun_at),
        "history_bytes": sum(text_bytes(name) + value_bytes(value)
                             for name, value in zip(history["name"].tolist(), values)),
    }


def parts(world):
    # the experiments' own reading of a world, imported late: experiments imports compare
    from .experiments.runner import parts as world_parts
    return world_parts(world)


__all__ = ["compare", "metrics", "ledgers", "COLUMNS", "LEDGER_COLUMNS", "RETRY_OUTCOMES"]
