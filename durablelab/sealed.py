"""A file is data: how durablelab opens a DuckDB file someone may have crafted.

A store from a stranger may define `runs` as a view over ``read_text('~/.ssh/id_rsa')``, or
be a SQLite file that DuckDB would fetch an extension to read. So every connection to a
store is sealed (`SEALED`: DuckDB reads no other file and loads no extension, and nothing
in the file can turn either back on), a file that is another kind of database is refused by
its first bytes, and `catalog` says what each name in the file really is, asked of DuckDB's
own catalog functions, so that `store.check_tables` can refuse a view where a table belongs
and a table that is not the one durablelab creates.
"""

from __future__ import annotations

import duckdb

from .errors import foreign_store

#: How every connection to a store is opened. A file is data: DuckDB may not read or list
#: any other file (a view over read_text or glob), install or load an extension (DuckDB
#: fetches one to read a SQLite or Parquet file), and nothing the file runs can turn either
#: back on. DuckDB refuses a second connection to a file with another config, so everything
#: that opens a store (the engine, replay_check, the sweep's results) uses this one.
SEALED = {"enable_external_access": False, "autoinstall_known_extensions": False,
          "autoload_known_extensions": False, "lock_configuration": True}

#: First bytes of files that are not stores, refused before DuckDB opens them.
FOREIGN = ((b"SQLite format 3\x00", "a SQLite database"),
           (b"PAR1", "a Parquet file (a durablelab export? read it with dl.load(path))"))


def head(path: str) -> bytes | None:
    """The first bytes of the file at `path`, or None if it is not a readable file."""
    try:
        with open(path, "rb") as f:
            return f.read(512)
    except OSError:
        return None


def connect(path: str | None, read_only: bool = False) -> duckdb.DuckDBPyConnection:
    """A sealed (`SEALED`) DuckDB connection to the store at `path`, or to a new in-memory
    one (None). A SQLite or Parquet file is refused by its first bytes (StoreFormatError),
    before DuckDB sees it. DuckDB's own errors (a lock, a file that is not DuckDB) pass."""
    if path is None:
        # An in-memory store holds one lab's or one sweep worker's few thousand rows: a
        # statement's work is too small to share out, and handing it to DuckDB's worker
        # threads costs more than it saves (on a busy machine, several times more).
        return duckdb.connect(":memory:", config={**SEALED, "threads": 1})
    first = head(path) or b""
    for magic, what in FOREIGN:
        if first.startswith(magic):
            raise foreign_store(path, what)
    return duckdb.connect(path, read_only=read_only, config=SEALED)


def catalog(con) -> dict[str, str]:
    """What each name in the database's main schema is: "view", or a base table's
    definition as DuckDB writes it back from its own catalog (from the opening parenthesis
    on: columns, types, NOT NULLs, defaults, key), so two tables are the same exactly when
    these texts are. Read through the catalog functions of DuckDB's `system` database,
    named in full: a file can define a macro `duckdb_tables()` of its own, which would
    answer for the unqualified name. Names are lowercased: DuckDB finds a view `RUNS` for
    `FROM runs`."""
    where = "schema_name = 'main' AND NOT internal AND NOT temporary"
    found = {name.lower(): "view" for (name,) in con.execute(
        f"SELECT view_name FROM system.main.duckdb_views() WHERE {where}").fetchall()}
    for name, sql in con.execute(
            f"SELECT table_name, sql FROM system.main.duckdb_tables() WHERE {where}").fetchall():
        found[name.lower()] = sql[sql.index("("):].rstrip(";")
    return found


__all__ = ["SEALED", "connect", "catalog", "head"]
