"""Durable timers, signals with deadlines, continue-as-new and compensation."""

import pytest

import durablelab as dl
from durablelab.sim import Bank, ERP

DAY = 86400.0


def approval_flow(ctx, _):
    first = ctx.wait_signal("approval", deadline=ctx.now() + 3 * DAY)
    if first is None:
        second = ctx.wait_signal("approval", timeout=2 * DAY)
        return {"escalated": True, "decision": second}
    return {"escalated": False, "decision": first}


def test_three_day_wait_takes_no_real_time(engine):
    def wf(ctx, _):
        ctx.sleep(3 * DAY)
        return ctx.now()
    run_id = engine.start(wf, None)
    engine.run_until_idle()
    assert engine.run(run_id).result == 3 * DAY


def test_signal_wakes_a_waiting_run_before_its_deadline(engine):
    run_id = engine.start(approval_flow, None)
    engine.advance(DAY)
    assert engine.run(run_id).status == "waiting"
    engine.signal(run_id, "approval", {"approved": True}, signal_id="click-1")
    engine.run_until_idle()
    run = engine.run(run_id)
    assert run.result == {"escalated": False, "decision": {"approved": True}}
    assert run.ended_at == DAY


def test_deadline_passes_then_escalation_times_out(engine):
    run_id = engine.start(approval_flow, None)
    engine.run_until_idle()
    run = engine.run(run_id)
    assert run.result == {"escalated": True, "decision": None}
    assert run.ended_at == 5 * DAY
    assert list(run.history["kind"]) == ["now", "wait_signal", "signal_timeout",
                                         "wait_signal", "signal_timeout"]


def test_early_signal_is_buffered(engine):
    run_id = engine.start(approval_flow, None)
    engine.signal(run_id, "approval", {"approved": False})    # before the code ever ran
    engine.run_until_idle()
    assert engine.run(run_id).result["decision"] == {"approved": False}
    assert engine.run(run_id).ended_at == 0.0


def test_duplicate_signal_id_is_recorded_once(engine):
    def two_approvals(ctx, _):
        return [ctx.wait_signal("approval", timeout=60), ctx.wait_signal("approval", timeout=60)]
    run_id = engine.start(two_approvals, None)
    assert engine.signal(run_id, "approval", "yes", signal_id="click-1") is True
    assert engine.signal(run_id, "approval", "yes", signal_id="click-1") is False  # double click
    engine.run_until_idle()
    assert engine.run(run_id).result == ["yes", None]
    assert engine.store.fetch("SELECT count(*) FROM signals")[0][0] == 1


def test_kth_wait_gets_kth_signal_in_arrival_order(engine):
    def collect(ctx, _):
        return [ctx.wait_signal("item") for _ in range(3)]
    run_id = engine.start(collect, None)
    for value in ("a", "b"):
        engine.signal(run_id, "item", value)
    engine.run_until_idle()
    assert engine.run(run_id).status == "waiting"
    engine.signal(run_id, "other", "ignored")
    engine.signal(run_id, "item", "c")
    engine.run_until_idle()
    assert engine.run(run_id).result == ["a", "b", "c"]


def test_crash_during_timer_resumes_the_wait_not_restarts_it(engine):
    def wf(ctx, _):
        ctx.sleep(900)
        return ctx.now()
    run_id = engine.start(wf, None)
    engine.advance(600)
    engine.crash()
    engine.run_until_idle()
    assert engine.run(run_id).result == 900.0


def test_crash_during_backoff_resumes_the_wait(engine):
    calls = []
    def flaky():
        calls.append(engine.clock.now())
        if len(calls) == 1:
            raise TimeoutError("slow")
        return "ok"
    def wf(ctx, _):
        return ctx.activity("flaky", flaky,
                            policy=dl.RetryPolicy(initial=900, max_interval=3600, jitter="none"))
    run_id = engine.start(wf, None)
    engine.advance(300)
    engine.crash()
    engine.run_until_idle()
    assert engine.run(run_id).result == "ok"
    assert calls == [0.0, 900.0]


def test_injected_crash_during_wait_is_recorded_and_recovered(engine):
    plan = dl.FaultPlan([dl.faults.Crash("sleep", point="during_wait")])
    def wf(ctx, _):
        ctx.sleep(100)
        return "woke"
    run_id = engine.start(wf, None, faults=plan)
    engine.run_until_idle()
    run = engine.run(run_id)
    assert run.result == "woke" and run.ended_at == 100.0
    assert list(run.crashes["crashed_at"]) == [50.0]
    assert "recovery" in set(run.wakeups["reason"])


def test_continue_as_new_carries_state_into_a_fresh_run(engine):
    def counter(ctx, n):
        ctx.sleep(10)
        if n < 3:
            ctx.continue_as_new(n + 1)
        return n
    run_id = engine.start(counter, 0, run_id="loop")
    engine.run_until_idle()
    runs = engine.runs().set_index("run_id")
    assert list(runs.index) == ["loop", "loop~1", "loop~2", "loop~3"]
    assert list(runs["status"]) == ["continued"] * 3 + ["completed"]
    assert runs.loc["loop~2", "parent_run_id"] == "loop~1"
    assert engine.run("loop").result == {"continued_as": "loop~1"}
    assert engine.run("loop~3").result == 3
    assert engine.run("loop~3").history.shape[0] == 2    # fresh history, not a growing one


def test_saga_compensates_in_reverse_when_a_step_fails(engine):
    erp, bank = ERP(), Bank()
    undone = []
    def create(name, idempotency_key=None):
        return erp.create_vendor(name, "NO", idempotency_key=idempotency_key)
    def register(vendor_id, idempotency_key=None):
        raise PermissionError("bank says no")
    def deactivate(vendor_id, idempotency_key=None):
        undone.append(vendor_id)
        return erp.deactivate_vendor(vendor_id, idempotency_key=idempotency_key)
    def wf(ctx, _):
        try:
            with ctx.saga() as saga:
                vendor = ctx.activity("create", create, "Fjord")
                saga.add("deactivate", deactivate, vendor["id"])
                ctx.activity("register", register, vendor["id"])
        except dl.ActivityFailed as exc:
            ctx.sleep(1)
            return {"compensated": True, "because": exc.cause_class}
    run_id = engine.start(wf, None)
    engine.run_until_idle()
    run = engine.run(run_id)
    assert run.result == {"compensated": True, "because": "PermissionError"}
    assert list(run.history["name"][:3]) == ["create", "register", "deactivate"]
    assert undone == ["vnd_1"]                  # ran once, although the run replayed after
    assert [e["op"] for e in erp.effects] == ["create_vendor", "deactivate_vendor"]


def test_random_and_uuid_are_recorded_once(engine):
    seen = []
    def wf(ctx, _):
        values = (ctx.random(), ctx.uuid(), ctx.now())
        seen.append(values)
        ctx.sleep(5)
        return list(values)
    run_id = engine.start(wf, None, seed=3)
    engine.run_until_idle()
    assert len(seen) == 2 and seen[0] == seen[1]          # replay handed the same values back
    result = engine.run(run_id).result
    assert 0 <= result[0] < 1 and len(result[1]) == 36 and result[2] == 0.0


def test_log_is_silent_on_replay(engine, capsys):
    def wf(ctx, _):
        ctx.log("charging")
        ctx.sleep(5)
        ctx.log("done")
    engine.start(wf, None, run_id="r")
    engine.run_until_idle()
    out = capsys.readouterr().out.splitlines()
    assert out == ["[r t=0s] charging", "[r t=5s] done"]


def test_latency_interleaves_runs_in_virtual_time(engine):
    """Services see requests in virtual-time order, not in the order code happens to run."""
    seen = []
    def call(tag):
        seen.append((engine.clock.now(), tag))
        return tag
    plan = dl.FaultPlan([dl.faults.Latency("slow", seconds=10)])
    def slow_run(ctx, _):
        ctx.activity("slow", call, "slow-1")
        ctx.activity("fast", call, "slow-2")
    def fast_run(ctx, _):
        ctx.sleep(5)
        ctx.activity("fast", call, "fast-1")
    engine.start(slow_run, None, faults=plan)
    engine.start(fast_run, None)
    engine.run_until_idle()
    assert seen == [(0.0, "slow-1"), (5.0, "fast-1"), (10.0, "slow-2")]


def test_a_run_started_after_a_crash_does_not_list_it(engine):
    def wf(ctx, _):
        return ctx.activity("boom", lambda: "x")
    first = engine.start(wf, None, faults=[dl.faults.Crash("boom", point="after_effect")])
    engine.run_until_idle()
    later = engine.start(wf, None)             # same virtual instant, after the crash
    engine.run_until_idle()
    assert len(engine.run(first).crashes) == 1
    assert engine.run(later).crashes.empty
