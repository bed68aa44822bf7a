"""The real chat-completions client (the official openai package) against the local fake
server: every failure a provider has, mapped to the engine's retry classes, offline.

The server counts the requests that reached it, so a model call repeated by a crash or a
replay cannot hide. Hangs are real, so they are kept short: the client's time-out is a
fraction of a second here.
"""

import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import durablelab as dl
from durablelab import agents
from durablelab.agents import FakeChatServer, OpenAICompatible
from durablelab.agents.openai_compat import PLACEHOLDER_KEY
from durablelab.agents.shop import TASK, Shop
from durablelab.faults import Crash

pytest.importorskip("openai")

FINAL = "Order A-1001 is paid"
PRICES = {"input": 1.0, "output": 2.0}


def run_agent(server, shop=None, timeout=0.3, faults=None, engine=None, until=None, **react):
    """Run the order agent with the real client against `server` (until nothing is due, or
    for `until` virtual seconds); (run, shop)."""
    shop = shop or Shop()
    llm = OpenAICompatible(server.url, "fake-model", timeout=timeout, prices=PRICES)

    def order_agent(ctx, task):
        return agents.react(ctx, task, model=llm, tools=shop.tools, **react)
    own = engine is None
    engine = engine or dl.Engine()
    try:
        run_id = engine.start(order_agent, TASK, faults=faults)
        if until is None:
            engine.run_until_idle()
        else:
            engine.advance(until)
        return engine.run(run_id), shop
    finally:
        if own:
            engine.close()


def model_attempts(run):
    return run.attempts[run.attempts.activity == "model"]


def test_the_agent_finishes_through_the_real_client():
    with FakeChatServer() as server:
        run, shop = run_agent(server)
    assert run.status == "completed", run.error
    assert run.result["stop_reason"] == "answered" and run.result["answer"].startswith(FINAL)
    assert run.result["turns"] == 4
    assert server.counts() == {"ok": 5}                  # 4 turns + 1 repair
    assert len(shop.payments.effects) == 1 and len(shop.email.effects) == 1


def test_429_with_retry_after_waits_at_least_that_long_in_virtual_time():
    with FakeChatServer(script=["429"], retry_after=7) as server:
        started = time.monotonic()
        run, _ = run_agent(server)
        elapsed = time.monotonic() - started
    first, second = model_attempts(run).iloc[0], model_attempts(run).iloc[1]
    assert first.outcome == "rate_limited" and "Retry-After: 7" in first.error
    assert first.delay >= 7.0
    assert second.started_at - first.ended_at >= 7.0    # virtual seconds...
    assert elapsed < 7.0                                  # ...not real ones
    assert run.result["stop_reason"] == "answered"


def test_503_is_retried_and_costs_no_turn():
    with FakeChatServer(script=["503", "503"]) as server:
        run, _ = run_agent(server)
    assert model_attempts(run).outcome.tolist()[:3] == ["transient", "transient", "malformed"]
    assert run.result["turns"] == 4 and server.counts() == {"503": 2, "ok": 5}


def test_a_hang_is_cut_by_the_client_time_out_and_retried():
    with FakeChatServer(script=["hang"], hang=5.0) as server:
        started = time.monotonic()
        run, _ = run_agent(server, timeout=0.2)
        elapsed = time.monotonic() - started
    first = model_attempts(run).iloc[0]
    assert first.outcome == "timeout" and "did not answer within 0.2s" in first.error
    assert run.result["stop_reason"] == "answered"
    assert elapsed < 4.0                                  # the client gave up, not the server


def test_malformed_arguments_are_repaired_without_a_turn():
    with FakeChatServer(script=["malformed"]) as server:
        run, _ = run_agent(server)
    first = model_attempts(run).iloc[0]
    assert first.outcome == "malformed" and "not valid JSON" in first.error
    assert run.result["turns"] == 4                       # the same as without the fault
    assert [r["repair"] for r in server.requests[:2]] == [False, True]


def test_usage_is_reported_in_the_interface_keys_with_cost_from_prices():
    with FakeChatServer() as server:
        run, shop = run_agent(server)
    usage = run.result["usage"]
    assert usage["model_calls"] == 4 and usage["tokens"] > 0
    expected = (usage["input_tokens"] * PRICES["input"]
                + usage["output_tokens"] * PRICES["output"]) / 1e6
    assert usage["cost"] == pytest.approx(expected)
    brain = server.brain.usage                            # what the server counted
    assert usage["input_tokens"] == brain["input_tokens"]
    assert usage["output_tokens"] == brain["output_tokens"]
    row = dl.compare([run]).loc[run.run_id]
    assert row["cost"] == pytest.approx(usage["cost"])


def test_other_4xx_is_non_retryable():
    with FakeChatServer() as server:
        llm = OpenAICompatible(server.url.replace("/v1", "/v2"), "fake-model", timeout=1)
        with pytest.raises(dl.NonRetryable, match="HTTP 404"):
            llm([{"role": "user", "content": TASK}], [])
        assert dl.classify(ConnectionError()).error_class == "Transient"


def test_connection_refused_is_transient():
    with FakeChatServer() as server:
        url = server.url
    with pytest.raises(dl.Transient, match="cannot reach"):
        OpenAICompatible(url, "fake-model", timeout=1)([{"role": "user", "content": "hi"}], [])


def test_api_key_is_read_inside_the_call(monkeypatch):
    with FakeChatServer() as server:
        llm = OpenAICompatible(server.url, "fake-model")
        monkeypatch.delenv("OPENAI_API_KEY", raising=False)
        llm([{"role": "user", "content": "hi"}], [])
        monkeypatch.setenv("OPENAI_API_KEY", "sk-from-the-environment")
        llm([{"role": "user", "content": "hi"}], [])
        OpenAICompatible(server.url, "fake-model", api_key="sk-given")(
            [{"role": "user", "content": "hi"}], [])
    assert [r["authorization"] for r in server.requests] == [
        f"Bearer {PLACEHOLDER_KEY}", "Bearer sk-from-the-environment", "Bearer sk-given"]


def test_bad_settings_are_refused_with_the_fix():
    with pytest.raises(ValueError, match="give an http"):
        OpenAICompatible("127.0.0.1:8000", "m")
    with pytest.raises(ValueError, match="timeout=0"):
        OpenAICompatible("http://127.0.0.1:8000/v1", "m", timeout=0)
    with pytest.raises(ValueError, match="prices="):
        OpenAICompatible("http://127.0.0.1:8000/v1", "m", prices={"input": 1})
    with pytest.raises(ValueError, match="unknown action 'teapot'"):
        FakeChatServer(script=["teapot"])


def test_seeded_server_faults_are_met_and_survived():
    rates = {"429": 0.2, "503": 0.2, "malformed": 0.1}
    with FakeChatServer(seed=5, rates=rates, retry_after=3) as server:
        run, shop = run_agent(server)
    assert run.result["stop_reason"] == "answered"
    counts = server.counts()
    assert counts.get("429", 0) + counts.get("503", 0) + counts.get("malformed", 0) > 0
    assert len(shop.payments.effects) == 1


def test_recorded_answers_replay_without_the_network(tmp_path):
    path = tmp_path / "runs.duckdb"
    with FakeChatServer() as server:
        engine = dl.Engine(path)
        run, shop = run_agent(server, engine=engine, until=3600, approval=["send_receipt"])
        assert run.status == "waiting"
        asked = len(server.requests)
        engine.close()
        engine = dl.Engine(path)                          # a fresh worker replays
        engine.advance(60)
        assert len(server.requests) == asked              # nothing asked again
        engine.signal(run.run_id, "approve:send_receipt", {"approved": True})
        engine.run_until_idle()
        run = engine.run(run.run_id)
        engine.close()
    assert run.result["stop_reason"] == "answered"
    assert len(server.requests) == asked + 1              # only the last turn is new


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rules=st.lists(st.tuples(
    st.sampled_from(["model", "charge_card", "send_receipt"]),
    st.sampled_from(["before_activity", "after_effect", "after_record"]),
    st.integers(1, 2)), min_size=1, max_size=3))
def test_crashes_never_repeat_a_completed_model_call_at_the_server(rules):
    plan = dl.FaultPlan([Crash(a, point=p, times=n) for a, p, n in rules])
    with FakeChatServer() as server:
        run, shop = run_agent(server, faults=plan)
    assert run.result["stop_reason"] == "answered"
    assert len(shop.payments.effects) == 1 and len(shop.email.effects) == 1
    # every request the server answered is an attempt that reached an outcome, or one
    # whose answer a crash lost before it was recorded; none is a recorded call asked again
    model = run.history[run.history.name == "model"].position.tolist()
    lost = run.crashes[(run.crashes.point == "after_effect")
                       & run.crashes.position.isin(model)]
    reached = model_attempts(run)[model_attempts(run).outcome != "crashed"]
    assert server.answered == len(reached) + len(lost), rules
