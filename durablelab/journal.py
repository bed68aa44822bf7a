"""Journal: when what a run records reaches the store. The durability mode, in one place.

The engine records two things about a run as it goes: rows of its history (each event, each
failed attempt and the backoff chosen after it) and, at the end, how the run ended (status,
result or error). The store commits whatever it is handed, at once. A journal decides when
a run's rows are handed over, and that decision is all that differs between the modes:

- ``sync``: each row is committed before the code sees its result, so a crash loses nothing
  the code has seen. A durable step is one INSERT, and on a file one fsync.
- ``batch``: a run's rows wait in memory until the engine's turn with the run is over (a
  wake-up, the end of an attempt that was in flight, a time-out), then go in one write. A
  crash loses at most that turn, which the recovered worker runs again.
- ``exit``: a run's rows wait until it ends, or the engine closes cleanly. A crash loses all
  of them: the recovered worker runs the run again from its start.

Facts about the world do not go through a journal: a run's start, a signal, a fault firing,
a crash, a heartbeat are committed at once in every mode (DESIGN.md section 6). Rows waiting
to be committed live on the run's state (`RunState.pending`), so they die with it when the
worker crashes, exactly as they would with a real process.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .runstate import RunState
    from .store import Store


class Journal:
    """Rows wait on their run until `flush` writes them in one commit; subclasses say when.
    `end` takes the wake-up rows (telemetry) the engine has collected and returns those
    still to write: only `sync` commits them along with a run's end."""

    #: the durability mode this journal implements, as `Engine(durability=...)` names it.
    mode = ""

    def __init__(self, store: "Store"):
        self.store = store

    def record(self, state: "RunState", table: str, row: tuple) -> None:
        """A row of the run's history (`event_log` or `attempts`)."""
        state.pending.setdefault(table, []).append(row)

    def turn_ended(self, state: "RunState") -> None:
        """The engine's turn with the run is over: a wake-up, the end of an attempt that
        was in flight, or a time-out (not a crash: what a crash cut short is lost)."""

    def end(self, state: "RunState", end: tuple, telemetry: list) -> list:
        """The run ended: `end` is a `RunEnd` (status, result, error, ended_at, run_id)."""
        state.pending_end = end
        return telemetry

    def status(self, state: "RunState", change: tuple) -> None:
        """The unfinished run now waits, or runs again (a `RunEnd` with no end): it waits
        with the run's rows, and a later change or the run's end replaces it."""
        state.pending_end = change

    def flush(self, state: "RunState") -> None:
        """Commit what waits for the run, in one write (at the latest at a clean close)."""
        if state.pending or state.pending_end:
            self.store.write(state.pending, [state.pending_end] if state.pending_end else [])
            state.pending, state.pending_end = {}, None


class SyncJournal(Journal):
    """Commit each row at once; a run's end shares its commit with the telemetry waiting."""

    mode = "sync"

    def record(self, state, table, row):
        self.store.insert(table, row)

    def turn_ended(self, state):
        """A change of status (`status`) is committed once the turn is over: the row of the
        step that parked the run is already committed, and a turn may park it again."""
        self.flush(state)

    def end(self, state, end, telemetry):
        state.pending_end = None   # the end replaces a status change not yet committed
        self.store.write({"wakeups": telemetry}, ends=[end])
        return []   # a new list: an in-memory store keeps the one it was handed, queued


class BatchJournal(Journal):
    """Commit a run's rows once per turn of the engine with it."""

    mode = "batch"

    def turn_ended(self, state):
        self.flush(state)


class ExitJournal(Journal):
    """Commit a run's rows when it ends (and at a clean close)."""

    mode = "exit"

    def end(self, state, end, telemetry):
        state.pending_end = end
        self.flush(state)
        return telemetry


#: The journal of each durability mode, in the order the modes trade safety for speed.
JOURNALS: dict[str, type[Journal]] = {j.mode: j for j in (SyncJournal, BatchJournal,
                                                          ExitJournal)}
