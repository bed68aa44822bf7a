"""The store's schema: its tables, as DDL, and the checks that a file holds those tables.

The DDL below is the one description of a store: `Store` creates it in a new file,
`check_tables` compares a file's own catalog (DuckDB's, read before anything else) with
what it makes, so a view in place of a table (it would run the file's own SQL) or a table
of another shape is refused before any row is read. `SCHEMA_VERSION` counts its changes;
`Store._upgrade` brings an older file up to it.
"""

from __future__ import annotations

import functools

from .errors import store_tampered
from .records import (AttemptRecord, CrashRecord, FaultRecord, RunRecord, SignalRecord,
                      WakeupRecord)
from .sealed import catalog, connect

SCHEMA_VERSION = 7

# Times are float seconds on the engine's clock. JSON columns hold compact JSON text.
DDL = """
CREATE TABLE IF NOT EXISTS meta (
    key    VARCHAR PRIMARY KEY,
    value  VARCHAR
);
-- One row per run. An unfinished run is 'running' (work is due now or an attempt is in
-- flight) or 'waiting' (on a timer, a retry backoff or a signal: `waiting` says which, since
-- when and until when), as its durability mode last committed. A run whose replay stopped
-- matching its code is 'diverged' (with its NonDeterminismError in `error`) until an engine
-- with matching code replays it.
CREATE TABLE IF NOT EXISTS runs (
    run_id        VARCHAR PRIMARY KEY,
    workflow      VARCHAR NOT NULL,   -- 'module:qualname' of the workflow function
    input         VARCHAR NOT NULL,   -- JSON
    seed          BIGINT  NOT NULL,
    faults        VARCHAR,            -- the FaultPlan as JSON, or NULL
    options       VARCHAR,            -- JSON: time-out, budget, policy overrides, or NULL
    parent_run_id VARCHAR,            -- the run that continued as this one
    status        VARCHAR NOT NULL,   -- running | waiting | diverged | completed | failed
                                      -- | continued | cancelled
    result        VARCHAR,            -- JSON
    error         VARCHAR,            -- JSON of the durablelab error
    started_at    DOUBLE  NOT NULL,
    ended_at      DOUBLE,
    waiting       VARCHAR             -- JSON {on, name, position, since, until} while waiting
);
-- History: one row per recording ctx call, plus one when a wait ends. An activity's row
-- carries its final attempt, so a durable step costs one INSERT. DuckDB's commit pays for
-- every column (bench/bench_engine.py, figure 3), so the stored row is three columns and
-- `body` holds the rest; the `events` view below spreads it out again.
-- Read `events`, write `event_log`.
-- (run_id, position) is unique, but not a PRIMARY KEY: the index would add to every
-- commit; the engine writes each position once, and checks 1, 2, 3, ... when it loads.
CREATE TABLE IF NOT EXISTS event_log (
    run_id   VARCHAR NOT NULL,
    position INTEGER NOT NULL,        -- counts from 1 within a run
    body     VARCHAR NOT NULL         -- JSON array, in the order of the view's columns
);
-- Values larger than an engine's payload_threshold (bytes of JSON), stored once under the
-- SHA-256 of their text: an event then holds the digest as its 15th body item (see `view`).
CREATE TABLE IF NOT EXISTS payloads (
    digest VARCHAR PRIMARY KEY,       -- hex SHA-256 of body
    body   VARCHAR NOT NULL           -- the value's JSON text
);
CREATE OR REPLACE VIEW events AS
SELECT run_id, position,
       body ->> '$[0]'                    AS kind,        -- activity, now, random, sleep, ...
       body ->> '$[1]'                    AS name,
       body ->> '$[2]'                    AS digest,      -- of the canonical JSON input
       CAST(body -> '$[3]' AS BOOLEAN)    AS ok,
       COALESCE(body ->> '$[4]',          -- JSON text: the result, or the error of a
                (SELECT p.body FROM payloads p   -- failed activity; a large one is stored
                 WHERE p.digest = event_log.body ->> '$[14]'))  -- once in payloads
                                          AS value,
       CAST(body -> '$[5]' AS DOUBLE)     AS recorded_at,
       CAST(body -> '$[6]' AS INTEGER)    AS attempt,     -- an activity's final attempt:
       CAST(body -> '$[7]' AS DOUBLE)     AS started_at,  --   when it started,
       body ->> '$[8]'                    AS outcome,     --   how it ended
       body ->> '$[9]'                    AS error_class,
       body ->> '$[10]'                   AS error,
       body ->> '$[11]'                   AS call_site,   -- 'file:line' of the ctx call
       body ->> '$[12]'                   AS args,        -- canonical JSON of its arguments,
                                                          -- [args, kwargs], cut at 2,000
                                                          -- characters (history.ARGS_CAP);
                                                          -- NULL before schema 4
       CAST(body -> '$[13]' AS INTEGER)   AS handle       -- the end of concurrent work: the
                                                          -- position that started it
FROM event_log;
-- Attempts that did not end their activity (they failed and a retry was scheduled).
-- `delay` is the backoff chosen; the retry is due at ended_at + delay: a durable timer.
CREATE TABLE IF NOT EXISTS attempts (
    run_id      VARCHAR NOT NULL,
    position    INTEGER NOT NULL,
    activity    VARCHAR NOT NULL,
    attempt     INTEGER NOT NULL,
    started_at  DOUBLE  NOT NULL,
    ended_at    DOUBLE  NOT NULL,
    outcome     VARCHAR NOT NULL,
    error_class VARCHAR,
    error       VARCHAR,
    delay       DOUBLE,
    max_attempts INTEGER              -- the policy's, so a view can say "attempt 2 of 6"
);
-- The signal inbox. A signal is committed the moment it arrives; a wait consumes the k-th
-- distinct signal of its name. A repeated signal_id is not stored again.
CREATE TABLE IF NOT EXISTS signals (
    run_id     VARCHAR NOT NULL,
    seq        INTEGER NOT NULL,      -- arrival order within the run
    name       VARCHAR NOT NULL,
    signal_id  VARCHAR,
    value      VARCHAR,               -- JSON
    arrived_at DOUBLE  NOT NULL
);
-- Fault firings: facts about the world, committed when they happen in every mode, so a
-- rule's `times=` holds across crashes.
CREATE TABLE IF NOT EXISTS faults (
    run_id   VARCHAR NOT NULL,
    rule     INTEGER NOT NULL,        -- index in the run's FaultPlan
    type     VARCHAR NOT NULL,
    point    VARCHAR,                 -- crash point, for Crash rules
    position INTEGER NOT NULL,
    attempt  INTEGER NOT NULL,
    fired_at DOUBLE  NOT NULL
);
-- Worker deaths (injected or engine.crash()); after each, a fresh worker recovered.
CREATE TABLE IF NOT EXISTS crashes (
    crashed_at DOUBLE NOT NULL,
    run_id   VARCHAR,                 -- the run whose fault killed the worker, if any
    position INTEGER,
    point    VARCHAR,
    cause    VARCHAR NOT NULL
);
-- Wake-ups: each time a run's code ran from the top, and how much of it was replay.
-- Telemetry, written in bulk when the engine goes idle, crashes or closes.
CREATE TABLE IF NOT EXISTS wakeups (
    run_id   VARCHAR NOT NULL,
    woke_at  DOUBLE  NOT NULL,
    reason   VARCHAR NOT NULL,        -- start, timer, retry, signal, recovery, activity
    replayed INTEGER NOT NULL,        -- events handed back from history
    recorded INTEGER NOT NULL         -- events this wake-up added
);
-- Pending durable timers, derived from history (kept once, never twice): waits that
-- started and have not ended, and retry backoffs whose next attempt has not happened.
CREATE OR REPLACE VIEW pending_timers AS
SELECT e.run_id, e.position, e.kind, e.name,
       CAST(json_extract(e.value, '$.deadline') AS DOUBLE) AS fire_at
FROM events e JOIN runs r USING (run_id)
WHERE r.status IN ('running', 'waiting') AND e.kind IN ('sleep', 'wait_signal')
  AND NOT EXISTS (SELECT 1 FROM events x WHERE x.run_id = e.run_id AND x.position = e.position + 1)
UNION ALL
SELECT a.run_id, a.position, 'retry' AS kind, a.activity AS name, a.ended_at + a.delay AS fire_at
FROM attempts a JOIN runs r USING (run_id)
WHERE r.status IN ('running', 'waiting')
  AND NOT EXISTS (SELECT 1 FROM events x WHERE x.run_id = a.run_id AND x.position = a.position)
  AND a.attempt = (SELECT max(attempt) FROM attempts b
                   WHERE b.run_id = a.run_id AND b.position = a.position);
-- Signals that arrived and no wait has consumed yet.
CREATE OR REPLACE VIEW pending_signals AS
SELECT s.* FROM signals s JOIN runs r USING (run_id)
WHERE r.status IN ('running', 'waiting')
  AND s.seq NOT IN (SELECT CAST(json_extract(e.value, '$.seq') AS INTEGER) FROM events e
                    WHERE e.run_id = s.run_id AND e.kind = 'signal_received');
"""

#: Schema 2's `events` table, a column per fact; `Store._upgrade` moves its rows to event_log.
EVENTS_V2_DDL = """
CREATE TABLE events (
    run_id VARCHAR NOT NULL, position INTEGER NOT NULL, kind VARCHAR NOT NULL,
    name VARCHAR NOT NULL, digest VARCHAR, ok BOOLEAN NOT NULL, value VARCHAR,
    recorded_at DOUBLE NOT NULL, attempt INTEGER, started_at DOUBLE, outcome VARCHAR,
    error_class VARCHAR, error VARCHAR, call_site VARCHAR, PRIMARY KEY (run_id, position))
"""

EVENT_COLS = ("run_id", "position", "kind", "name", "digest", "ok", "value", "recorded_at",
              "attempt", "started_at", "outcome", "error_class", "error", "call_site", "args",
              "handle")
#: The columns of schema 2's `events` table (it had no args, nor handle).
EVENT_COLS_V2 = EVENT_COLS[:-2]
EVENT_LOG_COLS = ("run_id", "position", "body")
# The other tables' columns are their row types' fields (durablelab/records.py).
ATTEMPT_COLS = AttemptRecord._fields
RUN_COLS = RunRecord._fields
SIGNAL_COLS = SignalRecord._fields
FAULT_COLS = FaultRecord._fields
CRASH_COLS = CrashRecord._fields
WAKEUP_COLS = WakeupRecord._fields
#: The row type `load` gives each table's rows.
RECORDS = {"attempts": AttemptRecord, "signals": SignalRecord, "faults": FaultRecord,
            "wakeups": WakeupRecord}


@functools.cache
def shapes() -> dict[str, str]:
    """The definition (`catalog`) of each table the DDL creates, of schema 4's `runs` (no
    `waiting` yet) and of schema 2's `events`, read from scratch databases: the DDL stays
    the one description of a store's tables."""
    with connect(None) as con:
        con.execute(DDL)
        found = {k: v for k, v in catalog(con).items() if v != "view"}
        con.execute("ALTER TABLE runs DROP COLUMN waiting")
        found["runs_v4"] = catalog(con)["runs"]
    with connect(None) as con:
        con.execute(EVENTS_V2_DDL)
        found["events_v2"] = catalog(con)["events"]
    return found


def expected_tables(version: int) -> dict[str, str]:
    """What each name durablelab reads or replaces is in a store of schema `version`: a
    table's definition (`catalog`), or "view". Before schema 5, `runs` had no `waiting` (its
    last column); schema 2 kept `events` as a table and had no `event_log`."""
    known = shapes()
    expected: dict[str, str] = {name: shape for name, shape in known.items()
                                if name not in ("events_v2", "runs_v4")}
    expected.update(events="view", pending_timers="view", pending_signals="view")
    if version == 2:
        del expected["event_log"]
        expected["events"] = known["events_v2"]
    return expected


def check_tables(path, found: dict, version: int, names=None) -> None:
    """Refuse (StoreFormatError) a store where a name durablelab reads is not what its DDL
    makes of it: a view in place of a table (it would run the file's SQL), a table with
    other columns, types or key, or a table missing from a store of this version. `found`
    is the store's `catalog`; `names` limits the check to those names."""
    expected = expected_tables(version)
    for name in (expected if names is None else names):
        want, have = expected[name], found.get(name)
        if have is None:
            if want != "view" and version == SCHEMA_VERSION:
                raise store_tampered(path, name, f"it has no table {name!r}, which every "
                                                 f"durablelab store of schema {version} has")
            continue
        if want == "view":
            if have != "view":
                raise store_tampered(path, name, f"its {name!r} is a table, where "
                                                 f"durablelab keeps a view")
            continue
        if have == "view":
            raise store_tampered(path, name, f"its {name!r} is a view, not the table "
                                             f"durablelab writes: a view runs SQL the file "
                                             f"brings with it, so durablelab does not read it")
        older = name == "runs" and version < 5 and have == shapes()["runs_v4"]
        if have != want and not older:
            raise store_tampered(path, name, f"its table {name!r} is not the one durablelab "
                                             f"creates: it is {name}{have}, where "
                                             f"durablelab's is {name}{want}")


__all__ = ["SCHEMA_VERSION", "DDL", "EVENT_COLS", "RECORDS", "check_tables", "expected_tables",
           "shapes"]
