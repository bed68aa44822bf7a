"""The engine as its parts see it: one object of public names over the engine's own.

A run's `Context` (`context.Port`), the attempt runner (`activities.Host`) and the engine's
concurrent work (`concurrency.Concurrency`) reach the engine only through an `EnginePort`,
so each reads on its own and none reaches for an underscore; `tests/test_engine_layout.py`
holds the runner to what `activities.Host` declares. The port holds its engine weakly, so
an engine dropped without `close()` is freed at once.
"""

from __future__ import annotations

from .observe import notify
from .sticky import blocking


class EnginePort:
    """An engine's clock, world, store and runs, and the moves its parts may make."""

    __slots__ = ("_engine",)

    def __init__(self, engine):
        self._engine = engine

    @property
    def clock(self):
        return self._engine.clock

    @property
    def world(self):
        return self._engine.world

    @property
    def store(self):
        return self._engine.store

    @property
    def runs(self):
        return self._engine._runs

    @property
    def attempts(self):
        """The engine's attempt runner (`activities.AttemptRunner`)."""
        return self._engine._attempts

    def resolve(self, workflow, run_id):
        """The function to run a run of `workflow` with, or None (`Definitions.resolve`)."""
        return self._engine._code.resolve(workflow, run_id)

    # --- recording and scheduling ---------------------------------------------------------
    def append(self, state, cursor, event):
        return self._engine._append(state, cursor, event)

    def write(self, state, table, row):
        self._engine._write(state, table, row)

    def turn_ended(self, state):
        """The run's turn is over: the journal commits what its durability mode says."""
        self._engine._journal.turn_ended(state)

    def free_until(self, instant):
        return self._engine._free_until(instant)

    def schedule(self, state, due_at, action, arg=None, new_generation=True):
        self._engine._schedule(state, due_at, action, arg, new_generation)

    def start_run(self, workflow, input_json, run_id, plan, seed, parent, options_json, fn):
        return self._engine._start(workflow, input_json, run_id, plan, seed, parent,
                                   options_json, fn=fn)

    def end(self, state, status, result_json=None, error=None):
        self._engine._end(state, status, result_json, error)

    def cancel(self, run_id, reason):
        self._engine.cancel(run_id, reason)

    # --- what a run's code asks for (`context.Port`) ---------------------------------------
    def blocking(self, ctx, call, *args):
        """A ctx call that may suspend the run: a sticky engine keeps the run's code
        waiting in it (`sticky.blocking`); otherwise it is just made."""
        if self._engine._sticky is None:
            return call(*args)
        return blocking(ctx, call, args)

    def execute_activity(self, state, cursor, request):
        return self._engine._attempts.execute(state, cursor, request)

    def record_event(self, state, cursor, kind, name, args, value_json, call_site,
                     kwargs=None):
        return self._engine._record_event(state, cursor, kind, name, args, value_json,
                                          call_site, kwargs)

    def launch(self, state, position, request):
        self._engine._concurrency.launch(state, position, request)

    def start_child(self, state, position, workflow, input_json, child_run_id, policies):
        self._engine._concurrency.start_child(state, position, workflow, input_json,
                                              child_run_id, policies)

    def child_ended(self, state, position, child_run_id):
        self._engine._concurrency.child_ended(state, position, child_run_id)

    def signal_for(self, state, name, k):
        """The k-th (from 0) signal called `name` that arrived for this run, if any."""
        matching = [s for s in state.signals if s.name == name]
        return matching[k] if k < len(matching) else None

    def attempt_ended(self, state, attempt, error):
        notify(self._engine.observers, "attempt_ended", state, attempt, error)


__all__ = ["EnginePort"]
