"""Concurrent work in a run: activities and child runs started now and waited for later.

`ctx.start_activity` and `ctx.start_child` record a start at the next history position and
hand back a `Handle`: that position, so it means the same on every replay, whatever order
the work finishes in. The end of started work is appended to history when it comes, naming
the position it answers (`Cursor.absorb` files it under that position); waiting on handles
(`Handle.result`, `ctx.gather`, `ctx.map`) is a blocking call like `ctx.activity`: at the
end of history it suspends the run until the engine has recorded enough ends.
"""

from __future__ import annotations

import json
import sys
from typing import Any

from . import history as h
from .context import DEFAULT_POLICY, Context, Request, Suspend
from .errors import (ActivityFailed, check_seconds, check_text, child_failed, error_from_json,
                     not_a_policy, not_callable)
from .retry import RetryPolicy


def start_activity(ctx: Context, name, fn, args, kwargs, policy, start_to_close,
                   schedule_to_close, heartbeat, frame) -> "Handle":
    """`ctx.start_activity`: record the start (or find it in history) and launch it."""
    call = f"ctx.start_activity({name!r}) at {h.site(frame)}"
    if type(name) is not str or not name or not name.isascii():
        check_text(name, call, "name")
    if not callable(fn):
        raise not_callable(call, fn)
    if policy is not None and not isinstance(policy, RetryPolicy):
        raise not_a_policy(call, policy)
    for what, value in (("start_to_close", start_to_close),
                        ("schedule_to_close", schedule_to_close), ("heartbeat", heartbeat)):
        if value is not None:
            check_seconds(value, call, what)
    ctx._check()
    event = ctx._expect(h.START_ACTIVITY, name, frame, args, kwargs)
    if event is None:
        if ctx._state.cancel_pending:
            ctx._cancel_here(frame)
        event = ctx._record(h.START_ACTIVITY, name, args, None, frame, kwargs)
    overrides = ctx._state.overrides
    if overrides is not None:
        policy = overrides.for_activity(name) or policy
    request = Request(name, fn, args, kwargs, policy or DEFAULT_POLICY, start_to_close,
                      schedule_to_close, heartbeat, h.site(frame))
    ctx._port.launch(ctx._state, event.position, request)
    return Handle(ctx, event.position, name, "activity")


def start_child(ctx: Context, workflow, input, run_id, policies, frame) -> "Handle":
    """`ctx.start_child`: record the child's run id (or find it in history) and start it
    in the engine, which finds the same child again after a crash."""
    from .registry import workflow_name
    call = f"ctx.start_child at {h.site(frame)}"
    name = workflow_name(workflow)
    if run_id is not None:
        check_text(run_id, call, "run_id")
    input_json = h.to_json(input, "the child's input", call)
    ctx._check()
    event = ctx._expect(h.START_CHILD, name, frame, (json.loads(input_json),), {})
    if event is None:
        if ctx._state.cancel_pending:
            ctx._cancel_here(frame)
        child_id = run_id or f"{ctx.run_id}/{ctx._cursor.position + 1}"
        event = ctx._record(h.START_CHILD, name, (json.loads(input_json),),
                            json.dumps({"run_id": child_id}), frame)
    child_id = event.loads()["run_id"]
    ctx._port.start_child(ctx._state, event.position, workflow, input_json, child_id, policies)
    return Handle(ctx, event.position, name, "child", child_id)


def wait_for(ctx: Context, handles, need_all: bool, frame) -> None:
    """Block until all (or, `need_all` False, any) of `handles` have ended: a blocking
    call, so it takes the ends history holds at this point (`Cursor.absorb`); at the
    end of history it suspends the run until the engine records enough of them."""
    ctx._port.blocking(ctx, _wait_once, ctx, handles, need_all, frame)


def _wait_once(ctx: Context, handles, need_all: bool, frame) -> None:
    ctx._check()
    cursor = ctx._cursor
    ended = cursor.ended
    ready = all if need_all else any
    if ready(hd.position in ended for hd in handles):
        return
    cursor.absorb()
    told = cursor.cancelled()   # a cancel comes before what it ended
    if told is not None:
        raise ctx._told(told)
    if not cursor.replaying and ctx._state.cancel_pending:
        ctx._cancel_here(frame)
    if ready(hd.position in ended for hd in handles):
        return
    if cursor.replaying:   # the code waits where it did not before
        ctx.diverged = cursor.diverged(cursor.peek(), "wait",
                                       ", ".join(hd.name for hd in handles), None, frame,
                                       "different_call")
        raise ctx.diverged
    for hd in handles:   # a child that ended while this run's worker was down
        if hd.kind == "child" and hd.position not in ended:
            ctx._port.child_ended(ctx._state, hd.position, hd.child_run_id)
    cursor.absorb()
    if ready(hd.position in ended for hd in handles):
        return
    waiting = [hd for hd in handles if hd.position not in ended]
    raise Suspend(None, "handles", name=waiting[0].name, position=cursor.position,
                  waiting_on=f"{len(waiting)} of {len(handles)}: " + ", ".join(
                      f"{hd.name}@{hd.position}" for hd in waiting),
                  handles=tuple(hd.position for hd in handles), need_all=need_all)


class Handle:
    """Something a run started and has not waited for yet: an activity
    (`ctx.start_activity`) or a child run (`ctx.start_child`). It is a position in the
    run's history, so it means the same on every replay."""

    __slots__ = ("_ctx", "position", "name", "kind", "child_run_id")

    def __init__(self, ctx: Context, position: int, name: str, kind: str,
                 child_run_id: str | None = None):
        self._ctx, self.position, self.name, self.kind = ctx, position, name, kind
        #: the child's run id (a child handle), else None
        self.child_run_id = child_run_id

    def done(self) -> bool:
        """Whether it has ended, as far as this run's code knows at this point of the
        code (the same answer on every replay). Does not wait."""
        return self.position in self._ctx._cursor.ended

    def result(self) -> Any:
        """Wait for it to end: its value, or the `ActivityFailed` (`ChildFailed`) it ended
        with."""
        wait_for(self._ctx, (self,), True, sys._getframe(1))   # (the guard does not wrap it)
        if not self._ctx._cursor.ended[self.position].ok:
            raise self._error()
        return self._value()

    def _value(self) -> Any:
        return self._ctx._cursor.ended[self.position].loads()

    def _error(self) -> ActivityFailed:
        event = self._ctx._cursor.ended[self.position]
        if self.kind == "child":
            end = event.loads()
            return child_failed(self._ctx.run_id, self.name, self.position, end["run_id"],
                                end["status"], end.get("error"), event.call_site)
        failed = error_from_json(event.loads())
        failed.call_site = event.call_site
        return failed

    def __repr__(self) -> str:
        state = "done" if self.done() else "pending"
        return f"<Handle {self.kind} {self.name!r} at position {self.position}: {state}>"


__all__ = ["Handle", "start_activity", "start_child", "wait_for"]
