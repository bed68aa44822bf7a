"""The presets checked against what they mimic: the installed LangGraph's own `RetryPolicy`
(so the test fails when LangGraph changes a default) and Prefect's immediate task retries,
waited out on the engine's virtual clock."""

from __future__ import annotations

import dataclasses
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
    # LangGraph adds up to 1 s after the cap: jitter="additive" says the same
    assert installed.jitter and preset.jitter == "additive"
    assert "random.uniform(0, 1)" in dl.presets.sources["langgraph-default"]


class Drawn:
    """A random source whose every draw is `u` of the range: LangGraph's and ours alike."""

    def __init__(self, u):
        self.u = u

    def uniform(self, a, b):
        return a + (b - a) * self.u


@pytest.mark.parametrize("u", [0.0, 0.3, 0.999])
def test_langgraph_default_waits_what_the_installed_langgraph_waits(monkeypatch, u):
    """LangGraph's own retry loop run with its default policy, its sleeps recorded instead
    of slept and its random draw fixed: the preset's waits for the same draw are equal."""
    retry = pytest.importorskip("langgraph.pregel._retry")
    from langgraph.graph import END, START, StateGraph
    from langgraph.types import RetryPolicy as LangGraphPolicy
    slept = []
    monkeypatch.setattr(retry, "random", Drawn(u))
    monkeypatch.setattr(retry.time, "sleep", slept.append)

    def flaky(state):
        raise ConnectionError("reset by peer")      # retried by LangGraph's default

    graph = StateGraph(dict)
    graph.add_node("flaky", flaky, retry_policy=LangGraphPolicy(max_attempts=5))
    graph.add_edge(START, "flaky")
    graph.add_edge("flaky", END)
    with pytest.raises(ConnectionError):
        graph.compile().invoke({"x": 1})
    preset = dataclasses.replace(dl.presets["langgraph-default"], max_attempts=5)
    ours = [next_delay(preset, n, Transient("reset"), Drawn(u)) for n in range(1, 5)]
    assert len(slept) == 4 and slept == pytest.approx(ours)
    assert ours == pytest.approx([0.5 + u, 1.0 + u, 2.0 + u, 4.0 + u])


def test_additive_jitter_adds_up_to_a_second_after_the_cap():
    policy = dl.RetryPolicy(initial=100.0, max_interval=128.0, jitter="additive")
    waits = [next_delay(policy, n, Transient("503"), random.Random(seed))
             for n in (1, 2, 3) for seed in range(50)]
    assert all(100.0 <= w < 101.0 for w in waits[:50])
    assert all(128.0 <= w < 129.0 for w in waits[50:])     # past max_interval, as LangGraph
    assert len(set(waits[:50])) == 50                       # a draw per run


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
