"""The same workflow code on DBOS Transact: the engine's invariants that apply to it.

Each test opens one `DBOSRunner` (DBOS is one instance per process) and closes it. Over
SQLite always; over PostgreSQL with a throwaway server (tests/pg_server.py), skipped with a
reason only where no PostgreSQL is installed, and never when DURABLELAB_REQUIRE_PG is set
(CI sets it).
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

pytest.importorskip("dbos", reason="the DBOS extra is not installed: pip install -e '.[dbos]'")

import durablelab as dl  # noqa: E402
from durablelab.backends.dbos import (DBOSRunner, RunnerOpenError,  # noqa: E402
                                      UnknownWorkflowError)
from durablelab.importers.dbos import DBOSReadError  # noqa: E402

from dbos import DBOS  # noqa: E402

HERE = Path(__file__).resolve().parent
QUICK = dl.RetryPolicy(max_attempts=4, initial=0.01, backoff=2.0, jitter="none")


# --- where the runs live --------------------------------------------------------------------

@pytest.fixture(scope="session")
def postgres():
    from pg_server import PostgresServer, find_bin
    if find_bin() is None and not os.environ.get("DURABLELAB_REQUIRE_PG"):
        pytest.skip("no PostgreSQL server installed here (initdb/pg_ctl not found)")
    server = PostgresServer()
    base = server.start()
    yield base
    server.stop()


@pytest.fixture(params=["sqlite", "postgres"])
def url(request, tmp_path):
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'dbos.sqlite'}"
    base = request.getfixturevalue("postgres")
    return f"{base}/t_{uuid.uuid4().hex[:12]}"


@pytest.fixture
def sqlite_url(tmp_path):
    return f"sqlite:///{tmp_path / 'dbos.sqlite'}"


@pytest.fixture
def runner_on(request):
    opened = []

    def open_runner(url, **kwargs):
        runner = DBOSRunner(url, **kwargs)
        opened.append(runner)
        return runner
    yield open_runner
    for runner in opened:
        runner.close()


# --- workflows --------------------------------------------------------------------------------

CALLS: dict[str, int] = {}
CHANGE = {"argument": 1}


def count(name: str):
    CALLS[name] = CALLS.get(name, 0) + 1


def flaky(x: int, idempotency_key=None) -> dict:
    count("flaky")
    if CALLS["flaky"] < 3:
        raise TimeoutError("the service took too long")
    return {"x": x, "key": idempotency_key}


def step(i: int) -> int:
    count(f"step{i}")
    return i * 10


def reject(x: int) -> None:
    count("reject")
    raise PermissionError("card declined by the issuer")


def retried(ctx, order):
    return ctx.activity("flaky", flaky, order["x"], policy=QUICK)


def three_steps(ctx, order):
    a = ctx.activity("one", step, CHANGE["argument"])
    b = ctx.activity("two", step, 2)
    c = ctx.activity("three", step, 3)
    return a + b + c


def approval(ctx, order):
    first = ctx.wait_signal("approve", timeout=5)
    second = ctx.wait_signal("approve", timeout=0.3)
    return {"first": first, "second": second}


def fanned(ctx, order):
    return ctx.gather(*[ctx.start_activity("one", step, i) for i in range(3)])


def hidden_fan(ctx, order):   # concurrency the code's names do not show: refused at the call
    start = getattr(ctx, "start_" + "activity")
    return start("one", step, 1).result()


def long_wait(ctx, order):
    return ctx.wait_signal("never", timeout=600)


def declined(ctx, order):
    return ctx.activity("reject", reject, 1, policy=QUICK)


@pytest.fixture(autouse=True)
def fresh_counts():
    CALLS.clear()
    CHANGE["argument"] = 1


# --- tests --------------------------------------------------------------------------------------

def test_each_attempt_is_recorded_and_each_backoff_is_durable(sqlite_url, runner_on):
    runner = runner_on(sqlite_url, workflows=[retried])
    run_id = runner.start(retried, {"x": 7}, run_id="r-1")
    assert runner.result(run_id, timeout=30) == {"x": 7, "key": "r-1:1"}
    run = runner.run(run_id)
    assert run.source == "dbos" and run.status == "completed"
    assert run.workflow == f"{__name__}:retried"
    assert run.attempts["attempt"].tolist() == [1, 2, 3]
    assert run.attempts["outcome"].tolist() == ["timeout", "timeout", "ok"]
    # the backoffs the workflow chose (jitter="none": exactly 0.01 s, then 0.02 s)
    assert run.attempts["delay"].tolist()[:2] == [0.01, 0.02]
    assert run.history[["kind", "name", "ok"]].values.tolist() == [["activity", "flaky", True]]
    assert CALLS["flaky"] == 3


def test_a_signal_clicked_twice_is_delivered_once_and_a_deadline_gives_none(url, runner_on):
    runner = runner_on(url, workflows=[approval])
    run_id = runner.start(approval, {}, run_id="a-1")
    runner.signal(run_id, "approve", {"approved": True}, signal_id="click-1")
    runner.signal(run_id, "approve", {"approved": True}, signal_id="click-1")
    assert runner.result(run_id, timeout=30) == {"first": {"approved": True}, "second": None}
    kinds = runner.run(run_id).history[["kind", "name"]].values.tolist()
    assert kinds == [["wait_signal", "approve"], ["signal_received", "approve"],
                     ["wait_signal", ""], ["signal_timeout", ""]]


def test_completed_steps_replay_without_running_again(sqlite_url, runner_on):
    runner = runner_on(sqlite_url, workflows=[three_steps])
    run_id = runner.start(three_steps, {}, run_id="s-1")
    assert runner.result(run_id, timeout=30) == 60
    forked = runner.fork(run_id, 3)   # steps 1 and 2 are replayed
    assert runner.result(forked, timeout=30) == 60
    assert CALLS == {"step1": 1, "step2": 1, "step3": 2}


def test_a_changed_argument_is_a_non_determinism_error_dbos_alone_would_miss(
        sqlite_url, runner_on):
    runner = runner_on(sqlite_url, workflows=[three_steps])
    run_id = runner.start(three_steps, {}, run_id="n-1")
    assert runner.result(run_id, timeout=30) == 60
    CHANGE["argument"] = 99                    # a deploy changed what step one is asked
    forked = runner.fork(run_id, 3)
    with pytest.raises(dl.NonDeterminismError) as caught:
        runner.result(forked, timeout=30)
    err = caught.value
    assert (err.position, err.reason) == (1, "different_arguments")
    assert err.recorded["name"] == err.requested["name"] == "one"
    assert err.recorded["digest"] != err.requested["digest"]
    assert "Non-determinism" in str(err)
    assert CALLS == {"step1": 1, "step2": 1, "step3": 1}   # nothing ran on the new path


def test_a_failure_for_good_comes_back_as_activity_failed(sqlite_url, runner_on):
    runner = runner_on(sqlite_url, workflows=[declined])
    run_id = runner.start(declined, {}, run_id="d-1")
    with pytest.raises(dl.ActivityFailed) as caught:
        runner.result(run_id, timeout=30)
    assert (caught.value.activity, caught.value.position, caught.value.attempts) == \
        ("reject", 1, 1)
    assert caught.value.error_class == "NonRetryable"
    assert CALLS == {"reject": 1}
    run = runner.run(run_id)
    assert run.status == "failed" and isinstance(run.error, dl.ActivityFailed)


def test_only_registered_workflows_run(sqlite_url, runner_on, tmp_path):
    from durablelab.backends.dbos import _dbos_run
    from dbos import SetWorkflowID
    runner = runner_on(sqlite_url, workflows=[retried])
    target = tmp_path / "made-by-a-stranger"
    with SetWorkflowID("evil"):        # a row naming a callable this process did not register
        DBOS.start_workflow(_dbos_run, "os:makedirs", str(target))
    with pytest.raises(dl.DurableLabError) as caught:
        runner.result("evil", timeout=30)
    assert "did not register" in str(caught.value)
    assert not target.exists()


def test_bad_calls_are_refused_clearly(sqlite_url, runner_on):
    with pytest.raises(ValueError, match="sqlite:///"):
        DBOSRunner("mysql://nope")
    runner = runner_on(sqlite_url, workflows=[retried])
    with pytest.raises(RunnerOpenError, match="already open"):
        DBOSRunner(sqlite_url)
    runner.start(retried, {"x": 1}, run_id="dup")
    with pytest.raises(dl.DuplicateRunError, match="'dup' already exists"):
        runner.start(retried, {"x": 1}, run_id="dup")
    with pytest.raises(dl.RunNotFoundError):
        runner.signal("nobody", "approve", True)
    with pytest.raises(TypeError, match="signal_id"):
        runner.signal("dup", "approve", True, signal_id=5)
    with pytest.raises(dl.SerializationError):
        runner.start(retried, {"x": object()}, run_id="bad-input")
    runner.result("dup", timeout=30)
    with pytest.raises(dl.RunFinishedError, match="has ended"):
        runner.signal("dup", "approve", True)


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_kill9_mid_run_then_another_process_finishes_each_effect_once(backend, request,
                                                                     tmp_path):
    if backend == "sqlite":
        url = f"sqlite:///{tmp_path / 'dbos.sqlite'}"
    else:
        url = f"{request.getfixturevalue('postgres')}/k_{uuid.uuid4().hex[:12]}"
    ledger_path = str(tmp_path / "ledger.sqlite")
    worker = [sys.executable, str(HERE / "dbos_worker.py"), url, ledger_path, "k-1"]
    env = {**os.environ, "PYTHONPATH": str(HERE.parent)}
    first = subprocess.Popen([*worker, "start"], env=env, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE)
    effects = 0
    give_up = time.monotonic() + 60
    while effects < 5 and time.monotonic() < give_up and first.poll() is None:
        time.sleep(0.05)
        if Path(ledger_path).exists():
            with sqlite3.connect(ledger_path, timeout=30) as con:
                try:
                    effects = con.execute("SELECT count(*) FROM effects").fetchone()[0]
                except sqlite3.OperationalError:
                    effects = 0
    assert first.poll() is None, first.communicate()
    first.send_signal(signal.SIGKILL)
    first.wait()
    with sqlite3.connect(ledger_path) as con:
        before = con.execute("SELECT count(*) FROM effects").fetchone()[0]
    assert 5 <= before < 20      # killed mid-run

    second = subprocess.run([*worker, "recover"], env=env, capture_output=True, text=True,
                            timeout=180)
    assert second.returncode == 0, second.stderr
    assert json.loads(second.stdout.strip().splitlines()[-1]) == {"order": "o-1",
                                                                  "charged": 20}
    with sqlite3.connect(ledger_path) as con:
        keys = [k for (k,) in con.execute("SELECT key FROM effects ORDER BY step")]
        calls = con.execute("SELECT count(*) FROM calls").fetchone()[0]
    assert keys == [f"k-1:{i}" for i in range(1, 21)]     # each effect exactly once
    assert 20 <= calls <= 21      # at most the one attempt in flight at the kill ran twice


# --- reading DBOS's own tables ---------------------------------------------------------------

@DBOS.step()
def plain_reserve(sku: str) -> dict:
    return {"sku": sku, "reserved": True}


@DBOS.workflow()
def plain_checkout(sku: str) -> dict:
    reservation = plain_reserve(sku)
    DBOS.sleep(0.01)
    return {"done": reservation["reserved"]}


def _plain_dbos(url: str, serializer) -> None:
    config = {"name": "plain", "system_database_url": url, "application_version": "1",
              "log_level": "WARNING"}
    if serializer is not None:
        config["serializer"] = serializer
    DBOS(config=config)
    DBOS.launch()
    try:
        from dbos import SetWorkflowID
        with SetWorkflowID("plain-1"):
            assert DBOS.start_workflow(plain_checkout, "sku-9").get_result() == {"done": True}
    finally:
        DBOS.destroy(destroy_registry=False)


def test_from_dbos_reads_runs_of_plain_dbos_code(sqlite_url):
    from dbos._serialization import DBOSPortableJSON
    _plain_dbos(sqlite_url, DBOSPortableJSON)
    run = dl.from_dbos(sqlite_url, "plain-1")
    assert run.status == "completed" and run.result == {"done": True}
    assert run.input == ["sku-9"]
    assert run.history[["kind", "name"]].values.tolist() == [
        ["activity", "plain_reserve"], ["sleep", "sleep"], ["timer_fired", "sleep"]]
    assert any("does not record failed attempts" in note for note in run.notes)
    assert dl.compare([run])["status"].tolist() == ["completed"]
    assert run.timeline() is not None


def test_from_dbos_refuses_pickled_rows(sqlite_url):
    _plain_dbos(sqlite_url, None)        # DBOS's default serializer pickles
    with pytest.raises(DBOSReadError, match="pickle"):
        dl.from_dbos(sqlite_url, "plain-1")


def test_from_dbos_names_a_missing_workflow_and_a_database_that_is_not_dbos(sqlite_url,
                                                                          tmp_path):
    _plain_dbos(sqlite_url, None)
    with pytest.raises(DBOSReadError, match="no such workflow"):
        dl.from_dbos(sqlite_url, "nobody")
    other = tmp_path / "other.sqlite"
    sqlite3.connect(other).execute("CREATE TABLE t (x)")
    with pytest.raises(DBOSReadError, match="cannot read DBOS's tables"):
        dl.from_dbos(f"sqlite:///{other}", "plain-1")


def summarise(items: list, idempotency_key=None) -> dict:
    """Heartbeat code written for dl.Engine: resume where the last attempt got to."""
    done = dl.last_heartbeat() or 0
    count("summarise")
    for i in range(done, len(items)):
        dl.heartbeat(i + 1)
        if CALLS["summarise"] == 1 and i == 1:
            raise TimeoutError("lost halfway")
    return {"started_at": done, "items": len(items)}


def heartbeating(ctx, order):
    return ctx.activity("summarise", summarise, order["items"], policy=QUICK, heartbeat=5)


def test_heartbeat_code_runs_unchanged_and_says_dbos_keeps_nothing(sqlite_url, runner_on):
    """DBOS has no heartbeats: an activity's dl.heartbeat() is not an error there (it was
    "called outside an activity", and retried as if transient), nothing is kept, so the
    retried attempt starts over, and a warning says so once."""
    runner = runner_on(sqlite_url, workflows=[heartbeating])
    with pytest.warns(dl.HeartbeatIgnoredWarning, match="'summarise'.*no activity heartbeats"):
        run_id = runner.start(heartbeating, {"items": [1, 2, 3]}, run_id="hb-1")
        assert runner.result(run_id, timeout=30) == {"started_at": 0, "items": 3}
    assert runner.run(run_id).attempts["outcome"].tolist() == ["timeout", "ok"]
    with pytest.raises(dl.HeartbeatError, match="outside an activity"):
        dl.heartbeat(1)


def bad_beat(x: int) -> int:
    count("bad_beat")
    dl.heartbeat({"when": object()})
    return x


def beats_badly(ctx, order):
    return ctx.activity("bad_beat", bad_beat, 1, policy=QUICK)


def test_heartbeat_details_that_are_not_json_fail_for_good_as_on_the_engine(sqlite_url,
                                                                           runner_on):
    """The details are checked as dl.Engine checks them, and the SerializationError is an
    error the workflow classifies (NonRetryable: one attempt), not one it retries until the
    run crashes on it."""
    runner = runner_on(sqlite_url, workflows=[beats_badly])
    run_id = runner.start(beats_badly, {}, run_id="hb-2")
    with pytest.raises(dl.ActivityFailed, match="SerializationError.*not JSON"):
        runner.result(run_id, timeout=30)
    assert CALLS["bad_beat"] == 1
    run = runner.run(run_id)
    assert run.status == "failed" and run.attempts["outcome"].tolist() == ["non_retryable"]


def test_concurrent_work_is_refused_at_start_naming_the_calls_and_a_run_can_be_cancelled(
        sqlite_url, runner_on):
    runner = runner_on(sqlite_url, workflows=[fanned, hidden_fan, long_wait])
    with pytest.raises(dl.DurableLabError, match=r"ctx.gather, ctx.start_activity.*one at a "
                                                 r"time.*dl.Engine"):
        runner.start(fanned, {}, run_id="fan")
    run_id = runner.start(hidden_fan, {}, run_id="hidden")
    with pytest.raises(dl.DurableLabError, match="ctx.start_activity in run 'hidden'"):
        runner.result(run_id, timeout=30)
    run_id = runner.start(long_wait, {}, run_id="waits")
    runner.cancel(run_id)
    with pytest.raises(Exception):
        runner.result(run_id, timeout=30)
    assert runner.run(run_id).status in ("cancelled", "failed")
    with pytest.raises(dl.RunFinishedError, match="already cancelled"):
        runner.cancel(run_id)


# --- fault plans on DBOS -------------------------------------------------------------------------

def test_a_fault_plan_fails_the_attempts_the_engine_fails_with_the_same_seed(sqlite_url,
                                                                             runner_on):
    from durablelab.faults import Fail, Malformed, RateLimit, ServerError
    plan = dl.FaultPlan([RateLimit("one", attempts=[1]), ServerError("two", p=0.5),
                         Fail("three", status=500, times=1), Malformed("three", attempts=[2])])
    runner = runner_on(sqlite_url, workflows=[three_steps])
    engine = dl.Engine()
    for seed in range(4):
        run_id = runner.start(three_steps, {}, run_id=f"s-{seed}", faults=plan, seed=seed)
        try:
            assert runner.result(run_id, timeout=30) == 60
        except dl.ActivityFailed:    # three 503s in a row: the same on both engines
            pass
        on_dbos = runner.run(run_id)
        assert on_dbos.seed == seed
        engine.start(three_steps, {}, run_id=f"s-{seed}", faults=plan, seed=seed)
        engine.run_until_idle()
        on_engine = engine.run(f"s-{seed}")
        assert on_dbos.status == on_engine.status, seed
        columns = ["position", "activity", "attempt", "outcome", "error_class"]
        assert (on_dbos.attempts[columns].values.tolist()
                == on_engine.attempts[columns].values.tolist()), seed
    # the draws differ by seed (rule 1 fires with p=0.5 on some seeds, not on others)
    outcomes = {tuple(runner.run(f"s-{seed}").attempts.outcome) for seed in range(4)}
    assert len(outcomes) > 1


@pytest.mark.parametrize("rule, words", [
    (lambda: dl.faults.Latency("one", 2.0), r"rule 1, Latency\('one'\).*virtual time"),
    (lambda: dl.faults.Timeout("one"), r"rule 1, Timeout\('one'\)"),
    (lambda: dl.faults.Hang("two"), r"rule 1, Hang\('two'\).*wall clock"),
    (lambda: dl.faults.RateLimit("one", between=(0, 5)), r"between=\(0.0, 5.0\)"),
])
def test_rules_that_need_virtual_time_are_refused_and_record_nothing(sqlite_url, runner_on,
                                                                     rule, words):
    runner = runner_on(sqlite_url, workflows=[three_steps])
    plan = [dl.faults.RateLimit("two", attempts=[1]), rule()]
    with pytest.raises(dl.errors.BadValue, match=words):
        runner.start(three_steps, {}, run_id="refused", faults=plan)
    assert CALLS == {}                                   # nothing ran...
    run_id = runner.start(three_steps, {}, run_id="refused", faults=plan[:1])
    assert runner.result(run_id, timeout=30) == 60       # ...and the id is still free


def test_a_crash_rule_ends_the_process_like_kill9_and_recovery_passes_each_point(tmp_path):
    url = f"sqlite:///{tmp_path / 'dbos.sqlite'}"
    ledger_path = str(tmp_path / "ledger.sqlite")
    Crash, RateLimit = dl.faults.Crash, dl.faults.RateLimit
    plan = dl.FaultPlan([Crash("charge", point="before_activity", position=[3]),
                         Crash("charge", point="after_effect", position=[6]),
                         Crash("charge", point="after_record", position=[9]),
                         RateLimit("charge", position=[12], attempts=[1]),
                         Crash("charge", point="during_wait", position=[12])])
    worker = [sys.executable, str(HERE / "dbos_worker.py"), url, ledger_path, "c-1"]
    env = {**os.environ, "PYTHONPATH": str(HERE.parent)}
    codes = [subprocess.run([*worker, "start", plan.to_json(), "7"], env=env,
                            capture_output=True, text=True, timeout=120)]
    while codes[-1].returncode == 137 and len(codes) < 8:
        codes.append(subprocess.run([*worker, "recover"], env=env, capture_output=True,
                                    text=True, timeout=120))
    assert [c.returncode for c in codes] == [137, 137, 137, 137, 0], codes[-1].stderr
    assert json.loads(codes[-1].stdout.strip().splitlines()[-1]) == {"order": "o-1",
                                                                     "charged": 20}
    with sqlite3.connect(ledger_path) as con:
        keys = [k for (k,) in con.execute("SELECT key FROM effects ORDER BY step")]
        calls = [k for (k,) in con.execute("SELECT key FROM calls")]
    assert keys == [f"c-1:{i}" for i in range(1, 21)]        # each effect exactly once
    assert len(calls) == 21 and calls.count("c-1:6") == 2     # only after_effect repeats
    run = dl.from_dbos(url, "c-1")
    assert run.status == "completed" and run.seed == 7
    assert run.crashes[["position", "point"]].values.tolist() == [
        [3, "before_activity"], [6, "after_effect"], [9, "after_record"], [12, "during_wait"]]
    assert run.attempts[run.attempts.position == 12].outcome.tolist() == ["rate_limited", "ok"]
    assert (run.attempts.outcome == "crashed").sum() == 1


# --- a stranger's system database --------------------------------------------------------


def crafted_system_db(path, status=("w", "flow", "SUCCESS", 1000, 2000, None),
                      inputs='{"positionalArgs": [1]}', steps=()):
    """The tables and columns from_dbos reads, by hand, holding what a crafted file may."""
    con = sqlite3.connect(path)
    con.executescript(
        "CREATE TABLE workflow_status (workflow_uuid, name, status, created_at, updated_at, "
        "serialization); CREATE TABLE workflow_input (workflow_uuid, inputs); "
        "CREATE TABLE workflow_output (workflow_uuid, output, error); "
        "CREATE TABLE operation_outputs (workflow_uuid, function_id, function_name, output, "
        "error, started_at_epoch_ms, completed_at_epoch_ms, serialization); "
        "CREATE TABLE notifications (destination_uuid, topic, consumed_by_function_id);")
    con.execute("INSERT INTO workflow_status VALUES (?, ?, ?, ?, ?, ?)", status)
    con.execute("INSERT INTO workflow_input VALUES ('w', ?)", (inputs,))
    for step in steps:
        con.execute("INSERT INTO operation_outputs VALUES ('w', ?, ?, ?, ?, ?, ?, ?)", step)
    con.commit()
    con.close()
    return f"sqlite:///{path}"


PAY = (1, "pay", '{"a": 1}', None, 1000, 1500, None)


@pytest.mark.parametrize("change, words", [
    ({"status": ("w", "flow", "SUCCESS", "yesterday", 2000, None)}, "status, input or first"),
    ({"inputs": "[1, 2]"}, "status, input or first"),
    ({"inputs": "[" * 100_000 + "]" * 100_000}, "the workflow input is not JSON"),
    ({"steps": [(1, "durablelab.attempt", '{"ok": true}', None, 1000, 1500, None)]},
     "step 1 of operation_outputs"),
    ({"steps": [(1, 5, '{"a": 1}', None, 1000, 1500, None)]}, "step 1 of operation_outputs"),
    ({"steps": [(1, "pay", 5, None, 1000, 1500, None)]}, r"step 1 \(pay\) is not JSON"),
    ({"steps": [(1, "pay", None, "[1]", 1000, 1500, None)]}, "step 1 of operation_outputs"),
])
def test_a_crafted_system_database_is_refused_naming_the_row(tmp_path, change, words):
    """Each raised TypeError, KeyError, AttributeError or RecursionError before."""
    url = crafted_system_db(tmp_path / "dbos.sqlite", **change)
    with pytest.raises(DBOSReadError, match=words) as info:
        dl.from_dbos(url, "w")
    assert info.value.what == "row"


def test_the_crafted_database_reads_when_nothing_is_bent(tmp_path):
    run = dl.from_dbos(crafted_system_db(tmp_path / "dbos.sqlite", steps=[PAY]), "w")
    assert (run.status, run.history.name.tolist()) == ("completed", ["pay"])
