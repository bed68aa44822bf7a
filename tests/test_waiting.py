"""A waiting run is stored 'waiting' with what it waits on, `runs(status=)` filters,
`run_until_blocked()` stops before a signal's deadline, and a notebook cell that redefines a
workflow reaches the runs in flight (DESIGN.md sections 2 and 6)."""

import json
import subprocess
import sys
import warnings

import pytest

import durablelab as dl
from durablelab.errors import WorkflowRedefinedWarning

DAY = 86400.0


def approval(ctx, req):
    """The DESIGN sample's shape: one step, then a wait for approval with a 3-day deadline."""
    ctx.activity("fetch", lambda: req["vendor_id"])
    decision = ctx.wait_signal("approval", deadline=ctx.now() + 3 * DAY)
    return {"approved": bool(decision and decision["approved"])}


def napper(ctx, _):
    ctx.sleep(600)
    return "rested"


def flaky(ctx, _):
    return ctx.activity("flaky", _always_503,
                        policy=dl.RetryPolicy(max_attempts=3, initial=30, backoff=1,
                                                jitter="none"))


def _always_503():
    raise dl.faults.HttpError(503, "busy")


def _three_kinds(path, durability="sync"):
    """A store holding a run on each kind of wait: signal, timer, retry backoff."""
    engine = dl.Engine(path, durability=durability)
    engine.start(approval, {"vendor_id": "v-1"}, run_id="signal")
    engine.start(napper, run_id="timer")
    engine.start(flaky, run_id="retry")
    engine.advance(1)
    return engine


@pytest.mark.parametrize("durability", ["sync", "batch", "exit"])
def test_every_reader_sees_waiting_and_on_what(db_path, durability):
    engine = _three_kinds(db_path, durability)
    live = engine.runs().set_index("run_id")
    engine.close()
    with dl.Engine(db_path, read_only=True) as reader:
        stored = reader.runs().set_index("run_id")
        assert reader.run("signal").waiting_on == "signal:approval"
        assert reader.run("timer").waiting == {"on": "timer", "name": "sleep", "position": 1,
                                               "since": 0.0, "until": 600.0}
    for frame in (live, stored):
        assert set(frame["status"]) == {"waiting"}
        assert frame.loc["signal", "waiting_on"] == "signal:approval"
        assert frame.loc["signal", "waiting_until"] == pytest.approx(3 * DAY)
        assert frame.loc["timer", "waiting_on"] == "timer"
        assert frame.loc["retry", "waiting_on"] == "retry:flaky"
        assert frame.loc["retry", "waiting_until"] == pytest.approx(30.0)


def test_a_run_that_goes_on_is_running_again_in_the_store(db_path):
    engine = _three_kinds(db_path)
    engine.signal("signal", "approval", {"approved": True})
    engine.advance(700)
    engine.close()
    with dl.Engine(db_path, read_only=True) as reader:
        statuses = dict(zip(reader.runs()["run_id"], reader.runs()["status"]))
        assert statuses == {"signal": "completed", "timer": "completed", "retry": "failed"}
        assert reader.runs()["waiting_on"].isna().all()


def test_a_store_an_older_engine_wrote_reads_waiting_after_wake(db_path):
    """Schema 4 stored every parked run 'running'; opened and woken, it is stored again."""
    engine = _three_kinds(db_path)
    engine.close()
    import duckdb
    con = duckdb.connect(db_path)
    con.execute("UPDATE runs SET status = 'running', waiting = NULL")
    con.close()
    with dl.Engine(db_path, workflows=[approval, napper, flaky]) as again:
        again.advance(0)
        assert set(again.runs()["status"]) == {"waiting"}


def test_cli_runs_and_show_say_waiting_on_what(db_path):
    _three_kinds(db_path).close()
    listing = subprocess.run([sys.executable, "-m", "durablelab", "runs", db_path],
                             capture_output=True, text=True, check=True).stdout
    assert "waiting_on" in listing and "signal:approval" in listing
    assert "retry:flaky" in listing and "running" not in listing
    shown = subprocess.run([sys.executable, "-m", "durablelab", "show", "--db", db_path, "timer"],
                           capture_output=True, text=True, check=True).stdout
    assert "waiting" in shown and "on timer" in shown


def test_an_export_keeps_what_a_run_waits_on(engine, tmp_path):
    engine.start(approval, {"vendor_id": "v-1"}, run_id="signal")
    engine.start(napper, run_id="done")
    engine.run_until_blocked()
    engine.advance(700)
    path = tmp_path / "runs.jsonl"
    dl.export(engine, path)
    loaded = {run.run_id: run for run in dl.load(path)}
    assert loaded["signal"].waiting == engine.run("signal").waiting
    assert loaded["signal"].waiting_on == "signal:approval"
    assert loaded["done"].waiting is None
    assert '"waiting"' not in [line for line in path.read_text().splitlines()
                               if '"run_id":"done"' in line][0]


def test_diagnose_from_a_store_names_the_wait(db_path):
    _three_kinds(db_path).close()
    with dl.Engine(db_path, read_only=True) as reader:
        assert dl.diagnose(reader.run("signal")).state == "waiting_signal"
        assert dl.diagnose(reader.run("timer")).state == "waiting_timer"
        assert dl.diagnose(reader.run("retry")).state == "backoff"


def test_runs_filters_by_status(engine):
    engine.start(approval, {"vendor_id": "v-1"}, run_id="signal")
    engine.start(napper, run_id="timer")
    engine.advance(601)
    assert list(engine.runs(status="waiting")["run_id"]) == ["signal"]
    assert list(engine.runs(status="completed")["run_id"]) == ["timer"]
    assert sorted(engine.runs(status=["waiting", "completed"])["run_id"]) == ["signal", "timer"]
    assert engine.runs(status="failed").empty
    assert list(engine.runs(status="failed").columns) == list(engine.runs().columns)


@pytest.mark.parametrize("bad", ["wating", 3, ["waiting", None], ""])
def test_runs_refuses_a_status_that_is_none(engine, bad):
    with pytest.raises(ValueError, match="runs\\(status=...\\).*use one of 'running'"):
        engine.runs(status=bad)


def test_design_sample_approves_in_time_with_run_until_blocked(engine):
    run_id = engine.start(approval, {"vendor_id": "v-42"}, seed=7)
    engine.run_until_blocked()
    assert engine.clock.now() < 3 * DAY
    assert engine.run(run_id).status == "waiting"
    engine.signal(run_id, "approval", {"approved": True}, signal_id="click-1")
    engine.run_until_idle()
    assert engine.run(run_id).result == {"approved": True}


def test_run_until_blocked_still_runs_timers_and_backoffs_before_the_deadline(engine):
    engine.start(approval, {"vendor_id": "v-42"}, run_id="wait")
    engine.start(napper, run_id="nap")
    engine.start(flaky, run_id="flaky")
    engine.run_until_blocked()
    assert engine.run("nap").status == "completed"
    assert engine.run("flaky").status == "failed"
    assert engine.run("wait").status == "waiting"
    assert engine.clock.now() == pytest.approx(600.0)


def test_run_until_blocked_on_a_read_only_engine_is_refused(db_path):
    _three_kinds(db_path).close()
    with dl.Engine(db_path, read_only=True) as reader:
        with pytest.raises(dl.DurableLabError, match="run_until_blocked"):
            reader.run_until_blocked()


def test_a_signal_after_run_until_idle_passed_the_deadline_names_run_until_blocked(engine):
    run_id = engine.start(approval, {"vendor_id": "v-42"})
    engine.run_until_idle()
    assert engine.run(run_id).result == {"approved": False}
    with pytest.raises(dl.DurableLabError) as caught:
        engine.signal(run_id, "approval", {"approved": True})
    assert "timed out at t=259200s" in str(caught.value)
    assert "run_until_blocked()" in str(caught.value)


# --- a notebook cell that redefines a workflow ----------------------------------------------

CELL_V1 = '''
import durablelab as dl
def greet(ctx, name):
    ctx.sleep(60)
    return ctx.activity("hello", lambda: f"hello {name}")
'''
CELL_V2 = '''
def greet(ctx, name):
    ctx.sleep(60)
    return ctx.activity("hello", lambda: f"HELLO {name}")
'''


def test_redefining_a_cell_switches_the_run_in_flight_with_a_warning(engine):
    """As in a notebook: the module's name is rebound to a new function, never registered."""
    import types
    cells = types.ModuleType("notebook_cells")
    sys.modules["notebook_cells"] = cells
    try:
        exec(CELL_V1, cells.__dict__)
        run_id = engine.start(cells.greet, "ada")
        engine.advance(1)
        exec(CELL_V2, cells.__dict__)
        with pytest.warns(WorkflowRedefinedWarning, match=run_id):
            engine.run_until_idle()
        assert engine.run(run_id).result == "HELLO ada"
        with warnings.catch_warnings():
            warnings.simplefilter("error")      # once switched, no second warning
            engine.start(cells.greet, "bob", run_id="bob")
            engine.run_until_idle()
        assert engine.run("bob").result == "HELLO bob"
    finally:
        del sys.modules["notebook_cells"]


def test_waiting_column_is_json_the_store_can_read(db_path):
    _three_kinds(db_path).close()
    import duckdb
    con = duckdb.connect(db_path, read_only=True)
    rows = dict(con.execute("SELECT run_id, waiting FROM runs").fetchall())
    con.close()
    assert json.loads(rows["signal"])["on"] == "signal"
    assert json.loads(rows["retry"])["name"] == "flaky"


def test_a_finished_runs_time_out_does_not_move_the_clock(engine):
    """A run that completed well within `timeout=` leaves no trace on the clock: before,
    run_until_idle() jumped to the dead time-out (t=3600) on its way out."""
    engine.start(napper, run_id="quick", timeout=3600)
    engine.run_until_idle()
    assert engine.run("quick").status == "completed"
    assert engine.clock.now() == 600.0
