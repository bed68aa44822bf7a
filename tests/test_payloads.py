"""Large payloads by reference (`Engine(payload_threshold=...)`): a value longer than the
threshold is stored once in `payloads` under its SHA-256 and the event names it; replay,
views, the `events` view, exports and `replay_check` resolve it; a reference with nothing
behind it (or the wrong thing) sets its run aside, and the other runs carry on."""

from __future__ import annotations

import random

import duckdb
import pytest

import durablelab as dl
from durablelab.faults import Crash

DOC = "".join(random.Random(7).choice("abcdefghij klmnop") for _ in range(200_000))


def fetch(i):
    return {"doc": DOC}


def reads_ten(ctx, n):
    sizes = [len(ctx.activity("fetch", fetch, i)["doc"]) for i in range(n)]
    return {"sizes": sizes, "go": ctx.wait_signal("go")}


def small(ctx, _):
    return ctx.activity("small", lambda: "tiny")


def stored(path):
    con = duckdb.connect(str(path), read_only=True)
    try:
        return (con.execute("SELECT count(*), coalesce(sum(length(body)), 0) FROM payloads")
                .fetchone(), con.execute("SELECT sum(length(body)) FROM event_log").fetchone()[0],
                [v for (v,) in con.execute("SELECT value FROM events WHERE run_id = 'r' AND "
                                           "kind = 'activity' ORDER BY position").fetchall()])
    finally:
        con.close()


def test_ten_activities_returning_one_document_store_it_once_and_replay_it(tmp_path):
    path = tmp_path / "s.duckdb"
    engine = dl.Engine(path, payload_threshold=65536)
    engine.start(reads_ten, 10, run_id="r", faults=[Crash("fetch", point="after_record",
                                                          position=[4])])
    engine.start(small, None, run_id="s")
    engine.run_until_idle()                    # a crash and a recovery on the way
    engine.close()
    (payloads, payload_bytes), event_bytes, values = stored(path)
    assert payloads == 1 and payload_bytes > len(DOC)
    assert event_bytes < 10_000                # ten references, not ten documents
    assert len(values) == 10 and all(DOC in v for v in values)   # the view resolves them
    engine = dl.Engine(path, workflows=[reads_ten])
    engine.signal("r", "go", True)
    engine.run_until_idle()
    run = engine.run("r")
    assert run.result == {"sizes": [len(DOC)] * 10, "go": True}
    assert run.history.value.iloc[0] == {"doc": DOC}
    assert engine.run("s").result == "tiny"
    engine.close()
    assert dl.replay_check(reads_ten, str(path)).ok
    with dl.Engine(path, read_only=True) as reader:
        export = dl.export(reader, tmp_path / "runs.jsonl")
    [loaded] = [r for r in dl.load(export) if r.run_id == "r"]
    assert loaded.history.value.iloc[9] == {"doc": DOC}


def test_in_memory_store_keeps_one_copy_too():
    engine = dl.Engine(payload_threshold=1000)
    run_id = engine.start(reads_ten, 3)
    engine.signal(run_id, "go", 1)
    engine.run_until_idle()
    assert engine.run(run_id).result["sizes"] == [len(DOC)] * 3
    assert engine.store.fetch("SELECT count(*) FROM payloads") == [(1,)]


@pytest.mark.parametrize("damage, why", [
    ("DELETE FROM payloads", "missing"),
    ("UPDATE payloads SET body = '{\"doc\": \"forged\"}'", "not the one its digest names"),
])
def test_a_reference_with_the_wrong_payload_behind_it_sets_its_run_aside(tmp_path, damage, why):
    path = tmp_path / "s.duckdb"
    with dl.Engine(path, payload_threshold=65536) as engine:
        engine.start(reads_ten, 2, run_id="r")
        engine.start(reads_ten, 0, run_id="other")
        engine.run_until_idle()
    con = duckdb.connect(str(path))
    con.execute(damage)
    con.close()
    engine = dl.Engine(path, workflows=[reads_ten])
    try:
        with pytest.raises(dl.DurableLabError, match=why):
            engine.run("r")
        engine.signal("other", "go", "ok")
        engine.run_until_idle()
        assert engine.run("other").result == {"sizes": [], "go": "ok"}
    finally:
        engine.close()


def test_the_threshold_counts_bytes_of_json_not_characters():
    # 3,000 "é" are 3,002 characters of JSON text but 6,002 bytes of UTF-8: over a
    # threshold of 5,000 bytes, as the docs say; 1,000 of them (2,002 bytes) are not.
    def accents(ctx, n):
        return [len(ctx.activity("text", lambda k=k: "é" * k)) for k in n]

    engine = dl.Engine(payload_threshold=5000)
    run_id = engine.start(accents, [3000, 1000])
    engine.run_until_idle()
    assert engine.run(run_id).result == [3000, 1000]
    assert engine.store.fetch("SELECT count(*), min(length(body)) FROM payloads") == [(1, 3002)]


@pytest.mark.parametrize("threshold", [0, -5, True, 1.5, "64k"])
def test_a_threshold_that_is_not_a_positive_number_of_bytes_is_refused(threshold):
    with pytest.raises(dl.DurableLabError, match="payload_threshold"):
        dl.Engine(payload_threshold=threshold)


@pytest.mark.parametrize("version", ["5", "6"])
def test_a_store_without_payloads_is_upgraded_in_place(tmp_path, version):
    path = tmp_path / "s.duckdb"
    with dl.Engine(path) as engine:
        engine.start(reads_ten, 1, run_id="r")
        engine.run_until_idle()
    con = duckdb.connect(str(path))
    con.execute("DROP VIEW pending_timers; DROP VIEW pending_signals; DROP VIEW events; "
                f"DROP TABLE payloads; UPDATE meta SET value = '{version}' "
                f"WHERE key = 'schema_version'")
    con.close()
    engine = dl.Engine(path, workflows=[reads_ten], payload_threshold=1000)
    try:
        engine.signal("r", "go", 1)
        engine.run_until_idle()
        assert engine.run("r").result == {"sizes": [len(DOC)], "go": 1}
        assert engine.store.fetch("SELECT value FROM meta WHERE key = 'schema_version'") == [
            (str(dl.store.SCHEMA_VERSION),)]
    finally:
        engine.close()
