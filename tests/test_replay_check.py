"""dl.replay_check and `durablelab replay-check`: recorded runs replayed against today's
code, no activity run, nothing written, and no matching run is an error, not a pass."""

import hashlib

import pytest

import durablelab as dl
from durablelab import cli
from durablelab.versioning import version_of

calls = []


def step(name):
    def fn(*args):
        calls.append(name)
        return {"step": name, "args": list(args)}
    fn.__name__ = name
    return fn


fetch, screen, notify, audit = step("fetch"), step("screen"), step("notify"), step("audit")


def shipped(ctx, order):
    """Version 1: fetch, screen, wait for approval, notify."""
    ctx.activity("fetch", fetch, order)
    ctx.activity("screen", screen, order)
    if ctx.wait_signal("approval", timeout=86400) is None:
        return "timed out"
    ctx.activity("notify", notify, order)
    return "done"


@version_of(shipped)
def audit_first(ctx, order):
    """Inserts an audit before the screen, unguarded: every recorded run breaks there."""
    ctx.activity("fetch", fetch, order)
    ctx.activity("audit", audit, order)
    ctx.activity("screen", screen, order)
    if ctx.wait_signal("approval", timeout=86400) is None:
        return "timed out"
    ctx.activity("notify", notify, order)
    return "done"


@version_of(shipped)
def audit_at_the_end(ctx, order):
    """Adds an audit after the notify: runs in flight will just do it; completed runs
    recorded no audit, so the code now asks for more than they did."""
    ctx.activity("fetch", fetch, order)
    ctx.activity("screen", screen, order)
    if ctx.wait_signal("approval", timeout=86400) is None:
        return "timed out"
    ctx.activity("notify", notify, order)
    ctx.activity("audit", audit, order)
    return "done"


@version_of(shipped)
def audit_patched(ctx, order):
    """The same audit, behind ctx.patched: old runs replay, new ones audit."""
    ctx.activity("fetch", fetch, order)
    if ctx.patched("audit"):
        ctx.activity("audit", audit, order)
    ctx.activity("screen", screen, order)
    if ctx.wait_signal("approval", timeout=86400) is None:
        return "timed out"
    ctx.activity("notify", notify, order)
    return "done"


def other(ctx, _):
    return ctx.activity("fetch", fetch, "x")


@pytest.fixture
def store(db_path):
    """Five runs of `shipped`: two completed, one timed out, two waiting for approval;
    and one run of another workflow."""
    engine = dl.Engine(db_path)
    for i in range(5):
        engine.start(shipped, f"o-{i}", run_id=f"r-{i}")
    engine.start(other, None, run_id="x-1")
    engine.advance(60)
    engine.signal("r-0", "approval", True)
    engine.signal("r-1", "approval", True)
    engine.advance(60)
    engine.close()
    engine = dl.Engine(db_path)
    engine.advance(86400)               # r-2 .. r-4 time out ...
    engine.close()
    engine = dl.Engine(db_path)
    engine.start(shipped, "o-5", run_id="r-5")
    engine.start(shipped, "o-6", run_id="r-6")
    engine.advance(1)                    # ... and r-5, r-6 wait
    statuses = dict(zip(engine.runs()["run_id"], engine.runs()["status"]))
    engine.close()
    assert statuses == {"r-0": "completed", "r-1": "completed", "r-2": "completed",
                        "r-3": "completed", "r-4": "completed", "x-1": "completed",
                        "r-5": "waiting", "r-6": "waiting"}
    calls.clear()
    return db_path


def digest(path):
    return hashlib.sha256(open(path, "rb").read()).hexdigest()


def test_same_code_replays_every_run_and_runs_no_activity(store):
    before = digest(store)
    report = dl.replay_check(shipped, store)
    assert report.ok and list(report.frame.columns) == [
        "run_id", "status", "position", "recorded", "requested", "cause"]
    assert sorted(report.frame["run_id"]) == [f"r-{i}" for i in range(7)]   # not x-1
    assert set(report.frame["status"]) == {"ok"}
    assert calls == []                    # nothing was executed
    assert digest(store) == before        # nor written
    assert "7 run(s), 7 replay, 0 diverged" in str(report)


def test_inserted_step_diverges_every_run_that_recorded_past_it(store):
    report = dl.replay_check(audit_first, store)
    assert not report.ok and calls == []
    bad = report.diverged
    assert sorted(bad["run_id"]) == [f"r-{i}" for i in range(7)]
    row = bad.iloc[0]
    assert (row["position"], row["cause"]) == (2, "different_call")
    assert row["recorded"].startswith("ctx.activity('screen')")
    assert row["requested"].startswith("ctx.activity('audit')")
    text = str(report)
    assert "different_call at position 2: 7 run(s) (r-0, r-1, r-2, r-3, r-4 and 2 more)" in text
    assert "ctx.patched" in text          # the fix is named
    assert isinstance(report.errors["r-0"], dl.NonDeterminismError)


def test_completed_run_whose_code_asks_for_more_steps_is_diverged(store):
    report = dl.replay_check(audit_at_the_end, store)
    frame = report.frame.set_index("run_id")
    assert list(frame.loc[["r-0", "r-1"], "cause"]) == ["more_steps", "more_steps"]
    assert frame.loc["r-0", "position"] == 6         # 5 events, then the audit
    assert frame.loc["r-0", "requested"] == "ctx.activity('audit')"
    # the timed-out runs end before the new step; the waiting ones may still take it
    assert set(frame.loc[["r-2", "r-3", "r-4", "r-5", "r-6"], "status"]) == {"ok"}
    assert "more_steps at position 6: 2 run(s) (r-0, r-1)" in str(report)


def test_patched_change_replays_every_old_run(store):
    assert dl.replay_check(audit_patched, store).ok
    assert calls == []


def test_export_and_runs_give_the_same_frame_as_the_store(store, tmp_path):
    by_file = dl.replay_check(audit_first, store).frame
    with dl.Engine(store) as engine:
        runs = [engine.run(r) for r in engine.runs()["run_id"]]
    for suffix in ("jsonl", "parquet"):
        path = dl.export(runs, tmp_path / f"runs.{suffix}")
        by_export = dl.replay_check(audit_first, path).frame
        assert by_export.sort_values("run_id").reset_index(drop=True).equals(
            by_file.sort_values("run_id").reset_index(drop=True))
    assert dl.replay_check(audit_first, runs).frame.sort_values("run_id").reset_index(
        drop=True).equals(by_file.sort_values("run_id").reset_index(drop=True))


def test_no_matching_run_is_an_error_not_a_pass(store):
    def renamed(ctx, order):
        return shipped(ctx, order)
    with pytest.raises(dl.ReplayCheckError) as caught:
        dl.replay_check(renamed, store)
    assert isinstance(caught.value, ValueError)
    text = str(caught.value)
    assert "no run in" in text and "renamed" in text and "test_replay_check:shipped" in text
    assert "version_of" in text
    with pytest.raises(dl.ReplayCheckError, match="holds no runs"):
        dl.replay_check(renamed, [])


def test_a_file_an_engine_holds_is_refused_with_the_fix(store):
    engine = dl.Engine(store)
    try:
        with pytest.raises(dl.ReplayCheckError, match="engine.close()"):
            dl.replay_check(shipped, store)
    finally:
        engine.close()
    with pytest.raises(dl.ReplayCheckError, match="no such file"):
        dl.replay_check(shipped, store + ".missing")


def test_cli_exit_codes_and_one_line_errors(store, capsys):
    spec = "test_replay_check:{}"
    assert cli.main(["replay-check", "--workflow", spec.format("shipped"), "--from", store]) == 0
    assert "0 diverged" in capsys.readouterr().out
    assert cli.main(["replay-check", "--workflow", spec.format("audit_first"),
                     "--from", store]) == 1
    out = capsys.readouterr().out
    assert "7 diverged" in out and "different_call at position 2" in out
    for argv, code, words in [
            (["--workflow", "no_colon", "--from", store], 2, "must be module:function"),
            (["--workflow", "no_such_module:f", "--from", store], 2, "cannot find"),
            (["--workflow", spec.format("missing"), "--from", store], 2, "cannot find"),
            (["--workflow", spec.format("shipped"), "--from", store + ".x"], 2, "no such file"),
            (["--workflow", spec.format("other_renamed"), "--from", store], 1, "no run in")]:
        assert cli.main(["replay-check", *argv]) == code, argv
        err = capsys.readouterr().err
        assert words in err and err.count("\n") == 1 and "Traceback" not in err
    assert cli.main(["replay-check", "--from", store]) == 2
    assert "--workflow" in capsys.readouterr().err


@version_of(other)
def other_renamed(ctx, _):
    return None


other_renamed.__module__ = "somewhere_else"
