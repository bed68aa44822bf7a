"""Bad input gets a clear error naming what was wrong and where; nothing recorded is lost
or altered by it (invariant 5)."""

import os

import duckdb
import pytest

import durablelab as dl


def ok(x=None):
    return {"ok": x}


def waits(ctx, _):
    ctx.activity("first", ok, 1)
    return ctx.wait_signal("go")


def snapshot(engine):
    return {t: engine.store.fetch(f"SELECT * FROM {t} ORDER BY ALL")
            for t in ("runs", "events", "attempts", "signals")}


@pytest.fixture
def waiting(engine):
    run_id = engine.start(waits, None, run_id="r-1")
    engine.run_until_idle()
    return run_id


def test_non_json_workflow_input_fails_at_start_and_records_nothing(engine, waiting):
    before = snapshot(engine)
    with pytest.raises(dl.SerializationError, match=r"workflow input .*Engine.start\(.*waits\)"):
        engine.start(waits, {"when": object()})
    assert snapshot(engine) == before


def test_non_json_activity_result_fails_the_activity_naming_it(engine):
    calls = []
    def returns_a_set():
        calls.append(1)
        return {1, 2}
    def wf(ctx, _):
        return ctx.activity("make_set", returns_a_set, policy=dl.RetryPolicy(max_attempts=5))
    run_id = engine.start(wf, None)
    engine.run_until_idle()
    run = engine.run(run_id)
    assert run.status == "failed" and len(calls) == 1          # non-retryable: its effect happened
    assert run.error.error_class == "NonRetryable"
    assert "'make_set' at position 1 is not JSON-serialisable" in str(run.error)


def test_non_json_activity_argument_fails_the_run_at_the_call(engine):
    def wf(ctx, _):
        return ctx.activity("send", ok, object())
    run_id = engine.start(wf, None)
    engine.run_until_idle()
    run = engine.run(run_id)
    assert run.status == "failed" and isinstance(run.error, dl.WorkflowError)
    assert "ctx.activity('send')" in str(run.error) and "not JSON-serialisable" in str(run.error)
    assert run.history.empty


def test_tuple_result_comes_back_as_a_list_both_times(engine):
    seen = []
    def wf(ctx, _):
        seen.append(ctx.activity("pair", lambda: (1, 2)))
        ctx.sleep(1)
        return seen[-1]
    engine.start(wf, None)
    engine.run_until_idle()
    assert seen == [[1, 2], [1, 2]]


def test_unknown_run_id(engine, waiting):
    with pytest.raises(dl.RunNotFoundError, match="No run 'nope'") as info:
        engine.signal("nope", "go", 1)
    assert info.value.run_id == "nope"
    with pytest.raises(KeyError):
        engine.run("nope")


def test_signal_to_a_finished_run_names_its_state(engine, waiting):
    engine.signal(waiting, "go", 1)
    engine.run_until_idle()
    before = snapshot(engine)
    with pytest.raises(dl.RunFinishedError, match="'r-1': it is completed") as info:
        engine.signal(waiting, "go", 2)
    assert info.value.status == "completed"
    assert snapshot(engine) == before


def test_non_json_signal_value(engine, waiting):
    before = snapshot(engine)
    with pytest.raises(dl.SerializationError, match="signal 'go'"):
        engine.signal(waiting, "go", object())
    assert snapshot(engine) == before


@pytest.mark.parametrize("seconds", [-1, float("nan"), "10", None])
def test_bad_sleep_fails_the_run_with_the_value_named(engine, seconds):
    def wf(ctx, _):
        ctx.activity("first", ok, 1)
        ctx.sleep(seconds)
    run_id = engine.start(wf, None)
    engine.run_until_idle()
    run = engine.run(run_id)
    assert run.status == "failed" and isinstance(run.error, dl.WorkflowError)
    assert "ctx.sleep(seconds)" in str(run.error) and repr(seconds) in str(run.error)
    assert "test_bad_input.py:106" in str(run.error)            # where, in the learner's file
    assert "move it into ctx.activity" not in str(run.error)    # advice for other errors
    assert isinstance(run.error, dl.DurableLabError)
    assert len(run.history) == 1                                # the recorded step is kept


def test_workflow_exception_fails_at_once_and_says_where(engine):
    runs = []
    def wf(ctx, _):
        runs.append(1)
        ctx.activity("first", ok, 1)
        return 1 / 0
    run_id = engine.start(wf, None)
    engine.run_until_idle()
    run = engine.run(run_id)
    assert run.status == "failed" and len(runs) == 1            # never retried
    err = run.error
    assert isinstance(err, dl.WorkflowError) and err.cause_class == "ZeroDivisionError"
    assert err.location.startswith(__file__) and "in wf" in err.location
    assert str(err).startswith("Workflow code raised ZeroDivisionError")
    assert "not from an activity" in str(err)


def test_duplicate_run_id(engine, waiting):
    before = snapshot(engine)
    with pytest.raises(dl.DuplicateRunError, match="'r-1' already exists"):
        engine.start(waits, None, run_id="r-1")
    assert snapshot(engine) == before


def test_bad_seed_and_bad_workflow(engine):
    with pytest.raises(TypeError, match="seed='7'"):
        engine.start(waits, None, seed="7")
    with pytest.raises(TypeError, match="a workflow is a function"):
        engine.start("waits", None)


def test_second_process_gets_a_clear_lock_error(db_path):
    import subprocess, sys, textwrap
    holder = subprocess.Popen([sys.executable, "-c", textwrap.dedent(f"""
        import durablelab as dl, sys, time
        e = dl.Engine({db_path!r})
        print("open", flush=True)
        sys.stdin.readline()
    """)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "open"
        with pytest.raises(dl.StoreLockedError) as info:
            dl.Engine(db_path)
        assert info.value.path == db_path and info.value.pid == holder.pid
        assert f"process {holder.pid}" in str(info.value) and "engine.close()" in str(info.value)
    finally:
        holder.communicate("\n", timeout=30)


def test_foreign_duckdb_file_is_refused(db_path):
    con = duckdb.connect(db_path)
    con.execute("CREATE TABLE invoices (id INTEGER)")
    con.close()
    with pytest.raises(dl.StoreFormatError, match="not a durablelab store"):
        dl.Engine(db_path)
    con = duckdb.connect(db_path)
    assert con.execute("SELECT count(*) FROM information_schema.tables").fetchall() == [(1,)]
    con.close()


def test_newer_schema_version_is_refused(db_path):
    dl.Engine(db_path).close()
    con = duckdb.connect(db_path)
    con.execute("UPDATE meta SET value = '99' WHERE key = 'schema_version'")
    con.close()
    with pytest.raises(dl.StoreFormatError, match="version 99") as info:
        dl.Engine(db_path)
    assert (info.value.found, info.value.expected) == (99, dl.store.SCHEMA_VERSION)


def test_closed_engine_refuses_calls(db_path):
    engine = dl.Engine(db_path)
    engine.close()
    with pytest.raises(RuntimeError, match="closed"):
        engine.start(waits, None)
    assert os.path.exists(db_path)


def test_bad_activity_timeouts(engine):
    def wf(ctx, _):
        ctx.activity("x", ok, start_to_close=-5)
    run_id = engine.start(wf, None)
    engine.run_until_idle()
    assert "start_to_close=-5" in str(engine.run(run_id).error)


def test_wait_signal_with_deadline_and_timeout(engine):
    def wf(ctx, _):
        ctx.wait_signal("go", deadline=10, timeout=10)
    run_id = engine.start(wf, None)
    engine.run_until_idle()
    assert "not both" in str(engine.run(run_id).error)


def test_start_refuses_a_dict_key_json_would_turn_into_a_string():
    engine = dl.Engine()

    def wf(ctx, order):
        return order["qty"][1]

    with pytest.raises(dl.SerializationError, match=r"dict key 1 \(of type int\) in input\['qty'\]"):
        engine.start(wf, {"qty": {1: 5}})
    assert engine.runs().empty
