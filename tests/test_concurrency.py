"""Agent-shaped workflows (DESIGN.md section 2): activities started concurrently
(`ctx.start_activity`, `ctx.gather`, `ctx.map`), child runs, cancellation, `async def`
activities and `dl.idempotency_key()`, with the invariants of section 4 under crashes."""

from __future__ import annotations

import asyncio
import json
import os

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import durablelab as dl
from durablelab.faults import Crash, Latency, ServerError
from durablelab.sim import Payments

SCALE = int(os.environ.get("DURABLELAB_PROPERTY_SCALE", "1"))
PROPERTY = settings(max_examples=40 * SCALE, deadline=None, database=None,
                    derandomize=SCALE == 1, suppress_health_check=[HealthCheck.too_slow])


class Service:
    """A key-honouring service that notes when (virtual time) each request reached it."""

    def __init__(self, engine=None):
        self.engine = engine
        self.seen: list[tuple[float, str, str]] = []   # (time, what, key)
        self.payments = Payments(honor_keys=True)

    def call(self, what, idempotency_key=None):
        self.seen.append((self.engine.clock.now(), what, idempotency_key))
        return self.payments.charge(what, 1.0, idempotency_key=idempotency_key)["id"]


def events(engine, run_id):
    return [(e.position, e.kind, e.name, e.ok, e.handle)
            for e in engine.snapshot(run_id).events]


# --- start_activity, gather, map --------------------------------------------------------------

def test_three_ten_second_activities_started_together_take_ten_seconds_not_thirty():
    engine = dl.Engine()
    service = Service(engine)

    def fan_out(ctx, _):
        handles = [ctx.start_activity("fetch", service.call, f"doc{i}") for i in range(3)]
        values = ctx.gather(*handles)
        return {"values": values, "t": ctx.now()}

    run_id = engine.start(fan_out, None, faults=[Latency("fetch", seconds=10.0)])
    engine.run_until_idle()
    run = engine.run(run_id)
    assert run.status == "completed"
    assert run.result["t"] == pytest.approx(10.0)
    assert [when for when, _, _ in service.seen] == [0.0, 0.0, 0.0]
    # each has its own key, the position its start_activity took
    assert [key for _, _, key in service.seen] == [f"{run_id}:{p}" for p in (1, 2, 3)]
    assert run.result["values"] == ["ch_1", "ch_2", "ch_3"]


def test_positions_follow_the_order_started_not_the_order_finished():
    engine = dl.Engine()

    def wf(ctx, _):
        slow = ctx.start_activity("slow", lambda: "s")
        fast = ctx.start_activity("fast", lambda: "f")
        return ctx.gather(slow, fast)

    run_id = engine.start(wf, None, faults=[Latency("slow", seconds=9.0),
                                            Latency("fast", seconds=1.0)])
    engine.run_until_idle()
    assert engine.run(run_id).result == ["s", "f"]
    # starts at 1 and 2; the fast one's end is recorded first, naming position 2
    assert events(engine, run_id) == [(1, "start_activity", "slow", True, None),
                                      (2, "start_activity", "fast", True, None),
                                      (3, "activity", "fast", True, 2),
                                      (4, "activity", "slow", True, 1)]


def test_a_simulated_service_sees_concurrent_runs_in_virtual_time_order():
    engine = dl.Engine()
    service = Service(engine)

    def wf(ctx, delay):
        ctx.sleep(delay)
        return ctx.gather(*[ctx.start_activity("call", service.call, f"{delay}-{i}")
                            for i in range(2)])

    for delay in (5.0, 1.0, 3.0):
        engine.start(wf, delay)
    engine.run_until_idle()
    times = [when for when, _, _ in service.seen]
    assert times == sorted(times) == [1.0, 1.0, 3.0, 3.0, 5.0, 5.0]


def test_gather_raises_the_failure_at_the_lowest_position_once_all_have_ended():
    engine = dl.Engine()
    ended = []

    def boom(what):
        raise RuntimeError(what)

    def fine(what):
        ended.append(what)
        return what

    def wf(ctx, _):
        a = ctx.start_activity("a", fine, "a")
        b = ctx.start_activity("b", boom, "b", policy=dl.RetryPolicy(max_attempts=1))
        c = ctx.start_activity("c", boom, "c", policy=dl.RetryPolicy(max_attempts=1))
        d = ctx.start_activity("d", fine, "d")
        try:
            ctx.gather(a, b, c, d)
        except dl.ActivityFailed as failed:
            return {"failed": failed.activity, "t": ctx.now(), "d_done": d.done()}

    run_id = engine.start(wf, None, faults=[Latency("c", seconds=1.0),
                                            Latency("d", seconds=20.0)])
    engine.run_until_idle()
    # c fails first in time (b at t=0 too, but b is at the lower position); d ends at 20
    assert engine.run(run_id).result == {"failed": "b", "t": 20.0, "d_done": True}
    assert ended == ["a", "d"]


def test_map_keeps_at_most_limit_in_flight_and_returns_values_in_item_order():
    engine = dl.Engine()
    service = Service(engine)

    def wf(ctx, items):
        return ctx.map("summarise", service.call, items, limit=2)

    items = [f"doc{i}" for i in range(7)]
    plan = [Latency("summarise", seconds=1.0, max_seconds=9.0)]
    run_id = engine.start(wf, items, faults=plan, seed=3)
    engine.run_until_idle()
    run = engine.run(run_id)
    assert run.status == "completed"
    assert run.result == [f"ch_{1 + [w for _, w, _ in service.seen].index(d)}" for d in items]
    spans = [(e.started_at, e.recorded_at) for e in engine.snapshot(run_id).events
             if e.kind == "activity"]
    assert len(spans) == 7
    for start, _ in spans:   # how many were in flight when each one started
        assert sum(1 for s, end in spans if s <= start < end) <= 2


@pytest.mark.parametrize("limit", [0, -1, 1.5, True, "2"])
def test_map_refuses_a_limit_that_is_not_a_positive_whole_number(limit):
    engine = dl.Engine()

    def wf(ctx, _):
        return ctx.map("x", str, [1, 2], limit=limit)

    run_id = engine.start(wf, None)
    engine.run_until_idle()
    run = engine.run(run_id)
    assert run.status == "failed" and "limit=" in run.error.cause_message


def test_gather_refuses_what_is_not_a_handle():
    engine = dl.Engine()

    def wf(ctx, _):
        return ctx.gather("not a handle")

    run_id = engine.start(wf, None)
    engine.run_until_idle()
    assert "not a handle of this run" in engine.run(run_id).error.cause_message


def test_done_answers_on_replay_what_it_answered_the_first_time():
    engine = dl.Engine()

    def wf(ctx, _):
        h = ctx.start_activity("slow", lambda: 1)
        first = h.done()
        ctx.sleep(1)            # a wake-up later, and the activity ended meanwhile
        second = h.done()       # the sleep blocked while it ended: seen
        third = ctx.start_activity("slow", lambda: 2)
        fourth = third.done()   # asked before anything blocked: not yet
        return [first, second, h.result(), fourth, third.result(), third.done()]

    run_id = engine.start(wf, None, faults=[Latency("slow", seconds=0.5)])
    engine.run_until_idle()
    assert engine.run(run_id).result == [False, True, 1, False, 2, True]
    assert dl.replay_check(wf, engine.run(run_id)).ok


def test_swapping_two_start_activity_calls_under_a_waiting_run_is_non_determinism(tmp_path):
    engine = dl.Engine(tmp_path / "s.duckdb")

    def wf(ctx, _):
        a = ctx.start_activity("fetch_a", lambda: "a")
        b = ctx.start_activity("fetch_b", lambda: "b")
        return ctx.gather(a, b)

    run_id = engine.start(wf, None, faults=[Latency("fetch_*", seconds=60.0)])
    engine.advance(10)
    assert engine.run(run_id).status == "running"

    def wf(ctx, _):   # noqa: F811 (the notebook way: redefined in place)
        b = ctx.start_activity("fetch_b", lambda: "b")
        a = ctx.start_activity("fetch_a", lambda: "a")
        return ctx.gather(a, b)

    engine.close()
    engine = dl.Engine(tmp_path / "s.duckdb", workflows=[wf])
    engine.run_until_idle()
    run = engine.run(run_id)
    assert run.status == "diverged"
    assert run.error.position == 1
    assert "fetch_a" in run.error.table and "fetch_b" in run.error.table
    assert "start_activity" in run.error.table


# --- the invariants under crashes -------------------------------------------------------------

SERVICE = {}
PATIENT = dl.RetryPolicy(max_attempts=30, initial=1.0, max_interval=5.0)


def charge(item, idempotency_key=None):
    return SERVICE["payments"].charge(item, 1.0, idempotency_key=idempotency_key)["id"]


def fan_out(ctx, items):
    # a crash loses every attempt in flight, and each lost attempt counts: many attempts
    handles = [ctx.start_activity("charge", charge, item, policy=PATIENT) for item in items]
    first = ctx.gather(*handles)
    rest = ctx.map("charge", charge, [f"{item}+" for item in items], limit=2, policy=PATIENT)
    return {"first": first, "rest": rest, "t": ctx.now(), "r": ctx.random()}


crash_rules = st.lists(st.builds(
    lambda point, attempt, position: Crash("charge", point=point, attempts=[attempt],
                                           position=[position]),
    st.sampled_from(["before_activity", "after_effect", "after_record"]),
    st.integers(1, 2), st.integers(1, 12)), max_size=4)


def run_fan_out(plan, seed, durability="sync"):
    SERVICE["payments"] = Payments(honor_keys=True)
    engine = dl.Engine(durability=durability)
    faults = [Latency("charge", seconds=1.0, max_seconds=5.0), ServerError("charge", p=0.3)] + plan
    run_id = engine.start(fan_out, ["a", "b", "c"], faults=faults, seed=seed, run_id="r")
    engine.run_until_idle()
    history = [(e.position, e.kind, e.name, e.ok, e.value, e.handle, e.recorded_at)
               for e in engine.snapshot(run_id).events]
    return engine, engine.run(run_id), history, SERVICE["payments"]


@PROPERTY
@given(plan=crash_rules, seed=st.integers(0, 50),
       durability=st.sampled_from(["sync", "batch"]))
def test_crashes_anywhere_during_concurrent_work_change_nothing_a_key_honouring_service_sees(
        plan, seed, durability):
    _, clean, _, clean_payments = run_fan_out([], seed)
    engine, run, _, payments = run_fan_out(plan, seed, durability)
    assert run.status == clean.status
    if clean.status == "completed":   # each value is the effect made for its own item
        customer = {e["id"]: e["args"]["customer"] for e in payments.effects}
        assert [customer[i] for i in run.result["first"]] == ["a", "b", "c"]
        assert [customer[i] for i in run.result["rest"]] == ["a+", "b+", "c+"]
        assert run.result["r"] == clean.result["r"]
    assert payments.duplicate_effects == 0
    assert len(payments.effects) == len(clean_payments.effects)


@settings(max_examples=10 * SCALE, deadline=None, database=None, derandomize=SCALE == 1)
@given(seed=st.integers(0, 1000), plan=crash_rules)
def test_the_same_seed_gives_the_same_history_byte_for_byte(seed, plan):
    first = run_fan_out(plan, seed)[2]
    assert run_fan_out(plan, seed)[2] == first


def test_a_crash_while_three_attempts_are_in_flight_recovers_each_of_them_once():
    plan = [Crash("charge", point="after_effect", position=[3])]
    _, run, history, payments = run_fan_out(plan, seed=1)
    assert run.status == "completed"
    assert payments.duplicate_effects == 0
    assert sorted(e["args"]["customer"] for e in payments.effects) == sorted(
        ["a", "b", "c", "a+", "b+", "c+"])


# What the service is called with, per mode, when the worker dies right after recording the
# end of "a+" (the map's first charge) while "b+" is in flight: sync committed that end, so
# only "b+" is called again; batch commits a turn when it is over, so the end of "a+" was
# lost with its turn (the gather's ends, earlier turns, were not); exit commits nothing
# before the run ends, so everything the dead worker did is done again.
CALLED_AGAIN = {"sync": {"b+"}, "batch": {"a+", "b+"}, "exit": {"a", "b", "c", "a+", "b+"}}


@pytest.mark.parametrize("durability", ["sync", "batch", "exit"])
def test_each_durability_mode_keeps_its_promise_with_concurrent_work(tmp_path, durability):
    """A worker that dies (a Crash rule: the engine reloads from the store) recovers the
    run in every mode, calling again what the mode did not commit (a key-honouring service
    still makes each effect once)."""
    payments = SERVICE["payments"] = Payments(honor_keys=True)
    engine = dl.Engine(tmp_path / "s.duckdb", durability=durability)
    plan = [Latency("charge", seconds=2.0), Crash("charge", point="after_record", position=[7])]
    run_id = engine.start(fan_out, ["a", "b", "c"], faults=plan, seed=2)
    engine.run_until_idle()
    run = engine.run(run_id)
    assert run.status == "completed" and len(run.crashes) == 1
    assert payments.duplicate_effects == 0 and len(payments.effects) == 6
    called = [call["args"]["customer"] for call in payments.calls]
    assert {item for item in called if called.count(item) > 1} == CALLED_AGAIN[durability]
    engine.close()
    reopened = dl.Engine(tmp_path / "s.duckdb", read_only=True)
    assert reopened.run(run_id).result == run.result
    reopened.close()


# --- child runs -----------------------------------------------------------------------------------

@dl.workflow
def research(ctx, topic):
    return ctx.activity("search", lambda t: f"notes on {t}", topic)


@dl.workflow
def failing_child(ctx, _):
    ctx.activity("broken", lambda: 1 / 0, policy=dl.RetryPolicy(max_attempts=1))


def test_a_child_run_has_its_own_history_and_its_result_is_one_event_in_the_parent():
    engine = dl.Engine()

    def parent(ctx, topics):
        first = ctx.child(research, topics[0])
        rest = [ctx.start_child(research, t) for t in topics[1:]]
        return [first] + ctx.gather(*rest)

    run_id = engine.start(parent, ["ducks", "geese", "swans"], run_id="p")
    engine.run_until_idle()
    assert engine.run(run_id).result == ["notes on ducks", "notes on geese", "notes on swans"]
    runs = engine.runs().set_index("run_id")
    assert list(runs.loc[["p/1", "p/3", "p/4"], "parent_run_id"]) == ["p", "p", "p"]
    assert [k for _, k, *_ in events(engine, "p/1")] == ["activity"]
    kinds = [(k, handle) for _, k, _, _, handle in events(engine, "p")]
    assert kinds[:2] == [("start_child", None), ("child", 1)]


def test_a_child_that_fails_raises_child_failed_in_the_parent():
    engine = dl.Engine()

    def parent(ctx, _):
        try:
            ctx.child(failing_child, None)
        except dl.ChildFailed as failed:
            return {"child": failed.child_run_id, "status": failed.child_status,
                    "is_activity_failed": isinstance(failed, dl.ActivityFailed)}

    run_id = engine.start(parent, None, run_id="p")
    engine.run_until_idle()
    assert engine.run(run_id).result == {"child": "p/1", "status": "failed",
                                         "is_activity_failed": True}


@pytest.mark.parametrize("durability", ["sync", "batch", "exit"])
def test_a_crash_between_the_childs_start_and_its_record_starts_no_second_child(
        tmp_path, durability):
    path = tmp_path / "s.duckdb"
    started = []

    @dl.workflow
    def counted(ctx, topic):
        return ctx.activity("count", lambda t: started.append(t) or len(started), topic)

    def parent(ctx, _):
        handle = ctx.start_child(counted, "x")
        ctx.sleep(5)
        return handle.result()

    engine = dl.Engine(path, durability=durability)
    run_id = engine.start(parent, None, run_id="p")
    engine.advance(1)      # the child ran; the parent sleeps
    engine.crash()
    engine.run_until_idle()
    assert engine.run(run_id).status == "completed"
    assert list(engine.runs().run_id).count("p/1") == 1
    assert len(started) == 1 or durability == "exit"
    engine.close()


@dl.workflow
def counted_child(ctx, topic):
    world = ctx.world
    return ctx.activity("count", lambda t: world.append(t) or len(world), topic)


def child_parent(ctx, topics):
    handles = [ctx.start_child(counted_child, t) for t in topics]
    return ctx.gather(*handles)


@pytest.mark.parametrize("point", ["before_activity", "after_effect"])
@pytest.mark.parametrize("durability", ["sync", "batch"])
def test_a_crash_on_either_side_of_a_child_start_starts_each_child_once(durability, point):
    """A `Crash` rule names a child's workflow and a point: before the child run exists
    (the parent's replay starts it) or right after (the parent's replay finds it)."""
    name = dl.registry.workflow_name(counted_child)
    world = []
    engine = dl.Engine(durability=durability, world=world)
    run_id = engine.start(child_parent, ["a", "b"], run_id="p",
                          faults=[Crash(name, point=point, position=2)])
    engine.run_until_idle()
    run = engine.run(run_id)
    assert run.status == "completed" and run.result == [1, 2]
    assert len(run.crashes) == 1 and run.crashes.point.iloc[0] == point
    assert sorted(engine.runs().run_id) == ["p", "p/1", "p/2"]
    assert sorted(world) == ["a", "b"]          # each child's step ran once
    engine.close()


def test_explore_crashes_crashes_either_side_of_each_child_start():
    def each_child_ran_once(run, world):
        assert run.status == "completed" and sorted(world) == ["a", "b"], (run.status, world)

    report = dl.explore_crashes(child_parent, ["a", "b"], each_child_ran_once,
                                world=lambda clock: [])
    starts = report.frame[report.frame.activity == dl.registry.workflow_name(counted_child)]
    assert sorted(zip(starts.position, starts.point)) == [
        (1, "after_effect"), (1, "before_activity"), (2, "after_effect"), (2, "before_activity")]
    assert starts.fired.all() and starts.holds.all()


# --- cancellation -----------------------------------------------------------------------------

def cleanup(what):
    return f"cleaned {what}"


@pytest.mark.parametrize("blocked_in", ["signal", "timer", "backoff", "attempt", "handles"])
def test_a_cancelled_run_ends_cancelled_wherever_it_was_blocked(blocked_in):
    engine = dl.Engine()

    def flaky():
        raise ConnectionError("down")

    def wf(ctx, _):
        if blocked_in == "signal":
            ctx.wait_signal("approval")
        elif blocked_in == "timer":
            ctx.sleep(3600)
        elif blocked_in == "backoff":
            ctx.activity("flaky", flaky, policy=dl.RetryPolicy(initial=600, max_interval=3600,
                                                               max_attempts=5))
        elif blocked_in == "attempt":
            ctx.activity("slow", lambda: 1)
        else:
            ctx.gather(ctx.start_activity("slow", lambda: 1),
                       ctx.start_activity("slow", lambda: 2))
        return "not cancelled"

    run_id = engine.start(wf, None, faults=[Latency("slow", seconds=500.0)])
    engine.advance(100)
    engine.cancel(run_id, reason="the customer changed their mind")
    engine.run_until_idle()
    run = engine.run(run_id)
    assert run.status == "cancelled"
    assert isinstance(run.error, dl.Cancelled)
    assert run.error.reason == "the customer changed their mind"
    assert run.ended_at == pytest.approx(100.0)
    if blocked_in in ("attempt", "handles"):   # abandoned, and recorded so
        assert set(run.attempts.outcome) >= {"canceled"}
        engine.advance(1000)                    # the answers due at 500 s come late
        late = engine.run(run_id)
        assert late.status == "cancelled" and "ok" not in set(late.attempts.outcome)
        assert not ((late.history.kind == "activity") & late.history.ok.astype(bool)).any()
    with pytest.raises(dl.RunFinishedError, match="already cancelled"):
        engine.cancel(run_id)


def test_code_that_catches_cancelled_can_run_recorded_cleanup():
    engine = dl.Engine()

    def wf(ctx, _):
        try:
            ctx.wait_signal("go")
        except dl.Cancelled:
            return ctx.activity("cleanup", cleanup, "the draft")

    run_id = engine.start(wf, None)
    engine.run_until_idle()
    engine.cancel(run_id)
    engine.run_until_idle()
    run = engine.run(run_id)
    assert (run.status, run.result) == ("completed", "cleaned the draft")
    assert list(run.history.kind) == ["wait_signal", "cancelled", "activity"]
    assert dl.replay_check(wf, engine.run(run_id)).ok


def test_a_saga_compensates_when_its_run_is_cancelled():
    engine = dl.Engine()
    payments = Payments()

    def wf(ctx, _):
        with ctx.saga() as saga:
            charged = ctx.activity("charge", payments.charge, "c1", 10.0)
            saga.add("refund", payments.refund, charged["id"])
            ctx.wait_signal("shipped")

    run_id = engine.start(wf, None)
    engine.run_until_idle()
    engine.cancel(run_id)
    engine.run_until_idle()
    run = engine.run(run_id)
    assert run.status == "cancelled"
    assert [e["op"] for e in payments.effects] == ["charge", "refund"]


def test_cancelling_a_parent_cancels_its_children():
    engine = dl.Engine()

    @dl.workflow
    def waits(ctx, _):
        return ctx.wait_signal("never")

    def parent(ctx, _):
        return ctx.child(waits, None)

    run_id = engine.start(parent, None, run_id="p")
    engine.run_until_idle()
    assert engine.run("p/1").status == "waiting"
    engine.cancel(run_id)
    engine.run_until_idle()
    assert engine.run("p").status == "cancelled"
    assert engine.run("p/1").status == "cancelled"


def test_cancel_refuses_a_finished_run_and_an_unknown_one():
    engine = dl.Engine()
    run_id = engine.start(research, "x")
    engine.run_until_idle()
    with pytest.raises(dl.RunFinishedError, match="already completed"):
        engine.cancel(run_id)
    with pytest.raises(dl.RunNotFoundError):
        engine.cancel("nope")


def test_a_cancel_survives_a_crash_before_the_code_was_told(tmp_path):
    engine = dl.Engine(tmp_path / "s.duckdb")

    def wf(ctx, _):
        ctx.sleep(100)

    run_id = engine.start(wf, None)
    engine.advance(1)
    engine.cancel(run_id)
    engine.close()
    engine = dl.Engine(tmp_path / "s.duckdb", workflows=[wf])
    engine.run_until_idle()
    assert engine.run(run_id).status == "cancelled"
    engine.close()


# --- async activities, idempotency_key ----------------------------------------------------------

async def fetch_async(url, idempotency_key=None):
    await asyncio.sleep(0)
    return {"url": url, "key": idempotency_key}


def test_an_async_activity_is_awaited_and_recorded():
    engine = dl.Engine()

    def wf(ctx, _):
        return [ctx.activity("fetch", fetch_async, "a"),
                ctx.gather(ctx.start_activity("fetch", fetch_async, "b"))[0]]

    run_id = engine.start(wf, None, run_id="r")
    engine.run_until_idle()
    assert engine.run(run_id).result == [{"url": "a", "key": "r:1"}, {"url": "b", "key": "r:2"}]


def test_an_async_activity_runs_while_an_event_loop_is_running_as_in_a_notebook():
    async def main():
        engine = dl.Engine()

        def wf(ctx, _):
            return ctx.activity("fetch", fetch_async, "a")

        run_id = engine.start(wf, None, run_id="r")
        engine.run_until_idle()
        return engine.run(run_id).result

    assert asyncio.run(main()) == {"url": "a", "key": "r:1"}


def test_an_async_workflow_is_refused_at_start_with_the_fix():
    async def wf(ctx, _):
        return 1

    with pytest.raises(dl.DurableLabError, match="async def"):
        dl.Engine().start(wf, None)


def test_idempotency_key_inside_an_activity_is_the_attempts_key():
    engine = dl.Engine()

    def tool(x):
        return dl.idempotency_key()

    def wf(ctx, _):
        return [ctx.activity("tool", tool, 1), ctx.start_activity("tool", tool, 2).result()]

    run_id = engine.start(wf, None, run_id="r")
    engine.run_until_idle()
    assert engine.run(run_id).result == ["r:1", "r:2"]
    with pytest.raises(dl.HeartbeatError, match="outside an activity"):
        dl.idempotency_key()


def test_diagnose_names_the_started_activities_a_run_still_waits_for():
    def fetch(seconds):
        return dl.sim.after(seconds, value=seconds)

    def wf(ctx, waits):
        return ctx.gather(*[ctx.start_activity("fetch", fetch, s) for s in waits])

    engine = dl.Engine()
    run_id = engine.start(wf, [10, 30, 20], run_id="r")
    engine.advance(15)
    found = dl.diagnose(engine.run(run_id))
    assert found.state == "running"
    assert found.sentence.startswith("Running: waiting for 2 of 3 activities: 'fetch' at "
                                     "position 2 (attempt 1 in flight")
    assert "'fetch' at position 3" in found.sentence and "position 1" not in found.sentence


def test_explore_crashes_crashes_at_each_point_of_each_concurrent_activity():
    def world(clock):
        return Payments(honor_keys=True)

    def wf(ctx, items):
        started = [ctx.start_activity("charge", ctx.world.charge, i, 1.0) for i in items]
        return ctx.gather(*started)

    def once_each(run, payments):
        assert run.status == "completed" and payments.duplicate_effects == 0
        assert len(payments.effects) == 2

    report = dl.explore_crashes(wf, ["a", "b"], once_each, world=world)
    crashed = report.frame[report.frame.point != "none"]
    assert sorted(zip(crashed.position, crashed.point)) == [
        (p, point) for p in (1, 2) for point in ("after_effect", "after_record",
                                                 "before_activity")]
    assert report.ok, report.broken


def test_replay_check_passes_concurrent_code_and_names_a_swapped_start():
    SERVICE["payments"] = Payments(honor_keys=True)
    engine = dl.Engine()
    run_id = engine.start(fan_out, ["a", "b", "c"], run_id="r")
    engine.run_until_idle()
    run = engine.run(run_id)
    assert dl.replay_check(fan_out, run).ok

    @dl.versioning.version_of(fan_out)
    def started_in_reverse(ctx, items):
        handles = [ctx.start_activity("charge", charge, item, policy=PATIENT)
                   for item in reversed(items)]
        return ctx.gather(*handles)

    report = dl.replay_check(started_in_reverse, run)
    assert not report.ok
    assert "at position 1" in str(report) and "ctx.start_activity('charge')" in str(report)


def test_counterfactual_meets_a_started_activitys_failure_at_the_position_that_started_it():
    def fetch(doc):
        return doc.upper()

    def wf(ctx, docs):
        once = dl.RetryPolicy(max_attempts=1)
        return ctx.gather(*[ctx.start_activity("fetch", fetch, d, policy=once) for d in docs])

    engine = dl.Engine()
    run_id = engine.start(wf, ["a", "b", "c"], run_id="r",
                          faults=[ServerError("fetch", position=[2])])
    engine.run_until_idle()
    run = engine.run(run_id)
    assert run.status == "failed"
    again = dl.counterfactual(run, wf, policies=dl.RetryPolicy(max_attempts=2))
    assert (again.status, again.result) == ("completed", ["A", "B", "C"])
    tried = again.attempts.groupby("position").outcome.apply(list).to_dict()
    assert tried == {1: ["ok"], 2: ["transient", "ok"], 3: ["ok"]}
    assert any("fetch at position 2 (attempt 2)" in note for note in again.notes)


def test_a_fork_that_copies_some_ends_of_started_work_runs_only_the_rest():
    keys = []

    def fetch(doc, idempotency_key=None):
        keys.append(idempotency_key)
        return doc

    def wf(ctx, docs):
        return ctx.gather(*[ctx.start_activity("fetch", fetch, d) for d in docs])

    engine = dl.Engine()
    run_id = engine.start(wf, ["a", "b", "c"], run_id="r",
                          faults=[Latency("fetch", seconds=10.0, max_seconds=30.0)])
    engine.run_until_idle()
    history = engine.run(run_id).history
    assert list(history.kind[:4]) == ["start_activity"] * 3 + ["activity"]
    copied_end = int(history.handle.iloc[3])   # the first to end, at position 4
    keys.clear()
    fork = engine.fork(run_id, at=5)           # copies the three starts and that end
    engine.run_until_idle()
    forked = engine.run(fork)
    assert (forked.status, forked.result) == ("completed", ["a", "b", "c"])
    assert sorted(forked.history.handle.dropna().astype(int)) == [1, 2, 3]   # one end each
    assert sorted(keys) == [f"{fork}:{p}" for p in (1, 2, 3) if p != copied_end]


def test_history_with_concurrent_work_survives_export_and_load(tmp_path):
    engine = dl.Engine()
    run_id = engine.start(fan_out, ["a", "b"], run_id="r")
    SERVICE["payments"] = Payments()
    engine.run_until_idle()
    path = dl.export(engine, tmp_path / "runs.jsonl")
    [loaded] = dl.load(path)
    assert json.loads(loaded.history.to_json()) == json.loads(engine.run(run_id).history.to_json())


# --- dl.agents.react(parallel_tools=True) ---------------------------------------------------------

def fetch_page(url: str) -> dict:
    """Fetch a web page and return its title."""
    return {"title": url.upper()}


def send_payment(amount: float, idempotency_key: str | None = None) -> dict:
    """Pay an amount (EUR)."""
    return {"paid": amount, "key": idempotency_key}


def two_turn_model(messages, tools, feedback=None):
    """Asks for three tools in one turn, then answers with what came back, in order."""
    usage = {"input_tokens": 10, "output_tokens": 5, "cost": 0.0}
    if messages[-1]["role"] == "user":
        return {"content": None, "usage": usage, "tool_calls": [
            {"id": "c1", "name": "fetch_page", "arguments": {"url": "a"}},
            {"id": "c2", "name": "send_payment", "arguments": {"amount": 5.0}},
            {"id": "c3", "name": "fetch_page", "arguments": {"url": "b"}}]}
    seen = [m["tool_call_id"] for m in messages if m["role"] == "tool"]
    return {"content": ",".join(seen), "tool_calls": [], "usage": usage}


def test_react_with_parallel_tools_runs_a_turns_calls_at_once_and_answers_in_call_order():
    engine = dl.Engine()

    def agent(ctx, task):
        return dl.agents.react(ctx, task, model=two_turn_model,
                               tools=[fetch_page, send_payment], parallel_tools=True,
                               approval=["send_payment"])

    run_id = engine.start(agent, "research and pay", run_id="r",
                          faults=[Latency("fetch_page", seconds=30.0)])
    engine.run_until_blocked()   # the payment waits for a person; the fetches do not
    run = engine.run(run_id)
    fetched = run.attempts[run.attempts.activity == "fetch_page"]
    assert list(fetched.outcome) == ["ok", "ok"] and list(fetched.ended_at) == [30.0, 30.0]
    assert run.status == "waiting"
    engine.signal(run_id, "approve:send_payment", {"approved": True})
    engine.run_until_idle()
    run = engine.run(run_id)
    assert run.result["answer"] == "c1,c2,c3"
    paid = run.history[run.history.name == "send_payment"]
    assert paid.value.iloc[-1]["result"]["key"] == f"r:{int(paid.handle.iloc[-1])}"
    # the two fetches overlapped: each has a lane of its own on the timeline
    from durablelab.viz.plots import activity_attempts
    assert sorted(set(activity_attempts(run).lane)) == ["fetch_page", "fetch_page ·2",
                                                        "model", "send_payment"]


class Throttled(Exception):
    status_code = 429   # a 429 without Retry-After: the policy's backoff decides the wait


class QuoteAPI:
    """A world whose API grants 10 requests at once, then 10 a second, to all runs."""

    def __init__(self, clock):
        from durablelab.sim.llm import TokenBucket
        self.bucket = TokenBucket(rate=10.0, burst=10, clock=clock)

    def quote(self, item):
        if self.bucket.take() > 0:
            raise Throttled("429 Too Many Requests")
        return item


def quotes_at_once(ctx, items):
    return ctx.map("quote", ctx.world.quote, items, policy=PATIENT)


def quotes_in_turn(ctx, items):
    return [ctx.activity("quote", ctx.world.quote, item, policy=PATIENT) for item in items]


def test_a_sweep_with_contention_shows_a_fan_out_multiplying_the_load_on_a_shared_api():
    """Ten runs of four quotes, each taking a second, on one shared API: asked in turn,
    ten requests arrive a second, which the API grants; fanned out, forty arrive at once
    and thirty are refused, then retried."""
    inputs = [[f"r{run}-q{k}" for k in range(4)] for run in range(10)]
    common = dict(seeds=range(1), world=QuoteAPI, contention=True,
                  fault_plans={"1 s": dl.FaultPlan([Latency("quote", seconds=1.0)])})
    fanned = dl.sweep(quotes_at_once, inputs, **common).frame
    in_turn = dl.sweep(quotes_in_turn, inputs, **common).frame
    assert (fanned.status == "completed").all() and (in_turn.status == "completed").all()
    assert in_turn.retries_rate_limited.sum() == 0 and in_turn.attempts.sum() == 40
    assert fanned.retries_rate_limited.sum() >= 30 and fanned.attempts.sum() >= 70


def test_sweep_metrics_count_a_started_activitys_retries_once_as_compare_does():
    from durablelab.faults import RateLimit

    def wf(ctx, _):
        return ctx.gather(ctx.start_activity("a", lambda: 1), ctx.start_activity("b", lambda: 2))

    plan = dl.FaultPlan([RateLimit("b", attempts=[1, 2])])
    ex = dl.sweep(wf, [None], fault_plans={"p": plan}, seeds=[0])
    row = ex.frame.iloc[0]
    assert (row.attempts, row.activities, row.retries, row.retries_rate_limited,
            row.retries_other) == (4, 2, 2, 2, 0)
    engine = dl.Engine()
    run_id = engine.start(wf, None, faults=plan, seed=0)
    engine.run_until_idle()
    row = dl.compare([engine.run(run_id)]).iloc[0]
    assert (row.attempts, row.activities, row.retries, row.retries_rate_limited,
            row.retries_other) == (4, 2, 2, 2, 0)
