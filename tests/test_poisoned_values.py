"""Values that would poison a store are refused where they are given, and one damaged run or
file never takes the rest down (DESIGN section 6, "Retries and errors"; invariant 5).

Each test shows the error (its class and its words) and that nothing recorded changed.
"""

import math
import os
import re

import duckdb
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import durablelab as dl
from durablelab.errors import BadType, BadValue, DamagedRunError, StoreOpenError


def ok(x=None):
    return {"ok": x}


def waits(ctx, _):
    ctx.activity("first", ok, 1)
    return ctx.wait_signal("go")


def snapshot(engine):
    return {t: engine.store.fetch(f"SELECT * FROM {t} ORDER BY ALL")
            for t in ("runs", "events", "attempts", "signals", "faults", "meta")}


@pytest.fixture
def waiting(engine):
    engine.start(waits, None, run_id="r-1")
    engine.run_until_idle()
    return "r-1"


def usage_error(kind, exc):
    assert isinstance(exc, dl.DurableLabError) and isinstance(exc, kind)
    assert isinstance(exc, ValueError if kind is BadValue else TypeError)


# --- times --------------------------------------------------------------------------------

@pytest.mark.parametrize("seconds", [math.inf, -math.inf, math.nan, 10 ** 400, -1, "5", None,
                                     True])
def test_advance_refuses_a_time_that_is_not_finite_seconds(engine, waiting, seconds):
    before, now = snapshot(engine), engine.clock.now()
    with pytest.raises((BadValue, BadType), match=r"advance: seconds=") as info:
        engine.advance(seconds)
    usage_error(BadType if isinstance(seconds, (str, type(None), bool)) else BadValue,
                info.value)
    assert snapshot(engine) == before and engine.clock.now() == now
    engine.start(waits, None, run_id="r-2")                # the file still takes new runs
    engine.run_until_idle()
    assert engine.run("r-2").status == "waiting"


def test_advance_inf_no_longer_breaks_every_later_run_on_the_file(db_path):
    with dl.Engine(db_path) as engine:
        with pytest.raises(BadValue, match="not a finite number"):
            engine.advance(float("inf"))
    with dl.Engine(db_path) as engine:
        assert engine.clock.now() == 0.0
        engine.start(waits, None, run_id="r")
        engine.run_until_idle()
        assert engine.run("r").status == "waiting"


@pytest.mark.parametrize("timeout", [math.nan, math.inf, 0, -3])
def test_start_refuses_a_bad_timeout_and_records_nothing(engine, waiting, timeout):
    before = snapshot(engine)
    with pytest.raises(BadValue, match=r"start\(.*waits\): timeout=") as info:
        engine.start(waits, None, timeout=timeout)
    usage_error(BadValue, info.value)
    assert snapshot(engine) == before


@pytest.mark.parametrize("field", ["initial", "max_interval", "backoff"])
@pytest.mark.parametrize("value", [math.nan, math.inf])
def test_retry_policy_refuses_nan_and_inf(field, value):
    with pytest.raises(BadValue, match=rf"RetryPolicy: {field}={value!r} must be a number .*"
                                       rf"finite"):
        dl.RetryPolicy(**{field: value})


def test_a_huge_attempt_number_caps_instead_of_overflowing():
    policy = dl.RetryPolicy(max_attempts=None, initial=1.0, backoff=2.0, max_interval=60.0)
    assert policy.cap(5000) == 60.0


@pytest.mark.parametrize("header", ["inf", "nan", "-5", "1e999"])
def test_a_retry_after_header_that_is_no_time_is_no_hint(header):
    class Response:
        status_code = 429
        headers = {"Retry-After": header}

    class HTTPError(Exception):
        response = Response()
    error = dl.classify(HTTPError("slow down"))
    assert isinstance(error, dl.RateLimited) and error.retry_after is None


# --- fault rules --------------------------------------------------------------------------

@pytest.mark.parametrize("make, kind, words", [
    (lambda: dl.faults.Latency("x", seconds=-50), BadValue, "seconds=-50 must be seconds >= 0"),
    (lambda: dl.faults.Latency("x", seconds=math.nan), BadValue, "not a finite number"),
    (lambda: dl.faults.Latency("x", seconds=1, max_seconds=0.5), BadValue, "below seconds"),
    (lambda: dl.faults.RateLimit("x", retry_after="5"), BadType,
     "retry_after='5' must be a number of seconds"),
    (lambda: dl.faults.RateLimit("x", retry_after=-1), BadValue, "retry_after=-1"),
    (lambda: dl.faults.ServerError("x", p=True), BadType, "p=True must be a probability"),
    (lambda: dl.faults.ServerError("x", p=math.nan), BadValue, "p=nan"),
    (lambda: dl.faults.ServerError("x", status=404), BadValue, "HTTP 5xx"),
    (lambda: dl.faults.Crash("x", times=True), BadType, "times=True"),
    (lambda: dl.faults.Crash("x", attempts=[True]), BadValue, "attempts=[True]"),
    (lambda: dl.faults.Crash("x", point="later"), BadValue, "point='later'"),
    (lambda: dl.faults.Timeout(7), BadType, "activity must be a non-empty name"),
    (lambda: dl.FaultPlan(["Crash"]), BadType, "rule 0 is 'Crash'"),
])
def test_fault_rules_refuse_bad_values_by_name(make, kind, words):
    with pytest.raises(kind, match=re.escape(words)) as info:
        make()
    usage_error(kind, info.value)


def test_a_plan_file_with_a_bad_value_is_refused_before_anything_is_recorded(engine, waiting,
                                                                             tmp_path):
    plan = tmp_path / "plan.json"
    plan.write_text('{"version": 1, "rules": [{"type": "Latency", "activity": "first", '
                    '"seconds": -50}]}')
    before = snapshot(engine)
    with pytest.raises(BadValue, match=r"plan.json, rule 0: Latency\('first'\): seconds=-50"):
        engine.start(waits, None, faults=str(plan))
    assert snapshot(engine) == before


# --- integers and names -------------------------------------------------------------------

@pytest.mark.parametrize("seed", [2 ** 70, -(2 ** 63) - 1, 2 ** 63])
def test_a_seed_the_store_cannot_keep_is_refused(engine, waiting, seed):
    before = snapshot(engine)
    with pytest.raises(BadValue, match="outside the 64-bit range"):
        engine.start(waits, None, seed=seed)
    assert snapshot(engine) == before
    engine.start(waits, None, seed=2 ** 63 - 1, run_id="edge")   # the largest that fits
    assert engine.store.fetch("SELECT seed FROM runs WHERE run_id = 'edge'") == [(2 ** 63 - 1,)]


@pytest.mark.parametrize("name", [123, None, ("a",), "", "bad\ud800name"])
def test_an_activity_name_that_is_not_text_fails_the_run_at_the_call(engine, name):
    def wf(ctx, _):
        ctx.activity("first", ok, 1)
        ctx.activity(name, ok, 2)
    run_id = engine.start(wf, None)
    engine.run_until_idle()
    run = engine.run(run_id)
    assert run.status == "failed" and isinstance(run.error, dl.WorkflowError)
    assert f"name={name!r}" in str(run.error) and "test_poisoned_values.py" in str(run.error)
    assert "move it into ctx.activity" not in str(run.error)
    assert list(run.history["name"]) == ["first"]            # the recorded step is kept


@pytest.mark.parametrize("signal_id", [1, 2.5, ["a"], "click\udc00"])
def test_a_signal_id_that_is_not_text_is_refused(db_path, signal_id):
    engine = dl.Engine(db_path)
    engine.start(waits, None, run_id="r")
    engine.run_until_idle()
    engine.signal("r", "other", 1, signal_id="1")
    before = snapshot(engine)
    with pytest.raises((BadType, BadValue), match="signal_id=") as info:
        engine.signal("r", "go", "yes", signal_id=signal_id)
    assert isinstance(info.value, dl.DurableLabError)
    assert snapshot(engine) == before
    engine.close()
    reopened = dl.Engine(db_path)                            # the same id is still deduplicated
    assert reopened.signal("r", "other", 1, signal_id="1") is False
    reopened.close()


@pytest.mark.parametrize("bad", [{"name": 5}, {"name": "a\ud800"}])
def test_a_signal_name_that_is_not_text_is_refused(engine, waiting, bad):
    before = snapshot(engine)
    with pytest.raises((BadType, BadValue), match="name="):
        engine.signal(waiting, bad["name"], 1)
    assert snapshot(engine) == before


# --- lone surrogates ----------------------------------------------------------------------

TEXT = st.text(alphabet=st.characters(min_codepoint=0, max_codepoint=0x10FFFF,
                                      blacklist_categories=()), max_size=8)
VALUES = st.recursive(st.none() | st.booleans() | st.integers(-10 ** 6, 10 ** 6) | TEXT,
                      lambda inner: st.lists(inner, max_size=3)
                      | st.dictionaries(TEXT, inner, max_size=3), max_leaves=6)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(value=VALUES)
def test_any_json_value_round_trips_exactly_even_with_lone_surrogates(value):
    def answer(v):
        return v
    def wf(ctx, input):
        got = ctx.activity("echo", answer, input)
        signal = ctx.wait_signal("go")
        return {"input": input, "activity": got, "signal": signal}
    with dl.Engine() as engine:
        run_id = engine.start(wf, value)
        engine.run_until_idle()
        engine.signal(run_id, "go", value)
        engine.run_until_idle()
        engine.crash()                                       # read back from DuckDB
        run = engine.run(run_id)
        assert run.status == "completed"
        assert run.result == {"input": value, "activity": value, "signal": value}
        assert run.input == value


def test_a_lone_surrogate_string_alone_still_makes_a_history_frame(engine):
    run_id = engine.start(lambda ctx, _: ctx.activity("s", lambda: "\ud800"), None)
    engine.run_until_idle()
    run = engine.run(run_id)
    assert run.result == "\ud800" and run.history.value[0] == "\ud800"


def test_a_lone_surrogate_survives_a_file_and_a_new_engine(db_path):
    weird = {"\ud800key": ["\udfff", "ok \u00e9", "\ud83d"]}
    def wf(ctx, input):
        got = ctx.activity("echo\u00e9", lambda: weird)
        ctx.wait_signal("go")
        return [input, got]
    engine = dl.Engine(db_path)
    engine.start(wf, "in\udc80put", run_id="r")
    engine.run_until_idle()
    engine.close()
    reopened = dl.Engine(db_path, workflows=[wf])
    reopened.signal("r", "go")
    reopened.run_until_idle()
    assert reopened.run("r").result == ["in\udc80put", weird]
    assert reopened.run("r").history["name"][0] == "echo\u00e9"
    reopened.close()


def test_an_activity_error_message_with_a_lone_surrogate_is_kept_readable(db_path):
    def flaky():
        raise ConnectionError("reset by \ud800 peer")
    def wf(ctx, _):
        return ctx.activity("flaky", flaky, policy=dl.RetryPolicy(max_attempts=2,
                                                                   jitter="none"))
    with dl.Engine(db_path) as engine:
        engine.start(wf, None, run_id="r")
        engine.run_until_idle()
        run = engine.run("r")
    assert run.status == "failed" and "reset by" in str(run.error)
    with dl.Engine(db_path) as engine:                       # the file reads back
        attempts = engine.run("r").attempts
        assert list(attempts.outcome) == ["transient", "transient"]
        assert "\\ud800" in attempts.error[0]


# --- damaged rows -------------------------------------------------------------------------

def two_waiting_runs(path, sql, *params):
    with dl.Engine(path) as engine:
        engine.start(waits, None, run_id="bad", faults=[dl.faults.Latency("first", seconds=1)],
                     budget=dl.Budget(model_calls=5))
        engine.start(waits, None, run_id="good")
        engine.run_until_idle()
    con = duckdb.connect(path)
    con.execute(sql, list(params))
    before = con.execute("SELECT * FROM runs ORDER BY ALL").fetchall() + \
        con.execute("SELECT * FROM event_log ORDER BY ALL").fetchall()
    con.close()
    return before


@pytest.mark.parametrize("sql, words", [
    ("UPDATE event_log SET body = '[\"activity\", \"first\"' WHERE run_id = 'bad' "
     "AND position = 1", r"its event's body is not the JSON durablelab wrote at history "
                         r"position 1"),
    ("UPDATE event_log SET body = '{}' WHERE run_id = 'bad' AND position = 2",
     r"at history position 2"),
    ("UPDATE runs SET faults = '{\"version\": 1, \"rules\": [{\"type\": \"Nope\"}]}' "
     "WHERE run_id = 'bad'", r"its fault plan \(runs.faults\) does not read back"),
    ("UPDATE runs SET options = '{\"budget\": {\"coins\": 3}}' WHERE run_id = 'bad'",
     r"its options.* does not read back"),
    ("UPDATE runs SET options = 'not json' WHERE run_id = 'bad'", r"its options"),
    ("UPDATE runs SET input = '{oops' WHERE run_id = 'bad'", r"its input \(runs.input\)"),
])
def test_one_damaged_row_sets_its_run_aside_and_the_others_run(db_path, sql, words):
    before = two_waiting_runs(db_path, sql)
    engine = dl.Engine(db_path, workflows=[waits])
    assert set(engine.runs()["run_id"]) == {"bad", "good"}
    with pytest.raises(DamagedRunError, match=words) as info:
        engine.run("bad")
    assert isinstance(info.value, dl.StoreFormatError) and info.value.run_id == "bad"
    assert "Run 'bad'" in str(info.value) and "read-only in DuckDB" in str(info.value)
    with pytest.raises(DamagedRunError):
        engine.signal("bad", "go", 1)
    engine.signal("good", "go", 1)
    engine.run_until_idle()
    assert engine.run("good").status == "completed"
    engine.close()
    con = duckdb.connect(db_path, read_only=True)           # the damaged run is untouched
    after = con.execute("SELECT * FROM runs WHERE run_id = 'bad' ORDER BY ALL").fetchall() + \
        con.execute("SELECT * FROM event_log WHERE run_id = 'bad' ORDER BY ALL").fetchall()
    con.close()
    assert after == [row for row in before if row[0] == "bad"]


def test_an_ended_run_with_an_unreadable_error_is_set_aside(db_path):
    with dl.Engine(db_path) as engine:
        engine.start(lambda ctx, _: 1 / 0, None, run_id="bad")
        engine.start(waits, None, run_id="good")
        engine.run_until_idle()
    con = duckdb.connect(db_path)
    con.execute("UPDATE runs SET error = '[1, 2' WHERE run_id = 'bad'")
    con.close()
    with dl.Engine(db_path, workflows=[waits]) as engine:
        assert engine.runs().set_index("run_id").status["bad"] == "failed"
        with pytest.raises(DamagedRunError, match=r"its recorded error \(runs.error\)"):
            engine.run("bad")
        engine.run_until_idle()
        assert engine.run("good").status == "waiting"


# --- files that are not stores ------------------------------------------------------------

def make_file(tmp_path, kind):
    path = tmp_path / f"{kind}.duckdb"
    if kind == "empty":
        path.write_bytes(b"")
    elif kind == "text":
        path.write_text("these are my notes, not a database\n" * 20)
    elif kind == "random":
        path.write_bytes(os.urandom(8192))
    elif kind == "export":
        path.write_text('{"run_id": "r", "kind": "run"}\n')
    elif kind == "truncated":
        with dl.Engine(str(path)) as engine:
            for i in range(30):
                engine.start(waits, list(range(200)), run_id=f"r{i}")
            engine.run_until_idle()
        path.write_bytes(path.read_bytes()[:20_000])
    elif kind == "directory":
        path.mkdir()
    elif kind == "missing folder":
        path = tmp_path / "no" / "such" / "runs.duckdb"
    return path


@pytest.mark.parametrize("kind, words", [
    ("empty", "it is an empty file"), ("text", "it is a plain-text file"),
    ("random", "it is a file of some other format"), ("export", "dl.load"),
    ("truncated", "cut short"), ("directory", "it is a directory"),
    ("missing folder", "does not exist"),
])
def test_a_path_that_is_not_a_store_says_what_duckdb_found(tmp_path, kind, words):
    path = make_file(tmp_path, kind)
    data = path.read_bytes() if path.is_file() else None
    with pytest.raises(StoreOpenError, match=words) as info:
        dl.Engine(str(path))
    assert "another process" not in str(info.value) and "DuckDB said:" in str(info.value)
    assert info.value.path == str(path) and isinstance(info.value, dl.DurableLabError)
    assert (path.read_bytes() if path.is_file() else None) == data   # nothing written
    assert not (tmp_path / "no").exists()
