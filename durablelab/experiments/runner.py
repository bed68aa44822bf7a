"""Running the runs of a sweep, and reading each one's metrics straight from the engine.

A sweep's unit of work is a *job*: some runs of one cell (policy, fault plan). Two ways to
run one:

- **With contention** every run of the cell starts in one engine around one world
  (``world(engine.clock)``), so they meet in the same rate limiter at the same virtual
  instants: a storm without jitter is a real storm.
- **Isolated** each run gets a fresh world on a fresh clock starting at 0, and nothing of
  another run: no shared breaker, no other run's crash. Opening an engine costs about
  24 ms (a DuckDB connection and its schema), a hundred times what a small run costs, so
  an `Isolated` runner keeps one in-memory engine and empties it between runs instead
  (`Engine.forget`): the run's rows wait in the in-memory store's queue
  (`durablelab.store`) and are dropped unwritten when the run has ended, so the next run
  starts from an empty store. A run that crashed has been through recovery, which reads
  the queue directly while it is short (`durablelab.queued`) and otherwise writes it to
  DuckDB to read it back; then the tables are emptied too (a few statements).
  `tests/test_sweep.py` checks that this gives exactly what a fresh engine per run gives.

Metrics come from the engine's in-memory state of each run, not from `Run` frames: building
four DataFrames costs a millisecond a run, more than the run itself. `run_metrics` hands the
state's rows to `durablelab.metrics.measure`, which `dl.compare` calls too, so each metric
is defined once.
"""

from __future__ import annotations

import contextlib
import gc
import math
from collections import Counter
from operator import itemgetter
from typing import Any

from ..budget import discarded_usage
from ..clock import VirtualClock
from ..engine import Engine
from ..loading import lived_through
from ..metrics import RETRY_COLUMNS, measure, usage_of

#: Columns of a run's metrics row, after (input, policy, fault_plan, seed, run_id).
METRICS = ["status", "error", "virtual_duration", "attempts", "activities", "retries",
           *RETRY_COLUMNS, "crashes",
           "model_calls", "input_tokens", "output_tokens", "tokens", "cost",
           "duplicate_effects", "wakeups", "events_replayed", "history_events"]

#: An isolated runner's engine is replaced after this many runs (it never grows: this
#: only bounds what a long-lived process keeps, such as the plans it has parsed).
RECYCLE_EVERY = 100_000


def discarded(engine, state) -> dict | None:
    """What run `state`'s broken model answers cost (`Run.discarded`), read from the store
    only when an attempt of it failed as a `ModelOutputError`: most runs had none, and a
    read costs a DuckDB statement."""
    broken = any(row.error_class == "ModelOutputError" for rows in state.attempts.values()
                 for row in rows) or any(e.error_class == "ModelOutputError"
                                         for e in state.history if e.kind == "activity")
    return discarded_usage(engine.store.burnt(state.run_id)) if broken else None


def run_metrics(state, crashes: int, duplicates: int, broken: dict | None = None
                ) -> dict[str, Any]:
    """The metrics of one run from the engine's state of it: `durablelab.metrics.measure`
    over the same plain rows `dl.compare` reads from a `Run`'s frames, without building
    them. `crashes` (worker deaths during its life) and `duplicates` come from the engine
    and the world around it (see `Isolated.run` and `run_contended`), `broken` (what its
    broken model answers cost, see `discarded`) from the store."""
    rows, usages, instants = state_rows(state, instants=state.ended_at is None)
    shared = measure(status=state.status, started_at=state.started_at,
                     ended_at=state.ended_at, instants=instants,
                     attempts=rows, usages=usages,
                     discarded=broken, crashes=crashes,
                     replayed=[row[3] for row in state.wakeups],
                     history_events=len(state.history))
    # Only a sweep reports these. `error`: the class of a failed run's error, so a table
    # of thousands of runs groups its failures (`dl.compare` has the `Run`, whose `error`
    # is the error itself). `duplicate_effects`: the world's ledger of effects done twice
    # under one key, which a sweep always holds; `dl.compare` has it only when given the
    # world (its LEDGER_COLUMNS) and otherwise estimates it from the run's own records
    # (effect_reexecutions, duplicates_prevented; see `compare._compare_only`).
    error = state.error
    shared["error"] = None if error is None else type(error).__name__
    shared["duplicate_effects"] = duplicates
    return shared


_MADE = itemgetter(0, 3, 4, 1)      # position, started_at, order, attempt


def state_rows(state, instants: bool = True) -> tuple[list, list, list]:
    """(attempts, usages, instants) of run `state` as plain rows, the ones `dl.compare`
    reads from a `Run`'s frames, without building them: what `run_metrics` and `dl.ops`
    hand to `durablelab.metrics`.

    - attempts: the rows a `Run`'s attempts frame holds (`Run.from_snapshot`), crashed
      ones left out: retried attempts, the attempt each activity's end records (filed
      under the position that started it, for a started activity), and attempts in
      flight, as ``(position, attempt, outcome, started_at, order, error_class)``, sorted
      as the frame is where a position has several (order puts one in flight after one
      that ended at the same instant).
    - usages: each kept model answer's ``(input_tokens, output_tokens, cost)``.
    - instants: what `Run.latest_at` reads from the frames; skipped (empty) when
      `instants` is False (a sweep needs them only for a run that has not ended).
    """
    rows = [(row.position, row.attempt, row.outcome, row.started_at, 1, row.error_class)
            for found in state.attempts.values() for row in found if row.outcome != "crashed"]
    usages = []
    append = rows.append
    for e in state.history:
        if e.kind != "activity":
            continue
        if e.started_at is not None:   # (a cancel's end: no attempt)
            append((e.position if e.handle is None else e.handle, e.attempt or 0, e.outcome,
                    e.started_at, 1, e.error_class))   # (0: not numbered, for the sort)
        if e.ok and e.value is not None and '"usage"' in e.value:   # (skip decoding others)
            usage = usage_of(e.loads())
            if usage is not None:
                usages.append(usage)
    for o in (state.inflight, *state.flying.values()):
        if o is not None:
            append((o.position, o.attempt, "in_flight", o.started_at, 3, None))
    if state.attempts:   # only retried attempts give a position several rows
        rows.sort(key=_MADE)
    if instants:
        found = [e.recorded_at for e in state.history]
        found += [row.ended_at for made in state.attempts.values() for row in made]
        found += [f.fired_at for f in state.fault_rows if f.type == "Crash"
                  and f.point != "during_wait"]
        found += [row[1] for row in state.wakeups]
    else:
        found = []
    return rows, usages, found




# --- what the world says ---------------------------------------------------------------------
def parts(world) -> list[tuple[str, Any]]:
    """(name, object) of the world's parts: the world itself, and its attributes or items
    (a world is usually a small object or dict of services, models and limiters)."""
    if world is None:
        return []
    found = [("world", world)]
    items = world.items() if isinstance(world, dict) else getattr(world, "__dict__", {}).items()
    found += [(str(name), value) for name, value in items if not str(name).startswith("_")
              and type(value) not in _PLAIN]   # a count or a name holds no calls or effects
    return found


_PLAIN = frozenset((int, float, str, bool, type(None)))


def duplicate_effects(world_parts: list, run_ids) -> dict[str, int]:
    """Effects a service created again for one idempotency key of a run (a key starting
    ``"{run_id}:"``, as the engine's ``"{run_id}:{position}"`` does), per run id of
    `run_ids`: what keys exist to prevent (`Service.duplicate_effects`, counted per run).
    `world_parts` is `parts(world)`; one pass serves every run of a shared world."""
    out: dict[str, int] = {}
    for _, part in world_parts:
        effects = getattr(part, "effects", None)
        if not isinstance(effects, list):
            continue
        keys = Counter(e.get("key") for e in effects if isinstance(e, dict)
                       and isinstance(e.get("key"), str))
        for key, n in keys.items():
            colon = key.find(":") if n > 1 else -1
            while colon != -1:   # every run whose id and a colon begin the key
                run_id = key[:colon]
                if run_id in run_ids:
                    out[run_id] = out.get(run_id, 0) + n - 1
                colon = key.find(":", colon + 1)
    return out


def stamped_calls(world_parts: list) -> dict[str, list[float]]:
    """The request instants of each part of the world (`parts(world)`) that stamps its
    calls on the engine's clock: a ``calls`` list of dicts with ``"at"`` (as `SimLLM`
    keeps), named after the part, or such a list held by the world itself, named after its
    attribute."""
    found = {}
    for name, part in world_parts:
        calls = part if isinstance(part, list) else getattr(part, "calls", None)
        if isinstance(calls, list) and calls and isinstance(calls[0], dict) and "at" in calls[0]:
            found[name] = [c["at"] for c in calls]
    return found


def add_load(load: dict, source: str, instants, offset: float = 0.0) -> None:
    """Count requests per whole virtual second: load[(source, second)] += 1."""
    for t in instants:
        if t is not None and math.isfinite(t):
            key = (source, int((t - offset) // 1))
            load[key] = load.get(key, 0) + 1


def add_starts(load: dict, state) -> None:
    """`add_load` of each attempt start of a run, under its activity: every attempt that
    reached the activity (a crash before it did not), the one that ended it, and one still
    in flight when the run was measured (a `Hang`: its request reached the activity)."""
    isfinite = math.isfinite
    get = load.get
    for rows in state.attempts.values():
        for row in rows:
            t = row.started_at
            if row.outcome != "crashed" and t is not None and isfinite(t):
                key = (row.activity, int(t // 1))
                load[key] = get(key, 0) + 1
    for e in state.history:
        t = e.started_at
        if e.kind == "activity" and t is not None and isfinite(t):
            key = (e.name, int(t // 1))
            load[key] = get(key, 0) + 1
    for o in (state.inflight, *state.flying.values()):
        if o is not None and isfinite(o.started_at):
            key = (o.name, int(o.started_at // 1))
            load[key] = get(key, 0) + 1


#: what `add_requests` files a retry the quota refused under (no attempt was made).
QUOTA_REFUSED = "quota_refused"
_QUOTA_WORDS = "the retry quota is empty"


def add_requests(out: list, state, seed: int) -> None:
    """Append ``(seed, started_at, ended_at, attempt, outcome)`` for every attempt of a run
    (what `Experiment.series` bins), crashed ones aside: they never reached the world. A
    retry its `RetryQuota` refused is one more row, outcome `QUOTA_REFUSED`, at the instant
    the activity failed for good."""
    append = out.append
    for rows in state.attempts.values():
        for row in rows:
            if row.outcome != "crashed":
                append((seed, row.started_at, row.ended_at, row.attempt, row.outcome))
    for e in state.history:
        if e.kind != "activity" or e.started_at is None:
            continue
        attempt = e.attempt or 1
        append((seed, e.started_at, e.recorded_at, attempt, e.outcome))
        if not e.ok and e.value is not None and _QUOTA_WORDS in e.value:
            append((seed, e.recorded_at, e.recorded_at, attempt + 1, QUOTA_REFUSED))


# --- jobs -------------------------------------------------------------------------------------
#: The young-generation threshold of Python's garbage collector while a sweep's runs run.
YOUNG_COLLECTION_AFTER = 50_000


@contextlib.contextmanager
def roomy_collector():
    """Let the cyclic garbage collector wait longer between young collections (50,000 new
    objects instead of 700), as long as runs run. A run allocates thousands of objects that
    die within an attempt; collected every 700 allocations, many are caught alive and
    promoted, and the older generations, full of the other runs' histories, are scanned
    again and again (on a contended cell, where every run stays in memory, that shows). The
    setting found on entry is restored after, also after an error (one set inside is
    replaced by it). A sweep holds it around each job (`do_job`)."""
    threshold = gc.get_threshold()
    if threshold[0] == 0 or threshold[0] >= YOUNG_COLLECTION_AFTER:   # disabled, or roomier
        yield
        return
    gc.set_threshold(YOUNG_COLLECTION_AFTER, *threshold[1:])
    try:
        yield
    finally:
        gc.set_threshold(*threshold)


class Isolated:
    """Runs one run at a time, each alone, in one reused in-memory engine (see above);
    `sticky`: whether that engine keeps runs' code between wake-ups (`Engine(sticky=)`)."""

    def __init__(self, sticky: bool = True):
        self.engine: Engine | None = None
        self.used = 0
        self.sticky = sticky

    def fresh(self) -> Engine:
        """The runner's engine, empty (`Engine.forget` after each use) on a new clock at 0."""
        if self.engine is None or self.used >= RECYCLE_EVERY:
            self.close()
            self.engine = Engine(sticky=self.sticky)
            self.used = 0
        self.used += 1
        self.engine.clock = VirtualClock()
        return self.engine

    def run(self, workflow, input_value, run_id, policies, plan, seed, world_factory,
            timeout, load: dict, requests: list | None = None,
            start_at: float | None = None) -> dict:
        engine = self.fresh()
        clock = engine.clock                        # every run starts at t=0
        world = world_factory(clock) if world_factory is not None else None
        engine.world = world                        # ...in a world of its own
        engine.start(workflow, input_value, run_id=run_id, faults=plan, seed=seed,
                     timeout=timeout, policies=policies, start_at=start_at)
        engine.run_until_idle()
        state = engine.working_state(run_id)
        if requests is not None:
            add_requests(requests, state, seed)
        # Alone in its engine, a run lives through its own crashes only, one per `Crash`
        # fault that fired: what `Run.crashes` holds, without a statement to read them.
        crashed = sum(1 for row in state.fault_rows if row[2] == "Crash")
        world_parts = parts(world)
        duplicates = duplicate_effects(world_parts, {run_id}).get(run_id, 0)
        metrics = run_metrics(state, crashed, duplicates, discarded(engine, state))
        add_starts(load, state)
        for name, instants in stamped_calls(world_parts).items():
            add_load(load, name, instants)
        engine.forget()    # no breaker, run or row of this run reaches the next
        return metrics

    def close(self) -> None:
        if self.engine is not None:
            self.engine.store.forget()
            self.engine.close()
            self.engine = None


#: Runners put back by sweeps that ended, for the next sweep in this process: opening one's
#: engine (a DuckDB connection and its schema) costs more than a small sweep's runs. At
#: most `IDLE_RUNNERS` wait; each is emptied (`Engine.forget`) after every use anyway.
#: Kept apart by whether their engines are sticky.
_IDLE: dict[bool, list[Isolated]] = {True: [], False: []}
IDLE_RUNNERS = 2


@contextlib.contextmanager
def borrowed_runner(sticky: bool = True):
    """An `Isolated` runner for one serial sweep: one a finished sweep gave back, or a new
    one. It is given back only if the sweep ended without an error (an error may leave a
    run half made in its engine, which `forget` is not meant to clear); otherwise closed."""
    idle = _IDLE[sticky]
    try:
        runner = idle.pop()            # atomic: two threads never get the same runner
    except IndexError:
        runner = Isolated(sticky)
    try:
        yield runner
    except BaseException:
        runner.close()
        raise
    if runner.engine is not None and len(idle) < IDLE_RUNNERS:
        runner.engine.forget()         # kept code too: none outlives its sweep
        runner.engine.world = None     # nothing of the last sweep's world is kept alive
        idle.append(runner)
    else:
        runner.close()


def run_contended(workflow, runs, policies, plan, world_factory, timeout, load: dict,
                  requests: list | None = None, runner: Isolated | None = None) -> list:
    """All `runs` ((input value, run id, seed, start instant or None)) of a cell, or of a
    cell's seed, at once, in one engine around one world. Returns their metrics in the
    order given. With a `runner`, its engine is used and emptied after (a sweep with
    ``contention="per_seed"`` runs many small worlds in turn: a new engine each would cost
    a DuckDB connection and its schema, several times a small trial)."""
    engine = Engine() if runner is None else runner.fresh()
    try:
        world = world_factory(engine.clock) if world_factory is not None else None
        engine.world = world
        # Only a Crash rule kills a sweep's worker, and only recovery reads the store back:
        # without one, nothing reads the cell's rows, so they are not kept at all.
        crashing = plan is not None and plan.crashes()
        if not crashing:
            engine.store.discard_queue()
        for input_value, run_id, seed, start_at in runs:
            engine.start(workflow, input_value, run_id=run_id, faults=plan, seed=seed,
                         timeout=timeout, policies=policies, start_at=start_at)
        engine.run_until_idle()
        crash_rows = engine.store.fetch(
            "SELECT crashed_at, run_id FROM crashes") if crashing else []
        world_parts = parts(world)
        duplicates = duplicate_effects(world_parts, {run[1] for run in runs})
        out = []
        for _, run_id, seed, _ in runs:
            state = engine.working_state(run_id)   # loaded again if a crash dropped it
            if requests is not None:
                add_requests(requests, state, seed)
            # the crashes `Run.crashes` holds: the run's own, and others' while it lived
            crashes = sum(1 for t, owner in crash_rows if lived_through(state, t, owner))
            out.append(run_metrics(state, crashes, duplicates.get(run_id, 0),
                                   discarded(engine, state)))
            add_starts(load, state)
        for name, instants in stamped_calls(world_parts).items():
            add_load(load, name, instants)
        return out
    finally:
        if runner is None:
            engine.store.forget()     # in memory: rows nobody will read again
            engine.close()
        else:
            engine.forget()           # no breaker, run or row of this world reaches the next


__all__ = ["METRICS", "Isolated", "borrowed_runner", "run_contended", "run_metrics", "state_rows",
           "duplicate_effects", "add_requests", "QUOTA_REFUSED"]
