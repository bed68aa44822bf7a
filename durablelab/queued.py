"""Reading an in-memory store's queue as DuckDB would, without DuckDB.

An in-memory store (`durablelab.store`) queues its commits and writes them to DuckDB in bulk
before anything reads the database. The read that matters most is a simulated crash's
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


__all__ = ["QUEUE_SCAN_LIMIT", "runs", "crashes", "rows_of"]
