"""Concurrency: started activities, child runs and cancellation, as the engine runs them.

Workflow code stays one plain function re-run from the top; what runs at the same time is
the work it starts. `ctx.start_activity` takes its position in history at the call (a
`start_activity` event), and its attempts go on the engine's heap beside everything else,
so they overlap in virtual time. When an attempt ends, its end is appended to the history
as an `activity` event whose `handle` names the position it answers, and the run wakes if
that is what it waits for. A child run (`ctx.start_child`) is a run of its own; its end is
appended to its parent's history the same way. A cancel is stored as a signal (it outlives a
crash), told to the code at the call it is blocked in, and ends everything the run started.
"""

from __future__ import annotations

import json

from . import history as h
from .errors import ActivityFailed, cancelled
from .context import StopRun, Suspend
from .records import AttemptRecord, SignalRecord
from .registry import register, workflow_name
from .retry import Overrides
from .runstate import CANCEL_SIGNAL, FINAL, RunState, Signal, options_json


class Concurrency:
    """An engine's concurrent work; it reaches the engine only through its port
    (`port.EnginePort`)."""

    __slots__ = ("port",)

    def __init__(self, port):
        self.port = port

    # --- started activities ---------------------------------------------------------------
    def launch(self, state: RunState, position: int, request) -> None:
        """`ctx.start_activity` at `position`: start an attempt, unless the activity has
        ended, has one in flight, or (after a crash) waits for its backoff."""
        state.requests[position] = request   # what a retry calls: this wake-up's function
        if position in state.closed or position in state.flying:
            return
        self.port.attempts.launch(state, position, request)

    def finish(self, state: RunState, position: int) -> None:
        """A started activity's attempt ends now: record it (its end, or a failed attempt
        and when to retry), then wake the run if that is what it waits for. A late answer
        (the run was cancelled, ended, or lost the attempt in a crash) is ignored."""
        outcome = state.flying.pop(position, None)
        if outcome is None or state.status in FINAL:
            return
        cursor = h.Cursor(state.history, state.run_id, state.workflow)
        cursor.position = len(state.history)
        try:
            self.port.attempts.finish(state, cursor, outcome)
        except ActivityFailed:
            pass   # its end is recorded as failed: the code raises it where it waits
        except Suspend as retry:
            self.port.schedule(state, retry.due_at, "launch", position, new_generation=False)
        except StopRun as stop:
            self.port.end(state, "failed", error=stop.error)
        self.port.turn_ended(state)
        self.wake_if_ready(state, position)

    def relaunch(self, state: RunState, position: int) -> None:
        """A started activity's retry backoff has elapsed: its next attempt."""
        request = state.requests.get(position)
        if request is None or state.status in FINAL:
            return   # (after a crash the replay launches it again at its start_activity)
        try:
            self.launch(state, position, request)
        except StopRun as stop:
            self.port.end(state, "failed", error=stop.error)
        self.port.turn_ended(state)

    def wake_if_ready(self, state: RunState, ended: int) -> None:
        """Position `ended` has just ended: wake the run if that was the last of what it
        waits for (or, waiting for any, one of them). The positions still open are kept
        as a set, so a fan-out of N costs N checks, not N times N."""
        if state.awaiting is None or state.status in FINAL:
            return
        open_, need_all = state.awaiting
        if ended not in open_:
            return
        open_.discard(ended)
        if not open_ or not need_all:
            state.awaiting = None
            self.port.schedule(state, self.port.clock.now(), "wake", "activity")

    # --- child runs -----------------------------------------------------------------------
    def start_child(self, parent: RunState, position: int, workflow, input_json: str,
                    child_run_id: str, policies) -> None:
        """`ctx.start_child` at `position`: start the child run, unless it exists (a parent
        replaying after a crash finds the child it started, and starts no second one)."""
        if child_run_id in self.port.runs:   # its end, if it has ended, is appended when the
            return                           # code waits for it (in the middle of a wake-up,
                                             # it would take the place of the code's next step)
        options = {"child_of": json.dumps([parent.run_id, position])}
        if policies is not None:
            options["policies"] = Overrides(policies, f"ctx.start_child({child_run_id!r}): "
                                                      f"policies").to_json()
        register(workflow, stacklevel=2)
        name = workflow_name(workflow)
        # A worker may die on either side of the child's start, as around an activity's
        # effect: before it, the parent's replay starts the child; after, it finds it.
        self.port.attempts.crash_point(parent, "before_activity", name, position)
        self.port.start_run(name, input_json, child_run_id, parent.faults, parent.seed,
                            parent.run_id, options_json(options), workflow)
        self.port.attempts.crash_point(parent, "after_effect", name, position)

    def child_ended(self, parent: RunState | None, position: int, child_run_id: str) -> None:
        """Append a child's end to its parent's history, once, and wake the parent if it
        waits for that."""
        child = self.port.runs.get(child_run_id)
        if (parent is None or child is None or child.status not in FINAL
                or parent.status in FINAL or position in parent.closed
                or parent.history is None):
            return
        ok = child.status == "completed"
        value = child.result_json if ok else h.compact({
            "run_id": child_run_id, "status": child.status,
            "error": None if child.error is None else json.dumps(child.error.to_json())})
        cursor = h.Cursor(parent.history, parent.run_id, parent.workflow)
        cursor.position = len(parent.history)
        self.port.append(parent, cursor, h.Event(
            cursor.position + 1, h.CHILD, child.workflow, None, ok, value,
            self.port.clock.now(), outcome="ok" if ok else child.status, handle=position))
        self.port.turn_ended(parent)
        self.wake_if_ready(parent, position)

    def run_ended(self, state: RunState) -> None:
        """Run `state` has just ended: tell its parent, and if it was cancelled, cancel the
        children it leaves running."""
        if state.child_of is not None:
            self.child_ended(self.port.runs.get(state.child_of[0]), state.child_of[1],
                             state.run_id)
        if state.status == "cancelled":
            self.cancel_children(state, f"its parent {state.run_id!r} was cancelled")

    def cancel_children(self, state: RunState, reason: str) -> None:
        for child in list(self.port.runs.values()):
            if (child.child_of is not None and child.child_of[0] == state.run_id
                    and child.status not in FINAL):
                self.port.cancel(child.run_id, reason)

    # --- cancellation ---------------------------------------------------------------------
    def cancel(self, state: RunState, reason: str | None) -> None:
        """Record a cancel of run `state` (`Engine.cancel` checked it may be cancelled),
        end what it started, and tell its code at its next wake-up."""
        if any(s.name == CANCEL_SIGNAL for s in state.signals):
            return   # cancelling twice is one cancel
        now = self.port.clock.now()
        value_json = json.dumps({"reason": reason})
        arrived = Signal(len(state.signals) + 1, CANCEL_SIGNAL, None, value_json, now)
        self.port.store.insert("signals", SignalRecord(
            state.run_id, arrived.seq, CANCEL_SIGNAL, None, value_json, now))
        state.signals.append(arrived)
        state.cancel_pending, state.cancel_reason = True, reason
        self.abandon(state, "its run was cancelled")
        self._close_started(state)
        self.port.turn_ended(state)
        if state.status == "diverged" or state.fn is None:   # no code can be told: stop it
            self.port.end(state, "cancelled",
                          error=cancelled(state.run_id, reason, len(state.history)))
            self.port.turn_ended(state)
        else:   # told before its children end, so their ends do not answer its wait first
            state.awaiting = None
            self.port.schedule(state, now, "wake", "cancel")
        self.cancel_children(state, f"its parent {state.run_id!r} was cancelled")

    def abandon(self, state: RunState, why: str) -> None:
        """Give up the run's attempts in flight: each is recorded as canceled (a late
        answer is ignored), and a started activity's end says so, so it is not run again."""
        now = self.port.clock.now()
        rows = []
        for o in (state.inflight, *state.flying.values()):
            if o is not None:
                rows.append(AttemptRecord(state.run_id, o.position, o.name, o.attempt,
                                          o.started_at, now, "canceled", "Cancelled",
                                          f"abandoned: {why}; a late answer is ignored", 0.0,
                                          o.policy.max_attempts))
        state.inflight = None
        state.flying = {}
        for row in rows:
            state.attempts.setdefault(row.position, []).append(row)
            self.port.write(state, "attempts", row)

    def _close_started(self, state: RunState) -> None:
        """End every activity the cancelled run started and nothing has ended, as failed
        with the cause Cancelled, so that no replay launches it again."""
        cursor = h.Cursor(state.history, state.run_id, state.workflow)
        for event in [e for e in state.history if e.kind == h.START_ACTIVITY
                      and e.position not in state.closed]:
            tried = len(state.attempts.get(event.position, ()))
            failed = ActivityFailed(
                f"Activity {event.name!r} (run {state.run_id!r}, position {event.position}) "
                f"was abandoned: its run was cancelled.", run_id=state.run_id,
                activity=event.name, position=event.position, attempts=tried,
                error_class="Cancelled", cause_class="Cancelled",
                cause_message="its run was cancelled")
            cursor.position = len(state.history)
            self.port.append(state, cursor, h.Event(
                cursor.position + 1, h.ACTIVITY, event.name, event.digest, False,
                json.dumps(failed.to_json()), self.port.clock.now(), tried or None, None,
                "canceled", "Cancelled", "its run was cancelled", handle=event.position))


__all__ = ["Concurrency"]
