"""The order agent of lesson 17 written three ways (durablelab.examples.three_ways): the same
model, tools and world, so that what differs under one fault plan is the framework's doing.
These are the claims the lesson's table and its retry table make."""

import functools

import pytest

pytest.importorskip("pydantic_ai", reason="the Pydantic AI extra is not installed: "
                                          "pip install -e '.[pydantic-ai]'")
pytest.importorskip("langgraph.checkpoint.sqlite", reason="the LangGraph extra is not "
                    "installed: pip install -e '.[langgraph]'")

from langgraph.checkpoint.memory import InMemorySaver  # noqa: E402
from langgraph.types import RetryPolicy  # noqa: E402

import durablelab as dl  # noqa: E402
from durablelab.backends import langgraph as lgb  # noqa: E402
from durablelab.examples import three_ways as tw  # noqa: E402
from durablelab.faults import Crash, RateLimit  # noqa: E402

PLAN = dl.FaultPlan([RateLimit("model", times=1, retry_after=2.0),
                     Crash("send_receipt", point="after_effect")])


def engine_run(workflow, world, faults=None):
    with dl.Engine(world=world) as engine:
        run_id = engine.start(workflow, tw.TASK, faults=faults)
        engine.run_until_idle()
        return engine.run(run_id)


@pytest.mark.parametrize("workflow", [tw.react_agent, tw.pydantic_agent])
def test_on_durablelab_a_crash_after_the_receipt_repeats_only_the_receipt(workflow):
    world = tw.keyless()
    run = engine_run(workflow, world, PLAN)
    assert run.status == "completed", run.error
    names = run.history[run.history.kind == "activity"].name.tolist()
    assert names == ["model", "lookup_order", "model", "charge_card", "send_receipt", "model"]
    row = dl.compare(run, world=world).iloc[0]
    assert (row.retries_rate_limited, row.crashes, row.model_calls_paid) == (1, 1, 3)
    assert (len(world.payments.effects), len(world.email.effects)) == (1, 2)
    assert run.attempts[run.attempts.outcome == "rate_limited"].delay.tolist() == [2.0]


def crash_after_the_receipt(build):
    """The plan's run (a 429 on the first model call, a crash right after the receipt: the
    explorer's p5-after_effect row) of a LangGraph build, its world, and the whole report."""
    kept = {}
    build = functools.partial(build, plan=[RateLimit("model", times=1)],
                              retry=RetryPolicy(initial_interval=0.0, jitter=False))
    report = lgb.explore_crashes(build, tw.graph_input(), lambda run, world: kept.update(
        {run.run_id: (run, world)}), world=tw.keyless)
    return report, *kept["p5-after_effect"]


def test_on_langgraph_the_same_crash_runs_the_tools_node_again_and_charges_again():
    report, run, world = crash_after_the_receipt(tw.build_graph)
    assert run.source == "langgraph" and run.status == "completed"
    assert run.history.name.tolist() == ["agent", "tools", "agent", "tools", "agent"]
    row = dl.compare(run, world=world).iloc[0]
    assert (row.retries_rate_limited, row.crashes, row.model_calls, row.model_calls_paid) == (
        1, 1, 0, 3)
    assert (len(world.payments.effects), len(world.email.effects)) == (2, 2)
    assert report.frame.fired.iloc[1:].all()


def test_on_the_functional_api_the_same_crash_runs_only_the_receipt_again():
    report, run, world = crash_after_the_receipt(tw.build_functional)
    assert run.source == "langgraph" and run.status == "completed"
    assert len(run.history) == 6         # one saved task per model call and tool call
    row = dl.compare(run, world=world).iloc[0]
    assert (row.retries_rate_limited, row.crashes, row.model_calls, row.model_calls_paid) == (
        1, 1, 3, 3)
    assert (len(world.payments.effects), len(world.email.effects)) == (1, 2)
    assert report.frame.fired.iloc[1:].all()


def test_functional_api_breaks_only_in_the_charge_window_when_the_charge_ignores_keys():
    report = lgb.explore_crashes(tw.build_functional, tw.graph_input(),
                                 tw.one_charge_one_receipt, world=tw.keyless_charges)
    assert [(r.activity, r.point) for r in report.broken.itertuples()] == [
        ("charge_card", "after_effect")]
    assert len(report.points) == 18      # six tasks, three points each


def test_without_faults_each_framework_charges_once_and_answers():
    for workflow in (tw.react_agent, tw.pydantic_agent):
        world = tw.keyless()
        run = engine_run(workflow, world)
        assert run.status == "completed" and repr(world) == (
            "World(model calls paid 3, charges 1, receipts 1)")
    world = tw.keyless()
    out = tw.build_graph(InMemorySaver(), world).invoke(
        tw.graph_input(), {"configurable": {"thread_id": "t-1"}})
    assert out["messages"][-1]["content"].startswith("Order A-1001 is paid")
    assert repr(world) == "World(model calls paid 3, charges 1, receipts 1)"
    world = tw.keyless()
    out = tw.build_functional(InMemorySaver(), world).invoke(
        tw.graph_input(), {"configurable": {"thread_id": "t-1"}})
    assert out["messages"][-1]["content"].startswith("Order A-1001 is paid")
    assert repr(world) == "World(model calls paid 3, charges 1, receipts 1)"


def test_langgraph_default_retry_on_against_lgb_retry_on():
    cases = {503: (3, 3), 429: (1, 3), 400: (1, 1)}
    for status, (default, ours) in cases.items():
        error = tw.http_error(status)
        assert (tw.node_calls(error), tw.node_calls(error, lgb.retry_on)) == (default, ours)
    for status in (503, 429):       # add_node's default: no retry_policy, no retry
        assert tw.node_calls(tw.http_error(status), max_attempts=None) == 1
    own_class = tw.BadRequest("400: the card number is invalid")
    assert (tw.node_calls(own_class), tw.node_calls(own_class, lgb.retry_on)) == (3, 1)


def test_an_order_that_does_not_exist_is_the_tools_error_not_a_retry():
    with pytest.raises(dl.NonRetryable, match="no order 'B-1'"):
        tw.World().lookup_order("B-1")


def run_graph(build, world, retry_on):
    """Invoke `build`'s graph once on `world` with a quick RetryPolicy; its error, or None."""
    options = {} if retry_on is None else {"retry_on": retry_on}
    graph = build(InMemorySaver(), world, retry=RetryPolicy(initial_interval=0.0, jitter=False,
                                                            **options))
    try:
        graph.invoke(tw.graph_input(), {"configurable": {"thread_id": "t-1"}})
    except tw.BadRequest as exc:
        return exc
    return None


def test_a_400_from_a_tool_each_framework_in_its_own_way():
    world = tw.invalid_card()                  # react: the error goes back to the model
    run = engine_run(tw.react_agent, world)
    assert run.status == "completed" and world.rejected == 1 and not world.payments.effects
    tools = run.history[run.history.kind == "activity"].name.tolist()
    assert tools == ["model", "lookup_order", "model", "charge_card", "send_receipt", "model",
                     "send_receipt", "model"]
    world = tw.invalid_card()                  # Pydantic AI: a tool's exception ends the run
    run = engine_run(tw.pydantic_agent, world)
    assert run.status == "failed" and world.rejected == 1
    assert isinstance(run.error, dl.ActivityFailed)
    for build in (tw.build_graph, tw.build_functional):
        for retry_on, sent in ((None, 3), (lgb.retry_on, 1)):
            world = tw.invalid_card()
            assert isinstance(run_graph(build, world, retry_on), tw.BadRequest)
            assert world.rejected == sent and not world.payments.effects
