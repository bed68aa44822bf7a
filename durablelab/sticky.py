"""Sticky runs: a run whose code waits at a blocking ctx call is kept where it is until it wakes.

The engine's model (`engine.py`, every lesson) runs workflow code again from the top on
each wake-up: the code replays history until it reaches new ground. That is what recovery
must do after a crash, and what the lessons show. It also costs: a client of a contended
sweep that has retried its read-modify-write 20 times replays the 20 tries of ``ctx.retry``
to make its 21st, so the work grows with the square of the retries. Temporal's workers keep
a *sticky cache* for the same reason: a workflow that blocks stays in memory, and its next
task resumes it instead of replaying the history from the start.

An engine opened with ``Engine(sticky=True)`` (as the engines `dl.sweep` builds are, unless
``sticky=False``) does the same. Its runs execute in a greenlet each. When a blocking call
(`Context.activity`, a sleep, a signal wait, a wait for handles) would suspend the run, the
greenlet is kept, switched away from, instead of unwound; the next wake-up resumes it and
the call is made again at the same history position, exactly as a replay from the top
would make it when it got there (the code is deterministic: that is the contract replay
already relies on). So history, attempts and every metric are the same as replay gives,
byte for byte (`tests/test_sticky.py`). A wake-up's telemetry (`events_replayed`) reports
what a replay from the top would hand the code, the durable-execution model's figure, not
the one event the resumed call takes.

Kept code is dropped, and the run replays from the top next time, whenever memory cannot be
trusted or the run is gone: a worker crash and its recovery, `Engine.forget`,
`Engine.close`, the run's end, a cancel, and a redefined workflow. Dropping kept code
throws `greenlet.GreenletExit` into it, which nothing may record after. (A run that waits
is stored `waiting`, and the lessons say it is parked, whether or not its code is kept:
this module is only about where the code waits in memory.)
"""

from __future__ import annotations

import sys
from typing import Any, Callable, NamedTuple

import greenlet

from .context import Ended, Suspend, execute


class Kept(NamedTuple):
    """A run's code waiting in a blocking call, and the definition it was running."""

    runner: "Runner"
    fn: Callable


class Runner(greenlet.greenlet):
    """One run's code in a greenlet of its own, with its Context (`ctx`). Nothing its frames
    hold leads back to the engine (the Context reaches it through a weak proxy), so an
    engine dropped without `close()` is still freed at once, and its kept code with it:
    the garbage collector cannot see through a waiting greenlet's frames."""

    def __init__(self, guard, state, ctx, cursor):
        if guard is None:
            def code():
                return state.fn(ctx, state.input())
        else:
            def code():
                return guard.call(state.fn, ctx, state.input())
        super().__init__(lambda: execute(code, ctx, cursor))
        self.ctx = ctx


class StickyCache:
    """The kept runs of one engine (its ``_sticky``), by run id; `guard` is the
    engine's determinism guard (`guard.Guard`), or None."""

    def __init__(self, guard):
        self.guard = guard
        self.kept: dict[str, Kept] = {}

    def wake(self, state, ctx, cursor) -> Ended:
        """What `execute` gives for the run's code with `ctx` and `cursor` (as `_wake` runs
        it), but resuming the run where its code was kept, if it was and may still be; its
        code is kept again if it blocks."""
        kept = self.kept.pop(state.run_id, None)
        if kept is not None and (kept.fn is not state.fn or state.cancel_pending):
            _kill(kept)    # redefined, or cancelled: replay from the top decides
            kept = None
        if kept is not None:
            try:
                kept.runner.parent = greenlet.getcurrent()
            except ValueError:   # kept by another thread, where only it can end it
                kept = None
        if kept is None:
            runner = Runner(self.guard, state, ctx, cursor)
        else:
            runner = kept.runner
            ctx = runner.ctx
            # What a replay from the top hands the code before it reaches this call again.
            ctx._cursor.replayed = ctx._cursor.position
            # As a fresh Context of this wake-up would say: `is_replaying` counts from here.
            ctx._frontier, ctx._been_here = len(cursor.history), None
            woke_at, reason, _, before = state.waking   # the telemetry reads this cursor
            state.waking = (woke_at, reason, ctx._cursor, before)
        profile = sys.getprofile()
        try:
            ended = runner.switch()
        finally:
            if sys.getprofile() is not profile:   # the guard's hook stays with its code
                sys.setprofile(profile)
        if not runner.dead:
            self.kept[state.run_id] = Kept(runner, state.fn)
        return ended

    def drop(self, run_id: str | None = None) -> None:
        """Drop run `run_id`'s kept code (None: every run's); it replays from the top."""
        if run_id is None:
            dropped, self.kept = list(self.kept.values()), {}
        else:
            one = self.kept.pop(run_id, None)
            dropped = [] if one is None else [one]
        for one in dropped:
            _kill(one)


def blocking(ctx, call: Callable, args: tuple) -> Any:
    """Make a blocking ctx call; if it suspends the run, keep the run's code waiting here and, once
    woken, make the call again from the same position."""
    if getattr(greenlet.getcurrent(), "ctx", None) is not ctx:   # not in a `Runner` of it
        return call(*args)
    cursor = ctx._cursor
    while True:
        start, ended = cursor.position, dict(cursor.ended)
        try:
            return call(*args)
        except Suspend as suspend:
            if ctx.diverged is not None:
                raise
            # Put back what the call took, so the next wake-up makes it again where a
            # replay from the top would make it.
            cursor.position, cursor.ended = start, ended
            hook = sys.getprofile()
            # (No local names the greenlet itself: its frames would keep it alive.)
            greenlet.getcurrent().parent.switch(
                Ended("suspended", suspend.with_traceback(None)))
            if sys.getprofile() is not hook:   # the guard's, where the code left it
                sys.setprofile(hook)


def _kill(kept: Kept) -> None:
    """End kept code: nothing it runs on the way out may record (its ctx raises)."""
    runner = kept.runner
    if runner.dead:
        return
    runner.ctx.diverged = greenlet.GreenletExit()   # a ctx call re-raises it
    profile = sys.getprofile()
    try:
        runner.parent = greenlet.getcurrent()
        runner.throw(greenlet.GreenletExit)
    except (greenlet.error, ValueError):   # kept in another thread: it ends with it
        pass
    finally:
        if sys.getprofile() is not profile:
            sys.setprofile(profile)


__all__ = ["StickyCache", "Kept", "Runner", "blocking"]
