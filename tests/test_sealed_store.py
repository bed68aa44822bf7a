"""A store is sealed, and no value poisons it (issue 20).

A file is data: a stranger's .duckdb file that defines `runs`, `meta` or `crashes` as a view
over `read_text(...)` or `glob(...)` must not make durablelab read a local file or list a
folder. Every connection to a store is opened with external access and extension loading
off, and each table durablelab reads must be the base table its DDL creates before anything
reads it; a SQLite or Parquet file given as a store is refused by its first bytes.

And one damaged run is set aside, never poisoning the others (DESIGN section 6): a time that
is not finite, a NaN deadline, a body nested too deep or a signal value that is not JSON
belongs to its run alone; the clock at open counts only finite, readable values.

Each malicious store is crafted with a plain DuckDB connection, closed, then opened the way a
learner would: `dl.Engine(path)`, `dl.Engine(path, read_only=True)`, `durablelab runs FILE`.
"""

from __future__ import annotations

import hashlib
import json
import math
import sqlite3
import subprocess
import sys
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import durablelab as dl
from durablelab import cli, store
from durablelab.errors import DamagedRunError, ForeignStoreError

ROOT = Path(__file__).resolve().parent.parent
SECRET = "TOP-SECRET-7f3a9c"   # what a crafted store would leak, were it read


def ok(x=None):
    return {"ok": x}


def waits(ctx, _):
    ctx.activity("first", ok, 1)
    return ctx.wait_signal("go")


def digest(path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


@pytest.fixture
def secret(tmp_path):
    """A private file, and a folder whose listing is private too."""
    folder = tmp_path / "private"
    folder.mkdir()
    path = folder / f"{SECRET}.txt"
    path.write_text(f"{SECRET}\n")
    return path


def a_store(path):
    """A real store at `path`: one completed run and one waiting on a signal."""
    with dl.Engine(path) as engine:
        engine.start(lambda ctx, _: ctx.activity("first", ok, 1), None, run_id="done")
        engine.start(waits, None, run_id="waiting")
        engine.run_until_idle()
    return path


def edit(path, *statements):
    con = duckdb.connect(str(path))
    try:
        for sql in statements:
            con.execute(sql)
    finally:
        con.close()


def runs_view_over(secret) -> str:
    """`runs` as a view that reads `secret`, with the columns durablelab selects."""
    return (f"CREATE VIEW runs AS SELECT content AS run_id, 'w:f' AS workflow, 'null' AS input, "
            f"0::BIGINT AS seed, NULL AS faults, NULL AS options, NULL AS parent_run_id, "
            f"'completed' AS status, 'null' AS result, NULL AS error, 0.0 AS started_at, "
            f"1.0 AS ended_at, NULL AS waiting FROM read_text('{secret}')")


# --- a store is sealed ----------------------------------------------------------------------

def crafted(path, secret, table):
    """A real store whose `table` is replaced by a view over a private file or folder."""
    a_store(path)
    if table == "runs":
        view = runs_view_over(secret)
    elif table == "meta":
        view = (f"CREATE VIEW meta AS SELECT 'schema_version' AS key, '5' AS value UNION ALL "
                f"SELECT 'clock', content FROM read_text('{secret}')")
    elif table == "crashes":
        view = (f"CREATE VIEW crashes AS SELECT 1.0 AS crashed_at, file AS run_id, "
                f"NULL::INTEGER AS position, NULL AS point, file AS cause "
                f"FROM glob('{secret.parent}/*')")
    else:   # event_log
        view = (f"CREATE VIEW event_log AS SELECT 'waiting' AS run_id, 1 AS position, "
                f"content AS body FROM read_text('{secret}')")
    edit(path, f"DROP TABLE {table}", view)
    return path


@pytest.mark.parametrize("table", ["runs", "meta", "crashes", "event_log"])
@pytest.mark.parametrize("read_only", [False, True])
def test_a_store_whose_table_is_a_view_is_refused_before_it_is_read(db_path, secret, table,
                                                                   read_only):
    crafted(db_path, secret, table)
    before = digest(db_path)
    with pytest.raises(ForeignStoreError, match=rf"its '{table}' is a view, not the table "
                                                rf"durablelab writes") as info:
        dl.Engine(db_path, read_only=read_only)
    assert isinstance(info.value, dl.StoreFormatError) and info.value.table == table
    assert info.value.path == db_path and db_path in str(info.value)
    assert SECRET not in str(info.value)
    assert digest(db_path) == before                         # nothing written either


@pytest.mark.parametrize("table", ["runs", "meta", "crashes"])
def test_durablelab_runs_on_a_crafted_store_prints_no_file(tmp_path, secret, table):
    path = crafted(str(tmp_path / "gift.duckdb"), secret, table)
    done = subprocess.run([sys.executable, "-m", "durablelab", "runs", path],
                          env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 1, done
    assert SECRET not in done.stdout + done.stderr            # neither the file nor the folder
    assert done.stdout == "" and "Traceback" not in done.stderr
    assert f"its '{table}' is a view" in done.stderr and path in done.stderr


def test_durablelab_show_on_a_crafted_store_prints_no_file(tmp_path, secret, capsys):
    path = crafted(str(tmp_path / "gift.duckdb"), secret, "runs")
    assert cli.main(["show", "waiting", "--db", path]) == cli.FAILED
    out = capsys.readouterr()
    assert SECRET not in out.out + out.err and "is a view" in out.err


def test_the_catalog_check_is_not_fooled_by_a_macro_of_the_same_name(db_path, secret):
    a_store(db_path)
    edit(db_path, "DROP TABLE runs", runs_view_over(secret),
         # what an unqualified duckdb_tables() / duckdb_views() would answer
         "CREATE MACRO duckdb_views() AS TABLE SELECT 'x' AS view_name WHERE false",
         "CREATE MACRO duckdb_tables() AS TABLE SELECT 'runs' AS table_name")
    with pytest.raises(ForeignStoreError, match="its 'runs' is a view"):
        dl.Engine(db_path, read_only=True)


def test_a_view_named_in_capitals_is_still_the_table_durablelab_reads(db_path, secret):
    a_store(db_path)   # DuckDB finds a view "CRASHES" for FROM crashes
    edit(db_path, "DROP TABLE crashes",
         f'CREATE VIEW "CRASHES" AS SELECT 1.0 AS crashed_at, file AS run_id, '
         f"NULL::INTEGER AS position, NULL AS point, file AS cause FROM glob('{secret.parent}/*')")
    with pytest.raises(ForeignStoreError, match="its 'crashes' is a view"):
        dl.Engine(db_path, read_only=True)


@pytest.mark.parametrize("sql, words", [
    ("ALTER TABLE runs ADD COLUMN extra VARCHAR", r"its table 'runs' is not the one durablelab "
                                                  r"creates: it is runs\(.*extra VARCHAR"),
    ("ALTER TABLE attempts ALTER delay TYPE VARCHAR", r"its table 'attempts' .* delay VARCHAR"),
    ("DROP TABLE wakeups", r"it has no table 'wakeups', which every durablelab store of "
                           rf"schema {dl.store.SCHEMA_VERSION} has"),
    ("DROP VIEW pending_signals; CREATE TABLE pending_signals (x INTEGER)",
     r"its 'pending_signals' is a table, where durablelab keeps a view"),
])
def test_a_table_of_another_shape_is_refused(db_path, sql, words):
    a_store(db_path)
    edit(db_path, sql)
    before = digest(db_path)
    for read_only in (False, True):
        with pytest.raises(ForeignStoreError, match=words):
            dl.Engine(db_path, read_only=read_only)
    assert digest(db_path) == before


def test_an_old_schema_store_is_checked_before_its_upgrade(db_path, secret):
    a_store(db_path)
    edit(db_path, "UPDATE meta SET value = '4' WHERE key = 'schema_version'",
         "ALTER TABLE runs DROP COLUMN waiting", "DROP TABLE crashes",
         f"CREATE VIEW crashes AS SELECT 1.0 AS crashed_at, content AS run_id, "
         f"NULL::INTEGER AS position, NULL AS point, 'x' AS cause FROM read_text('{secret}')")
    before = digest(db_path)
    with pytest.raises(ForeignStoreError, match="its 'crashes' is a view"):
        dl.Engine(db_path)
    assert digest(db_path) == before                         # not upgraded: nothing written


def test_an_old_schema_store_of_durablelab_still_upgrades(db_path):
    """Schema 4 had no runs.waiting: that shape is durablelab's, and upgrades in place."""
    a_store(db_path)
    edit(db_path, "UPDATE meta SET value = '4' WHERE key = 'schema_version'",
         "ALTER TABLE runs DROP COLUMN waiting")
    with dl.Engine(db_path, workflows=[waits]) as engine:
        engine.signal("waiting", "go", 1)
        engine.run_until_idle()
        assert engine.run("waiting").status == "completed"
        assert engine.store.fetch("SELECT value FROM meta WHERE key = 'schema_version'") == \
            [(str(store.SCHEMA_VERSION),)]


def sqlite_file(path):
    con = sqlite3.connect(path)
    con.execute("CREATE TABLE runs (run_id TEXT)")
    con.execute("INSERT INTO runs VALUES (?)", [SECRET])
    con.commit()
    con.close()


def parquet_file(path):
    pq.write_table(pa.table({"run_id": [SECRET]}), path)


@pytest.mark.parametrize("make, what", [(sqlite_file, "a SQLite database"),
                                        (parquet_file, "a Parquet file")])
@pytest.mark.parametrize("read_only", [False, True])
def test_a_sqlite_or_parquet_file_is_refused_by_its_first_bytes(db_path, make, what,
                                                               read_only):
    make(db_path)
    before = digest(db_path)
    with pytest.raises(ForeignStoreError, match=rf"Cannot open .*runs.duckdb as a durablelab "
                                                rf"store: it is {what}") as info:
        dl.Engine(db_path, read_only=read_only)
    assert info.value.path == db_path and isinstance(info.value, dl.StoreFormatError)
    assert digest(db_path) == before


def test_every_store_connection_is_sealed(db_path, secret):
    a_store(db_path)
    for engine in (dl.Engine(db_path, read_only=True), dl.Engine()):
        with engine:
            con = engine.store.con
            with pytest.raises(duckdb.PermissionException):
                con.execute(f"SELECT * FROM read_text('{secret}')")
            with pytest.raises(duckdb.PermissionException):
                con.execute(f"SELECT * FROM glob('{secret.parent}/*')")
            with pytest.raises(duckdb.Error, match="locked"):   # and the file cannot unseal it
                con.execute("SET enable_external_access = true")
            with pytest.raises(duckdb.Error, match="locked"):
                con.execute("SET autoload_known_extensions = true")


def test_replay_check_refuses_a_crafted_store(db_path, secret):
    crafted(db_path, secret, "runs")
    with pytest.raises(ForeignStoreError, match="its 'runs' is a view") as info:
        dl.versioning.replay_check(waits, db_path)
    assert SECRET not in str(info.value)


def test_replay_check_still_reads_a_store(db_path):
    a_store(db_path)
    report = dl.versioning.replay_check(waits, db_path)
    assert report.ok


def test_a_sweep_results_file_with_a_view_is_refused(tmp_path, secret):
    path = tmp_path / "results.duckdb"
    edit(path, f"CREATE VIEW sweep_meta AS SELECT 'spec' AS key, content AS value "
               f"FROM read_text('{secret}')")
    with pytest.raises(dl.SweepError, match="'sweep_meta' is a view") as info:
        dl.sweep(waits, [None], seeds=range(1), path=path)
    assert SECRET not in str(info.value)


def test_the_store_module_is_the_only_unsealed_duckdb_connect_left():
    """Every duckdb.connect of a store file passes sealed.SEALED; export.py and
    experiments/io.py connect in memory to read or write a Parquet file the caller names."""
    unsealed = []
    for path in (ROOT / "durablelab").rglob("*.py"):
        for number, line in enumerate(path.read_text().splitlines(), 1):
            if "duckdb.connect(" in line and "SEALED" not in line and "duckdb.connect()" \
                    not in line:
                unsealed.append(f"{path.relative_to(ROOT)}:{number}")
    assert unsealed == []


# --- no value poisons a store ---------------------------------------------------------------

def steps(ctx, _):
    ctx.activity("first", ok, 1)
    ctx.sleep(10)
    return ctx.wait_signal("go")


def two_runs(path):
    """A file with runs 'bad' (a retried attempt and its fault firing) and 'good', both
    waiting on signal 'go', and 'done', completed. Returns the clock it closed at."""
    with dl.Engine(path) as engine:
        engine.start(steps, None, run_id="bad", faults=[dl.faults.ServerError("first",
                                                                             attempts=(1,))])
        engine.start(steps, None, run_id="good")
        engine.start(lambda ctx, _: ctx.activity("first", ok, 2), None, run_id="done")
        engine.signal("bad", "other", {"unread": True})   # a signal row no wait consumes
        engine.run_until_idle()
        assert engine.run("bad").status == engine.run("good").status == "waiting"
        return engine.clock.now()


def rows_of(path, run_id):
    con = duckdb.connect(str(path), read_only=True)
    try:
        return {table: repr(con.execute(f"SELECT * FROM {table} WHERE run_id = ? ORDER BY ALL",
                                        [run_id]).fetchall())   # repr: nan == nan
                for table in ("runs", "event_log", "attempts", "signals", "faults", "wakeups")}
    finally:
        con.close()


def assert_set_aside(path, run_id, words, clock):
    """`run_id` is listed, refused with `words`, never run; the clock opens where the file
    closed, and 'good' carries on to the end."""
    before = rows_of(path, run_id)
    with dl.Engine(path, workflows=[steps]) as engine:
        assert engine.clock.now() == clock
        assert run_id in set(engine.runs()["run_id"])
        with pytest.raises(DamagedRunError, match=words) as info:
            engine.run(run_id)
        assert info.value.run_id == run_id and "set aside" in str(info.value)
        engine.signal("good", "go", "yes")
        engine.run_until_idle()
        assert engine.run("good").status == "completed"
        assert engine.run("good").result == "yes"
        assert math.isfinite(engine.clock.now())
    assert rows_of(path, run_id) == before                   # the damaged run is untouched
    with dl.Engine(path, read_only=True) as engine:         # and a reader sees the same
        with pytest.raises(DamagedRunError, match=words):
            engine.run(run_id)


@pytest.mark.parametrize("sql, words", [
    ("UPDATE runs SET ended_at = 'inf' WHERE run_id = 'done'",
     r"its start or end time .* ended_at inf"),
    ("UPDATE runs SET started_at = 'nan' WHERE run_id = 'done'", r"started_at nan"),
    ("UPDATE runs SET started_at = '-inf' WHERE run_id = 'bad'", r"started_at -inf"),
])
def test_a_run_row_with_a_time_that_is_not_finite_is_set_aside(db_path, sql, words):
    clock = two_runs(db_path)
    edit(db_path, sql)
    run_id = "done" if "'done'" in sql else "bad"
    assert_set_aside(db_path, run_id, words, clock)


@pytest.mark.parametrize("clock", ["inf", "nan", "-inf", "abc", "1e999", ""])
def test_a_saved_clock_that_is_not_a_finite_number_moves_no_run(db_path, clock):
    closed_at = two_runs(db_path)
    edit(db_path, f"UPDATE meta SET value = '{clock}' WHERE key = 'clock'")
    with dl.Engine(db_path, workflows=[steps]) as engine:
        assert engine.clock.now() == closed_at               # the runs' own rows still count
        engine.signal("good", "go", 1)
        engine.signal("bad", "go", 2)
        engine.run_until_idle()
        assert engine.run("good").status == engine.run("bad").status == "completed"


def test_a_crash_time_that_is_not_finite_moves_no_run(db_path):
    closed_at = two_runs(db_path)
    edit(db_path, "INSERT INTO crashes VALUES ('inf', NULL, NULL, NULL, 'edited')")
    with dl.Engine(db_path, workflows=[steps]) as engine:
        assert engine.clock.now() == closed_at


def set_body(path, run_id, position, change):
    """Rewrite the body of one event_log row with `change(fields)`."""
    con = duckdb.connect(str(path))
    try:
        (body,), = con.execute("SELECT body FROM event_log WHERE run_id = ? AND position = ?",
                               [run_id, position]).fetchall()
        con.execute("UPDATE event_log SET body = ? WHERE run_id = ? AND position = ?",
                    [change(json.loads(body)), run_id, position])
    finally:
        con.close()


def with_value(text):
    def change(fields):
        fields[4] = text
        return json.dumps(fields)
    return change


def with_time(index, text):
    """Field `index` of a body (5: recorded_at, 7: started_at) as the JSON token `text`."""
    def change(fields):
        return "[" + ", ".join(text if i == index else json.dumps(field)
                               for i, field in enumerate(fields)) + "]"
    return change


@pytest.mark.parametrize("position, change, words", [
    (2, with_value('{"seconds": 10, "deadline": NaN}'), r"its wait \(ctx.sleep\) has no "
                                                        r"finite deadline .*at history "
                                                        r"position 2"),
    (2, with_value('{"seconds": 10}'), r"ctx.sleep\) has no finite deadline"),
    (2, with_value('[1, 2'), r"ctx.sleep\) has no finite deadline"),
    (4, with_value('{"deadline": Infinity}'), r"its wait \(ctx.wait_signal\) has no finite "
                                              r"deadline .*at history position 4"),
    (1, with_time(5, "Infinity"), r"its event's time \(recorded_at\) is inf"),
    (2, with_time(5, '"soon"'), r"its event's time \(recorded_at\) is 'soon'"),
    (1, with_time(7, "NaN"), r"its activity's start time \(started_at\) is nan"),
    (1, lambda fields: "[" * 100_000 + "]" * 100_000,
     r"its event's body is not the JSON durablelab wrote at history position 1"),
])
def test_a_damaged_event_sets_its_run_aside(db_path, position, change, words):
    clock = two_runs(db_path)
    set_body(db_path, "bad", position, change)
    assert_set_aside(db_path, "bad", words, clock)


@pytest.mark.parametrize("sql, words", [
    ("UPDATE attempts SET ended_at = 'inf' WHERE run_id = 'bad'",
     r"its attempt 1 of 'first' has a time that is not a finite number .*ended_at inf"),
    ("UPDATE attempts SET delay = 'nan' WHERE run_id = 'bad'", r"delay nan"),
    ("UPDATE signals SET arrived_at = 'inf' WHERE run_id = 'bad'",
     r"its signal 'other' \(seq 1\) arrived at inf, not a finite time"),
    ("UPDATE signals SET value = '{unquoted: 1' WHERE run_id = 'bad'",
     r"its signal 'other' \(seq 1\) has a value that is not the JSON durablelab wrote"),
    ("UPDATE signals SET value = repeat('[', 100000) || repeat(']', 100000) "
     "WHERE run_id = 'bad'", r"has a value that is not the JSON"),
    ("UPDATE faults SET fired_at = '-inf' WHERE run_id = 'bad'",
     r"its fault \(rule 0\) fired at -inf, not a finite time"),
    ("UPDATE wakeups SET woke_at = 'nan' WHERE run_id = 'bad'",
     r"its wake-up \(start\) is at nan, not a finite time"),
])
def test_a_damaged_attempt_signal_fault_or_wakeup_row_sets_its_run_aside(db_path, sql, words):
    clock = two_runs(db_path)
    edit(db_path, sql)
    assert_set_aside(db_path, "bad", words, clock)


def sleepers(path, wait):
    """'bad' and 'good' both in a wait (`wait`: sleep or wait_signal with a time-out) due at
    t=100, the file closed at t=1."""
    def sleeper(ctx, _):
        if wait == "sleep":
            ctx.sleep(100)
        else:
            ctx.wait_signal("go", timeout=100)
        return "woke"
    sleeper.__qualname__ = sleeper.__name__ = f"sleeper_{wait}"
    with dl.Engine(path) as engine:
        engine.start(sleeper, None, run_id="bad")
        engine.start(sleeper, None, run_id="good")
        engine.advance(1)
    return sleeper


@pytest.mark.parametrize("wait, value", [
    ("sleep", '{"seconds": 100, "deadline": NaN}'),
    ("sleep", '{"seconds": 100, "deadline": -Infinity}'),
    ("wait_signal", '{"deadline": NaN}'),
])
def test_a_nan_deadline_no_longer_spins_run_until_idle(db_path, wait, value):
    import signal as alarm
    sleeper = sleepers(db_path, wait)
    set_body(db_path, "bad", 1, with_value(value))

    def stuck(*_):
        raise TimeoutError("run_until_idle() spun for 20 s on a NaN deadline")
    previous = alarm.signal(alarm.SIGALRM, stuck)
    alarm.alarm(20)
    try:
        with dl.Engine(db_path, workflows=[sleeper]) as engine:
            engine.run_until_idle()
            assert engine.run("good").status == "completed" and engine.clock.now() == 100
            with pytest.raises(DamagedRunError, match=rf"ctx.{wait}\) has no finite deadline"):
                engine.run("bad")
            wakeups = engine.store.fetch("SELECT count(*) FROM wakeups WHERE run_id = 'bad'")
            assert wakeups == [(1,)]                          # the start's, and no more
    finally:
        alarm.alarm(0)
        alarm.signal(alarm.SIGALRM, previous)


def test_a_budget_usage_that_does_not_read_back_sets_its_run_aside(db_path):
    with dl.Engine(db_path) as engine:
        engine.start(steps, None, run_id="bad", budget=dl.Budget(model_calls=5))
        engine.start(steps, None, run_id="good")
        engine.run_until_idle()
        clock = engine.clock.now()
    edit(db_path, "INSERT INTO meta VALUES ('burnt:bad', '{not json')")
    assert_set_aside(db_path, "bad", r"its budget's usage does not read back", clock)


@pytest.mark.parametrize("waiting, words", [
    ("'{oops'", r"what it waits on \(runs.waiting\) does not read back"),
    ("'{\"on\": \"signal\"}'", r"runs.waiting\) does not read back \(KeyError"),
    ("'{\"on\": \"timer\", \"until\": NaN}'", r"until nan is not a finite time"),
])
def test_a_damaged_waiting_column_sets_its_run_aside_and_runs_still_lists(db_path, waiting,
                                                                          words):
    clock = two_runs(db_path)
    edit(db_path, f"UPDATE runs SET waiting = {waiting} WHERE run_id = 'bad'")
    assert_set_aside(db_path, "bad", words, clock)
    with dl.Engine(db_path, read_only=True) as engine:      # the listing still reads
        listed = engine.runs().set_index("run_id")
        assert listed.status["bad"] == "waiting" and listed.waiting_on["bad"] is None


def test_durablelab_runs_lists_a_store_with_a_damaged_run(db_path, capsys):
    """The listing reads the runs table, not every run's history: one damaged run is listed
    with the others, and the command succeeds."""
    two_runs(db_path)
    edit(db_path, "UPDATE event_log SET body = '[[[[' WHERE run_id = 'bad'")
    assert cli.main(["runs", db_path]) == 0
    listed = capsys.readouterr().out
    assert all(run_id in listed for run_id in ("bad", "good", "done"))


def test_fork_of_a_damaged_run_is_refused_with_its_damage(db_path):
    two_runs(db_path)
    edit(db_path, "UPDATE event_log SET body = '[[[[' WHERE run_id = 'bad'")
    with dl.Engine(db_path, workflows=[steps]) as engine:
        with pytest.raises(DamagedRunError, match="'bad'"):
            engine.fork("bad", at=1)
        assert len(engine.runs()) == 3          # nothing was started


def test_replay_check_names_the_run_whose_event_body_does_not_read(db_path):
    two_runs(db_path)
    edit(db_path, "UPDATE event_log SET body = '[' || repeat('[', 100000) "
                  "WHERE run_id = 'bad' AND position = 1")
    with pytest.raises(DamagedRunError, match=r"Run 'bad'.*body is not the JSON durablelab wrote "
                                              r"at history position 1"):
        dl.replay_check(steps, db_path)
