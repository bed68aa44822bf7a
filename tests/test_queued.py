"""An in-memory store's recovery reads its queue (durablelab/queued.py) instead of DuckDB
while nothing has reached DuckDB: the rows, their order and their types must be exactly what
the queries give once the queue is written. And a store emptied by `Store.forget` starts
over: the next run's recovery sees nothing of the runs before it."""

import pytest

import durablelab as dl
from durablelab.faults import Crash, Latency, ServerError

POLICY = dl.RetryPolicy(max_attempts=4, initial=1.0, jitter="none")


def step(i, idempotency_key=None):
    return {"i": i, "key": idempotency_key}


def workflow(ctx, n):
    total = 0
    for i in range(n):
        total += ctx.activity(f"step_{i}", step, i, policy=POLICY)["i"]
    ctx.sleep(5)
    if ctx.wait_signal("go", timeout=10) is None:
        return {"timed_out": True, "total": total}
    return {"total": total, "r": ctx.random()}


PLAN = dl.FaultPlan([ServerError("step_1", attempts=[1, 2]), Latency("step_0", seconds=0.5),
                     Crash("step_2", point="after_effect"), Crash("sleep", point="during_wait")])


def reads(store):
    return store.run_rows(), store.load_unfinished(), store.crash_rows()


def busy_engine():
    """An in-memory engine with runs that ended, runs still waiting, retries, faults and
    crashes that its recoveries read back, and nothing written to DuckDB yet."""
    engine = dl.Engine()
    for k, n in enumerate((1, 3, 4)):
        engine.start(workflow, n, run_id=f"r{k}", faults=PLAN, seed=k)
    engine.advance(12.0)         # past the retries, crashes and sleeps: all wait for "go"
    assert {engine.run(r).status for r in ("r0", "r1", "r2")} == {"waiting"}
    engine.signal("r1", "go", True)
    engine.advance(0.5)          # r1 ends; the others still wait
    assert engine.run("r1").status == "completed" and engine.run("r0").status == "waiting"
    return engine


def test_recovery_reads_from_the_queue_what_the_queries_would_give():
    engine = busy_engine()
    try:
        store = engine.store
        assert not store._written and store._queue, "nothing may have reached DuckDB yet"
        from_queue = reads(store)
        assert from_queue[0] and from_queue[2], "runs and crashes to compare"
        assert any(from_queue[1][t] for t in ("events", "attempts", "signals", "faults",
                                               "wakeups"))
        store.flush()
        assert store._written
        from_duckdb = reads(store)
        assert from_queue == from_duckdb
        for q, d in zip([*from_queue[0], *from_queue[2]], [*from_duckdb[0], *from_duckdb[2]]):
            assert [type(v) for v in q] == [type(v) for v in d]
        for table, rows in from_queue[1].items():
            for q, d in zip(rows, from_duckdb[1][table]):
                assert [type(v) for v in q] == [type(v) for v in d], table
    finally:
        engine.close()


def test_runs_recovered_from_the_queue_end_as_from_duckdb():
    results = []
    for write_first in (False, True):
        engine = busy_engine()
        if write_first:
            engine.store.flush()
        engine.crash()
        engine.run_until_idle()
        results.append({r: (engine.run(r).status, engine.run(r).result,
                            engine.run(r).history.to_dict("list")) for r in ("r0", "r1", "r2")})
        engine.close()
    assert results[0] == results[1]


def test_forget_empties_the_store_for_the_next_run():
    engine = dl.Engine()
    try:
        engine.start(workflow, 3, run_id="first", faults=PLAN)
        engine.run_until_idle()
        engine.store.flush()          # as a read would: the rows are in DuckDB now
        engine.store.forget()
        assert reads(engine.store) == ([], reads(engine.store)[1], [])
        assert not any(reads(engine.store)[1].values())
        assert engine.store.fetch("SELECT count(*) FROM event_log") == [(0,)]
    finally:
        engine.close()


@pytest.mark.parametrize("method, words", [
    ("forget", "in-memory store only.*is a file"),
    ("discard_queue", "in-memory store's queue only.*is a file")])
def test_forget_and_discard_queue_refuse_a_file_store(tmp_path, method, words):
    engine = dl.Engine(tmp_path / "lab.duckdb")
    try:
        with pytest.raises(dl.DurableLabError, match=words):
            getattr(engine.store, method)()
    finally:
        engine.close()


def test_a_discarding_store_keeps_nothing_queued_until_forget():
    """A contended sweep cell that cannot crash drops its rows unwritten
    (`Store.discard_queue`): nothing reaches the queue or DuckDB, a run still ends with the
    result and history it would have, a read (a recovery too) is refused instead of
    answering "no runs", and `forget` makes the store keep rows again."""
    kept, dropped = dl.Engine(), dl.Engine()
    try:
        dropped.store.discard_queue()
        for engine in (kept, dropped):
            engine.start(workflow, 3, run_id="r", faults=dl.FaultPlan(
                [ServerError("step_1", attempts=[1])]))
            engine.run_until_idle()
        assert dropped.store._queue == [] and kept.store._queue
        assert dropped._runs["r"].history == kept._runs["r"].history
        assert dropped._runs["r"].result_json == kept._runs["r"].result_json
        for read in (lambda: dropped.store.fetch("SELECT count(*) FROM event_log"),
                     dropped.store.run_rows, dropped.store.load_unfinished, dropped.crash):
            with pytest.raises(dl.DurableLabError, match="drops the rows.*none to read"):
                read()   # a recovery too: loudly, not as if there had been no runs
        dropped.store.forget()
        dropped.store.insert("crashes", (1.0, "r", 1, "after_effect", "test"))
        assert dropped.store.fetch("SELECT count(*) FROM crashes") == [(1,)]
    finally:
        kept.close()
        dropped.close()
