"""Stores written by an older durablelab open in this one: schema 2 kept every fact of an
event in its own column of an `events` table; schema 3 writes the narrow `event_log` and
reads it through an `events` view. Opening a schema-2 file moves its rows over, unchanged,
and its unfinished runs carry on. A stored history whose positions are not 1, 2, 3, ...
is refused with an error naming the run and the position."""

import duckdb
import pytest

import durablelab as dl
from durablelab.store import EVENT_COLS_V2 as EVENT_COLS

# The events table exactly as schema 2 declared it.
EVENTS_V2 = """
CREATE TABLE events (
    run_id VARCHAR NOT NULL, position INTEGER NOT NULL, kind VARCHAR NOT NULL,
    name VARCHAR NOT NULL, digest VARCHAR, ok BOOLEAN NOT NULL, value VARCHAR,
    recorded_at DOUBLE NOT NULL, attempt INTEGER, started_at DOUBLE, outcome VARCHAR,
    error_class VARCHAR, error VARCHAR, call_site VARCHAR, PRIMARY KEY (run_id, position))
"""


def square(i):
    return {"i": i, "square": i * i, "third": i / 3}


def squares_then_wait(ctx, n):
    got = [ctx.activity("square", square, i)["square"] for i in range(n)]
    return {"squares": got, "go": ctx.wait_signal("go"), "at": ctx.now()}


def rows(con_or_store, sql):
    fetch = getattr(con_or_store, "fetch", None)
    return fetch(sql) if fetch else con_or_store.execute(sql).fetchall()


def downgrade_to_v2(path):
    """Rewrite a schema-3 file as schema 2 wrote it: the same events, one column a fact."""
    con = duckdb.connect(str(path))
    events = rows(con, f"SELECT {', '.join(EVENT_COLS)} FROM events ORDER BY run_id, position")
    con.execute("DROP VIEW pending_timers; DROP VIEW pending_signals; DROP VIEW events; "
                "DROP TABLE event_log;")
    con.execute(EVENTS_V2)
    con.executemany(f"INSERT INTO events VALUES ({', '.join('?' * len(EVENT_COLS))})", events)
    con.execute("UPDATE meta SET value = '2' WHERE key = 'schema_version'")
    con.close()
    return events


def test_a_schema_2_file_is_upgraded_in_place_and_its_run_carries_on(db_path):
    plan = [dl.faults.ServerError("square", attempts=(1,))]
    with dl.Engine(db_path) as engine:
        engine.start(squares_then_wait, 4, run_id="r", faults=plan, seed=3)
        engine.run_until_idle()
    events = downgrade_to_v2(db_path)
    assert len(events) == 5 and events[0][2] == "activity"

    engine = dl.Engine(db_path, workflows=[squares_then_wait])
    try:
        after = rows(engine.store, f"SELECT {', '.join(EVENT_COLS)} FROM events "
                                   f"ORDER BY run_id, position")
        assert after == events                       # every value, float and flag unchanged
        assert rows(engine.store, "SELECT value FROM meta WHERE key = 'schema_version'") == \
            [(str(dl.store.SCHEMA_VERSION),)]
        engine.signal("r", "go", "yes")
        engine.run_until_idle()
        run = engine.run("r")
        assert run.status == "completed"
        assert run.result["squares"] == [0, 1, 4, 9] and run.result["go"] == "yes"
        assert (run.wakeups.reason == "recovery").sum() == 1
        assert (run.attempts.outcome == "ok").sum() == 4   # no activity ran again
    finally:
        engine.close()


def waiting_run_edited(path, sql):
    """A file holding runs 'r' and 'ok' (two steps, then a signal wait), edited by hand
    with `sql`."""
    with dl.Engine(path) as engine:
        engine.start(squares_then_wait, 2, run_id="r")
        engine.start(squares_then_wait, 2, run_id="ok")
        engine.run_until_idle()
    con = duckdb.connect(str(path))
    con.execute(sql)
    con.close()


def assert_set_aside_while_the_other_runs(path, match):
    engine = dl.Engine(path, workflows=[squares_then_wait])
    assert set(engine.runs()["run_id"]) == {"r", "ok"}   # still listed
    with pytest.raises(dl.StoreFormatError, match=match) as info:
        engine.run("r")
    assert info.value.run_id == "r" and "SELECT * FROM events" in str(info.value)
    with pytest.raises(dl.StoreFormatError, match=match):
        engine.signal("r", "go", "yes")
    engine.signal("ok", "go", "yes")                      # the healthy run carries on
    engine.run_until_idle()
    assert engine.run("ok").status == "completed"
    engine.close()


def test_a_duplicate_history_position_sets_the_run_aside(db_path):
    waiting_run_edited(db_path, "INSERT INTO event_log SELECT * FROM event_log "
                                "WHERE position = 2 AND run_id = 'r'")
    assert_set_aside_while_the_other_runs(
        db_path, r"Run 'r' .* has a second event at history position 2 \(expected position 3")
    con = duckdb.connect(str(db_path))                 # nothing was altered by the refusal
    assert rows(con, "SELECT count(*) FROM event_log WHERE run_id = 'r'") == [(4,)]
    con.close()


def test_a_gap_in_a_history_sets_the_run_aside(db_path):
    waiting_run_edited(db_path, "DELETE FROM event_log WHERE position = 1 AND run_id = 'r'")
    assert_set_aside_while_the_other_runs(
        db_path, r"a gap before the event at history position 2 \(expected position 1")
