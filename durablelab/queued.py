"""The in-memory store: commits wait in a queue, and are read from it as DuckDB would.

An in-memory store is no more durable than the process that holds it, so a commit only has
to outlive a simulated crash: `MemoryStore` queues its commits where `engine.crash()` does
not reach, and writes them to DuckDB (`store.Store`, whose connection it is) in bulk before
anything reads the database. A sweep of thousands of runs in memory then pays for a bulk
write, not a statement per step. The read that matters most is a simulated crash's
recovery: a fresh worker reloads every run's row and the rows of each unfinished run. When
nothing has reached DuckDB yet (a sweep's isolated run, one row of the crash explorer: each
starts from an emptied store), the queue holds every row there is, so the recovery can read
them straight from it: the same rows, in the same order and with the same types as the
queries would give, for no DuckDB statement at all (a recovery otherwise makes a dozen:
the writes, then a query per table, each with a statement's fixed cost).

Only a short queue is read this way: the scan is linear, and a long one (a contended sweep
whose runs crash one after another) is cheaper to write once and query.
"""

from __future__ import annotations

import duckdb

from .records import CrashRecord, RunEnd, RunRecord, as_records
from .errors import bad_value
from .store import RECORDS, UNFINISHED, Store, decoded, encoded, screened

#: An in-memory store writes its queue to DuckDB at the latest when it holds this many
#: writes, so a long session that never reads does not keep every row twice in Python.
QUEUE_LIMIT = 100_000

#: The longest queue (in commits) read here; a longer one goes to DuckDB first.
QUEUE_SCAN_LIMIT = 5000

_int = int
_float = float


def _cast(row: tuple, types: tuple) -> tuple:
    """The row as DuckDB gives it back: INTEGER and BIGINT columns as int, DOUBLE as float."""
    return tuple(v if t is None or v is None else t(v) for v, t in zip(row, types))


# Column types of each table (see the DDL in `durablelab.store`): int, float, or None for
# text, which comes back as given.
TYPES = {
    "runs": (None, None, None, _int, None, None, None, None, None, None, _float, _float,
             None),
    "event_log": (None, _int, None),
    "attempts": (None, _int, None, _int, _float, _float, None, None, None, _float, _int),
    "signals": (None, _int, None, None, None, _float),
    "faults": (None, _int, None, None, _int, _int, _float),
    "wakeups": (None, _float, None, _int, _int),
    "crashes": (_float, None, _int, None, None),
}

#: How `Store.load` orders each table's rows (its ORDER BY), as column indexes.
ORDER = {"event_log": (0, 1), "attempts": (0, 1, 3), "signals": (0, 1), "faults": (0, 6),
         "wakeups": (0, 1)}


def runs(queue: list) -> list[tuple]:
    """Every run's row, each with its last queued end applied (as a flush would write it),
    ordered by (started_at, run_id)."""
    found: dict[str, tuple] = {}
    ends: dict[str, tuple] = {}
    for rows, write_ends in queue:
        for row in rows.get("runs", ()):
            found[row[0]] = row
        for end in write_ends:
            ends[end[4]] = end
    out = []
    for run_id, row in found.items():
        end = ends.get(run_id)
        if end is not None:
            row = row[:7] + tuple(end[:3]) + row[10:11] + (end[3], end.waiting)
        out.append(_cast(row, TYPES["runs"]))
    out.sort(key=lambda r: (r[10], r[0]))
    return out


def crashes(queue: list) -> list[tuple]:
    """Every crash row (CRASH_COLS), ordered by crashed_at."""
    out = [_cast(r, TYPES["crashes"]) for rows, _ in queue for r in rows.get("crashes", ())]
    out.sort(key=lambda r: r[0])
    return out


def rows_of(queue: list, run_ids: set) -> dict[str, list[tuple]]:
    """The queued rows of the runs `run_ids` in event_log, attempts, signals, faults and
    wakeups, each table ordered as `Store.load` orders it."""
    out: dict[str, list[tuple]] = {table: [] for table in ORDER}
    for rows, _ in queue:
        for table, table_rows in rows.items():
            bucket = out.get(table)
            if bucket is not None:
                bucket.extend(r for r in table_rows if r[0] in run_ids)
    for table, bucket in out.items():
        types, order = TYPES[table], ORDER[table]
        bucket[:] = [_cast(r, types) for r in bucket]
        bucket.sort(key=lambda r: tuple(r[i] for i in order))
    return out


class MemoryStore(Store):
    """A store in memory: its commits wait in a queue, written to DuckDB in one bulk
    transaction before the next read (`flush`), or read straight from the queue when it
    holds every row (a crash's recovery in a sweep's isolated run)."""

    def __init__(self, payload_threshold: int | None = None):
        super().__init__(None, payload_threshold=payload_threshold)
        #: the writes committed and not yet in DuckDB, each (rows by table, run ends).
        self._queue: list[tuple[dict, list]] = []
        self._written = False      # whether the queue ever reached DuckDB
        self._discarding = False   # queued writes are dropped (`discard_queue`)
        self._facts = False        # whether a heartbeat or a broken answer's cost was kept

    # --- writing: into the queue -----------------------------------------------------------
    def insert(self, table: str, row: tuple) -> None:
        """One row, committed: queued."""
        self.write({table: [row]})

    def write(self, rows: dict[str, list[tuple]], ends: list[tuple] = ()) -> None:
        """Rows and run ends, committed together: queued as one write."""
        if self._discarding:
            return
        self._queue.append((rows, list(ends)))
        if len(self._queue) >= QUEUE_LIMIT:
            self.flush()

    def flush(self) -> None:
        """Write the queued writes of an in-memory store to DuckDB in one transaction (a run
        that starts and ends inside the queue is inserted already ended). If DuckDB refuses
        a row, each write is tried alone, as a file store would have, and the first refusal
        is raised: one bad write never takes the others with it."""
        if not self._queue:
            return
        writes, self._queue = self._queue, []
        self._written = True
        try:
            self._write_all(writes)
        except duckdb.Error:
            refused = None
            for write in writes:
                try:
                    self._write_all([write])
                except duckdb.Error as exc:
                    refused = refused or exc
            if refused is not None:
                raise refused from None


    def forget(self) -> None:
        """Drop every row of an in-memory store, queued or written: a scratch store made
        empty again between runs that must not see each other (a sweep's isolated runs,
        the crash explorer's rows), for far less than opening a new one. The queue is
        dropped unwritten; the tables are emptied only if the queue ever reached them (a
        read, such as a crash's recovery, writes it first)."""
        self._queue.clear()
        self._discarding = False
        if self._written:
            self.con.execute("; ".join(f"DELETE FROM {table}" for table in self._columns))
            self._written = False
        if self._facts:   # kept per run id: the next run of the same id would read them
            self.con.execute("DELETE FROM meta WHERE key LIKE 'heartbeat:%' "
                             "OR key LIKE 'burnt:%'")
            self._facts = False

    # --- facts about the world: written at once, in memory too ------------------------------
    def save_heartbeat(self, run_id: str, position: int, text: str) -> None:
        self._facts = True
        super().save_heartbeat(run_id, position, text)

    def save_burnt(self, run_id: str, text: str) -> None:
        self._facts = True
        super().save_burnt(run_id, text)


    def discard_queue(self) -> None:
        """From now on, drop the writes an in-memory store would queue, unwritten: for an
        engine whose rows nobody reads, such as a contended sweep cell that cannot crash
        (its metrics come from the engine's memory, and its rows would only be written to
        DuckDB every QUEUE_LIMIT writes, then thrown away). What is written at once
        (heartbeats, the usage of broken answers) still is. `forget` ends it."""
        self._queue.clear()
        self._discarding = True


    def _write_all(self, writes: list[tuple[dict, list]]) -> None:
        tables: dict[str, list[tuple]] = {}
        ends: list[tuple] = []
        for rows, write_ends in writes:
            for table, table_rows in rows.items():
                tables.setdefault(table, []).extend(table_rows)
            ends.extend(write_ends)
        # Callers may hand plain tuples in the tables' column order: read them by name.
        started_runs = as_records(RunRecord, tables.get("runs", []))
        if started_runs:
            tables["runs"] = started_runs
        started = {row.run_id: i for i, row in enumerate(started_runs)}
        late = []
        # A run's status can change more than once in the queue (diverged, then running
        # again, then ended): the last change is the one that holds.
        ends = list({end.run_id: end for end in as_records(RunEnd, ends)}.values())
        for end in ends:
            i = started.get(end.run_id)
            if i is None:
                late.append(end)
            else:
                started_runs[i] = started_runs[i]._replace(
                    status=end.status, result=end.result, error=end.error,
                    ended_at=end.ended_at, waiting=end.waiting)
        self.con.execute("BEGIN")
        try:
            for table, rows in tables.items():
                if rows:
                    self._bulk(table, rows)
            if len(late) == 1:
                self.end(late[0])
            elif late:
                self._bulk_ends(late)
            self.con.execute("COMMIT")
        except BaseException:
            self.con.execute("ROLLBACK")
            raise


    def _queue_holds_all(self) -> bool:
        """Whether the queue holds every row (nothing reached DuckDB since it was emptied)
        and is short enough to read directly (see above)."""
        return (not self._written and not self._discarding
                and len(self._queue) <= QUEUE_SCAN_LIMIT)

    # --- reading: from the queue while it holds every row -------------------------------
    def fetch(self, sql: str, params=()) -> list:
        """A store that drops its rows (`discard_queue`) has none to read: it says so,
        rather than answer as if there were no runs."""
        if self._discarding:
            raise bad_value("Store.fetch()", None, "this in-memory store drops the rows it is "
                            "given (Store.discard_queue()), so it has none to read; call "
                            "forget() first, or keep the rows of a store something reads")
        return super().fetch(sql, params)

    def run_rows(self) -> list[RunRecord]:
        if self._queue_holds_all():
            return as_records(RunRecord, runs(self._queue))
        return super().run_rows()

    def crash_rows(self) -> list[CrashRecord]:
        if self._queue_holds_all():
            return as_records(CrashRecord, crashes(self._queue))
        return super().crash_rows()

    def load_unfinished(self) -> dict[str, list]:
        if not self._queue_holds_all():
            return super().load_unfinished()
        ids = {row.run_id for row in as_records(RunRecord, runs(self._queue))
               if row.status in UNFINISHED}
        found = rows_of(self._queue, ids)
        out = {table: as_records(record, found[table]) for table, record in RECORDS.items()}
        out["events"], out["damaged"] = decoded(map(encoded, found["event_log"]))
        return screened(out)


__all__ = ["MemoryStore", "QUEUE_LIMIT", "QUEUE_SCAN_LIMIT", "runs", "crashes", "rows_of"]
