"""compare(): one row of metrics per run, with exact values on hand-made scenarios, the same
for runs from an engine and runs loaded from an export."""

import dataclasses

import pandas as pd
import pytest
from pandas.testing import assert_frame_equal

import durablelab as dl
from durablelab.compare import COLUMNS, compare
from durablelab.export import export, load
from durablelab.faults import Crash, Latency, RateLimit, ServerError

NONE = dl.RetryPolicy(max_attempts=4, jitter="none")
executions = []


def llm(prompt):
    return {"text": prompt.upper(), "usage": {"input_tokens": 100, "output_tokens": 20,
                                              "cost": 0.25}}


def charge(amount, idempotency_key=None):
    executions.append(("charge", idempotency_key))
    return {"charged": amount}


def ship():
    executions.append(("ship", None))
    return "shipped"


def fetch_wf(ctx, _):
    return ctx.activity("fetch", lambda: {"id": 1}, policy=NONE)


def model_wf(ctx, _):
    first = ctx.activity("llm", llm, "hi", policy=NONE)
    second = ctx.activity("llm", llm, "again", policy=NONE)
    return [first["text"], second["text"]]


def effects_wf(ctx, _):
    ctx.activity("charge", charge, 10, policy=NONE)
    return ctx.activity("ship", ship, policy=NONE, start_to_close=5)


def replay_wf(ctx, _):
    ctx.activity("one", lambda: 1)
    ctx.activity("two", lambda: 2)
    ctx.sleep(60)
    return ctx.activity("three", lambda: 3)


def rejected_wf(ctx, _):
    return ctx.activity("screen", lambda: (_ for _ in ()).throw(ValueError("sanctioned")),
                        policy=NONE)


def waiting_wf(ctx, _):
    ctx.activity("prepare", lambda: "ready", policy=NONE)
    return ctx.wait_signal("go")


def one_run(workflow, faults=None):
    """The metrics row of one run of `workflow`, alone on a fresh engine."""
    executions.clear()
    engine = dl.Engine()
    run_id = engine.start(workflow, None, run_id="r", faults=faults)
    engine.run_until_idle()
    run = engine.run(run_id)
    engine.close()
    row = compare([run]).loc["r"]
    assert row["retries"] == sum(row[c] for c in COLUMNS if c.startswith("retries_"))
    return run, row


def test_server_errors_on_attempts_1_and_2_are_two_transient_retries():
    _, row = one_run(fetch_wf, [ServerError("fetch", attempts=[1, 2])])
    assert row.to_dict() == {
        "source": "durablelab", "status": "completed", "virtual_duration": 3.0,  # 1 s, 2 s
        "attempts": 3, "activities": 1, "retries": 2, "retries_transient": 2,
        "retries_rate_limited": 0, "retries_timeout": 0, "retries_malformed": 0,
        "retries_non_retryable": 0, "retries_circuit_open": 0, "retries_other": 0,
        "crashes": 0, "effect_reexecutions": 0, "duplicates_prevented": 0,
        "model_calls": 0, "input_tokens": 0,
        "output_tokens": 0, "tokens": 0, "cost": 0.0,
        "wakeups": 3,                                      # start, retry, retry
        "events_replayed": 0,
        "history_events": 1, "history_bytes": len("fetch") + len('{"id":1}')}


def test_model_usage_and_rate_limit_retries():
    _, row = one_run(model_wf, [RateLimit("llm", attempts=[1], retry_after=30)])
    assert row["model_calls"] == 2
    assert (row["input_tokens"], row["output_tokens"], row["tokens"]) == (200, 40, 240)
    assert row["cost"] == pytest.approx(0.5)
    assert row["retries_rate_limited"] == 2 and row["retries"] == 2   # one per call
    assert row["virtual_duration"] == 60.0                             # two 30 s Retry-Afters


def test_a_crash_after_the_effect_and_a_time_out_are_effect_reexecutions():
    run, row = one_run(effects_wf, [Crash("charge", point="after_effect", times=1),
                                    Latency("ship", attempts=[1], seconds=10)])
    # charge ran twice (the crash lost its record), ship ran twice (its first answer came
    # after start_to_close): two possible duplicate effects, as the functions' own counts say.
    assert executions == [("charge", "r:1"), ("charge", "r:1"), ("ship", None), ("ship", None)]
    assert row["effect_reexecutions"] == 2
    assert row["crashes"] == 1 and "crashed" in set(run.attempts["outcome"])
    # The crashed row is not an attempt: charge had 1, ship 2.
    assert (row["attempts"], row["activities"], row["retries"]) == (3, 2, 1)
    assert row["retries_timeout"] == 1 and row["retries_transient"] == 0
    assert row["virtual_duration"] == 6.0     # ship: cut at 5 s, backoff 1 s, then ok


def test_replay_counts_events_handed_back_on_each_wakeup():
    _, row = one_run(replay_wf)
    assert (row["wakeups"], row["events_replayed"]) == (2, 3)   # the timer's wake-up replays 3
    assert (row["history_events"], row["virtual_duration"]) == (5, 60.0)
    # names: one two sleep sleep three; values: 1, 2, {"seconds":60.0,"deadline":60.0}, none, 3
    assert row["history_bytes"] == (3 + 3 + 5 + 5 + 5) + (1 + 1 + len(
        '{"seconds":60.0,"deadline":60.0}') + 0 + 1)


def test_a_non_retryable_failure_is_not_retried():
    run, row = one_run(rejected_wf)
    assert row["status"] == "failed" and isinstance(run.error, dl.ActivityFailed)
    assert (row["attempts"], row["retries"], row["retries_non_retryable"]) == (1, 0, 0)


def test_an_unfinished_run_lasts_until_the_latest_instant_it_recorded():
    run, row = one_run(waiting_wf, [ServerError("prepare", attempts=[1])])
    assert run.status == "waiting" and run.ended_at is None
    assert row["virtual_duration"] == 1.0


def test_attempts_a_source_did_not_list_count_as_other_retries():
    run, _ = one_run(fetch_wf)
    # Temporal records only an activity's last attempt number: here attempt 3, one row.
    attempts = run.attempts.copy()
    attempts["attempt"] = pd.array([3], dtype="Int64")
    row = compare([dataclasses.replace(run, attempts=attempts)]).loc["r"]
    assert (row["attempts"], row["retries"], row["retries_other"]) == (3, 2, 2)


def test_compare_accepts_an_engine_a_run_a_file_and_nothing(tmp_path):
    engine = dl.Engine()
    engine.start(fetch_wf, None, run_id="a", faults=[ServerError("fetch", attempts=[1])])
    engine.start(replay_wf, None, run_id="b")
    engine.run_until_idle()
    frame = compare(engine)
    assert list(frame.index) == ["a", "b"] and frame.index.name == "run_id"
    assert list(frame.columns) == COLUMNS
    assert_frame_equal(compare(engine.run("a")), frame.loc[["a"]])
    path = export(engine, tmp_path / "runs.parquet")
    assert_frame_equal(compare(path), frame)
    assert_frame_equal(compare(str(path)), compare(load(path)))
    engine.close()
    empty = compare([])
    assert empty.empty and list(empty.columns) == COLUMNS and empty.index.name == "run_id"


@pytest.mark.parametrize("suffix", [".jsonl", ".parquet"])
def test_metrics_are_the_same_after_export_and_load(tmp_path, suffix):
    engine = dl.Engine()
    engine.start(model_wf, None, run_id="m", faults=[RateLimit("llm", attempts=[1])])
    engine.start(effects_wf, None, run_id="e", faults=[
        Crash("charge", point="after_effect", times=1), Latency("ship", attempts=[1], seconds=10)])
    engine.start(waiting_wf, None, run_id="w")
    engine.run_until_idle()
    before = compare(engine)
    after = compare(load(export(engine, tmp_path / f"runs{suffix}")))
    assert_frame_equal(after, before)
    assert before.loc["e", "effect_reexecutions"] == 2 and before.loc["m", "tokens"] == 240
    engine.close()
