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
                                                  r"creates: it has columns \(.*extra VARCHAR\)"),
    ("ALTER TABLE attempts ALTER delay TYPE VARCHAR", r"its table 'attempts' .* delay VARCHAR"),
    ("DROP TABLE wakeups", r"it has no table 'wakeups', which every durablelab store of "
                           r"schema 5 has"),
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
    """Every duckdb.connect of a store file passes store.SEALED; export.py and
    experiments/io.py connect in memory to read or write a Parquet file the caller names."""
    unsealed = []
    for path in (ROOT / "durablelab").rglob("*.py"):
        for number, line in enumerate(path.read_text().splitlines(), 1):
            if "duckdb.connect(" in line and "SEALED" not in line and "duckdb.connect()" \
                    not in line:
                unsealed.append(f"{path.relative_to(ROOT)}:{number}")
    assert unsealed == []
