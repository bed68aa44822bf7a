"""Store layout (schema 3): the narrow event_log behind the `events` view, the in-memory
commit queue, and the checkpoint cadence of file stores."""

import contextlib
import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import duckdb
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

import durablelab as dl
from durablelab import history as h
from durablelab.faults import ServerError
from durablelab import queued
from durablelab.store import CHECKPOINT_EVERY, Store, event_row

TESTS = Path(__file__).resolve().parent
if str(TESTS) not in sys.path:
    sys.path.insert(0, str(TESTS))
import kill9_worker  # noqa: E402  (needs the sys.path entry above)

TABLES = ("runs", "events", "attempts", "faults", "crashes", "signals", "wakeups")
FIRST = h.Event(1, "activity", "charge", "d1", True, '{"id":1}', 1.5)
# As in test_invariants.py: DURABLELAB_PROPERTY_SCALE=20 for a longer, random hunt.
SCALE = int(os.environ.get("DURABLELAB_PROPERTY_SCALE", "1"))


def run_row(run_id):
    return (run_id, "m:wf", "null", 0, None, None, None, "running", None, None, 0.0, None, None)


def view_row(run_id, e):
    return (run_id, e.position, e.kind, e.name, e.digest, e.ok, e.value, e.recorded_at,
            e.attempt, e.started_at, e.outcome, e.error_class, e.error, e.call_site, e.args,
            e.handle)


def wal_size(path) -> int:
    wal = Path(f"{path}.wal")
    return wal.stat().st_size if wal.exists() else 0


# --- 1. event_log rows and the events view ---------------------------------------------------

text = st.text(max_size=12) | st.sampled_from(['"', "\\", "\n", 'a"b\\c\nd', "é€😀", "\x00"])
number = st.floats(allow_nan=False, allow_infinity=False) | st.integers(-2**53, 2**53)
json_text = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False)
    | text, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(text, inner, max_size=3),
    max_leaves=6).map(h.compact)
event_fields = st.tuples(text, text, st.none() | text, st.booleans(), st.none() | json_text,
                         number, st.none() | st.integers(-2**31, 2**31 - 1), st.none() | number,
                         st.none() | text, st.none() | text, st.none() | json_text,
                         st.none() | text, st.none() | json_text | text,
                         st.none() | st.integers(1, 2**31 - 1))
EXTREMES = [(1, ("a", 'n"\\\n', None, False, '"[1]"', 5e-324, None, -1.7976931348623157e308,
                 None, None, '{"k":-0.0}', "f.py:1")),
            (2 ** 31 - 1, ("", "", "", True, "null", -1e-310, 2 ** 31 - 1, 0.1, "ok", "", "",
                           ""))]


@settings(max_examples=30 * SCALE, deadline=None, database=None, derandomize=SCALE == 1,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(run_id=st.text(min_size=1, max_size=8),
       rows=st.lists(st.tuples(st.integers(1, 2**31 - 1), event_fields), min_size=1, max_size=6,
                     unique_by=lambda r: r[0]))
@example(run_id="'; --", rows=EXTREMES)
def test_events_round_trip_through_view_load_and_reopen(tmp_path, run_id, rows):
    """Whatever an Event holds, its compact JSON body gives it back exactly, through the SQL
    view (JSON extraction and casts in DuckDB) and through load (json.loads in Python)."""
    run_id = f"{uuid.uuid4().hex[:6]}{run_id}"        # the examples share one file
    events = [h.Event(position, *fields) for position, fields in rows]
    expected = sorted(view_row(run_id, e) for e in events)
    store = Store(tmp_path / "events.duckdb")
    try:
        store.insert("runs", run_row(run_id))
        store.insert("event_log", event_row(run_id, events[0]))                 # one statement
        store.write({"event_log": [event_row(run_id, e) for e in events[1:]]})  # Arrow bulk
        for reopen in (False, True):
            if reopen:
                store.close()
                store = Store(tmp_path / "events.duckdb")
            assert store.fetch("SELECT * FROM events WHERE run_id = ? ORDER BY position",
                               [run_id]) == expected
            loaded = store.load("run_id = ?", [run_id])["events"]
            assert loaded == expected
            assert [h.Event(*row[1:]) for row in loaded] == sorted(events,
                                                                   key=lambda e: e.position)
    finally:
        store.close()


@pytest.mark.parametrize("in_memory", [False, True])
def test_a_refused_bulk_write_leaves_nothing_and_keeps_earlier_commits(tmp_path, in_memory):
    """A bulk write to three tables repeating a run id (the primary key) is refused whole,
    with the constraint as its error (not "transaction is aborted"); earlier commits stay.
    In memory the refusal comes at the flush, and the other queued writes still land."""
    store = queued.MemoryStore() if in_memory else Store(tmp_path / "s.duckdb")
    store.insert("runs", run_row("a"))
    with pytest.raises(duckdb.ConstraintException):
        store.write({"runs": [run_row("b"), run_row("a")],
                     "crashes": [(4.0, None, None, None, "x")],
                     "event_log": [event_row("b", FIRST), event_row("b", h.Event(
                         2, "now", "now", None, True, "4", 4.0))]})
        store.fetch("SELECT 1")            # in memory, the write is refused at its flush
    assert store.fetch("SELECT run_id FROM runs") == [("a",)]
    assert store.fetch("SELECT (SELECT count(*) FROM crashes) + count(*) FROM events") == [(0,)]
    store.insert("crashes", (5.0, None, None, None, "y"))      # the store is still usable
    assert store.fetch("SELECT cause FROM crashes") == [("y",)]
    store.close()


def say(value):
    return value


def refuse():
    raise ValueError("no")


def mixed(ctx, inp):
    said = ctx.activity("say", say, inp)
    ctx.now(), ctx.random(), ctx.uuid()
    ctx.sleep(1.5)
    with contextlib.suppress(dl.ActivityFailed):
        ctx.activity("refuse", refuse)
    return said


def test_engine_history_equals_the_events_view(db_path):
    """Run.history (the engine's in-memory events) and the view agree, column by column."""
    cols = ["position", "kind", "name", "ok", "digest", "recorded_at", "attempt", "outcome",
            "error_class", "call_site"]
    with dl.Engine(db_path) as engine:
        engine.start(mixed, 'hé "q"\n\\', run_id="m")
        engine.run_until_idle()
        stored = engine.store.fetch(f"SELECT {', '.join(cols)}, value FROM events "
                                    f"WHERE run_id = 'm' ORDER BY position")
        frame = engine.run("m").history
    frame = frame.astype(object).where(frame.notna(), None)
    assert [tuple(row) for row in frame[cols].itertuples(index=False)] == \
        [row[:-1] for row in stored]
    assert list(frame["value"]) == [row[-1] and json.loads(row[-1]) for row in stored]
    assert [row[1] for row in stored] == ["activity", "now", "random", "uuid", "sleep",
                                          "timer_fired", "activity"]


# --- 2. in-memory stores queue commits ------------------------------------------------------

def steps(ctx, n):
    return sum(ctx.activity(f"s{i}", say, i) for i in range(n))


def waits(ctx, inp):
    total = ctx.activity("first", say, inp)
    value = ctx.wait_signal("go")
    if value == "boom":
        raise RuntimeError("boom")
    return total + ctx.activity("then", say, value)


class CountingConnection:
    """A DuckDB connection that counts the statements it executes."""

    def __init__(self, con):
        self.con, self.statements = con, 0

    def execute(self, *args):
        self.statements += 1
        return self.con.execute(*args)

    def __getattr__(self, name):
        return getattr(self.con, name)


def test_memory_store_runs_no_statement_until_a_read():
    """In memory, commits and checkpoints execute nothing; the first read writes it all in a
    few statements, and runs that started and ended in the queue are inserted ended."""
    with dl.Engine() as engine:
        counting = engine.store.con = CountingConnection(engine.store.con)
        engine.start(mixed, "x", run_id="a")
        engine.start(steps, 30, run_id="s")
        engine.run_until_idle()
        engine.store.checkpoint()
        assert counting.statements == 0 and engine.store.uncheckpointed == 0
        assert engine.store.fetch("SELECT count(*) FROM events") == [(37,)]
        assert counting.statements < 10        # one flush: a handful of bulk statements
        assert engine.store.fetch("SELECT run_id, status, result, started_at, ended_at FROM "
                                  "runs ORDER BY run_id") == [("a", "completed", '"x"', 0.0, 1.5),
                                                              ("s", "completed", "435", 0.0, 0.0)]


def test_a_long_session_writes_its_queue_when_it_grows(monkeypatch):
    """The queue is written to DuckDB once it holds QUEUE_LIMIT writes, without a read, so
    a session that never reads does not hold every row twice; nothing is lost or doubled."""
    monkeypatch.setattr(queued, "QUEUE_LIMIT", 10)
    with dl.Engine() as engine:
        engine.start(steps, 25, run_id="s")
        engine.run_until_idle()
        raw = engine.store.con.execute("SELECT count(*) FROM event_log").fetchall()[0][0]
        assert 10 <= raw < 25 and len(engine.store._queue) < 10
        assert engine.store.fetch("SELECT count(*), count(DISTINCT position) FROM events") == \
            [(25, 25)]
        assert engine.run("s").result == sum(range(25))


def dump(engine):
    return {t: engine.store.fetch(f"SELECT * FROM {t} ORDER BY ALL") for t in TABLES}


@pytest.mark.parametrize("mode", ["exit", "sync"])
def test_memory_crash_keeps_what_the_mode_committed_like_a_file(tmp_path, mode):
    """A crash of an in-memory engine keeps the queued (committed) rows and loses exactly what
    the durability mode had not committed: table for table what a file store keeps."""
    dumps = []
    for path in (None, tmp_path / "runs.duckdb"):
        with dl.Engine(path, durability=mode) as engine:
            engine.start(steps, 3, run_id="done")
            engine.start(waits, 1, run_id="wait", faults=[ServerError("first", attempts=[1])])
            engine.signal("wait", "other", {"x": 1})
            engine.run_until_idle()      # no read since the start: in memory all is queued
            engine.crash()
            assert engine.run("done").status == "completed"
            kept = engine.store.fetch("SELECT count(*) FROM events WHERE run_id = 'wait'")
            assert kept == [(0 if mode == "exit" else 2,)]     # 'first', the wait's start
            # exit mode kept only its start; sync also committed that it waits
            assert engine.run("wait").status == ("running" if mode == "exit" else "waiting")
            crashed = dump(engine)
            engine.signal("wait", "go", 5)
            engine.run_until_idle()
            assert engine.run("wait").result == 6
            dumps.append((crashed, dump(engine)))
    assert dumps[0] == dumps[1]
    # every table had rows to lose; exit mode lost the retried attempt with the events
    assert all(dumps[0][0][t] for t in TABLES if t != "attempts" or mode == "sync")


@pytest.mark.parametrize("ends", [1, 4])
def test_ends_of_runs_flushed_while_running_are_applied(ends):
    """Runs whose start reached DuckDB while they ran get their end applied at the next
    flush: one end alone, or several in one bulk update, next to a run started since."""
    ids = [f"r{i}" for i in range(ends)]
    with dl.Engine() as engine:
        for run_id in ids:
            engine.start(waits, 1, run_id=run_id)
        engine.run_until_idle()
        assert engine.store.fetch("SELECT DISTINCT status FROM runs") == [("waiting",)]
        engine.start(steps, 2, run_id="fresh")   # its start and end meet in the queue
        for i, run_id in enumerate(ids):
            engine.signal(run_id, "go", "boom" if i == 1 else i)
        engine.run_until_idle()
        raw = engine.store.con.execute("SELECT DISTINCT status FROM runs").fetchall()
        assert raw == [("waiting",)]           # the ends still wait in the queue
        rows = engine.store.fetch("SELECT run_id, status, result, error IS NOT NULL, ended_at "
                                  "FROM runs ORDER BY run_id")
    expected = [(r, "failed", None, True, 0.0) if i == 1 else
                (r, "completed", str(1 + i), False, 0.0) for i, r in enumerate(ids)]
    assert rows == sorted(expected + [("fresh", "completed", "1", False, 0.0)])


# --- 3. checkpoints -------------------------------------------------------------------------

def test_file_store_checkpoints_on_a_fixed_cadence(db_path):
    """Commits since the last CHECKPOINT never reach CHECKPOINT_EVERY, and each reset really
    folded the WAL into the file (the WAL shrinks)."""
    seen = []

    def probe(i):
        seen.append((engine.store.uncheckpointed, wal_size(db_path)))
        return i
    with dl.Engine(db_path) as engine:
        engine.start(lambda ctx, n: [ctx.activity("p", probe, i) for i in range(n)], 230)
        engine.run_until_idle()
        counts = [c for c, _ in seen]
        resets = [i for i in range(1, len(seen)) if counts[i] < counts[i - 1]]
        assert max(counts) < CHECKPOINT_EVERY and len(resets) >= 2
        assert all(b > a for a, b in zip(counts, counts[1:]) if b >= a)   # a commit a step
        assert all(seen[i][1] < seen[i - 1][1] for i in resets)
        assert 0 < engine.store.uncheckpointed < CHECKPOINT_EVERY
        engine.store.checkpoint()
        assert engine.store.uncheckpointed == 0 and wal_size(db_path) == 0


CHILD = """
import os, sys
import durablelab as dl, kill9_worker as w
db, ledger, n, stop = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
w.SLEEP, append = 0.0, w.append_line
def dying(ledger, i, idempotency_key=None):
    if i == stop:       # steps 0..stop-1 are acknowledged (committed): die without close()
        print(engine.store.uncheckpointed, flush=True)
        os._exit(0)
    return append(ledger, i, idempotency_key=idempotency_key)
w.append_line = dying
engine = dl.Engine(db, durability="sync", workflows=[w.ledger_flow])
engine.start(w.ledger_flow, {"ledger": ledger, "n": n}, run_id="cp", seed=1)
engine.run_until_idle()
"""


def test_process_death_after_checkpoints_keeps_every_acknowledged_step(tmp_path, monkeypatch):
    """250 sync steps (several checkpoints, the rest in the WAL), then the process dies without
    closing: reopening replays the WAL, every step is there, and recovery runs only the rest."""
    db, ledger, n, stop = tmp_path / "runs.duckdb", tmp_path / "ledger.txt", 300, 250
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(TESTS),
                                                        os.environ.get("PYTHONPATH", "")])}
    child = subprocess.run([sys.executable, "-c", CHILD, str(db), str(ledger), str(n),
                            str(stop)], env=env, capture_output=True, text=True, timeout=120)
    assert child.returncode == 0, child.stderr[-3000:]
    assert 0 < int(child.stdout) < CHECKPOINT_EVERY and wal_size(db) > 0
    monkeypatch.setattr(kill9_worker, "SLEEP", 0.0)
    with dl.Engine(db, workflows=[kill9_worker.ledger_flow]) as engine:
        rows = engine.store.fetch("SELECT position, value FROM events ORDER BY position")
        assert rows == [(p, str(p - 1)) for p in range(1, stop + 1)]
        engine.run_until_idle()
        run = engine.run("cp")
        assert run.status == "completed" and run.result == kill9_worker.expected_result(n)
        assert (run.wakeups["reason"][0], run.wakeups["replayed"][0]) == ("recovery", stop)
    lines = ledger.read_text().splitlines()
    assert lines == [f"cp:{i + 1} effect {i}" for i in range(n)]   # no step ran twice
