"""A diverged run is kept in the store: an engine opened later, the CLI and the pending
views all see it diverged, and an engine with fixed (patched) code replays it and carries on."""

import duckdb

import durablelab as dl
from durablelab import cli

CODE = {"version": 1}
executions = []


def step(name):
    def fn(*args):
        executions.append(name)
        return {"step": name}
    fn.__name__ = name
    return fn


fetch, audit, notify = step("fetch"), step("audit"), step("notify")


def shipped(ctx, _):
    """Version 1 fetches, waits a day, notifies. Version 2 inserts an audit after the fetch:
    unguarded (breaks runs in flight), or behind ctx.patched (safe)."""
    ctx.activity("fetch", fetch)
    if CODE["version"] == 2 or (CODE["version"] == 3 and ctx.patched("audit")):
        ctx.activity("audit", audit)
    ctx.sleep(86400)
    ctx.activity("notify", notify)
    return "done"


def store_row(path, run_id):
    con = duckdb.connect(path, read_only=True)
    try:
        status, error = con.execute("SELECT status, error FROM runs WHERE run_id = ?",
                                    [run_id]).fetchone()
        timers = con.execute("SELECT count(*) FROM pending_timers WHERE run_id = ?",
                             [run_id]).fetchone()[0]
    finally:
        con.close()
    return status, error, timers


def diverge(path):
    CODE["version"] = 1
    executions.clear()
    engine = dl.Engine(path, workflows=[shipped])
    engine.start(shipped, None, run_id="r-1")
    engine.advance(60)                       # fetched; sleeping for a day
    CODE["version"] = 2                      # an unguarded deploy
    engine.crash()
    engine.run_until_idle()
    assert engine.run("r-1").status == "diverged"
    engine.close()


def test_diverged_survives_a_reopen_in_store_views_and_cli(db_path, capsys):
    diverge(db_path)
    status, error, timers = store_row(db_path, "r-1")
    assert status == "diverged" and '"NonDeterminismError"' in error
    assert timers == 0                        # a parked run has no timer that will fire
    assert cli.main(["runs", db_path]) == 0
    assert "diverged" in capsys.readouterr().out
    engine = dl.Engine(db_path, workflows=[shipped])   # same (broken) code: still diverged
    engine.run_until_idle()
    run = engine.run("r-1")
    assert run.status == "diverged" and run.ended_at is None
    assert isinstance(run.error, dl.NonDeterminismError) and run.error.position == 2
    assert run.error.reason == "different_call"
    assert list(run.history["name"]) == ["fetch", "sleep"]   # nothing recorded by it
    engine.close()
    assert cli.main(["show", "r-1", "--db", db_path]) == 0
    shown = capsys.readouterr().out
    assert "diverged" in shown and "Non-determinism" in shown
    assert executions == ["fetch"]


def test_diverged_run_recovers_with_patched_code(db_path):
    diverge(db_path)
    CODE["version"] = 3                      # the same change, behind ctx.patched("audit")
    engine = dl.Engine(db_path, workflows=[shipped])
    assert engine.run("r-1").status == "diverged"     # opening runs no code
    engine.advance(60)
    run = engine.run("r-1")
    assert run.status == "waiting" and run.error is None
    engine.close()
    status, error, timers = store_row(db_path, "r-1")
    assert (status, error, timers) == ("waiting", None, 1)   # the pending view counts it
    engine = dl.Engine(db_path, workflows=[shipped])
    engine.run_until_idle()
    run = engine.run("r-1")
    assert run.status == "completed" and run.result == "done"
    assert "patched" not in set(run.history["kind"])   # an old run stays on the old path
    assert executions == ["fetch", "notify"]            # each recorded step ran once, ever
    engine.close()
    assert store_row(db_path, "r-1")[:2] == ("completed", None)


def test_diverged_in_memory_recovers_in_batch_mode():
    CODE["version"] = 1
    executions.clear()
    engine = dl.Engine(durability="batch")
    engine.start(shipped, None, run_id="r-2")
    engine.advance(60)
    CODE["version"] = 2
    engine.crash()
    engine.advance(60)
    assert engine.store.fetch("SELECT status FROM runs")[0][0] == "diverged"
    CODE["version"] = 3
    engine.crash()
    engine.run_until_idle()
    assert engine.run("r-2").status == "completed"
    assert engine.store.fetch("SELECT status, error FROM runs") == [("completed", None)]
    engine.close()
