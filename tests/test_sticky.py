"""Kept runs (`durablelab/sticky.py`) give what replay from the top gives, byte for byte.

A sticky engine keeps a run's code waiting in a greenlet at its blocking ctx call and
resumes it at the next wake-up. The contract: every run's history, attempts and wake-up
rows, and a sweep's tables, are exactly those of the plain engine, which runs the code
again from the top; kept code is dropped (and the run replays) on a crash, recovery,
forget, close, the run's end, a cancel and a redefined workflow.
"""

from __future__ import annotations

import gc
import json
import sys
import types
import weakref

import greenlet
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import durablelab as dl
from durablelab.errors import BadType, DeterminismGuardError, SweepError
from durablelab.examples import brooker
from durablelab.experiments.spec import Spec

import occ_clients as oc


# --- what is compared ---------------------------------------------------------------------
def histories(engine) -> str:
    """Every run's events (every stored field), attempts, wake-up rows and ending, as JSON."""
    out = {}
    for run_id in sorted(engine._runs):
        s = engine.working_state(run_id)
        out[run_id] = {
            "events": [(e.position, e.kind, e.name, e.digest, e.value, e.ok, e.recorded_at,
                        e.started_at, e.attempt, e.outcome, e.call_site, e.handle)
                       for e in s.history],
            "attempts": {str(p): [repr(a) for a in rows] for p, rows in sorted(s.attempts.items())},
            "wakeups": [tuple(w) for w in s.wakeups],
            "end": (s.status, s.result_json, None if s.error is None else repr(s.error),
                    s.ended_at)}
    return json.dumps(out, sort_keys=True)


def tables(experiment) -> str:
    """A sweep's tables as CSV text: the runs, the load and the attempts."""
    return "\n".join(frame.to_csv() for frame in (
        experiment.frame, experiment.load, experiment.requests, experiment.cells))


def live_greenlets() -> set[int]:
    return {id(g) for g in gc.get_objects()
            if issubclass(type(g), greenlet.greenlet) and not g.dead
            and g is not greenlet.getcurrent()}


# --- a world and workflows with every kind of blocking call -------------------------------------
POLICY = dl.RetryPolicy(max_attempts=4, initial=0.5, jitter="none")
SCOPE = dl.RetryPolicy(max_attempts=3, initial=0.25, backoff=2, jitter="full")
TOPS: list[str] = []   # run ids, once each time a workflow's code starts from its top


class Desk:
    """Answers that take virtual time, so attempts stay in flight and runs wait."""

    def __init__(self, clock=None):
        self.calls = 0

    def fetch(self, n):
        self.calls += 1
        return dl.sim.after(0.5 + (n % 3) * 0.25, value={"n": n})

    def charge(self, n):
        return dl.sim.after(0.2, value={"paid": n})


def child_flow(ctx, n):
    ctx.sleep(1.0)
    return ctx.activity("fetch", ctx.world.fetch, n + 100)


def pay(ctx, n):
    return ctx.activity("charge", ctx.world.charge, n)


def mixed_flow(ctx, n):
    """An activity, a gather, a bounded map, a timer, a signal wait, a child and a retry
    scope: each a place where the run waits."""
    TOPS.append(ctx.run_id)
    first = ctx.activity("fetch", ctx.world.fetch, n, policy=POLICY)
    handles = [ctx.start_activity("fetch", ctx.world.fetch, n + k, policy=POLICY)
               for k in (1, 2)]
    both = ctx.gather(*handles)
    paid = ctx.map("charge", ctx.world.charge, [n, n + 1, n + 2], limit=2, policy=POLICY)
    ctx.sleep(2.0)
    answer = ctx.wait_signal("go", timeout=3.0)
    kid = ctx.child(child_flow, n)
    again = ctx.retry(SCOPE, pay, n + 7)
    return {"first": first, "both": both, "paid": paid, "answer": answer, "kid": kid,
            "again": again, "at": ctx.now()}


PLANS = {
    "calm": None,
    "crashy": dl.FaultPlan([dl.faults.ServerError("fetch", p=0.3),
                            dl.faults.Crash("charge", point="after_effect", p=0.15),
                            dl.faults.Crash("fetch", point="during_wait", p=0.1),
                            dl.faults.Crash("fetch", point="after_record", p=0.1)]),
}
POLICIES = {"code": None, "steady": dl.RetryPolicy(max_attempts=5, initial=0.5, jitter="none")}


# --- sweeps: the same tables, sticky or replayed ---------------------------------------------
@pytest.mark.parametrize("strategy", brooker.STRATEGIES)
def test_brooker_contended_sweep_same_tables_sticky_or_replayed(strategy):
    parked = brooker.reproduce(12, strategy, 3, sticky=True)
    replayed = brooker.reproduce(12, strategy, 3, sticky=False)
    assert parked[:2] == replayed[:2]
    assert tables(parked[2]) == tables(replayed[2])
    assert (parked[2].frame.events_replayed > 0).any()   # retries replay (in the model)


@pytest.mark.parametrize("contention", [False, True, "per_seed"])
def test_sweep_with_crashes_timers_signals_and_children_same_tables(contention):
    made = {}
    for sticky in (True, False):
        made[sticky] = dl.sweep(mixed_flow, [1, 2, 3], policies=POLICIES, fault_plans=PLANS,
                              seeds=range(4), world=Desk, contention=contention, sticky=sticky)
    assert tables(made[True]) == tables(made[False])
    frame = made[True].frame
    assert (frame.crashes > 0).any()            # the crashes happened...
    assert (frame.status == "completed").any()  # ...and runs got through them


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seeds=st.lists(st.integers(0, 10_000), min_size=1, max_size=3, unique=True),
       reads=st.lists(st.sampled_from([0.1, 0.25, 0.5, 1.0]), min_size=2, max_size=2),
       writes=st.lists(st.sampled_from([0.1, 0.25, 0.5, 1.0]), min_size=2, max_size=2))
def test_occ_clients_sweep_same_tables_over_seeds_and_delays(seeds, reads, writes):
    inputs = [[reads[0], writes[0]], [reads[1], writes[1]]]
    a = dl.sweep(oc.client, inputs, seeds=seeds, world=oc.Row, contention="per_seed",
                 sticky=True)
    b = dl.sweep(oc.client, inputs, seeds=seeds, world=oc.Row, contention="per_seed",
                 sticky=False)
    assert tables(a) == tables(b)


# --- one engine: histories, crashes, signals, cancels ------------------------------------------
def run_both(schedule):
    """`schedule(engine)` on a sticky engine and on a plain one; their histories."""
    out = []
    for sticky in (True, False):
        engine = dl.Engine(world=Desk(), sticky=sticky)
        try:
            schedule(engine)
            out.append(histories(engine))
        finally:
            engine.close()
    return out


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10_000), crash_at=st.one_of(st.none(), st.floats(0.0, 8.0)),
       signal_at=st.one_of(st.none(), st.floats(0.0, 8.0)), plan=st.sampled_from(list(PLANS)))
def test_histories_same_with_crash_and_signal_anywhere(seed, crash_at, signal_at, plan):
    def schedule(engine):
        for i in range(3):
            engine.start(mixed_flow, i, run_id=f"r{i}", seed=seed, faults=PLANS[plan])
        for when, act in sorted([(t, a) for t, a in ((crash_at, "crash"), (signal_at, "go"))
                                 if t is not None]):
            engine.advance(max(0.0, when - engine.clock.now()))
            if act == "crash":
                engine.crash()
            else:
                for s in engine.runs(status=["running", "waiting"]).run_id:
                    engine.signal(s, "go", {"from": s})
        engine.run_until_idle()
    parked, replayed = run_both(schedule)
    assert parked == replayed


def test_sticky_engine_runs_code_from_the_top_once_per_run():
    """Without a crash, each run's code starts once; replayed, once per wake-up."""
    counts = {}
    for sticky in (True, False):
        TOPS.clear()
        with dl.Engine(world=Desk(), sticky=sticky) as engine:
            engine.start(mixed_flow, 1, run_id="r")
            engine.run_until_idle()
            assert engine.run("r").status == "completed"
            counts[sticky] = TOPS.count("r")
    assert counts[True] == 1
    assert counts[False] > 5


def test_crash_while_kept_drops_the_kept_code_and_recovery_replays():
    TOPS.clear()
    with dl.Engine(world=Desk(), sticky=True) as engine:
        for i in range(3):
            engine.start(mixed_flow, i, run_id=f"r{i}")
        engine.advance(1.1)                           # each has recorded its first fetch
        parked = dict(engine._sticky.kept)
        assert sorted(parked) == ["r0", "r1", "r2"]    # each waits in a call, kept
        assert TOPS == ["r0", "r1", "r2"]
        engine.crash()
        assert engine._sticky.kept == {}
        assert all(p.runner.dead for p in parked.values())
        engine.run_until_idle()
        # Recovery ran each run's code from the top again, and it replayed its history.
        assert sorted(TOPS) == ["r0", "r0", "r1", "r1", "r2", "r2"]
        for i in range(3):
            run = engine.run(f"r{i}")
            assert run.status == "completed"
            recovery = run.wakeups[run.wakeups.reason == "recovery"]
            assert len(recovery) == 1 and recovery.replayed.iloc[0] > 0


def test_redefined_workflow_while_kept_replays_with_the_new_code():
    module = types.ModuleType("parked_cell")
    sys.modules["parked_cell"] = module
    module.TOPS = TOPS
    cell = ("import durablelab as dl\n@dl.workflow\ndef flow(ctx, _):\n"
            "    TOPS.append({0!r})\n    ctx.wait_signal('go')\n    return {0!r}\n")
    TOPS.clear()
    try:
        exec(cell.format("old"), module.__dict__)
        with dl.Engine(sticky=True) as engine:
            engine.start(module.flow, None, run_id="r")
            engine.run_until_idle()
            runner = engine._sticky.kept["r"].runner    # waits for "go", kept
            with pytest.warns(dl.WorkflowRedefinedWarning):
                exec(cell.format("new"), module.__dict__)   # the notebook cell, run again
            engine.signal("r", "go")
            engine.run_until_idle()
            assert runner.dead
            assert TOPS == ["old", "new"]
            assert engine.run("r").result == "new"
    finally:
        del sys.modules["parked_cell"]


def test_cancel_while_kept_gives_what_replay_gives():
    def schedule(engine):
        engine.start(mixed_flow, 1, run_id="r")
        engine.advance(2.0)
        engine.cancel("r", "enough")
        engine.run_until_idle()
        assert engine.run("r").status == "cancelled"
    parked, replayed = run_both(schedule)
    assert parked == replayed


def test_engine_reused_after_forget_keeps_nothing():
    with dl.Engine(world=Desk(), sticky=True) as engine:
        engine.start(mixed_flow, 1, run_id="r")
        engine.advance(0.6)
        runner = engine._sticky.kept["r"].runner
        engine.forget()
        assert runner.dead and engine._sticky.kept == {}
        engine.clock = dl.VirtualClock()              # as a sweep's runner does
        engine.start(mixed_flow, 1, run_id="r")       # the same id, from nothing
        engine.run_until_idle()
        again = histories(engine)
    with dl.Engine(world=Desk()) as plain:
        plain.start(mixed_flow, 1, run_id="r")
        plain.run_until_idle()
        assert histories(plain) == again


def test_sweeps_in_turn_leave_no_greenlet_alive():
    before = live_greenlets()
    for sticky in (True, False, True):
        dl.sweep(oc.client, [[0.1, 0.2], [0.2, 0.1]], seeds=range(2), world=oc.Row,
                 contention="per_seed", sticky=sticky)
    gc.collect()
    assert live_greenlets() - before == set()


def test_no_greenlet_alive_after_close():
    before = live_greenlets()
    engine = dl.Engine(world=Desk(), sticky=True)
    for i in range(4):
        engine.start(mixed_flow, i, run_id=f"r{i}")
    engine.advance(1.0)
    assert len(engine._sticky.kept) == 4
    assert len(live_greenlets() - before) == 4
    engine.close()
    del engine
    gc.collect()
    assert live_greenlets() - before == set()


def test_run_kept_in_one_thread_replays_when_woken_in_another():
    """A greenlet runs only in its own thread: woken elsewhere, the run replays instead."""
    import threading

    def schedule(engine):
        engine.start(mixed_flow, 1, run_id="r")
        engine.advance(0.6)
        worker = threading.Thread(target=engine.run_until_idle)
        worker.start()
        worker.join()
        assert engine.run("r").status == "completed"
    parked, replayed = run_both(schedule)
    assert parked == replayed


def test_engine_dropped_without_close_frees_its_kept_code():
    """Nothing kept code holds leads back to its engine: dropped, the engine is freed at
    once (as a plain one is), and its waiting greenlets end with it."""
    before = live_greenlets()
    engine = dl.Engine(world=Desk(), sticky=True)
    for i in range(3):
        engine.start(mixed_flow, i, run_id=f"r{i}")
    engine.advance(1.0)
    assert len(live_greenlets() - before) == 3
    gone = weakref.ref(engine)
    del engine
    assert gone() is None
    assert live_greenlets() - before == set()


def test_guard_still_stops_resumed_code():
    """The determinism guard's hook follows the kept code: after it resumes, a clock read
    in workflow code fails as it does replayed."""
    import time

    def sneaky(ctx, n):
        ctx.activity("fetch", ctx.world.fetch, n)    # in flight: the run's code waits here
        return time.time()

    for sticky in (True, False):
        with dl.Engine(world=Desk(), sticky=sticky) as engine:
            engine.start(sneaky, 1, run_id="r")
            engine.run_until_idle()
            run = engine.run("r")
            assert run.status == "failed"
            assert isinstance(run.error, DeterminismGuardError)


def test_plain_engine_keeps_no_code():
    with dl.Engine(world=Desk()) as engine:
        assert engine._sticky is None
        engine.start(mixed_flow, 1, run_id="r")
        engine.run_until_idle()
        assert engine.run("r").status == "completed"


# --- bad input ---------------------------------------------------------------------------------
def test_engine_sticky_must_be_a_bool():
    with pytest.raises(BadType) as caught:
        dl.Engine(sticky="yes")
    assert caught.value.argument == "sticky"
    assert "sticky='yes' must be True" in str(caught.value)


def test_sweep_sticky_must_be_a_bool():
    with pytest.raises(SweepError) as caught:
        dl.sweep(oc.client, [[0.1, 0.2]], seeds=range(1), world=oc.Row, sticky="yes")
    assert caught.value.argument == "sticky"
    assert "sweep(sticky='yes')" in str(caught.value)


def test_sticky_travels_in_the_data_form_only_when_off():
    on = Spec(oc.client, [[0.1, 0.2]], None, None, range(1), oc.Row, False, 100.0)
    off = Spec(oc.client, [[0.1, 0.2]], None, None, range(1), oc.Row, False, 100.0,
               sticky=False)
    assert "sticky" not in json.loads(on.to_data())
    assert Spec.from_data(on.to_data()).sticky is True
    assert Spec.from_data(off.to_data()).sticky is False
    assert on.describe() == off.describe()     # a results file resumes either way
