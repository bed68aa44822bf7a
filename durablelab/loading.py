"""Loading: the store read back as a fresh worker reads it.

When an engine opens a file, and after every crash, nothing of its runs is in memory. The
loader reads every run's row and the whole history of every unfinished run, one query per
table (`Store.load_unfinished`), and builds each run's `RunState`; an ended run's history
is read only when something asks for it. A row that does not read back (a damaged or
hand-edited file) sets its run aside (`RunState.damage`, named with what and where), and
the other runs load and run: one bad row never keeps a store closed.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Callable

from . import history as h
from .errors import damaged_run, error_from_json, history_gap
from .faults import FaultPlan
from .records import CrashRecord, RunRecord, waiting_columns
from .runstate import CANCEL_SIGNAL, RunState, Signal
from .schema import EVENT_COLS
from .store import UNFINISHED


@dataclass
class Loaded:
    """What `Loader.load` read: every run by id, the unfinished ones (set aside or not) in
    the store's order, and (when opening) the latest instant a readable run recorded."""

    runs: dict[str, RunState]
    unfinished: list[RunState]
    latest: float | None


class Loader:
    """Reads one store's runs back into `RunState`s (`resolve(workflow, run_id)`: the
    function to run a run with, or None when nobody registered its workflow)."""

    def __init__(self, store, path: str | None, resolve: Callable):
        self.store, self.path, self.resolve = store, path, resolve
        self._plans: dict[str, FaultPlan] = {}   # stored plan JSON -> the plan

    def load(self, opening: bool = False) -> Loaded:
        """Every run's row, and the history of every unfinished one; `opening`: also the
        latest instant recorded, for a new engine's clock (after a crash, it is there)."""
        runs: dict[str, RunState] = {}
        rows = self.store.run_rows()
        for row in rows:
            if row.status not in UNFINISHED:
                state = state_from_row(row, self.path, self.resolve, self.plan)
                state.history = None   # read when asked for (`history`)
                runs[state.run_id] = state
        loaded = self.store.load_unfinished()
        unfinished = []
        for row in rows:
            if row.status in UNFINISHED:
                state = runs[row.run_id] = state_from_row(row, self.path, self.resolve,
                                                          self.plan)
                if state.status == "diverged":
                    state.stored_error = row.error
                unfinished.append(state)
        fill(runs, loaded, self.path)
        for state in unfinished:
            if state.budget is not None and state.damage is None:
                self.spend(state)
        return Loaded(runs, unfinished, self._latest(rows, runs, loaded) if opening else None)

    def _latest(self, rows, runs, loaded) -> float | None:
        """The latest instant recorded by a run that reads back: a new clock starts no
        earlier, so time never runs backwards for a run (one damaged time moves nothing)."""
        readable = {run_id for run_id, state in runs.items() if state.damage is None}
        latest = [self.store.latest_instant()]
        latest += (row.ended_at if row.ended_at is not None else row.started_at
                   for row in rows if row.run_id in readable)
        recorded_at = EVENT_COLS.index("recorded_at")   # events are the view's tuples
        latest += (row[recorded_at] for row in loaded["events"] if row[0] in readable)
        for table, instant in (("attempts", "ended_at"), ("signals", "arrived_at"),
                               ("faults", "fired_at")):
            latest += (getattr(row, instant) for row in loaded[table] if row.run_id in readable)
        latest = [t for t in latest if t is not None]
        return max(latest) if latest else None

    def history(self, state: RunState, runs: dict[str, RunState]) -> None:
        """Read an ended run's history (and its other rows) into its state."""
        state.history = []
        fill(runs, self.store.load("run_id = ?", [state.run_id]), self.path)

    def spend(self, state: RunState) -> None:
        """What a run with a budget spent so far: its activities' usage and its broken
        answers' (`Store.burnt`). A value that does not read back sets the run aside."""
        try:
            for event in state.history:
                if event.kind == h.ACTIVITY:
                    state.spend.add(event.loads() if event.ok else None)
            burnt = self.store.burnt(state.run_id)   # broken answers, paid for
            if burnt is not None:
                state.spend.burn(json.loads(burnt))
        except Exception as exc:   # a hand-edited value: this run's alone
            state.damage = damaged_run(self.path, state.run_id, None,
                                       f"its budget's usage does not read back "
                                       f"({type(exc).__name__}: {str(exc)[:200]})")

    def crash_rows(self, state: RunState) -> list[CrashRecord]:
        """The worker crashes a run lived through (`lived_through`)."""
        return [row for row in self.store.crash_rows()
                if lived_through(state, row.crashed_at, row.run_id)]

    def plan(self, text: str) -> FaultPlan:
        """The plan stored with a run; runs that share a plan share one object (and its
        cache of which rules apply where), so reloading a sweep parses it once."""
        plan = self._plans.get(text)
        if plan is None:
            plan = self._plans[text] = FaultPlan.from_json(text)
        return plan


def read_all(store, path: str | None) -> list[RunState]:
    """Every run of `store` with its whole history, read as a fresh worker reads it, plus
    the ended runs' rows in one more query per table (`Store.load_ended`): for a reader of
    a whole store (`dl.ops`), where `Loader.history` would cost a query per table per run.
    Runs no workflow: each state's function is None."""
    loader = Loader(store, path, lambda workflow, run_id: None)
    loaded = loader.load()
    ended = [state for state in loaded.runs.values() if state.history is None]
    for state in ended:
        state.history = []
    if ended:
        fill(loaded.runs, store.load_ended(), path)
    return list(loaded.runs.values())


def lived_through(state: RunState, crashed_at: float, owner: str | None) -> bool:
    """Whether run `state` lived through the worker crash at `crashed_at` that run `owner`
    caused (None: ``engine.crash()``): its own crashes, and other runs' while it was alive
    (one started at the very instant of a crash, after it, was not). `Run.crashes` holds
    these, and both `dl.compare` and a sweep count them as ``crashes``."""
    if owner == state.run_id:   # also at its first instant: a crash in its first step
        return True
    end = state.ended_at if state.ended_at is not None else math.inf
    return state.started_at < crashed_at <= end


def state_from_row(row: RunRecord, path: str | None, resolve: Callable,
                   plan_from_json: Callable) -> RunState:
    """A run's state from its `runs` row (`resolve(workflow, run_id)`: the function to run
    it with, or None; `plan_from_json`: its fault plan from the stored JSON). A row whose
    times are not finite or whose JSON columns do not read back gives a state set aside
    (`damage`), so one damaged run never keeps the rest out (one infinite time would move
    every run's clock)."""
    (run_id, workflow, input_json, seed, faults_json, options_json, parent, status,
     result_json, error_json, started_at, ended_at, parked) = row

    def set_aside(what: str, why: str) -> RunState:
        state = RunState(run_id, workflow, input_json, seed, None, None, parent, status,
                         None, None, started_at, ended_at)
        state.damage = damaged_run(path, run_id, None,
                                   f"{what} does not read back ({why})")
        return state

    if not all(map(math.isfinite, (started_at,) if ended_at is None else
                   (started_at, ended_at))):
        return set_aside("its start or end time (runs.started_at, runs.ended_at)",
                         f"started_at {started_at!r}, ended_at {ended_at!r}: a time must "
                         f"be a finite number")
    what = "its recorded error (runs.error)"
    try:
        error = error_from_json(json.loads(error_json)) if error_json else None
        what = "its fault plan (runs.faults)"
        faults = plan_from_json(faults_json) if faults_json else None
        what = "its options: time-out, budget, policies (runs.options)"
        state = RunState(run_id, workflow, input_json, seed, faults_json, options_json,
                         parent, status, result_json, error, started_at, ended_at,
                         fn=resolve(workflow, run_id), faults=faults,
                         parked=parked if status == "waiting" else None)
        what = "its input (runs.input)"
        if status in ("running", "waiting"):
            json.loads(input_json)
        what = "what it waits on (runs.waiting)"
        # engine.runs() shows it for every run: one that does not read must not break all
        until = waiting_columns(state.waiting_detail())[1]
    except Exception as exc:   # whatever a hand-edited row throws, it stays this run's
        return set_aside(what, f"{type(exc).__name__}: {exc}")
    if until is not None and not (type(until) in (int, float) and math.isfinite(until)):
        return set_aside(what, f"until {until!r} is not a finite time")
    return state


def fill(runs: dict[str, RunState], loaded: dict, path: str | None) -> None:
    """Hand the rows `Store.load` read to their runs (`runs`, by id; `path` names the store
    in errors). A run with a damaged row (`Store.load` lists them) is set aside, its first
    damage named: never replayed, never scheduled."""
    for run_id, position, what, table in loaded["damaged"]:
        state = runs[run_id]
        if state.damage is None:
            state.damage = damaged_run(path, run_id, position, what, table=table)
    for row in loaded["events"]:   # (run_id, position, ...): the `events` view's columns
        run_id, position = row[0], row[1]
        state = runs[run_id]
        if state.damage is not None:
            continue
        history = state.history
        if position != len(history) + 1:
            state.damage = history_gap(path, run_id, position, len(history) + 1)
            continue
        event = h.Event(*row[1:])
        history.append(event)
        if event.handle is not None:
            state.closed.add(event.handle)
    for row in loaded["attempts"]:
        runs[row.run_id].attempts.setdefault(row.position, []).append(row)
    for row in loaded["signals"]:
        state = runs[row.run_id]
        if row.name == CANCEL_SIGNAL:   # a cancel the code has not been told of yet
            asked = json.loads(row.value)
            state.cancel_reason = asked.get("reason") if isinstance(asked, dict) else None
            state.cancel_pending = state.history is not None and not any(
                e.kind == h.CANCELLED for e in state.history)
        state.signals.append(Signal(*row[1:]))
    for row in loaded["faults"]:
        runs[row.run_id].fault_rows.append(row)
    for row in loaded["wakeups"]:
        runs[row.run_id].wakeups.append(row)


__all__ = ["Loaded", "Loader", "read_all", "lived_through", "state_from_row", "fill"]
