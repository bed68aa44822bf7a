"""Invariant tests: DESIGN.md section 4 (1, 2, 4 and 6), checked by property-based testing.

One workflow touches every kind of durable step the invariants talk about:

    charge          Payments (honours idempotency keys)
    create_vendor   ERP (honours keys), with a Latency fault so its attempt takes 3 s
    sleep(30)       a durable timer
    flaky           an outage of the world until t=40 s: it fails transiently a few times,
                    so the engine schedules retry backoffs (durable timers)
    notify          Email that IGNORES idempotency keys: duplicates are possible there
                    (an injected 503 on its first attempt: a retry where the function did not run)
    payee           Bank (honours keys), an injected 429 with Retry-After on its first attempt
    random, now     recorded values

Hypothesis draws fault plans of `Crash` rules (before_activity, after_effect, after_record,
during_wait on "sleep" and on the retrying activities' backoffs) with random attempts, times
and probabilities, plus random seeds, in durability "sync" and "batch", and compares each run
with the crash-free run of the same seed.

Every activity function is wrapped so that each call is logged together with what the engine
had recorded for that (run, position) at the moment of the call, both in the store (committed)
and in the engine's own view (`engine.run(run_id).history`). "A recorded activity never runs
again" is then a check on that log.

A `RuleBasedStateMachine` at the end drives a file-backed engine through start, advance,
run_until_idle, crash, signal, close-and-reopen and abandon-and-reopen, checking after every
step that no committed event changed or vanished, that key-honouring services never saw a
duplicate effect, and that finished runs keep their result.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections import Counter

import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.stateful import Bundle, RuleBasedStateMachine, invariant, rule

import durablelab as dl
from durablelab.faults import Crash, Latency, RateLimit, ServerError
from durablelab.sim import ERP, Bank, Email, Payments

FINAL = ("completed", "failed", "continued")

# Modest, deterministic settings: the whole file runs in well under a minute. The database is
# off so that no .hypothesis/ directory appears in the project. For a longer, random hunt:
# DURABLELAB_PROPERTY_SCALE=20 python -m pytest tests/test_invariants.py
SCALE = int(os.environ.get("DURABLELAB_PROPERTY_SCALE", "1"))


def _settings(examples: int, **extra) -> settings:
    return settings(max_examples=examples * SCALE, deadline=None, database=None,
                    derandomize=SCALE == 1, suppress_health_check=[HealthCheck.too_slow],
                    **extra)


PROPERTY = _settings(40)
DETERMINISM = _settings(15)
SMALL = _settings(10)


# --- the world outside the worker ----------------------------------------------------------------

class World:
    """Services with ledgers plus a log of every activity call, shared by the activity
    functions below. It lives outside any engine: a crash does not reset it."""

    def __init__(self):
        self.reset(None)

    def reset(self, engine) -> None:
        self.engine = engine
        self.payments = Payments(honor_keys=True)
        self.erp = ERP(honor_keys=True)
        self.bank = Bank(honor_keys=True)
        self.email = Email(honor_keys=False)      # ignores keys: duplicates are possible here
        #: one dict per activity function call, in call order.
        self.calls: list[dict] = []

    @property
    def honouring(self) -> dict:
        return {"payments": self.payments, "erp": self.erp, "bank": self.bank}


WORLD = World()

OUTAGE_UNTIL = 40.0      # the flaky service answers only from t=40 s of virtual time


def counted(fn):
    """Wrap an activity function: log each call with what was recorded for its position."""

    def wrapper(*args, idempotency_key=None):
        assert idempotency_key is not None, f"{fn.__name__} got no idempotency_key"
        run_id, _, position = idempotency_key.rpartition(":")
        position = int(position)
        engine = WORLD.engine
        committed = engine.store.fetch(
            "SELECT kind FROM events WHERE run_id = ? AND position = ?", [run_id, position])
        if engine.durability == "sync":
            # In sync mode the engine's view is what is committed (the state machine below
            # checks that), so the store answers both questions; engine.run() costs ~7 ms.
            in_view = len(committed) > 0
        else:
            history = engine.run(run_id).history
            in_view = bool((history["position"] == position).any())
        WORLD.calls.append({
            "activity": fn.__name__, "key": idempotency_key, "run_id": run_id,
            "position": position, "at": engine.clock.now(),
            "committed_before": len(committed) > 0, "in_view_before": in_view,
        })
        return fn(*args, idempotency_key=idempotency_key)

    wrapper.__name__ = wrapper.__qualname__ = fn.__name__
    return wrapper


@counted
def charge(customer, amount, idempotency_key=None):
    return WORLD.payments.charge(customer, amount, idempotency_key=idempotency_key)


@counted
def create_vendor(legal_name, idempotency_key=None):
    return WORLD.erp.create_vendor(legal_name, "NO", idempotency_key=idempotency_key)


@counted
def flaky(vendor_id, idempotency_key=None):
    if WORLD.engine.clock.now() < OUTAGE_UNTIL:
        raise ConnectionError("lookup service unavailable")       # Transient: retried
    return {"vendor_id": vendor_id, "verified": True}


@counted
def notify(to, idempotency_key=None):
    WORLD.email.send(to, "vendor created", idempotency_key=idempotency_key)
    return "sent"           # not the message id: with keys ignored it changes on a duplicate


@counted
def payee(vendor_id, idempotency_key=None):
    return WORLD.bank.register_payee(vendor_id, "NO93 8601 1117 947",
                                     idempotency_key=idempotency_key)


RETRY = dl.RetryPolicy(max_attempts=12, initial=1.0, backoff=2.0, max_interval=8.0)
ACTIVITIES = ("charge", "create_vendor", "flaky", "notify", "payee")


def onboarding(ctx: dl.Context, request: dict) -> dict:
    paid = ctx.activity("charge", charge, request["customer"], 12.5)
    vendor = ctx.activity("create_vendor", create_vendor, request["legal_name"])
    ctx.sleep(30)
    try:
        lookup = ctx.activity("flaky", flaky, vendor["id"], policy=RETRY)
    except dl.ActivityFailed as exc:
        lookup = {"gave_up": exc.message}
    sent = ctx.activity("notify", notify, "ops@example.com")
    registered = ctx.activity("payee", payee, vendor["id"])
    return {"charge": paid["id"], "vendor": vendor["id"], "lookup": lookup, "notify": sent,
            "payee": registered["id"], "random": ctx.random(), "finished_at": ctx.now()}


INPUT = {"customer": "c-7", "legal_name": "Fjord Fasteners AS"}
#: Rules that are part of the scenario, not crashes. They come first in every plan so that
#: adding crash rules after them does not change their indices (fault draws depend on them).
BASE_RULES = [Latency("create_vendor", seconds=3.0),
              ServerError("notify", attempts=(1,)),              # 503: the function does not run
              RateLimit("payee", attempts=(1,), retry_after=5.0)]  # 429, Retry-After: 5 s
RUN_ID = "run-inv"
NOTIFY_POSITION = 6     # charge 1, create_vendor 2, sleep 3, timer_fired 4, flaky 5, notify 6


def execute(durability: str, crash_rules=(), seed: int = 0, run_id: str = RUN_ID):
    """Run `onboarding` once on a fresh in-memory engine and a fresh world."""
    engine = dl.Engine(durability=durability)
    WORLD.reset(engine)
    engine.start(onboarding, INPUT, run_id=run_id,
                 faults=dl.FaultPlan(BASE_RULES + list(crash_rules)), seed=seed)
    engine.run_until_idle()
    return engine, engine.run(run_id)


def snapshot(engine, run):
    """What the world and the store look like after a run (taken before the next reset)."""
    return {
        "result": run.result, "status": run.status, "history": run.history,
        "calls": list(WORLD.calls),
        "effects": {name: list(s.effects) for name, s in WORLD.honouring.items()},
        "duplicates": {name: s.duplicate_effects for name, s in WORLD.honouring.items()},
        "email_effects": list(WORLD.email.effects),
        "email_duplicates": WORLD.email.duplicate_effects,
        "crashes": run.crashes,
        "tables": {table: engine.store.fetch(f"SELECT * FROM {table} ORDER BY ALL")
                   for table in ("events", "attempts", "faults", "crashes", "runs")},
    }


_BASELINES: dict = {}


def baseline(durability: str, seed: int) -> dict:
    """The crash-free run with this seed (cached: the determinism test checks that running
    it again gives the same thing)."""
    key = (durability, seed)
    if key not in _BASELINES:
        engine, run = execute(durability, (), seed)
        _BASELINES[key] = snapshot(engine, run)
        engine.close()
    return _BASELINES[key]


# --- strategies ----------------------------------------------------------------------------------

attempts_st = st.one_of(st.none(), st.lists(st.integers(1, 4), min_size=1, max_size=3,
                                              unique=True).map(tuple))
times_st = st.sampled_from([None, 1, 2, 3])
p_st = st.sampled_from([1.0, 1.0, 0.5])

step_crash = st.builds(
    Crash, st.sampled_from(ACTIVITIES + ("*", "c*")),
    point=st.sampled_from(["before_activity", "after_effect", "after_record"]),
    attempts=attempts_st, times=times_st, p=p_st)
# during_wait: on the durable timer ("sleep") and on the retrying activity's backoff.
wait_crash = st.builds(Crash, st.sampled_from(["sleep", "flaky", "payee", "*"]),
                       point=st.just("during_wait"),
                       attempts=attempts_st, times=times_st, p=p_st)
crash_plans = st.lists(st.one_of(step_crash, wait_crash), min_size=1, max_size=3)
seeds = st.integers(min_value=0, max_value=2**16)
durabilities = st.sampled_from(["sync", "batch"])


def check_no_rerun_after_record(calls: list[dict]) -> None:
    """Invariant 1: no activity function was called for a position that already had an
    event, neither committed in the store nor in the engine's own (live) view."""
    rerun = [c for c in calls if c["committed_before"] or c["in_view_before"]]
    assert not rerun, f"activities ran again after their event was recorded: {rerun}"


def after_effect_crashes(crashes: pd.DataFrame) -> Counter:
    hit = crashes[crashes["point"] == "after_effect"]
    return Counter(int(p) for p in hit["position"])


# --- invariants 1 and 2: crash anywhere, same result, effects once -------------------------------

#: Columns of Run.history that do not depend on when things happened.
TIMELESS = ["position", "kind", "name", "digest", "ok"]


def without_time(result: dict) -> dict:
    return {k: v for k, v in result.items() if k != "finished_at"}


@PROPERTY
@given(crash_rules=crash_plans, seed=seeds, durability=durabilities)
def test_crashes_anywhere_keep_result_effects_and_no_rerun(crash_rules, seed, durability):
    base = baseline(durability, seed)
    assert base["status"] == "completed"
    engine, run = execute(durability, crash_rules, seed)
    got = snapshot(engine, run)
    engine.close()
    history = run.history

    # The run ends with the same result as the crash-free run of the same seed. In sync mode
    # a crash costs no virtual time, so even ctx.now() at the end and the whole history are
    # the same. In batch mode the work of the wake-up a crash interrupted is lost and done
    # again from the crash instant (time never runs backwards), so times move (and with an
    # outage that ends at a fixed instant, the number of retries too): what was done, and
    # every value it returned, must still be the same.
    assert got["status"] == "completed", run.error
    if durability == "sync":
        assert got["result"] == base["result"]
        pd.testing.assert_frame_equal(history, base["history"], check_exact=True)
        assert got["tables"]["events"] == base["tables"]["events"]
    else:
        assert without_time(got["result"]) == without_time(base["result"])
        pd.testing.assert_frame_equal(history[TIMELESS], base["history"][TIMELESS])
        activities = history["kind"] == "activity"
        assert history[activities]["value"].tolist() == \
            base["history"][base["history"]["kind"] == "activity"]["value"].tolist()

    # Services that honour keys see each effect exactly once, as many as without crashes.
    assert got["duplicates"] == {"payments": 0, "erp": 0, "bank": 0}
    for name, effects in got["effects"].items():
        assert [e["key"] for e in effects] == [e["key"] for e in base["effects"][name]], name

    # A recorded activity never runs again.
    check_no_rerun_after_record(got["calls"])

    # Every call was for an activity position of the final history, under its own name.
    activity_at = {int(p): n for p, n, k in zip(history["position"], history["name"],
                                                history["kind"]) if k == "activity"}
    for call in got["calls"]:
        assert activity_at.get(call["position"]) == call["activity"], call
    assert activity_at[NOTIFY_POSITION] == "notify"

    calls = Counter(c["position"] for c in got["calls"])
    base_calls = Counter(c["position"] for c in base["calls"])
    lost = after_effect_crashes(run.crashes)
    if durability == "sync":
        # Each event is committed before the code moves on, so the only calls repeated are
        # the ones whose effect happened but whose record did not: crashes at after_effect.
        assert calls == base_calls + lost, (calls, base_calls, run.crashes)
        # And at the service that ignores keys, exactly those repeats are duplicates.
        assert got["email_duplicates"] == lost[NOTIFY_POSITION]
    else:
        # A crash in batch mode loses the wake-up's uncommitted work, which runs again, so
        # every activity ran at least once; without a crash nothing ran twice.
        assert set(calls) == set(base_calls)
        if len(run.crashes) == 0:
            assert calls == base_calls
        assert len(got["email_effects"]) == calls[NOTIFY_POSITION]


def test_batch_crash_redoes_lost_work_from_the_crash_instant():
    """Why the property above compares batch-mode results without their times: the crash
    after create_vendor's record (t=3 s, its 3 s latency paid) loses the uncommitted wake-up,
    and the recovered worker pays that latency again from t=3 s. Same effects, same values,
    a later clock. (Sync mode commits the record first and loses nothing.)"""
    base = baseline("batch", 0)
    engine, run = execute("batch", [Crash("create_vendor", point="after_record")])
    assert run.status == "completed"
    assert without_time(run.result) == without_time(base["result"])
    assert run.history.loc[run.history["name"] == "create_vendor", "recorded_at"].tolist() \
        == [6.0]
    assert WORLD.erp.duplicate_effects == 0 and len(WORLD.erp.effects) == 1
    assert len([c for c in WORLD.calls if c["activity"] == "create_vendor"]) == 2
    _, synced = execute("sync", [Crash("create_vendor", point="after_record")])
    assert synced.result == baseline("sync", 0)["result"]


# --- invariant 6: same seed, same code, same fault plan -> the same history, byte for byte ------

@DETERMINISM
@given(crash_rules=st.lists(st.one_of(step_crash, wait_crash), min_size=0, max_size=3),
       seed=seeds, durability=durabilities)
def test_same_seed_plan_and_run_id_give_byte_identical_history(crash_rules, seed, durability):
    first_engine, first_run = execute(durability, crash_rules, seed, run_id="run-twice")
    first = snapshot(first_engine, first_run)
    first_engine.close()
    second_engine, second_run = execute(durability, crash_rules, seed, run_id="run-twice")
    second = snapshot(second_engine, second_run)
    second_engine.close()

    pd.testing.assert_frame_equal(first_run.history, second_run.history, check_exact=True)
    assert first_run.history.to_json() == second_run.history.to_json()
    pd.testing.assert_frame_equal(first_run.attempts, second_run.attempts, check_exact=True)
    for table in ("events", "attempts", "faults", "crashes", "runs"):
        assert first["tables"][table] == second["tables"][table], table
    assert first["result"] == second["result"]
    assert first["calls"] == second["calls"]


def test_different_seeds_give_different_histories():
    """Guards the test above against a vacuous pass: the seed does reach the history."""
    _, one = execute("sync", (), seed=1)
    _, two = execute("sync", (), seed=2)
    assert one.history.to_json() != two.history.to_json()


# --- exit mode: weaker, but keys still hold ------------------------------------------------------

@SMALL
@given(crash_rules=crash_plans, seed=seeds)
def test_exit_mode_crashes_keep_key_honouring_effects_once(crash_rules, seed):
    """In 'exit' mode a crash re-executes the run from its start (DESIGN 6), but services
    that honour keys still see each effect once."""
    base = baseline("exit", seed)
    engine, run = execute("exit", crash_rules, seed)
    got = snapshot(engine, run)
    engine.close()
    assert got["status"] == "completed", run.error
    assert got["duplicates"] == {"payments": 0, "erp": 0, "bank": 0}
    for name, effects in got["effects"].items():
        assert len(effects) == len(base["effects"][name]), name
    # Nothing committed before a call (in exit mode, only a finished run commits events).
    assert not [c for c in got["calls"] if c["committed_before"]]
    assert not [c for c in got["calls"] if c["in_view_before"]]


# --- named examples of the same invariants -------------------------------------------------------

@pytest.mark.parametrize("durability", ["sync", "batch"])
def test_activity_not_rerun_after_crash_after_record(durability):
    engine, run = execute(durability, [Crash("charge", point="after_record")])
    assert run.status == "completed"
    assert list(run.crashes["point"]) == ["after_record"]
    charge_calls = [c for c in WORLD.calls if c["activity"] == "charge"]
    if durability == "sync":
        assert len(charge_calls) == 1
    check_no_rerun_after_record(WORLD.calls)
    assert WORLD.payments.duplicate_effects == 0 and len(WORLD.payments.effects) == 1


@pytest.mark.parametrize("durability", ["sync", "batch"])
def test_key_honouring_service_sees_one_effect_after_crash_after_effect(durability):
    engine, run = execute(durability, [Crash("payee", point="after_effect")])
    assert run.status == "completed"
    assert len([c for c in WORLD.calls if c["activity"] == "payee"]) == 2   # really sent twice
    assert len(WORLD.bank.effects) == 1 and WORLD.bank.duplicate_effects == 0
    assert run.result == baseline(durability, 0)["result"]


def test_key_ignoring_service_duplicates_effect_after_crash_after_effect():
    """The lesson the key-ignoring service exists for: same crash, a duplicate effect."""
    engine, run = execute("sync", [Crash("notify", point="after_effect")])
    assert run.status == "completed"
    assert len(WORLD.email.effects) == 2 and WORLD.email.duplicate_effects == 1
    assert run.result == baseline("sync", 0)["result"]


@pytest.mark.parametrize("durability", ["sync", "batch"])
def test_crash_during_sleep_resumes_timer_at_same_deadline(durability):
    engine, run = execute(durability, [Crash("sleep", point="during_wait")])
    base = baseline(durability, 0)
    assert list(run.crashes["point"]) == ["during_wait"]
    fired = run.history[run.history["kind"] == "timer_fired"]["recorded_at"].tolist()
    base_fired = base["history"][base["history"]["kind"] == "timer_fired"]["recorded_at"].tolist()
    assert fired == base_fired == [33.0]     # 3 s of latency, then the 30 s timer
    assert run.crashes["crashed_at"].tolist() == [18.0]   # halfway through the wait
    assert run.result == base["result"]


@pytest.mark.parametrize("durability", ["sync", "batch"])
def test_crash_during_retry_backoff_resumes_the_backoff(durability):
    engine, run = execute(durability, [Crash("flaky", point="during_wait")])
    base = baseline(durability, 0)
    flaky_attempts = [c for c in WORLD.calls if c["activity"] == "flaky"]
    base_attempts = [c for c in base["calls"] if c["activity"] == "flaky"]
    assert len(base_attempts) >= 3, "the scenario must retry the flaky activity"
    # One crash per backoff, and still the same attempts at the same instants.
    assert (run.crashes["point"] == "during_wait").sum() == len(base_attempts) - 1
    assert [c["at"] for c in flaky_attempts] == [c["at"] for c in base_attempts]
    assert run.result == base["result"]


def test_scenario_exercises_retries_timer_and_effects():
    """Guards the properties above against a vacuous pass."""
    base = baseline("sync", 0)
    kinds = base["history"]["kind"].tolist()
    assert "timer_fired" in kinds
    flaky_row = base["history"][base["history"]["name"] == "flaky"].iloc[0]
    assert flaky_row["attempt"] >= 3
    assert base["result"]["lookup"] == {"vendor_id": "vnd_1", "verified": True}
    assert {name: len(e) for name, e in base["effects"].items()} == {
        "payments": 1, "erp": 1, "bank": 1}
    # The injected 503 and 429 made notify and payee retry (their functions ran once each).
    engine, run = execute("sync", (), seed=0)
    attempts = run.attempts
    assert attempts[attempts["activity"] == "notify"]["outcome"].tolist() == ["transient", "ok"]
    payee_rows = attempts[attempts["activity"] == "payee"]
    assert payee_rows["outcome"].tolist() == ["rate_limited", "ok"]
    assert payee_rows["delay"].iloc[0] >= 5.0                  # waited at least Retry-After
    assert Counter(c["activity"] for c in WORLD.calls)["payee"] == 1
    engine.close()


# --- a state machine over a file-backed engine ----------------------------------------------------

class MachineWorld:
    def __init__(self):
        self.payments = Payments(honor_keys=True)
        self.email = Email(honor_keys=True)


MW = MachineWorld()


def m_charge(n, idempotency_key=None):
    return MW.payments.charge(f"cust-{n}", float(n), idempotency_key=idempotency_key)


def m_mail(n, idempotency_key=None):
    return MW.email.send(f"v{n}@example.com", "welcome", idempotency_key=idempotency_key)


def machine_flow(ctx: dl.Context, request: dict) -> dict:
    paid = ctx.activity("charge", m_charge, request["n"])
    answer = ctx.wait_signal("go", timeout=50.0)
    ctx.sleep(20.0)
    mail = ctx.activity("mail", m_mail, request["n"],
                        policy=dl.RetryPolicy(max_attempts=4, initial=2.0))
    return {"charge": paid["id"], "answer": answer, "mail": mail["id"],
            "at": ctx.now()}


MACHINE_PLANS = [
    [],
    [Crash("charge", point="after_effect")],
    [Crash("mail", point="before_activity"), Crash("sleep", point="during_wait")],
    [Crash("go", point="during_wait"), Crash("*", point="after_record", times=2)],
    [dl.faults.ServerError("mail", attempts=(1, 2)), Crash("mail", point="during_wait")],
    # Attempts that take 4 s are in flight while other runs crash the shared worker.
    [Latency("*", seconds=4.0), Crash("charge", point="after_effect", p=0.5)],
]


class DurableEngineMachine(RuleBasedStateMachine):
    """Drive a sync, file-backed engine through starts, time, signals, crashes and
    reopenings; after every step check what DESIGN 4.4 and 4.2 promise."""

    runs = Bundle("runs")

    def __init__(self):
        super().__init__()
        MW.__init__()
        self.dir = tempfile.mkdtemp(prefix="durablelab-sm-")
        self.path = f"{self.dir}/runs.duckdb"
        self.engine = dl.Engine(self.path, durability="sync", workflows=[machine_flow])
        self.count = 0
        self.seen_events: dict = {}        # (run_id, position) -> the committed row
        self.finished: dict = {}           # run_id -> (status, result)
        self.started: set = set()

    def teardown(self):
        try:
            self.engine.close()
        finally:
            shutil.rmtree(self.dir, ignore_errors=True)

    # --- rules -------------------------------------------------------------------------------
    @rule(target=runs, plan=st.integers(0, len(MACHINE_PLANS) - 1), seed=st.integers(0, 50))
    def start(self, plan, seed):
        self.count += 1
        run_id = f"m-{self.count}"
        self.engine.start(machine_flow, {"n": self.count}, run_id=run_id,
                          faults=MACHINE_PLANS[plan] or None, seed=seed)
        self.started.add(run_id)
        return run_id

    @rule(seconds=st.sampled_from([0.0, 1.0, 5.0, 15.0, 40.0, 100.0]))
    def advance(self, seconds):
        self.engine.advance(seconds)

    @rule()
    def run_until_idle(self):
        self.engine.run_until_idle()

    @rule()
    def crash(self):
        self.engine.crash()

    @rule(run_id=runs, signal_id=st.sampled_from([None, "click-1", "click-2"]),
          value=st.sampled_from([True, False]))
    def signal(self, run_id, signal_id, value):
        status = self.engine.run(run_id).status
        if status in FINAL:
            with pytest.raises(dl.RunFinishedError):
                self.engine.signal(run_id, "go", {"approved": value}, signal_id=signal_id)
        else:
            self.engine.signal(run_id, "go", {"approved": value}, signal_id=signal_id)

    @rule()
    def close_and_reopen(self):
        self.engine.close()
        self.engine = dl.Engine(self.path, durability="sync", workflows=[machine_flow])

    @rule()
    def abandon_and_reopen(self):
        """Like a process that died: no close(), a new engine on the same file."""
        self.engine = dl.Engine(self.path, durability="sync", workflows=[machine_flow])

    # --- invariants --------------------------------------------------------------------------
    @invariant()
    def committed_events_and_signals_never_change_or_vanish(self):
        rows = self.engine.store.fetch("SELECT * FROM events ORDER BY run_id, position")
        now = {("event", r[0], r[1]): r for r in rows}
        rows = self.engine.store.fetch("SELECT * FROM signals ORDER BY run_id, seq")
        now.update({("signal", r[0], r[1]): r for r in rows})
        for key, row in self.seen_events.items():
            assert now.get(key) == row, f"committed {key} changed or vanished"
        self.seen_events = now
        assert {r[0] for r in self.engine.store.fetch("SELECT run_id FROM runs")} == self.started

    @invariant()
    def key_honouring_services_see_each_effect_once(self):
        assert MW.payments.duplicate_effects == 0
        assert MW.email.duplicate_effects == 0
        assert len(MW.payments.effects) <= len(self.started)

    @invariant()
    def runs_are_committed_and_finished_runs_keep_their_result(self):
        committed = Counter(r[0] for r in self.engine.store.fetch("SELECT run_id FROM events"))
        stored = {r[0]: (r[1], r[2]) for r in self.engine.store.fetch(
            "SELECT run_id, status, result FROM runs")}
        for run_id in self.started:
            run = self.engine.run(run_id)
            # Sync mode: every event the engine shows (and handed to the code) is committed.
            assert len(run.history) == committed[run_id], run_id
            assert run.status != "diverged", run.error
            if run.status in FINAL:
                status, result_json = stored[run_id]
                assert (status, json.loads(result_json)) == (run.status, run.result), run_id
                if run_id in self.finished:
                    assert self.finished[run_id] == (run.status, run.result), run_id
                self.finished[run_id] = (run.status, run.result)
                if run.status == "completed":
                    # Its charge is the one effect recorded under its first position's key.
                    keyed = [e["id"] for e in MW.payments.effects if e["key"] == f"{run_id}:1"]
                    assert keyed == [run.result["charge"]], run_id
            else:
                assert run_id not in self.finished, f"finished run {run_id} is {run.status}"


DurableEngineMachine.TestCase.settings = settings(
    max_examples=10 * SCALE, stateful_step_count=15, deadline=None, database=None,
    derandomize=SCALE == 1, suppress_health_check=[HealthCheck.too_slow])
test_durable_engine_state_machine = DurableEngineMachine.TestCase
