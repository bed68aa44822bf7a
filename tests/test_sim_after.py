"""dl.sim.after, OCCResource and Server: the world decides how long a call takes, and the
engine runs the calls in virtual-time order. Every schedule here is worked out by hand."""

import math

import pytest

import durablelab as dl
from durablelab.errors import BadType, BadValue

ONCE = dl.RetryPolicy(max_attempts=1)


def _run(workflow, input=None, world=None, faults=None, seed=0):
    engine = dl.Engine(world=world)
    run_id = engine.start(workflow, input, faults=faults, seed=seed)
    engine.run_until_idle()
    return engine, engine.run(run_id)


def answer_later(ctx, seconds):
    return ctx.activity("slow", lambda s: dl.sim.after(s, value={"took": s}), seconds)


def test_the_attempt_ends_when_the_world_answers():
    _, run = _run(answer_later, 2.5)
    assert run.status == "completed" and run.result == {"took": 2.5}
    row = run.attempts.iloc[0]
    assert (row.started_at, row.ended_at, row.outcome) == (0.0, 2.5, "ok")
    assert run.history.iloc[0].recorded_at == 2.5


def failing_later(ctx, _):
    return ctx.activity("slow", lambda: dl.sim.after(3, error=ConnectionError("reset")),
                        policy=dl.RetryPolicy(max_attempts=2, initial=1, jitter="none"))


def test_an_error_through_after_fails_the_attempt_then():
    _, run = _run(failing_later)
    assert run.status == "failed"
    times = run.attempts[["attempt", "started_at", "ended_at", "outcome"]].values.tolist()
    # attempt 1: 0 -> 3, backoff 1 s; attempt 2: 4 -> 7, fails for good
    assert times == [[1, 0.0, 3.0, "transient"], [2, 4.0, 7.0, "transient"]]
    assert run.error.cause_class == "ConnectionError"


def cut_short(ctx, _):
    return ctx.activity("slow", lambda: dl.sim.after(5, value=1), start_to_close=1.5,
                        policy=ONCE)


def test_a_start_to_close_shorter_than_the_answer_times_out():
    _, run = _run(cut_short)
    row = run.attempts.iloc[0]
    assert (row.ended_at, row.outcome) == (1.5, "timeout")
    assert run.status == "failed"


def test_latency_faults_add_to_the_worlds_time():
    _, run = _run(answer_later, 1.0, faults=[dl.faults.Latency("slow", seconds=2.0)])
    assert run.attempts.iloc[0].ended_at == 3.0


# --- OCCResource: two clients, one row -------------------------------------------------
# The world (one OCC row) and the client (a read-modify-write retried whole) are the ones
# the sweep tests use too: tests/occ_clients.py.
from occ_clients import Row, client  # noqa: E402


def test_two_clients_on_one_row_by_hand():
    # A reads at 0 (answer at 1), writes at 1: accepted, version 1, done at 2.
    # B reads at 0 (answer at 2: version 0), writes at 2: conflict (1 landed), fails at 3;
    # backoff 0.5 s; reads at 3.5 (version 1, answer at 5.5), writes at 5.5: accepted, 6.5.
    world = Row()
    engine = dl.Engine(world=world)
    a = engine.start(client, [1, 1], run_id="a")
    b = engine.start(client, [2, 1], run_id="b")
    engine.run_until_idle()
    ra, rb = engine.run(a), engine.run(b)
    assert (ra.result, ra.ended_at) == (1, 2.0)
    assert (rb.result, rb.ended_at) == (2, 6.5)
    assert (world.row.version, world.row.writes, world.row.conflicts) == (2, 3, 1)
    assert list(rb.history.kind) == ["activity", "activity", "sleep", "timer_fired",
                                     "activity", "activity"]
    assert rb.history.iloc[2].value == {"seconds": 0.5, "deadline": 3.5}


def test_occ_write_semantics():
    row = dl.sim.OCCResource()
    v = row.read()
    assert row.write(v) == 1
    with pytest.raises(dl.sim.WriteConflict, match="version 1 landed"):
        row.write(v)
    assert dl.classify(dl.sim.WriteConflict("x")).error_class == "Transient"
    assert (row.reads, row.writes, row.conflicts) == (1, 2, 1)


# --- Server: latency grows with requests in flight ------------------------------------
class Busy:
    def __init__(self, clock, capacity=None):
        self.server = dl.sim.Server(capacity=capacity, base=1.0, per_request=0.01,
                                    clock=clock)


def _busy(capacity=None):
    engine = dl.Engine()
    engine.world = Busy(engine.clock, capacity)
    return engine, engine.world


def call_server(ctx, timeout):
    return ctx.activity("call", ctx.world.server.call, "ok", start_to_close=timeout,
                        policy=ONCE)


def test_latency_is_fixed_by_the_requests_in_flight_at_arrival():
    engine, world = _busy()
    ids = [engine.start(call_server, None, run_id=f"r{i}") for i in range(3)]
    engine.run_until_idle()
    ends = [engine.run(i).ended_at for i in ids]
    assert ends == pytest.approx([1.0, 1.01, 1.02])
    assert world.server.served == 3 and world.server.in_flight() == 0


def later_call(ctx, at):
    ctx.sleep(at)
    return ctx.activity("call", ctx.world.server.call, "ok", policy=ONCE)


def test_a_request_whose_client_timed_out_stays_in_flight_until_served():
    engine, world = _busy()
    gave_up = engine.start(call_server, 0.5, run_id="gave-up")   # served 0 -> 1.0
    behind = engine.start(later_call, 0.7, run_id="behind")      # arrives at 0.7: 1 ahead
    engine.run_until_idle()
    assert engine.run(gave_up).attempts.iloc[0].outcome == "timeout"
    assert engine.run(gave_up).ended_at == 0.5
    assert engine.run(behind).ended_at == pytest.approx(0.7 + 1.01)
    assert [c["at"] for c in world.server.calls] == [0.0, 0.7]


def test_a_full_server_refuses_at_once_and_the_refusal_is_retryable():
    engine, world = _busy(capacity=1)
    first = engine.start(call_server, None, run_id="first")
    second = engine.start(call_server, None, run_id="second")
    engine.run_until_idle()
    assert engine.run(first).status == "completed"
    refused = engine.run(second)
    assert refused.status == "failed" and refused.ended_at == 0.0
    assert refused.error.error_class == "Transient"
    assert world.server.refused == 1


def test_server_outside_an_activity_needs_a_clock():
    with pytest.raises(BadValue, match="outside an activity"):
        dl.sim.Server().call()
    clock = dl.VirtualClock()
    answer = dl.sim.Server(clock=clock).call(3)
    assert (answer.seconds, answer.value) == (1.0, 3)


# --- bad input ----------------------------------------------------------------------------
@pytest.mark.parametrize("seconds, error", [(-1, BadValue), (math.nan, BadValue),
                                            (math.inf, BadValue), ("1", BadType),
                                            (True, BadType)])
def test_after_refuses_a_bad_time(seconds, error):
    with pytest.raises(error, match="seconds="):
        dl.sim.after(seconds, value=1)


def test_after_refuses_value_and_error_together_and_a_non_exception():
    with pytest.raises(BadValue, match="not both"):
        dl.sim.after(1, value=1, error=TimeoutError())
    with pytest.raises(BadType, match="exception instance"):
        dl.sim.after(1, error="boom")


@pytest.mark.parametrize("kwargs, argument", [({"capacity": 0}, "capacity"),
                                              ({"capacity": 2.5}, "capacity"),
                                              ({"base": -1}, "base"),
                                              ({"per_request": math.nan}, "per_request"),
                                              ({"base": "1"}, "base")])
def test_server_refuses_bad_settings(kwargs, argument):
    with pytest.raises((BadValue, BadType)) as info:
        dl.sim.Server(**kwargs)
    assert info.value.argument == argument


def test_occ_write_refuses_a_version_that_is_not_an_int():
    with pytest.raises(BadType, match="version='1'"):
        dl.sim.OCCResource().write("1")


class Unclocked:
    def __init__(self, clock=None):
        self.server = dl.sim.Server(base=2.0, per_request=0.5)


def test_a_server_without_a_clock_reads_the_attempts_clock():
    world = Unclocked()
    engine = dl.Engine(world=world)
    first = engine.start(later_call, 1.0, run_id="first")     # arrives at 1: alone, 2 s
    second = engine.start(later_call, 2.0, run_id="second")   # at 2: one ahead, 2.5 s
    engine.run_until_idle()
    assert (engine.run(first).ended_at, engine.run(second).ended_at) == (3.0, 4.5)
