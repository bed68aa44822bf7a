"""The DuckDB store: where history lives, and (with its schema, `schema.py`) the only
module that speaks SQL.

A DuckDB statement has a fixed cost even when it does nothing, and a commit to a file
waits for an fsync. So the store never issues a query per replayed event: an engine
loads every unfinished run's history in a few queries when it opens, keeps it in memory,
and writes as few statements as its durability mode allows. In ``sync`` mode a durable step
is one INSERT: an activity's event row carries its final attempt. Bigger writes go in bulk
through Arrow, where a row costs far less than a statement.

An in-memory store (`queued.MemoryStore`) is this store with a queue in front: its commits
wait where a simulated crash does not reach them and go to DuckDB in bulk.

Payloads (inputs, results, signal values, errors) are JSON text, never pickle: opening a
stranger's file must never run code. Nor SQL of its own: every connection is sealed
(`sealed.py`), and the tables durablelab reads must be the base tables the DDL
(`schema.py`) creates, checked in DuckDB's own catalog (`check_tables`) before anything
reads them.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import re
from pathlib import Path
from typing import Callable

import duckdb
import pyarrow as pa

from . import history as h
from .errors import (StoreFormatError, StoreLockedError, bad_value, store_not_readable_as_is,
                     store_open_error, store_unreadable)
from .records import CrashRecord, RunEnd, RunRecord, as_records
from .schema import (ATTEMPT_COLS, CRASH_COLS, DDL, EVENT_COLS, EVENT_COLS_V2, EVENT_LOG_COLS,
                     FAULT_COLS, RECORDS, RUN_COLS, SCHEMA_VERSION, SIGNAL_COLS, WAKEUP_COLS,
                     check_tables, shapes)
from .sealed import catalog, connect, head

#: The statuses of runs a fresh worker picks up again.
UNFINISHED = ("running", "waiting", "diverged")

#: A file store folds its write-ahead log into the file every this many commits. Opening a
#: file replays each commit left in the WAL, so a worker that dies after thousands of sync
#: steps would otherwise pay for all of them before it can recover: here a crash leaves at
#: most 49. A CHECKPOINT costs a few commits, shared by fifty steps (bench/peers.py
#: measures both sides: the sync step and the recovery).
CHECKPOINT_EVERY = 50

def event_row(run_id: str, e) -> tuple:
    """The event_log row of a history event (a `history.Event`): (run_id, position, the
    event itself), whose body is encoded (`event_body`) only when the row is written.
    An in-memory store's queue is often dropped unwritten (a sweep's isolated run, a row of
    the crash explorer), and then nobody pays for the JSON. Events never change once
    recorded, so the body written later is the one it would have been now."""
    return (run_id, e.position, e)


def event_body(e, payload: str | None = None) -> str:
    """The `body` of an event's event_log row: its fields after run_id and position, as
    compact JSON (`history.compact`: a float keeps every digit, a lone surrogate is
    escaped, so the body reaches DuckDB and reads back exactly)."""
    fields = [e.kind, e.name, e.digest, e.ok, None if payload else e.value, e.recorded_at,
              e.attempt, e.started_at, e.outcome, e.error_class, e.error, e.call_site, e.args]
    if e.handle is not None or payload:   # only ends of concurrent work carry it: other
        fields.append(e.handle)           # bodies stay as schema 4 wrote them
    if payload:                           # a large value, stored once in `payloads`
        fields.append(payload)
    return h.compact(fields)


def encoded(row: tuple) -> tuple:
    """An event_log row as DuckDB stores it: its body as text (see `event_row`)."""
    body = row[2]
    return row if type(body) is str else (row[0], row[1], event_body(body))


def _row_of_view(row: tuple) -> tuple:
    """The event_log row of a row shaped like the `events` view (EVENT_COLS)."""
    return (row[0], row[1], h.compact(list(row[2:])))


def _event_fields(body: str) -> list | None:
    """The decoded body of an event_log row, or None if it is not one (a damaged row; a body
    nested too deep for Python's parser is one too)."""
    try:
        fields = json.loads(body)
    except (TypeError, ValueError, RecursionError):
        return None
    if not isinstance(fields, list) or not (  # bodies written before `args` lack it; one
            len(EVENT_COLS_V2) - 2 <= len(fields) <= len(EVENT_COLS) - 1):  # may name a payload
        return None
    return fields


#: What a body shorter than today's lacks (args before schema 4, handle but for the ends of
#: concurrent work), so every loaded event has the `events` view's columns.
_MISSING = (None,) * (len(EVENT_COLS) - 2)


def decoded(rows, payloads: Callable[[list], dict] | None = None) -> tuple[list, list]:
    """(events, damaged) of event_log rows: events in the `events` view's shape, with the
    body decoded here (json.loads is cheaper than twelve JSON extractions a row in the
    view), and a value stored by reference taken from `payloads(digests)` (digest -> text,
    asked once, for the digests these bodies name, and only if they name any); a body
    that does not decode, or names a payload that is missing or does not match its
    digest, is listed under damaged instead (see `screened`): its run is set aside."""
    rows = [(run_id, position, _event_fields(body)) for run_id, position, body in rows]
    named = [fields[-1] for _, _, fields in rows
             if fields is not None and len(fields) == len(EVENT_COLS) - 1
             and isinstance(fields[-1], str)]
    found = payloads(named) if named and payloads is not None else {}
    events, damaged = [], []
    for run_id, position, fields in rows:
        if fields is not None and len(fields) == len(EVENT_COLS) - 1:   # a payload's digest
            digest = fields.pop()
            text = found.get(digest) if isinstance(digest, str) else None
            if text is None or payload_digest(text) != digest:
                damaged.append((run_id, position, f"its value is stored by reference "
                                f"(payload {str(digest)[:16]}…) and that payload is "
                                f"{'missing' if text is None else 'not the one its digest names'}",
                                "payloads"))
                continue
            fields[4] = text
        if fields is None:
            damaged.append((run_id, position, "its event's body is not the JSON durablelab "
                                              "wrote", "events"))
        else:
            events.append((run_id, position, *fields, *_MISSING[len(fields):]))
    return events, damaged


def _longer(text: str, limit: int) -> bool:
    """Whether `text` is longer than `limit` bytes of UTF-8 (`payload_threshold` counts
    bytes), encoding it only when its length in characters cannot tell: a character
    takes one to four bytes."""
    n = len(text)
    if n > limit:
        return True
    if 4 * n <= limit or text.isascii():
        return False
    return len(text.encode("utf-8", "backslashreplace")) > limit


def payload_digest(text: str) -> str:
    """The key a large value is stored under in `payloads`: the SHA-256 of its text."""
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def _is_time(value) -> bool:
    """Whether `value` is a time a run can be replayed with: a finite int or float."""
    return type(value) in (float, int) and math.isfinite(value)


def _deadline(value_json) -> bool:
    """Whether a wait event's value holds a deadline a scheduler can keep: a finite time,
    or None (a signal wait without one). A NaN deadline woke its run for ever."""
    try:
        value = json.loads(value_json)
    except (TypeError, ValueError, RecursionError):
        return False
    return isinstance(value, dict) and "deadline" in value and (
        value["deadline"] is None or _is_time(value["deadline"]))


def screened(out: dict) -> dict:
    """`out` (a `load`) with `damaged` listing every row a run cannot be replayed from, as
    (run id, history position or None, what is wrong, the table to look in): a time that is
    not finite (one would move every run's clock at open), a wait without a finite deadline,
    a signal value that is not JSON. Such a row belongs to its run alone: the engine sets
    that run aside (DESIGN section 6) and the others open and run."""
    damaged = out["damaged"]
    recorded_at, started_at = EVENT_COLS.index("recorded_at"), EVENT_COLS.index("started_at")
    for row in out["events"]:
        if not _is_time(row[recorded_at]):
            damaged.append((row[0], row[1], f"its event's time (recorded_at) is "
                                            f"{row[recorded_at]!r}, not a finite number",
                            "events"))
        elif row[started_at] is not None and not _is_time(row[started_at]):
            damaged.append((row[0], row[1], f"its activity's start time (started_at) is "
                                            f"{row[started_at]!r}, not a finite number",
                            "events"))
        elif row[2] in (h.SLEEP, h.WAIT_SIGNAL) and not _deadline(row[6]):
            damaged.append((row[0], row[1], f"its wait (ctx.{row[2]}) has no finite deadline "
                                            f"(value {str(row[6])[:60]!r})", "events"))
    for row in out["attempts"]:
        if not (_is_time(row.started_at) and _is_time(row.ended_at)
                and (row.delay is None or _is_time(row.delay))):
            damaged.append((row.run_id, row.position, f"its attempt {row.attempt} of "
                            f"{row.activity!r} has a time that is not a finite number "
                            f"(started_at {row.started_at!r}, ended_at {row.ended_at!r}, "
                            f"delay {row.delay!r})", "attempts"))
    for row in out["signals"]:
        if not _is_time(row.arrived_at):
            damaged.append((row.run_id, None, f"its signal {row.name!r} (seq {row.seq}) "
                            f"arrived at {row.arrived_at!r}, not a finite time", "signals"))
            continue
        try:
            json.loads(row.value)
        except (TypeError, ValueError, RecursionError):
            damaged.append((row.run_id, None, f"its signal {row.name!r} (seq {row.seq}) has "
                            f"a value that is not the JSON durablelab wrote", "signals"))
    for row in out["faults"]:
        if not _is_time(row.fired_at):
            damaged.append((row.run_id, row.position, f"its fault (rule {row.rule}) fired at "
                            f"{row.fired_at!r}, not a finite time", "faults"))
    for row in out["wakeups"]:
        if not _is_time(row.woke_at):
            damaged.append((row.run_id, None, f"its wake-up ({row.reason}) is at "
                            f"{row.woke_at!r}, not a finite time", "wakeups"))
    return out


_LOCK = re.compile(r"Conflicting lock is held in (.*?) \(PID (\d+)\)")


def _finite(value) -> float | None:
    """`value` (a number, or the text of one) as a finite float, or None if it is not one."""
    try:
        number = float(value)
    except (TypeError, ValueError, OverflowError):
        return None
    return number if math.isfinite(number) else None


def _placeholders(columns) -> str:
    return "(" + ", ".join("?" for _ in columns) + ")"


class Store:
    """One DuckDB connection holding one lab's runs: a file, or (path None) an in-memory
    database, which `queued.MemoryStore` puts its queue in front of."""

    def __init__(self, path: str | Path | None = None, read_only: bool = False,
                 payload_threshold: int | None = None):
        self.path = None if path is None else str(path)
        #: event values longer than this many characters of JSON are stored once, by
        #: digest, in `payloads` (None: every value inline); see `Engine(payload_threshold=)`.
        self.payload_threshold = payload_threshold
        #: opened for reading only (`Engine(path, read_only=True)`, the CLI): DuckDB itself
        #: refuses every write, and no schema is created or upgraded.
        self.read_only = read_only
        try:
            self.con = connect(self.path, read_only)
        except duckdb.Error as exc:
            found = _LOCK.search(str(exc))
            if found is None and read_only:
                raise store_unreadable(self.path, str(exc).splitlines()[0]) from None
            if found is None:   # not a lock: say what DuckDB found there
                raise store_open_error(self.path, str(exc), head(self.path)) from None
            raise StoreLockedError(
                f"Cannot open {self.path}: process {found.group(2)} ({found.group(1)}) holds "
                f"it, and DuckDB lets one process at a time open a file. Close the engine "
                f"there (engine.close()) or stop that process (restart its kernel), or give "
                f"this Engine another path.",
                path=self.path, pid=int(found.group(2))) from None
        self._insert_sql = {
            table: f"INSERT INTO {table} VALUES {_placeholders(cols)}"
            for table, cols in (("event_log", EVENT_LOG_COLS), ("attempts", ATTEMPT_COLS),
                                ("runs", RUN_COLS), ("signals", SIGNAL_COLS),
                                ("faults", FAULT_COLS), ("crashes", CRASH_COLS),
                                ("wakeups", WAKEUP_COLS))}
        self._columns = {"event_log": EVENT_LOG_COLS, "attempts": ATTEMPT_COLS, "runs": RUN_COLS,
                         "signals": SIGNAL_COLS, "faults": FAULT_COLS,
                         "crashes": CRASH_COLS, "wakeups": WAKEUP_COLS,
                         "payloads": ("digest", "body")}
        #: commits since the last checkpoint: what a crash now would leave in the WAL.
        self.uncheckpointed = 0
        self._ensure_schema()

    def _ensure_schema(self) -> None:
        """Create the schema in a new store, check an existing one and upgrade it if it is
        older. Nothing of a file is read before its catalog says `meta` is durablelab's
        table, and nothing else before every table durablelab reads is checked (a view
        named `runs` would otherwise run the file's own SQL)."""
        if self.path is None:   # a new in-memory database: nothing there to check
            self.con.execute(DDL)
            self.con.execute("INSERT INTO meta VALUES ('schema_version', ?)",
                             [str(SCHEMA_VERSION)])
            return
        found = catalog(self.con)
        row = None
        if "meta" in found:
            check_tables(self.path, found, SCHEMA_VERSION, names=["meta"])
            row = self.con.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchall()
        version = row[0][0] if row else None
        if version == str(SCHEMA_VERSION):
            return check_tables(self.path, found, SCHEMA_VERSION)
        if self.read_only:
            raise store_not_readable_as_is(self.path, version, SCHEMA_VERSION)
        if found and "meta" not in found:
            raise StoreFormatError(
                f"{self.path} is a DuckDB file but not a durablelab store (it has tables "
                f"{sorted(found)[:5]} and no 'meta'). Give the Engine a new path.",
                path=self.path, found=None, expected=SCHEMA_VERSION)
        if not found:
            self.con.execute(DDL)
            self.con.execute("INSERT INTO meta VALUES ('schema_version', ?)",
                             [str(SCHEMA_VERSION)])
            return
        if version in ("2", "3", "4", "5", "6"):
            check_tables(self.path, found, int(version))
            return self._upgrade(int(version), found)
        raise StoreFormatError(
            f"{self.path} holds durablelab schema version {version}; this durablelab "
            f"reads version {SCHEMA_VERSION}. Open it with the version that wrote it, "
            f"or export its runs there and load them here.",
            path=self.path, found=int(version) if str(version).isdigit() else version,
            expected=SCHEMA_VERSION)

    def _upgrade(self, found: int, tables: dict) -> None:
        """Bring a store of schema `found` up to this one, in one transaction (a failure
        leaves the file as it was). Schema 2 kept every fact of an event in a column of an
        `events` table; schema 3 writes the narrow `event_log` and reads it through the
        `events` view, so its rows move over unchanged. Schema 4 keeps each call's canonical
        arguments as a 13th item of an event's body, shown as the view's `args` column; rows
        written before keep their 12 items (their `args` reads NULL: digests only), so from
        schema 3 only the views change. Schema 5 stores a waiting run as 'waiting', with what
        it waits on in the new `runs.waiting` column; the runs an older engine left 'running'
        stay so until an engine wakes them. Schema 6 adds a 14th body item to the ends of
        concurrent work (`handle`); other bodies are unchanged, so only the views change.
        Schema 7 adds the `payloads` table (and a 15th item to the bodies that use it).
        `tables`: the store's `catalog`, checked."""
        self.con.execute("BEGIN")
        try:
            old = []
            if found == 2:
                old = self.con.execute(f"SELECT {', '.join(EVENT_COLS_V2)} FROM events "
                                       f"ORDER BY run_id, position").fetchall()
                self.con.execute("DROP VIEW IF EXISTS pending_timers; "
                                 "DROP VIEW IF EXISTS pending_signals; DROP TABLE events;")
            self.con.execute(DDL)
            if "runs" in tables and tables["runs"] != shapes()["runs"]:   # no `waiting`
                self.con.execute("ALTER TABLE runs ADD COLUMN waiting VARCHAR")
            if old:
                self._bulk("event_log", [_row_of_view(r) for r in old])
            self.con.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'",
                             [str(SCHEMA_VERSION)])
            self.con.execute("COMMIT")
        except BaseException:
            self.con.execute("ROLLBACK")
            raise

    # --- writing -----------------------------------------------------------------------
    def insert(self, table: str, row: tuple) -> None:
        """One row, committed at once (DuckDB autocommits a lone statement)."""
        if table == "event_log":
            [row], payloads = self._events([row])
            if payloads:   # the value and its event commit together
                return self.write({"payloads": payloads, "event_log": [row]})
        self.con.execute(self._insert_sql[table], row)
        self._committed()

    def _events(self, rows: list[tuple]) -> tuple[list, list]:
        """(event_log rows with their bodies encoded, payload rows): a value longer than
        `payload_threshold` goes to `payloads` once, and its event names its digest."""
        limit = self.payload_threshold
        if limit is None:
            return [encoded(row) for row in rows], []
        out, payloads = [], {}
        for row in rows:
            event = row[2]
            if type(event) is not str and event.value is not None and _longer(event.value,
                                                                              limit):
                digest = payload_digest(event.value)
                payloads[digest] = (digest, event.value)
                out.append((row[0], row[1], event_body(event, digest)))
            else:
                out.append(encoded(row))
        return out, list(payloads.values())

    def write(self, rows: dict[str, list[tuple]], ends: list[tuple] = ()) -> None:
        """Write rows to several tables and end runs, atomically, in as few statements as
        the rows allow. `ends` holds `RunEnd`s (or tuples in its fields' order)."""
        work = [(t, r) for t, r in rows.items() if r]
        if len(work) == 1 and len(work[0][1]) == 1 and not ends:
            return self.insert(work[0][0], work[0][1][0])  # the sync fast path: one statement
        if not work and not ends:
            return None
        if not work and len(ends) == 1:
            self.end(ends[0])
            return self._committed()
        self.con.execute("BEGIN")
        try:
            for table, table_rows in work:
                self._bulk(table, table_rows)
            for end in ends:
                self.end(end)
            self.con.execute("COMMIT")
        except BaseException:
            self.con.execute("ROLLBACK")
            raise
        return self._committed()

    def _committed(self) -> None:
        self.uncheckpointed += 1
        if self.uncheckpointed >= CHECKPOINT_EVERY:
            self.checkpoint()

    def checkpoint(self) -> None:
        """Fold the WAL into the file (see CHECKPOINT_EVERY). Skipped, until the next
        commit, while another connection to the file has a transaction open."""
        if self.path is None or not self.uncheckpointed:
            return
        try:
            self.con.execute("CHECKPOINT")
        except duckdb.TransactionException:
            return
        self.uncheckpointed = 0

    def _bulk_ends(self, ends: list[tuple]) -> None:
        batch = pa.table({c: list(v) for c, v in zip(RunEnd._fields, zip(*ends))})
        self._with_batch("_durablelab_ends", batch,
                          "UPDATE runs SET status = e.status, result = e.result, "
                          "error = e.error, ended_at = e.ended_at, waiting = e.waiting "
                          "FROM _durablelab_ends e WHERE runs.run_id = e.run_id")

    def _with_batch(self, name: str, batch: pa.Table, sql: str) -> None:
        """Run `sql` reading the Arrow `batch` as the view `name`. If it fails (a duplicate
        key), its error is what the caller sees, not the failed transaction's refusal to
        drop the view (the next register of that name replaces it)."""
        self.con.register(name, batch)
        try:
            self.con.execute(sql)
        finally:
            with contextlib.suppress(duckdb.TransactionException):
                self.con.unregister(name)

    def end(self, end: RunEnd) -> None:
        """Change a run's status: it ended, diverged, waits, or runs again."""
        self.con.execute("UPDATE runs SET status = ?, result = ?, error = ?, ended_at = ?, "
                         "waiting = ? WHERE run_id = ?", (*end[:4], end.waiting, end.run_id))

    def _bulk(self, table: str, rows: list[tuple]) -> None:
        if table == "payloads":   # stored once: a digest already there is the same value
            self.con.executemany("INSERT OR IGNORE INTO payloads VALUES (?, ?)", rows)
            return
        if table == "event_log":
            rows, payloads = self._events(rows)
            if payloads:
                self._bulk("payloads", payloads)
        if len(rows) == 1:
            self.con.execute(self._insert_sql[table], rows[0])
            return
        columns = self._columns[table]
        batch = pa.table({c: list(values) for c, values in zip(columns, zip(*rows))})
        self._with_batch("_durablelab_batch", batch, f"INSERT INTO {table} SELECT * FROM "
                                                      f"_durablelab_batch")

    # --- reading -----------------------------------------------------------------------
    def fetch(self, sql: str, params=()) -> list[tuple]:
        """Every read ends here (an in-memory store writes its queue first: see `queued`)."""
        self.flush()
        return self.con.execute(sql, list(params)).fetchall()

    def flush(self) -> None:
        """Nothing waits in a file store: each write is committed as it is made. (An
        in-memory store, `queued.MemoryStore`, writes its queue here.)"""

    def forget(self) -> None:
        raise bad_value("Store.forget()", None, f"it empties an in-memory store only, "
                        f"and {self.path} is a file: nothing durable is ever forgotten")

    def discard_queue(self) -> None:
        raise bad_value("Store.discard_queue()", None, f"it drops an in-memory store's "
                        f"queue only, and {self.path} is a file: nothing durable is ever "
                        f"dropped")

    def run_rows(self) -> list[RunRecord]:
        """Every run's row, ordered by (started_at, run_id)."""
        return as_records(RunRecord, self.fetch(
            f"SELECT {', '.join(RUN_COLS)} FROM runs ORDER BY started_at, run_id"))

    def crash_rows(self) -> list[CrashRecord]:
        """Every crash row, ordered by crashed_at."""
        return as_records(CrashRecord, self.fetch(
            f"SELECT {', '.join(CRASH_COLS)} FROM crashes ORDER BY crashed_at"))

    def load_unfinished(self) -> dict[str, list]:
        """`load` of the unfinished runs (running, waiting or diverged): what a fresh worker
        reads."""
        return self.load(f"status IN {UNFINISHED!r}")

    def load_ended(self) -> dict[str, list]:
        """`load` of the runs that ended: what a reader of a whole store needs besides
        `load_unfinished` (`loading.read_all`)."""
        return self.load(f"status NOT IN {UNFINISHED!r}")

    def load(self, where: str, params=(), tables=tuple(RECORDS)) -> dict[str, list]:
        """The rows that belong to the runs selected by `where` (a condition on runs), in
        one query per table, ordered for replay. The runs' own rows are the caller's to
        read: an engine reads every run's row once, when it opens. Attempts, signals,
        faults and wake-ups come as their records (`durablelab/records.py`); events as
        tuples shaped like the `events` view (EVENT_COLS), which the engine turns into
        `history.Event`s; `damaged` lists the rows a run cannot be replayed from
        (`screened`). `tables`: the tables of records to read besides the events (a replay
        check needs only the attempts); the others come back empty."""
        runs = f"SELECT run_id FROM runs WHERE {where}"
        order = {"attempts": "run_id, position, attempt",
                 "signals": "run_id, seq", "faults": "run_id, fired_at",
                 "wakeups": "run_id, woke_at"}
        out = {}
        out["events"], out["damaged"] = decoded(self.fetch(
            f"SELECT run_id, position, body FROM event_log WHERE run_id IN ({runs}) "
            f"ORDER BY run_id, position", params), self._payloads)
        for table, record in RECORDS.items():
            out[table] = [] if table not in tables else as_records(record, self.fetch(
                f"SELECT {', '.join(record._fields)} FROM {table} "
                f"WHERE run_id IN ({runs}) ORDER BY {order[table]}", params))
        return screened(out)

    def _payloads(self, digests: list) -> dict:
        """digest -> text of the stored payloads among `digests`."""
        return dict(self.fetch("SELECT digest, body FROM payloads "
                               "WHERE list_contains(?, digest)", [sorted(set(digests))]))

    def save_clock(self, instant: float) -> None:
        """Remember the engine's clock, so an engine opened later does not start earlier."""
        self.con.execute("INSERT OR REPLACE INTO meta VALUES ('clock', ?)", [repr(float(instant))])

    def save_heartbeat(self, run_id: str, position: int, text: str) -> None:
        """Keep an activity's last heartbeat (JSON: attempt, sent_at, details), committed at
        once in every mode: like a fault firing it is a fact about the world, and the
        attempt after a crash reads it. One `meta` row per activity (only the last details
        count, as in Temporal), so the schema does not change."""
        self.con.execute("INSERT OR REPLACE INTO meta VALUES (?, ?)",
                         [f"heartbeat:{run_id}:{position}", text])
        self._committed()

    def last_heartbeat(self, run_id: str, position: int) -> str | None:
        """The JSON `save_heartbeat` kept for this activity, or None."""
        row = self.con.execute("SELECT value FROM meta WHERE key = ?",
                               [f"heartbeat:{run_id}:{position}"]).fetchall()
        return row[0][0] if row else None

    def save_burnt(self, run_id: str, text: str) -> None:
        """Keep the usage a run's broken model answers cost so far (JSON: calls,
        input_tokens, output_tokens, cost), committed at once: money spent is a fact about
        the world. A `meta` row per run, so the schema does not change."""
        self.con.execute("INSERT OR REPLACE INTO meta VALUES (?, ?)", [f"burnt:{run_id}", text])
        self._committed()

    def burnt(self, run_id: str) -> str | None:
        """The JSON `save_burnt` kept for this run, or None."""
        row = self.con.execute("SELECT value FROM meta WHERE key = ?",
                               [f"burnt:{run_id}"]).fetchall()
        return row[0][0] if row else None

    def burnt_all(self) -> dict[str, str]:
        """`burnt` of every run that has one, by run id, in one statement: a board over
        a whole store (`dl.ops`) would otherwise pay a statement per run."""
        return {key[len("burnt:"):]: value for key, value in self.con.execute(
            "SELECT key, value FROM meta WHERE key LIKE 'burnt:%'").fetchall()}

    def latest_instant(self) -> float | None:
        """The latest instant of a crash or of the clock saved at a clean close. Every other
        row belongs to a run and comes no later than the run's end, so an engine that opens
        needs only this, the runs' rows and the rows of unfinished runs (see `Engine._load`).
        A value that is not a finite number (a damaged or hand-edited row: 'abc', inf, NaN)
        is passed over: it would move every run's clock, and fail healthy runs."""
        found = [row[0] for row in self.fetch("SELECT crashed_at FROM crashes")]
        found += [row[0] for row in self.fetch("SELECT value FROM meta WHERE key = 'clock'")]
        instants = [t for t in map(_finite, found) if t is not None]
        return max(instants, default=None)

    def close(self) -> None:
        try:
            self.flush()
        finally:
            self.con.close()
