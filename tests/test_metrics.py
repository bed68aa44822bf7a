"""durablelab.metrics: each metric defined once, over plain rows, and the two readers of it
(`dl.compare` from a `Run`'s frames, a sweep from the engine's state) giving the same row
for the same run, also where they used to differ."""

from __future__ import annotations

import dataclasses
import math
import sys
from pathlib import Path

import pandas as pd
import pytest

import durablelab as dl
from durablelab.compare import COLUMNS, compare
from durablelab.experiments.runner import METRICS
from durablelab.metrics import SHARED, latest_at, measure

TESTS = Path(__file__).resolve().parent
if str(TESTS) not in sys.path:
    sys.path.insert(0, str(TESTS))

import sweep_worker as sw  # noqa: E402

F = dl.faults


def measured(attempts, **facts):
    args = dict(status="completed", started_at=0.0, ended_at=1.0, instants=(),
                attempts=attempts, usages=[], discarded=None, crashes=0, replayed=[0],
                history_events=len(attempts))
    args.update(facts)
    return measure(**args)


def test_the_shared_columns_are_the_ones_both_readers_report():
    assert list(measured([])) == SHARED
    assert set(SHARED) <= set(COLUMNS) and set(SHARED) <= set(METRICS)
    # and what only one of them reports, each for its reason (see compare._compare_only
    # and runner.run_metrics)
    assert set(COLUMNS) - set(SHARED) == {"source", "effect_reexecutions",
                                          "duplicates_prevented", "history_bytes"}
    assert set(METRICS) - set(SHARED) == {"error", "duplicate_effects"}


def test_every_row_of_an_activity_but_the_last_is_a_retry_by_its_outcome():
    row = measured([(0, 1, "transient"), (0, 2, "rate_limited"), (0, 3, "ok"), (1, 1, "ok"),
                    (2, 1, "timeout"), (2, 2, "in_flight")])
    assert (row["attempts"], row["activities"], row["retries"]) == (6, 3, 3)
    assert (row["retries_transient"], row["retries_rate_limited"], row["retries_timeout"],
            row["retries_other"]) == (1, 1, 1, 0)


@pytest.mark.parametrize("missing", [None, math.nan, pd.NA])
def test_attempt_numbers_a_source_left_out_or_gave_alone(missing):
    # Temporal lists an activity's last attempt only (3: two retries it did not list);
    # a source without numbers counts its rows.
    row = measured([(0, 3, "ok"), (1, missing, "transient"), (1, missing, "ok"),
                    (2, 2.0, "ok")])
    assert (row["attempts"], row["activities"], row["retries"]) == (7, 3, 4)
    assert (row["retries_transient"], row["retries_other"]) == (1, 3)


def test_an_unfinished_run_lasts_until_its_latest_recorded_instant_at_least_its_start():
    assert measured([], ended_at=None, started_at=5.0,
                    instants=[6.0, None, math.nan, 9.5, 7.0])["virtual_duration"] == 4.5
    assert measured([], ended_at=None, started_at=5.0, instants=[])["virtual_duration"] == 0
    assert latest_at(5.0, [pd.NA, 4.0]) == 5.0


def test_model_usage_adds_the_broken_answers_the_model_billed():
    row = measured([], usages=[(10, 2, 0.5), (1, 1, 0.25)],
                   discarded={"calls": 2, "input_tokens": 3, "output_tokens": 4, "cost": 1.0})
    assert (row["model_calls"], row["input_tokens"], row["output_tokens"], row["tokens"],
            row["cost"]) == (4, 14, 7, 21, 1.75)


def test_compare_groups_the_attempts_a_source_listed_interleaved():
    with dl.Engine() as engine:
        engine.start(sw.plain_flow, {"n": 1}, run_id="r",
                     faults=dl.FaultPlan([F.ServerError("fetch", attempts=[1])]))
        engine.run_until_idle()
        run = engine.run("r")
    ordered = compare(run).loc["r"]
    assert (ordered["attempts"], ordered["retries_transient"]) == (3, 1)
    # the same rows, the other activity's listed between the two of "fetch"
    shuffled = run.attempts.iloc[[0, 2, 1]].reset_index(drop=True)
    assert list(shuffled["activity"]) == ["fetch", "model", "fetch"]
    again = compare(dataclasses.replace(run, attempts=shuffled)).loc["r"]
    pd.testing.assert_series_equal(again, ordered)


def same_as_compare(experiment):
    """The sweep's rows against dl.compare of the same runs made again."""
    by_compare = dl.compare(list(experiment.runs()))
    mine = experiment.frame.set_index("run_id")[SHARED]
    pd.testing.assert_frame_equal(mine, by_compare[SHARED], check_dtype=False,
                                  check_index_type=False)
    return by_compare


@pytest.mark.parametrize("contention", [False, True])
def test_a_crash_in_a_runs_first_step_counts_in_the_sweep_as_in_compare(contention):
    # A run's own crash at its very first instant: with contention the sweep counted only
    # crashes strictly after the run's start, so it said 0 where compare said 1.
    plan = dl.FaultPlan([F.Crash("quote", attempts=[1])])
    experiment = dl.sweep(sw.order_flow, sw.INPUTS[:2], fault_plans={"first": plan},
                          seeds=range(2), world=sw.Shop, contention=contention)
    assert (experiment.frame["crashes"] >= 1).all()
    same_as_compare(experiment)


def test_contended_runs_measure_what_compare_measures():
    experiment = dl.sweep(sw.order_flow, sw.INPUTS, policies=sw.POLICIES, seeds=range(3),
                          world=sw.Shop, contention=True, fault_plans={"rough": dl.FaultPlan([
                              F.ServerError("quote", p=0.3),
                              F.RateLimit("charge", p=0.2, retry_after=5),
                              F.Crash("charge", point="after_effect", p=0.3)])})
    frame = experiment.frame
    assert frame["crashes"].sum() > 0 and frame["retries"].sum() > 0
    same_as_compare(experiment)


# A Hang rule that hung "b" for good matched "b": the sweep's load counts the attempt in
# flight (`runner.add_starts`), so no UnmatchedFaultRuleWarning (made an error here, so a
# false warning fails the test).
@pytest.mark.filterwarnings("error::durablelab.errors.UnmatchedFaultRuleWarning")
def test_a_run_left_in_flight_measures_the_same_in_the_sweep_and_in_compare():
    # Without a run timeout a hung attempt stays in flight: it counts as an attempt, and
    # the run lasts until the latest instant it recorded.
    def hangs(ctx, _):
        ctx.activity("a", lambda: 1)
        ctx.sleep(3)
        return ctx.activity("b", lambda: 2)

    experiment = dl.sweep(hangs, [None], fault_plans={"hang": dl.FaultPlan([F.Hang("b")])},
                          seeds=range(2), timeout=None)
    frame = experiment.frame
    assert (frame["status"] == "running").all()
    assert (frame["attempts"] == 2).all() and (frame["virtual_duration"] == 3.0).all()
    assert experiment.unmatched_rules.empty
    assert set(experiment.load["source"]) == {"a", "b"}     # the hung request reached "b"
    same_as_compare(experiment)
