"""The catalogue of non-determinism, entry by entry: each way workflow code can stop
replaying is either stopped at the call by the determinism guard, or ends in a
NonDeterminismError whose recorded and requested lines show the values themselves (not
only their digests). Code changes are simulated by flipping a flag, as a deploy would."""

import json
import os
import pathlib
import random
import time
import uuid

import duckdb
import pandas as pd
import pytest

import durablelab as dl
from durablelab.examples.hash_order import run_under_seeds, runs_under_seeds
from durablelab.history import ARGS_CAP

CHANGE = {}


@pytest.fixture(autouse=True)
def old_code():
    CHANGE.clear()


def echo(*args, **kwargs):
    return {"args": list(args), "kwargs": kwargs}


def sides(err: dl.NonDeterminismError) -> tuple[str, str]:
    """The message's recorded and requested lines."""
    lines = str(err).splitlines()
    return (next(line for line in lines if line.strip().startswith("recorded:")),
            next(line for line in lines if line.strip().startswith("requested:")))


def diverge(workflow, change: dict, guard: bool = True, input=None,
            seconds: float = 1) -> dl.NonDeterminismError:
    """Run `workflow` for `seconds` until it waits, deploy `change` (a fresh worker
    replays), return the error the replay stopped with."""
    engine = dl.Engine(guard=guard)
    try:
        engine.start(workflow, input, run_id="r-1")
        engine.advance(seconds)
        assert engine.run("r-1").status == "waiting"
        before = engine.store.fetch("SELECT * FROM events ORDER BY position")
        CHANGE.update(change)
        engine.crash()
        engine.run_until_idle()
        run = engine.run("r-1")
        assert run.status == "diverged", run.error
        assert engine.store.fetch("SELECT * FROM events ORDER BY position") == before
        return run.error
    finally:
        engine.close()


# --- values that differ between executions: the guard stops them at the call ----------------

def stamp(value):
    return value


def clock_flow(ctx, _):
    ctx.activity("stamp", stamp, time.time())
    ctx.wait_signal("go")


def random_flow(ctx, _):
    ctx.activity("stamp", stamp, random.random())
    ctx.wait_signal("go")


def uuid_flow(ctx, _):
    ctx.activity("stamp", stamp, str(uuid.uuid4()))
    ctx.wait_signal("go")


@pytest.mark.parametrize("workflow, call, replacement", [
    (clock_flow, "time.time()", "ctx.now()"),
    (random_flow, "random.random()", "ctx.random()"),
    (uuid_flow, "uuid.uuid4()", "ctx.uuid()"),
])
def test_clock_random_and_uuid4_are_guarded_at_the_call(workflow, call, replacement):
    engine = dl.Engine()
    engine.start(workflow, None, run_id="r-1")
    engine.run_until_idle()
    run = engine.run("r-1")
    engine.close()
    assert run.status == "failed" and isinstance(run.error, dl.DeterminismGuardError)
    assert run.error.call == call and replacement in str(run.error)
    assert run.error.location == f"{__file__}:{workflow.__code__.co_firstlineno + 1}"


@pytest.mark.parametrize("workflow", [clock_flow, random_flow, uuid_flow])
def test_without_the_guard_they_diverge_showing_both_values(workflow):
    err = diverge(workflow, {}, guard=False)
    assert err.reason == "different_arguments" and err.position == 1
    recorded, requested = json.loads(err.recorded_args), json.loads(err.requested_args)
    assert recorded != requested
    shown = sides(err)
    assert json.dumps(recorded[0][0]) in shown[0] and json.dumps(requested[0][0]) in shown[1]


# --- the environment and files ---------------------------------------------------------------

def env_flow(ctx, _):
    ctx.activity("deploy", stamp, os.environ.get("DL_REGION", "?"))
    ctx.wait_signal("go")


def test_an_environment_variable_is_guarded(monkeypatch):
    monkeypatch.setenv("DL_REGION", "eu")
    engine = dl.Engine()
    engine.start(env_flow, None, run_id="r-1")
    engine.run_until_idle()
    err = engine.run("r-1").error
    engine.close()
    assert err.call == "os.environ.get()" and "the workflow's input" in err.replacement


def test_an_environment_variable_unguarded_diverges_showing_both_values(monkeypatch):
    monkeypatch.setenv("DL_REGION", "eu")
    engine = dl.Engine(guard=False)
    engine.start(env_flow, None, run_id="r-1")
    engine.advance(1)
    monkeypatch.setenv("DL_REGION", "us")        # another machine, another environment
    engine.crash()
    engine.run_until_idle()
    err = engine.run("r-1").error
    engine.close()
    assert err.reason == "different_arguments"
    assert (err.recorded_args, err.requested_args) == ('[["eu"],{}]', '[["us"],{}]')
    recorded, requested = sides(err)
    assert '"eu"' in recorded and '"us"' in requested


def config_flow(ctx, path):
    with open(path) as f:
        config = json.load(f)
    ctx.activity("charge", stamp, config["currency"])
    ctx.wait_signal("go")


def config_via_pathlib(ctx, path):
    config = json.loads(pathlib.Path(path).read_text())   # pathlib opens it: a library
    ctx.activity("charge", stamp, config["currency"])
    ctx.wait_signal("go")


def test_a_config_file_read_is_guarded(tmp_path):
    config = tmp_path / "config.json"
    config.write_text('{"currency": "EUR"}')
    engine = dl.Engine()
    engine.start(config_flow, str(config), run_id="r-1")
    engine.run_until_idle()
    err = engine.run("r-1").error
    engine.close()
    assert err.call == "open()" and "an activity" in err.replacement


def test_a_config_file_read_through_a_library_diverges_when_the_file_changes(tmp_path):
    config = tmp_path / "config.json"
    config.write_text('{"currency": "EUR"}')
    engine = dl.Engine()
    engine.start(config_via_pathlib, str(config), run_id="r-1")
    engine.advance(1)
    config.write_text('{"currency": "NOK"}')      # edited while the run waited
    engine.crash()
    engine.run_until_idle()
    err = engine.run("r-1").error
    engine.close()
    assert err.reason == "different_arguments"
    recorded, requested = sides(err)
    assert '"EUR"' in recorded and '"NOK"' in requested


# --- hash order: the same code under two PYTHONHASHSEEDs --------------------------------------

@pytest.mark.parametrize("workflow, name", [("set_flow", "notify"),
                                            ("dict_flow", "open_region")])
def test_hash_order_diverges_under_another_pythonhashseed(tmp_path, workflow, name):
    recorded, replayed = run_under_seeds(workflow, (1, 4), tmp_path / "runs.duckdb")
    assert (recorded["hash_seed"], replayed["hash_seed"]) == ("1", "4")
    assert recorded["status"] == "waiting"
    assert replayed["status"] == "diverged"
    fields = replayed["error"]["fields"]
    assert replayed["error"]["class"] == "NonDeterminismError"
    assert fields["reason"] == "different_arguments" and fields["position"] == 1
    assert fields["recorded"]["name"] == fields["requested"]["name"] == name
    first, second = (json.loads(fields[k])[0][0] for k in ("recorded_args", "requested_args"))
    assert first == recorded["steps"][0] and first != second
    lines = replayed["message"].splitlines()
    assert f'"{first}"' in next(line for line in lines if "recorded:" in line)
    assert f'"{second}"' in next(line for line in lines if "requested:" in line)


@pytest.mark.parametrize("workflow, seeds", [("set_flow", (4, 4)), ("sorted_flow", (1, 4))])
def test_the_same_hash_seed_or_a_sorted_order_replays(tmp_path, workflow, seeds):
    recorded, replayed = run_under_seeds(workflow, seeds, tmp_path / "runs.duckdb")
    assert (recorded["status"], replayed["status"]) == ("waiting", "waiting")
    assert recorded["steps"] == replayed["steps"]


def test_several_workflows_share_the_two_processes_and_keep_their_own_fate(tmp_path):
    seen = runs_under_seeds(["set_flow", "sorted_flow"], (1, 4), tmp_path / "runs.duckdb")
    assert list(seen) == ["set_flow", "sorted_flow"]
    assert [side["status"] for side in seen["set_flow"]] == ["waiting", "diverged"]
    assert [side["status"] for side in seen["sorted_flow"]] == ["waiting", "waiting"]
    assert seen["sorted_flow"][0]["steps"] == sorted(seen["set_flow"][0]["steps"])


def test_an_unknown_hash_order_workflow_names_the_ones_there_are(tmp_path):
    with pytest.raises(ValueError, match="use names among dict_flow, set_flow, sorted_flow"):
        runs_under_seeds(["set_flow", "list_flow"], (1, 4), tmp_path / "runs.duckdb")


# --- code changes ----------------------------------------------------------------------------

def deployed(ctx, order):
    steps = ["fetch", "screen", "notify"]
    if CHANGE.get("insert"):
        steps.insert(1, "audit")
    if CHANGE.get("remove"):
        steps.remove("screen")
    if CHANGE.get("reorder"):
        steps[0], steps[1] = steps[1], steps[0]
    if CHANGE.get("rename"):
        steps[0] = "fetch_documents"
    for step in steps:
        ctx.activity(step, echo, order["vendor"], tier=CHANGE.get("tier", "gold"))
    threshold = CHANGE.get("threshold", 100)
    if order["amount"] > threshold:
        ctx.activity("manual_review", echo, order["amount"])
    else:
        ctx.activity("auto_approve", echo, order["amount"])
    ctx.sleep(CHANGE.get("sleep", 3600))
    ctx.wait_signal(CHANGE.get("signal", "approval"))
    return "done"


ORDER = {"vendor": "v-42", "amount": 80}


@pytest.mark.parametrize("change, position, recorded, requested", [
    ({"insert": True}, 2, ("activity", "screen"), ("activity", "audit")),
    ({"remove": True}, 2, ("activity", "screen"), ("activity", "notify")),
    ({"reorder": True}, 1, ("activity", "fetch"), ("activity", "screen")),
    ({"rename": True}, 1, ("activity", "fetch"), ("activity", "fetch_documents")),
    ({"threshold": 50}, 4, ("activity", "auto_approve"), ("activity", "manual_review")),
    ({"signal": "approve"}, 7, ("wait_signal", "approval"), ("wait_signal", "approve")),
])
def test_a_changed_step_names_both_steps_and_their_arguments(change, position, recorded,
                                                             requested):
    err = diverge(deployed, change, input=ORDER, seconds=7200)  # past the sleep: at the wait
    assert err.reason == "different_call" and err.position == position
    assert (err.recorded["kind"], err.recorded["name"]) == recorded
    assert (err.requested["kind"], err.requested["name"]) == requested
    assert err.recorded_args is not None and err.requested_args is not None
    rec_line, req_line = sides(err)
    assert recorded[1] in rec_line and requested[1] in req_line
    if recorded[0] == "activity":
        assert '"v-42", tier="gold"' in rec_line or "80" in rec_line


def test_changed_arguments_show_the_values_not_only_digests():
    err = diverge(deployed, {"tier": "silver"}, input=ORDER)
    assert err.reason == "different_arguments" and err.position == 1
    assert err.recorded_args == '[["v-42"],{"tier":"gold"}]'
    assert err.requested_args == '[["v-42"],{"tier":"silver"}]'
    rec_line, req_line = sides(err)
    assert '"v-42", tier="gold"' in rec_line and err.recorded["digest"] in rec_line
    assert '"v-42", tier="silver"' in req_line and err.requested["digest"] in req_line
    assert rec_line.index("tier") == req_line.index("tier")   # one column each


def test_a_changed_sleep_shows_both_durations():
    err = diverge(deployed, {"sleep": 7200}, input=ORDER)
    assert err.reason == "different_arguments" and err.recorded["kind"] == "sleep"
    assert (err.recorded_args, err.requested_args) == ("[[3600.0],{}]", "[[7200.0],{}]")
    rec_line, req_line = sides(err)
    assert "3600.0" in rec_line and "7200.0" in req_line


def test_a_step_removed_at_the_end_leaves_history_unconsumed():
    def flow(ctx, _):
        ctx.activity("fetch", echo, "v-42")
        if not CHANGE.get("drop_last"):
            ctx.activity("notify", echo, "maria")
            ctx.wait_signal("go")
        return "done"

    err = diverge(flow, {"drop_last": True})
    assert err.reason == "history_not_consumed" and err.position == 2
    assert err.recorded["name"] == "notify" and err.requested is None
    assert err.recorded_args == '[["maria"],{}]' and err.requested_args is None
    rec_line, req_line = sides(err)
    assert '"maria"' in rec_line and "(the code returned)" in req_line


# --- how much history keeps, and files written before it kept arguments -----------------------

def test_long_arguments_are_kept_cut_at_the_cap_and_the_digest_still_decides():
    def flow(ctx, _):
        ctx.activity("ask", echo, "x" * (3 * ARGS_CAP) + CHANGE.get("tail", "a"))
        ctx.wait_signal("go")

    err = diverge(flow, {"tail": "b"})
    assert err.reason == "different_arguments"
    assert len(err.recorded_args) == ARGS_CAP + 1 and err.recorded_args.endswith("…")
    assert err.recorded_args == err.requested_args          # the difference is past the cap
    assert err.recorded["digest"] != err.requested["digest"]
    assert max(len(line) for line in sides(err)) < 120       # the message stays readable


def as_schema_3(path):
    """Rewrite a file as schema 3 wrote it: each event's body without its args."""
    con = duckdb.connect(str(path))
    rows = con.execute("SELECT run_id, position, body FROM event_log").fetchall()
    con.execute("DELETE FROM event_log")
    for run_id, position, body in rows:
        con.execute("INSERT INTO event_log VALUES (?, ?, ?)",
                    [run_id, position, json.dumps(json.loads(body)[:12],
                                                  separators=(",", ":"))])
    con.execute("CREATE OR REPLACE VIEW events AS SELECT run_id, position, "
                "body ->> '$[0]' AS kind, body ->> '$[1]' AS name FROM event_log")
    con.execute("UPDATE meta SET value = '3' WHERE key = 'schema_version'")
    con.close()


def test_an_old_format_file_shows_digests_only(db_path, tmp_path):
    def flow(ctx, _):
        ctx.activity("fetch", echo, CHANGE.get("vendor", "v-42"))
        ctx.wait_signal("go")

    with dl.Engine(db_path) as engine:
        engine.start(flow, None, run_id="r-1")
        engine.run_until_idle()
    as_schema_3(db_path)
    CHANGE["vendor"] = "v-43"
    with dl.Engine(db_path, workflows=[flow]) as engine:
        assert engine.store.fetch("SELECT value FROM meta WHERE key = 'schema_version'") \
            == [(str(dl.store.SCHEMA_VERSION),)]
        assert engine.store.fetch("SELECT kind, args FROM events ORDER BY position") == [
            ("activity", None), ("wait_signal", None)]
        engine.run_until_idle()
        run = engine.run("r-1")
        exported = dl.load(dl.export(run, tmp_path / "old.jsonl"))[0]
    err = run.error
    assert run.status == "diverged" and err.reason == "different_arguments"
    assert err.recorded_args is None and err.requested_args == '[["v-43"],{}]'
    rec_line, req_line = sides(err)
    assert err.recorded["digest"] in rec_line and "v-42" not in rec_line
    assert '"v-43"' in req_line
    assert list(run.history["args"]) == list(exported.history["args"]) == [None, None]


def test_arguments_reach_the_events_view_and_exports(db_path, tmp_path):
    def flow(ctx, _):
        ctx.activity("fetch", echo, "v-42", region="eu")
        ctx.sleep(60)
        return ctx.now()

    with dl.Engine(db_path) as engine:
        engine.start(flow, None, run_id="r-1")
        engine.run_until_idle()
        run = engine.run("r-1")
        view = engine.store.fetch("SELECT kind, args FROM events ORDER BY position")
    assert view == [("activity", '[["v-42"],{"region":"eu"}]'), ("sleep", "[[60.0],{}]"),
                    ("timer_fired", None), ("now", None)]
    for suffix in (".jsonl", ".parquet"):
        loaded = dl.load(dl.export(run, tmp_path / f"runs{suffix}"))[0]
        pd.testing.assert_series_equal(loaded.history["args"], run.history["args"])
        assert loaded.history["args"][0] == view[0][1]
        assert loaded.history["args"].isna().tolist() == [False, False, True, True]


def test_the_divergence_picture_marks_where_each_replay_stopped():
    from matplotlib.colors import to_hex
    from durablelab.viz.divergence import COLOURS
    runs = {"insert": {"insert": True}, "sleep": {"sleep": 7200}}
    shown = {}
    for label, change in runs.items():
        CHANGE.clear()
        engine = dl.Engine()
        engine.start(deployed, ORDER, run_id=label)
        engine.advance(7200)
        CHANGE.update(change)
        engine.crash()
        engine.run_until_idle()
        shown[label] = engine.run(label)
        engine.close()
    fig = dl.viz.divergence_plot(shown)
    ax = fig.axes[0]
    assert [t.get_text() for t in ax.get_yticklabels()] == ["sleep", "insert"]
    assert ax.get_xlabel() == "history position"
    bars = {(round(p.get_y() + p.get_height() / 2), round(p.get_x() + p.get_width() / 2)):
            to_hex(p.get_facecolor()) for p in ax.patches}
    assert bars[(1, 2)] == COLOURS["stopped"] and bars[(1, 1)] == COLOURS["replayed"]
    assert bars[(0, 5)] == COLOURS["stopped"] and bars[(0, 6)] == COLOURS["unreached"]
    notes = [t.get_text() for t in ax.texts]
    assert "position 2: another step" in notes and "position 5: other arguments" in notes
