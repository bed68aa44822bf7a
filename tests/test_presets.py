"""The presets checked against what they mimic: the installed LangGraph's own `RetryPolicy`
(so the test fails when LangGraph changes a default) and Prefect's immediate task retries,
waited out on the engine's virtual clock."""

from __future__ import annotations

import random

import pytest

import durablelab as dl
from durablelab.retry import next_delay
from durablelab.errors import Transient


def test_langgraph_default_matches_the_installed_retry_policy():
    types = pytest.importorskip("langgraph.types")
    installed = types.RetryPolicy()
    preset = dl.presets["langgraph-default"]
    assert (preset.initial, preset.backoff, preset.max_interval, preset.max_attempts) == (
        installed.initial_interval, installed.backoff_factor, installed.max_interval,
        installed.max_attempts)
    # LangGraph's jitter is added on top of the cap, which a RetryPolicy cannot say: the
    # preset waits the caps and its source says so.
    assert preset.jitter == "none"
    if installed.jitter:
        assert "random.uniform(0, 1)" in dl.presets.sources["langgraph-default"]
    waits = [next_delay(preset, n, Transient("503"), random.Random(0)) for n in (1, 2)]
    assert waits == [0.5, 1.0]


def test_prefect_task_retries_retry_at_once_four_attempts_in_all():
    preset = dl.presets["prefect-task-retries"]
    assert preset.max_attempts == 4
    assert [next_delay(preset, n, Transient("503"), random.Random(0)) for n in (1, 2, 3)] == [
        0.0, 0.0, 0.0]
    assert "docs.prefect.io" in dl.presets.sources["prefect-task-retries"]


def pay(ctx, amount):
    return ctx.activity("charge", lambda a: {"charged": a}, amount)


def test_prefect_task_retries_survive_three_failures_at_one_instant():
    engine = dl.Engine()
    plan = dl.FaultPlan([dl.faults.ServerError("charge", attempts=[1, 2, 3])])
    engine.start(pay, 10, run_id="r", faults=plan,
                 policies={"*": dl.presets["prefect-task-retries"]})
    engine.run_until_idle()
    run = engine.run("r")
    assert run.status == "completed" and run.result == {"charged": 10}
    assert run.attempts["attempt"].tolist() == [1, 2, 3, 4]
    assert run.attempts["outcome"].tolist() == ["transient"] * 3 + ["ok"]
    row = dl.compare(run).loc["r"]
    assert (row["retries"], row["retries_transient"], row["virtual_duration"]) == (3, 3, 0.0)
    # a fourth failure is one too many
    engine.start(pay, 10, run_id="r4", faults=dl.FaultPlan(
        [dl.faults.ServerError("charge", attempts=[1, 2, 3, 4])]),
        policies={"*": dl.presets["prefect-task-retries"]})
    engine.run_until_idle()
    assert engine.run("r4").status == "failed"
