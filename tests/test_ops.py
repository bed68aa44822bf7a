"""dl.ops and `durablelab ops`: the operator's board over a whole store. A small fleet with
known behaviour (approvals answered, late and never bounded; a flaky service; a broken
model answer) gives exact counts, rates and ages; every source (engine, store path, export,
runs) gives the same board; bad input is refused clearly, and the command never writes the
file it reads."""

from __future__ import annotations

import hashlib
import math
import subprocess
import sys
from pathlib import Path

import duckdb
import pandas as pd
import pytest
from pandas.testing import assert_frame_equal

import durablelab as dl
from durablelab import cli
from durablelab.errors import BadType, BadValue, ExportFormatError, StoreOpenError
from durablelab.faults import Fail, Malformed, ServerError
from durablelab.sim import SimLLM

HOUR = 3600.0
STEADY = dl.RetryPolicy(max_attempts=4, initial=1.0, jitter="none")
MODEL = {}


def approval(ctx, order):
    ctx.activity("reserve", lambda: {"held": order}, policy=STEADY)
    decision = ctx.wait_signal("approval", deadline=ctx.now() + 2 * HOUR)
    return {"approved": bool(decision and decision["approved"])}


def unbounded(ctx, order):
    return ctx.wait_signal("approval")          # no deadline: never overdue, never alerted


def flaky(ctx, order):
    return ctx.activity("charge", lambda: {"charged": order}, policy=STEADY)


def ask(ctx, prompt):
    return ctx.activity("ask", MODEL["llm"].complete, prompt, policy=STEADY)


def fleet(engine) -> SimLLM:
    """3 approvals (one answered), 1 unbounded wait, 3 flaky charges (2 transient retries
    then ok; ok; a non-retryable refusal), 1 model call whose first answer is broken."""
    llm = MODEL["llm"] = SimLLM(clock=engine.clock, seed=2)
    for i in range(3):
        engine.start(approval, i, run_id=f"approve-{i}")
    engine.start(unbounded, 0, run_id="unbounded")
    engine.start(flaky, 1, run_id="flaky-retried", faults=[ServerError("charge", attempts=[1, 2])])
    engine.start(flaky, 2, run_id="flaky-ok")
    engine.start(flaky, 3, run_id="flaky-refused", faults=[Fail("charge", status=402)])
    engine.start(ask, "What is 2 + 2? Answer in JSON.", run_id="ask",
                 faults=[Malformed("ask", attempts=[1])])
    engine.run_until_blocked()                  # t = 3 s: the retries are done
    engine.signal("approve-0", "approval", {"approved": True})
    engine.advance(600 - engine.clock.now())    # t = 600 s: approvals wait, none is late yet
    return llm


@pytest.fixture
def engine():
    with dl.Engine() as e:
        yield e


def name(fn) -> str:
    return f"{fn.__module__}:{fn.__qualname__}"


def test_the_board_counts_runs_rates_and_spend_per_workflow(engine):
    llm = fleet(engine)
    board = dl.ops(engine)
    assert board.now == engine.clock.now() == 600.0
    table = board.workflows
    assert set(table.index) == {name(approval), name(unbounded), name(flaky), name(ask)}
    row = table.loc[name(approval)]
    assert (row.runs, row.completed, row.waiting, row.overdue) == (3, 1, 2, 0)
    assert row.oldest_waiting == 600.0
    row = table.loc[name(flaky)]
    # attempts 3 + 1 + 1 = 5; two were retried after a Transient error; one of the three
    # activities failed for good, NonRetryable
    assert (row.runs, row.completed, row.failed, row.attempts) == (3, 2, 1, 5)
    assert row.retry_rate == pytest.approx(2 / 5)
    assert row.retry_rate_Transient == pytest.approx(2 / 5)
    assert row.failure_rate == pytest.approx(1 / 3) == row.failure_rate_NonRetryable
    assert row.model_calls == 0 and row.tokens_per_run == 0
    row = table.loc[name(ask)]
    billed = llm.usage
    assert row.model_calls == billed["calls"] == 2          # the broken answer was billed too
    assert row.tokens_per_run == billed["input_tokens"] + billed["output_tokens"]
    assert row.cost_per_run == pytest.approx(billed["cost"])
    assert row.retry_rate_ModelOutputError == pytest.approx(1 / 2)
    # history size and replay, as dl.compare counts them per run
    per_run = dl.compare(engine)
    flaky_runs = per_run.loc[["flaky-retried", "flaky-ok", "flaky-refused"]]
    assert table.loc[name(flaky), "history_bytes_max"] == flaky_runs.history_bytes.max()
    assert table.loc[name(flaky), "history_events_mean"] == flaky_runs.history_events.mean()
    everything = per_run[per_run.index.str.startswith("approve")]
    assert table.loc[name(approval), "replayed_per_wakeup"] == pytest.approx(
        everything.events_replayed.sum() / everything.wakeups.sum())


def test_waiting_overdue_and_the_oldest_wait_at_a_later_now(engine):
    fleet(engine)
    now = 600.0 + 3 * HOUR                    # the approvals' deadline (t = 7200) has passed
    board = dl.ops(engine, now=now)
    waiting = board.waiting.set_index("run_id")
    assert sorted(waiting.index) == ["approve-1", "approve-2", "unbounded"]
    assert waiting.loc["approve-1", "on"] == "signal:approval"
    assert waiting.loc["approve-1", "deadline"] == 2 * HOUR
    assert waiting.loc["approve-1", "age"] == now
    assert math.isnan(waiting.loc["unbounded", "deadline"])
    assert list(board.overdue.run_id) == ["approve-1", "approve-2"]
    assert (board.overdue.overdue_by == now - 2 * HOUR).all()
    assert "unbounded" not in set(board.overdue.run_id)     # no deadline: nobody alerted
    assert board.oldest_waiting == now
    assert board.workflows.loc[name(approval), "overdue"] == 2
    assert dl.ops(engine).overdue.empty                     # at the engine's own clock


def test_every_source_gives_the_same_board(tmp_path):
    path = tmp_path / "fleet.duckdb"
    engine = dl.Engine(path)
    fleet(engine)
    expected = dl.ops(engine, now=5000.0)
    runs = [engine.run(r) for r in engine.runs().run_id]
    exported = dl.export(engine, tmp_path / "fleet.jsonl")
    engine.close()
    for source in (path, str(path), exported, runs):
        board = dl.ops(source, now=5000.0)
        assert_frame_equal(board.workflows, expected.workflows)
        assert_frame_equal(board.waiting, expected.waiting)
    # by default, a store is read at the clock it was closed at; runs at their latest instant
    assert dl.ops(path).now == 600.0
    assert dl.ops(runs).now == max(max(r.latest_at, r.ended_at or 0) for r in runs)


def test_a_run_that_starts_later_does_not_move_the_boards_now(engine):
    # start(start_at=) plans a start; nothing is recorded at that instant yet, so the board
    # is read at the engine's clock (not at the planned start), and can be read there.
    fleet(engine)
    engine.start(flaky, 9, run_id="later", start_at=5000.0)
    board = dl.ops(engine)
    assert board.now == engine.clock.now() == 600.0 and board.oldest_waiting == 600.0
    assert dl.ops(engine, now=600.0).frame.set_index("run_id").loc["later", "status"] == \
        "running"
    runs = [engine.run(r) for r in engine.runs().run_id]
    assert dl.ops(runs).now == 3.0             # the latest instant the others recorded
    assert dl.ops([engine.run("later")]).now == 5000.0   # nothing else to go by
    engine.advance(5000.0 - 600.0)
    assert dl.ops(engine).frame.set_index("run_id").loc["later", "status"] == "completed"


def test_an_empty_source_gives_an_empty_board(engine):
    board = dl.ops(engine)
    assert board.workflows.empty and board.waiting.empty and board.overdue.empty
    assert board.oldest_waiting == 0.0 and "0 run(s)" in repr(board)
    assert dl.ops([]).now == 0.0


def test_imported_runs_join_the_board():
    history = Path(__file__).resolve().parents[2] / "shared" / "external" / \
        "temporal-histories" / "sdk-python" / "research-workflow-history.json"
    if not history.is_file():
        pytest.skip(f"the shared Temporal histories are not at {history.parent}")
    run = dl.load_temporal(history)
    row = dl.ops([run]).workflows.iloc[0]
    assert (row.runs, row.completed, row.model_calls, row.tokens) == (1, 1, 12, 13195)


# --- bad input ------------------------------------------------------------------------------


def test_a_now_before_the_first_instant_is_refused(engine):
    fleet(engine)
    with pytest.raises(BadValue) as info:
        dl.ops(engine, now=-5.0)
    assert "now=-5 is before the first instant" in str(info.value)
    assert "run 'approve-0' started" in str(info.value)
    assert "Give now >= 3" in str(info.value)        # the last retry, at t = 3 s
    with pytest.raises(BadValue, match="before the latest instant"):
        dl.ops(engine, now=1.0)                  # after the first instant, before the last


@pytest.mark.parametrize("now, error, words", [
    (float("nan"), BadValue, "not a finite number"), (float("inf"), BadValue, "not a finite"),
    ("600", BadType, "is str"), (True, BadType, "is bool")])
def test_a_now_that_is_no_instant_is_refused(engine, now, error, words):
    with pytest.raises(error, match=words):
        dl.ops(engine, now=now)


def test_a_source_of_the_wrong_kind_is_refused():
    with pytest.raises(BadType, match="source is int; give an Engine"):
        dl.ops(42)
    with pytest.raises(BadType, match="item 0 is str"):
        dl.ops(["not a run"])


def test_damaged_and_foreign_files_are_refused_naming_the_file(tmp_path):
    path = tmp_path / "fleet.duckdb"
    with dl.Engine(path) as engine:
        fleet(engine)
    cut = tmp_path / "cut.duckdb"
    cut.write_bytes(path.read_bytes()[:len(path.read_bytes()) // 3])
    with pytest.raises(StoreOpenError, match="cut short"):
        dl.ops(cut)
    text = tmp_path / "notes.txt"
    text.write_text("hello\n")
    with pytest.raises(ExportFormatError, match="notes.txt"):
        dl.ops(text)
    with pytest.raises(StoreOpenError, match="no-such-file.jsonl: no such file"):
        dl.ops(tmp_path / "no-such-file.jsonl")


def test_a_damaged_run_is_counted_and_listed_not_dropped(tmp_path):
    path = tmp_path / "fleet.duckdb"
    with dl.Engine(path) as engine:
        fleet(engine)
    con = duckdb.connect(str(path))
    con.execute("UPDATE event_log SET body = '[[[[' WHERE run_id = 'flaky-ok'")
    con.close()
    board = dl.ops(path)
    row = board.workflows.loc[name(flaky)]
    assert (row.runs, row.damaged, row.completed) == (3, 1, 1)
    assert list(board.damaged.run_id) == ["flaky-ok"]
    assert "flaky-ok" in board.damaged.problem.iloc[0]


@pytest.mark.parametrize("damage, words", [
    ("UPDATE payloads SET body = '{\"doc\": \"forged\"}'", "not the one its digest names"),
    ("UPDATE payloads SET digest = 'abc'", "that payload is missing")])
def test_a_payload_with_the_wrong_hash_sets_its_run_aside_on_the_board(tmp_path, damage, words):
    path = tmp_path / "fleet.duckdb"
    with dl.Engine(path, payload_threshold=4096) as engine:
        fleet(engine)
        engine.start(big, 1, run_id="big")            # ended: read when the board asks
        engine.start(big_then_waits, 2, run_id="big-waiting")   # the same document
        engine.run_until_blocked()
    con = duckdb.connect(str(path))
    con.execute(damage)
    con.close()
    board = dl.ops(path)
    assert sorted(board.damaged.run_id) == ["big", "big-waiting"]
    assert all(words in problem for problem in board.damaged.problem)
    assert board.workflows.loc[name(big), "damaged"] == 1
    assert board.workflows.loc[name(big_then_waits), "runs"] == 1
    assert len(board.frame) == 8                      # the fleet's runs are all there


def test_an_exported_experiment_is_not_runs(tmp_path):
    experiment = dl.sweep(flaky, [1], seeds=range(1))
    path = experiment.export(tmp_path / "experiment.jsonl")
    with pytest.raises(ExportFormatError, match="exported experiment"):
        dl.ops(path)


# --- the card and the command ---------------------------------------------------------------


def test_the_card_shows_alarms_workflows_and_the_overdue_runs(engine):
    fleet(engine)
    html = dl.ops(engine, now=600.0 + 3 * HOUR)._repr_html_()
    assert "2 overdue" in html and "3 waiting" in html
    assert "test_ops:approval" in html and "<code>approve-1</code>" in html
    assert "1 h 10 min past its deadline" in html
    cost = dl.ops(engine).workflows.loc[name(ask), "cost_per_run"]
    assert 0 < cost < 0.01 and f"${cost:.6f}" in html      # fractions of a cent still show
    calm = dl.ops(engine)._repr_html_()
    assert "nothing overdue" in calm and "Overdue:" not in calm


def digest(path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def test_the_command_prints_the_board_and_never_writes_the_store(tmp_path, capsys):
    path = tmp_path / "fleet.duckdb"
    with dl.Engine(path) as engine:
        fleet(engine)
    before, files = digest(path), sorted(tmp_path.iterdir())
    assert cli.main(["ops", str(path), "--now", str(600 + 3 * HOUR)]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"8 run(s) of 4 workflow(s) in {path} at t=11400s: 3 waiting, "
                          f"2 overdue, oldest waiting 11400s")
    assert "overdue:" in out and "approve-1" in out and "NonRetryable" in out
    assert digest(path) == before and sorted(tmp_path.iterdir()) == files


def test_the_command_errors_are_one_line(tmp_path):
    path = tmp_path / "fleet.duckdb"
    with dl.Engine(path) as engine:
        fleet(engine)
    env_python = [sys.executable, "-m", "durablelab", "ops"]
    for args, status, words in [
            ([str(path), "--now", "-5"], 2, "--now -5.0: now=-5 is before the first instant"),
            ([str(tmp_path / "missing.duckdb")], 1, "no such file"),
            ([str(path), "--now", "soon"], 2, "invalid float value")]:
        done = subprocess.run(env_python + args, capture_output=True, text=True, timeout=120)
        assert done.returncode == status, done.stderr
        assert done.stderr.count("\n") == 1 and words in done.stderr, done.stderr
        assert "Traceback" not in done.stderr


# --- the engine's state and a Run's frames give the same board ------------------------------
# `dl.ops(engine)` measures each run from the engine's state of it (plain rows, as a sweep
# does); `dl.ops(runs)` from each `Run`'s frames, as `dl.compare` does. A fleet with every
# kind of fact a board reads must give the same board both ways.

LOCAL = dl.RetryPolicy(max_attempts=3, initial=5.0, jitter="none")


def nightly(ctx, order):
    ctx.activity("reserve", lambda: {"held": order, "note": "café ☕"}, policy=STEADY)
    ctx.sleep(12 * HOUR)                        # waiting on a timer
    return order


def backing_off(ctx, order):                    # waiting on a retry's backoff
    return ctx.activity("charge", lambda: {"charged": order}, policy=dl.RetryPolicy(
        max_attempts=3, initial=6 * HOUR, max_interval=6 * HOUR, jitter="none"))


def fan_out(ctx, n):                            # started activities: ends carry a handle
    handles = [ctx.start_activity("part", lambda i=i: i * 7, policy=STEADY) for i in range(n)]
    return sum(ctx.gather(*handles))


def numbers(ctx, n):                            # values that are plain numbers and null
    a = ctx.activity("count", lambda: 3, policy=STEADY)
    ctx.sleep(1)
    return a + ctx.activity("count", lambda: 4, policy=STEADY)


def strange(ctx, _):                            # a lone surrogate: stored escaped
    return ctx.activity("echo", lambda: {"text": "bad \ud800 é"}, policy=STEADY)


def crashes_once(ctx, order):
    return ctx.activity("charge", lambda: {"charged": order}, policy=STEADY)


def hangs(ctx, order):                          # an attempt still in flight
    return ctx.activity("charge", lambda: {"charged": order}, policy=STEADY)


def big(ctx, order):                            # a value stored by reference
    return len(ctx.activity("fetch", lambda: {"doc": "x" * 5000}, policy=STEADY)["doc"])


def big_then_waits(ctx, order):
    big(ctx, order)
    return ctx.wait_signal("go")


def varied(engine) -> None:
    """`fleet` and more: timers, a retry's backoff, started activities, numbers, a lone
    surrogate, a worker crash, a hang, a cancelled run, a value stored by reference."""
    fleet(engine)
    engine.start(nightly, 1, run_id="nightly")
    engine.start(backing_off, 1, run_id="backing-off", faults=[ServerError("charge",
                                                                           attempts=[1])])
    engine.start(fan_out, 3, run_id="fan-out", faults=[ServerError("part", attempts=[1])])
    engine.start(numbers, 1, run_id="numbers")
    engine.start(strange, 1, run_id="strange")
    engine.start(crashes_once, 1, run_id="crashes-once",
                 faults=[dl.faults.Crash("charge", point="after_effect", attempts=[1])])
    engine.start(hangs, 1, run_id="hangs", faults=[dl.faults.Hang("charge")])
    engine.start(unbounded, 1, run_id="cancelled")
    engine.start(big, 1, run_id="big")
    engine.run_until_blocked()
    engine.cancel("cancelled", reason="customer withdrew")
    engine.advance(60)


def same_board(new, old) -> None:
    assert_frame_equal(new.workflows, old.workflows)
    assert_frame_equal(new.waiting, old.waiting)
    assert_frame_equal(new.frame, old.frame)
    assert new.now == old.now


def test_the_engines_state_and_the_runs_frames_give_the_same_board(tmp_path):
    path = tmp_path / "varied.duckdb"
    with dl.Engine(path, payload_threshold=4096) as engine:
        varied(engine)
        runs = [engine.run(r) for r in engine.runs().run_id]
        statuses = {r.status for r in runs}
        assert {"waiting", "completed", "failed", "running", "cancelled"} <= statuses
        waits = {r.waiting_on for r in runs if r.waiting is not None}
        assert {"timer", "retry:charge", "signal:approval"} <= waits
        later = engine.clock.now() + 3 * HOUR       # the approvals are overdue
        for now in (None, later):
            same_board(dl.ops(engine, now=now), dl.ops(runs, now=now if now else
                                                       engine.clock.now()))
        board = dl.ops(engine, now=later)
    assert len(board.overdue) == 2 and board.frame.model_calls.sum() == 2
    # values are the JSON values recorded: ints stay ints (pandas alone makes [None, 0, 7]
    # floats, and history_bytes would count "7.0" for 7)
    fanned = next(r for r in runs if r.run_id == "fan-out").history
    assert fanned.value.tolist() == [None, None, None, 0, 7, 14]
    assert board.frame.set_index("run_id").loc["crashes-once", "attempts"] == 1
    # the store read back, read-only: its own runs, at the clock it was closed at
    with dl.Engine(path, read_only=True) as reader:
        again = [reader.run(r) for r in reader.runs().run_id]
        same_board(dl.ops(path, now=later), dl.ops(again, now=later))
        same_board(dl.ops(reader), dl.ops(again, now=reader.clock.now()))
        # an export of it (its frames written and read back) gives the same board too
        for suffix in ("jsonl", "parquet"):
            exported = dl.export(reader, tmp_path / f"varied.{suffix}")
            same_board(dl.ops(exported, now=later), dl.ops(path, now=later))
    # (the store has no row for the attempt still in flight: only the live engine knows it)
    assert dl.ops(path, now=later).frame.set_index("run_id").loc["hangs", "attempts"] == 0


def fingerprint(folder) -> dict:
    """Every file of `folder`: its bytes' digest and its modification time (ns)."""
    return {p.name: (digest(p), p.stat().st_mtime_ns) for p in sorted(Path(folder).iterdir())}


def test_no_reading_command_writes_a_store_a_killed_worker_left(tmp_path):
    # A worker killed mid-day leaves its last commits in the write-ahead log, beside the
    # file: a reader that replayed the log into the file would change both. None does.
    folder = tmp_path / "store"
    folder.mkdir()
    path = folder / "fleet.duckdb"
    worker = (f"import os, sys; sys.path.insert(0, {str(Path(__file__).parent)!r}); "
              f"import durablelab as dl, test_ops; e = dl.Engine({str(path)!r}); "
              f"test_ops.fleet(e); os._exit(0)")
    done = subprocess.run([sys.executable, "-c", worker], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    before = fingerprint(folder)
    assert set(before) == {"fleet.duckdb", "fleet.duckdb.wal"}
    out = tmp_path / "out"
    out.mkdir()
    for args in (["ops", str(path)], ["ops", str(path), "--now", "99999"], ["runs", str(path)],
                 ["show", "approve-1", "--db", str(path)],
                 ["timeline", "approve-1", "--db", str(path), "-o", str(out / "t.png")],
                 ["export", str(path), "-o", str(out / "e.jsonl")],
                 ["replay-check", "--workflow", "test_ops:approval", "--from", str(path)]):
        assert cli.main(args) == 0, args
        assert fingerprint(folder) == before, args
    # and what it read is what the worker committed before it died
    assert dl.ops(path).workflows.loc[name(approval), "waiting"] == 2
