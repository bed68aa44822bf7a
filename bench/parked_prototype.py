"""A prototype of parked runs (a sticky cache, as Temporal's workers keep one), to measure
what the engine hook asked for in issue 24 would buy. NOT part of the package.

    .venv/bin/python bench/parked_prototype.py --clients 10 50 100 --trials 1

Today every wake-up runs workflow code again from the top, and in Brooker's contended
sweep a client that has failed 20 times replays 20 tries of ``ctx.retry`` to make its 21st:
the work grows with the square of the retries. Here a run whose code suspends at
``ctx.activity`` or at ``ctx.retry``'s backoff stays parked in a greenlet instead, and its
next wake-up resumes it: the suspended call is made again at the same history position,
which is exactly what a replay from the top does when it reaches that call, so history is
the same event for event (checked below, byte for byte). A crash, a redefined workflow or
a run ending drops the parked code: recovery still replays from the top.

It subclasses `Engine` and overrides its private ``_wake``, ``_recover`` and ``forget``
(as they are at commit 1f85bc3): the hook it needs in the engine is described in the
report on issue 24. Only the wake-up telemetry differs (a resumed wake-up replays one
event, not the whole history), and so the sweep's ``events_replayed`` column.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import greenlet  # noqa: E402

import durablelab as dl  # noqa: E402
from durablelab import engine as engine_module  # noqa: E402
from durablelab import history as h  # noqa: E402
from durablelab.context import Context, Ended, Suspend, execute  # noqa: E402
from durablelab.guard import Guard, _profiler_active  # noqa: E402


class ParkingContext(Context):
    """A Context whose blocking calls park the run's greenlet instead of unwinding it."""

    def activity(self, *args, **kwargs):
        # Context.activity finds the workflow's line two frames further up: this override
        # and `_parked` stand between.
        self._caller = type(self)._caller + 2
        try:
            return self._parked(Context.activity, args, kwargs)
        finally:
            del self._caller

    def _sleep(self, seconds, frame):
        return self._parked(Context._sleep, (seconds, frame), {})

    def _parked(self, method, args, kwargs):
        cursor = self._cursor
        start, ended = cursor.position, dict(cursor.ended)
        while True:
            try:
                return method(self, *args, **kwargs)
            except Suspend as suspend:
                parent = greenlet.getcurrent().parent
                if parent is None or not getattr(self._state, "parkable", False):
                    raise
                # The next wake-up makes this call again where it began, as a replay
                # from the top would reach it.
                cursor.position, cursor.ended = start, ended
                parent.switch(Ended("suspended", suspend.with_traceback(None)))


# The guard wraps only the methods a class defines itself (`guard.guarded_context`): give
# this subclass every public method of Context, so all are wrapped as they are for Context.
for _name, _attr in list(vars(Context).items()):
    if not _name.startswith("_") and callable(_attr) and not isinstance(_attr, type) \
            and _name not in vars(ParkingContext):
        setattr(ParkingContext, _name, _attr)


class ParkedEngine(dl.Engine):
    """An Engine whose runs stay parked between wake-ups when nothing crashed."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._guard = Guard(ParkingContext) if self._guard is not None else None
        self._parked: dict[str, tuple] = {}    # run id -> (greenlet, ctx, cursor, fn)

    def _drop(self, run_id=None) -> None:
        for key in ([run_id] if run_id is not None else list(self._parked)):
            parked = self._parked.pop(key, None)
            if parked is not None and not parked[0].dead:
                parked[0].throw(greenlet.GreenletExit)
        if not _profiler_active():   # (a profiler keeps the hook: the guard is off)
            sys.setprofile(None)   # a dropped run's guard may have put its hook back

    def _wake(self, state, reason: str) -> None:
        self._use_current_definition(state)
        parked = self._parked.pop(state.run_id, None)
        if parked is not None and parked[3] is not state.fn:
            self._parked[state.run_id] = parked
            self._drop(state.run_id)
            parked = None
        if parked is None:
            cursor = h.Cursor(state.history, state.run_id, state.workflow)
            ctx = (Context if self._guard is None else self._guard.context)(
                self._port, state, cursor)
            if self._guard is None:
                def code():
                    return state.fn(ctx, state.input())
            else:
                def code():
                    return self._guard.call(state.fn, ctx, state.input())
            runner = greenlet.greenlet(lambda: execute(code, ctx, cursor))
        else:
            runner, ctx, cursor, _ = parked
            cursor.replayed = 0
        state.parkable = True
        state.status, state.waiting, state.waiting_on, state.due_at = "running", None, None, None
        state.waking = (self.clock.now(), reason, cursor, len(state.history))
        crashed = False
        try:
            how, value = runner.switch()
            if how == "suspended" and not runner.dead:
                self._parked[state.run_id] = (runner, ctx, cursor, state.fn)
            if how == "completed":
                try:
                    value = h.to_json(value, "the workflow result",
                                      f"the return of {state.workflow}")
                except engine_module.SerializationError as exc:
                    how, value = "raised", exc
            if how == "completed":
                self._end(state, "completed", result_json=value)
            elif how == "suspended":
                self._suspend(state, value)
            elif how == "continued":
                self._continue(state, value)
            elif how == "diverged":
                self._diverge(state, value)
            elif how == "failed":
                self._end(state, "failed", error=value)
            elif how == "cancelled":
                self._end(state, "cancelled", error=value)
            else:
                self._end(state, "failed", error=engine_module.workflow_error(
                    state.run_id, state.workflow, value, engine_module._location(value)))
        except engine_module.WorkerCrash:
            crashed = True
            self._drop()
            raise
        finally:
            self._note_wakeup(state)
            if state.status in engine_module.FINAL or state.status == "diverged":
                self._drop(state.run_id)
            if not crashed and state.stored_error is not None and state.status != "diverged":
                self._undiverge(state)
            if not crashed:
                self._journal.turn_ended(state)

    def _recover(self) -> None:
        self._drop()
        super()._recover()

    def forget(self) -> None:
        self._drop()
        super().forget()


def histories(engine) -> str:
    """Every run's history, as the store would write it (kind, name, value, call site...)."""
    out = {}
    for run_id, state in sorted(engine._runs.items()):
        out[run_id] = [(e.position, e.kind, e.name, e.digest, e.value, e.ok, e.recorded_at,
                        e.started_at, e.attempt, e.outcome, e.call_site, e.handle)
                       for e in state.history]
    return json.dumps(out)


def trial(engine_class, clients: int, strategy: str, seed: int):
    from durablelab.examples import brooker
    engine = engine_class(world=brooker.Row())
    engine.store.discard_queue()       # as a sweep does without a Crash rule
    for i in range(clients):
        engine.start(brooker.client, strategy, run_id=f"{strategy}/none/{seed}/{i}",
                     seed=seed, timeout=7 * 86400)
    began = time.perf_counter()
    engine.run_until_idle()
    took = time.perf_counter() - began
    writes = sum(1 for s in engine._runs.values() for e in s.history if e.name == "write")
    text = histories(engine)
    engine.store.forget()
    engine.close()
    return took, writes, text


def crash_check() -> bool:
    """A worker crash mid-trial: parked runs are dropped and replayed from the top, and
    every history ends as the plain engine's does."""
    from durablelab.examples import brooker
    texts = []
    for engine_class in (dl.Engine, ParkedEngine):
        engine = engine_class(world=brooker.Row())
        for i in range(6):
            engine.start(brooker.client, "full", run_id=f"c{i}", seed=1)
        engine.advance(0.05)               # reads and writes in flight, runs parked
        engine.crash()
        engine.run_until_idle()
        assert all(s.status == "completed" for s in engine._runs.values())
        texts.append("".join(engine.run(f"c{i}").history.to_csv() for i in range(6)))
        engine.close()
    return texts[0] == texts[1]


def sweeps(clients_list, trials: int) -> None:
    """The whole `dl.sweep` of bench/brooker.py --durablelab, replayed and parked, beside
    the plain simulation: the ratio the hook would give, and the tables compared."""
    import importlib
    from durablelab.examples import brooker
    runner = importlib.import_module("durablelab.experiments.runner")
    spec = importlib.util.spec_from_file_location(
        "brooker_bench", Path(__file__).resolve().parent / "brooker.py")
    reference = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(reference)

    def reproduce(engine_class, clients, strategy):
        runner._IDLE.clear()                # a borrowed runner keeps its engine's class
        runner.Engine = engine_class
        try:
            began = time.perf_counter()
            experiment = brooker.reproduce(clients, strategy, trials)[2]
            return time.perf_counter() - began, experiment
        finally:
            runner.Engine = dl.Engine
            runner._IDLE.clear()

    reproduce(ParkedEngine, 5, "full")
    print(f"\ndl.sweep of durablelab.examples.brooker, {trials} trials: replayed (today), "
          f"parked (the hook), and the plain simulation of bench/brooker.py")
    print(f"{'clients':>7} {'strategy':<13} {'sim s':>7} {'replayed s':>10} {'parked s':>9} "
          f"{'ratio':>7} {'parked':>7}  table")
    for clients in clients_list:
        totals = [0.0, 0.0, 0.0]
        for strategy in brooker.STRATEGIES:
            sim = float("inf")       # the fastest of three, as bench/brooker.py times it
            for _ in range(3):
                began = time.perf_counter()
                reference.experiment(clients, strategy, trials)
                sim = min(sim, time.perf_counter() - began)
            replayed, a = reproduce(dl.Engine, clients, strategy)
            parked, b = reproduce(ParkedEngine, clients, strategy)
            telemetry = ["events_replayed"]
            same = a.frame.drop(columns=telemetry).equals(b.frame.drop(columns=telemetry)) \
                and a.requests.equals(b.requests) and a.load.equals(b.load)
            for i, t in enumerate((sim, replayed, parked)):
                totals[i] += t
            print(f"{clients:>7} {strategy:<13} {sim:>7.3f} {replayed:>10.2f} {parked:>9.2f} "
                  f"{replayed / sim:>6.0f}x {parked / sim:>6.0f}x  "
                  f"{'same but events_replayed' if same else 'DIFFERS'}", flush=True)
        print(f"{clients:>7} all five: simulation {totals[0]:.3f} s, replayed {totals[1]:.2f} s "
              f"({totals[1] / totals[0]:.0f}x), parked {totals[2]:.2f} s "
              f"({totals[2] / totals[0]:.0f}x)", flush=True)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, nargs="+", default=[10, 50, 100])
    parser.add_argument("--trials", type=int, default=None, help="trials (1; 5 with --sweep)")
    parser.add_argument("--sweep", action="store_true",
                        help="time whole dl.sweep calls against bench/brooker.py's simulation")
    parser.add_argument("--quick", action="store_true", help="CI: 10 clients, 1 trial")
    args = parser.parse_args(argv)
    import os
    os.environ.setdefault("TQDM_DISABLE", "1")
    from durablelab.examples import brooker
    if args.quick:
        args.clients = [10]
    print(f"a crash mid-trial, parked and replayed: "
          f"{'same histories' if crash_check() else 'HISTORIES DIFFER'}")
    if args.sweep:
        sweeps(args.clients, args.trials or (1 if args.quick else 5))
        return 0
    trials = args.trials or 1
    trial(ParkedEngine, 3, "full", 0)
    print(f"{'clients':>7} {'strategy':<13} {'writes':>7} {'replayed s':>10} "
          f"{'parked s':>9} {'speed-up':>8}  history")
    for clients in args.clients:
        plain_total = parked_total = 0.0
        for strategy in brooker.STRATEGIES:
            plain = parked = 0.0
            same = True
            for seed in range(trials):
                t1, w1, h1 = trial(dl.Engine, clients, strategy, seed)
                t2, w2, h2 = trial(ParkedEngine, clients, strategy, seed)
                plain, parked, same = plain + t1, parked + t2, same and h1 == h2
            plain_total += plain
            parked_total += parked
            print(f"{clients:>7} {strategy:<13} {w1:>7} {plain:>10.3f} {parked:>9.3f} "
                  f"{plain / parked:>7.1f}x  {'same' if same else 'DIFFERS'}", flush=True)
        print(f"{clients:>7} all five: {plain_total:.2f} s replayed, {parked_total:.2f} s "
              f"parked: {plain_total / parked_total:.1f}x", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
