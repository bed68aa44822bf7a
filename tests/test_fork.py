"""engine.fork(run_id, at, ...): positions before `at` are the source run's recorded events,
replayed (never executed again); from `at` on the fork executes fresh, with other code,
faults, seed or policies if given."""

import pandas as pd
import pytest

import durablelab as dl
from durablelab.versioning import version_of

executed = []


def model(turn, idempotency_key=None):
    executed.append((turn, idempotency_key))
    return {"turn": turn, "tokens": 100, "cost": 0.01}


def agent(ctx, turns):
    """One recorded model call per turn, a coin from ctx.random, then an answer."""
    answers = [ctx.activity("model", model, t) for t in range(turns)]
    coin = ctx.random()
    return {"turns": len(answers), "coin": coin}


@pytest.fixture(autouse=True)
def clean():
    executed.clear()


def test_fork_replays_exactly_the_recorded_steps_and_runs_the_rest(engine):
    source = engine.start(agent, 5, run_id="a", seed=1)
    engine.run_until_idle()
    assert len(executed) == 5
    executed.clear()
    fork = engine.fork(source, at=4, seed=2)
    engine.run_until_idle()
    # Positions 1-3 came from history; 4 and 5 ran again under the fork's own keys.
    assert executed == [(3, f"{fork}:4"), (4, f"{fork}:5")]
    original, forked = engine.run(source), engine.run(fork)
    assert forked.status == "completed" and forked.result["turns"] == 5
    assert list(forked.history["value"][:3]) == list(original.history["value"][:3])
    assert forked.result["coin"] != original.result["coin"]       # position 6: a new seed
    runs = engine.runs().set_index("run_id")
    assert runs.loc[fork, "forked_from"] == "a" and pd.isna(runs.loc["a", "forked_from"])
    assert fork == "a~fork1" and engine.fork(source, at=6) == "a~fork2"


def test_fork_at_the_end_replays_everything_and_executes_nothing(engine):
    engine.start(agent, 3, run_id="a")
    engine.run_until_idle()
    executed.clear()
    fork = engine.fork("a", at=5)          # 3 calls, the coin, then the code returns
    engine.run_until_idle()
    assert executed == [] and engine.run(fork).result == engine.run("a").result


def search(query):
    executed.append(("search", query))
    return {"hits": 3}


def researcher(ctx, _):
    ctx.activity("model", model, 0)
    ctx.activity("model", model, 1)
    hits = ctx.activity("search", search, "durable execution")
    ctx.activity("model", model, 2)
    return hits


def test_fork_with_other_policies_recovers_a_failed_run_without_repeating_its_steps(engine):
    plan = dl.FaultPlan([dl.faults.ServerError("search", attempts=[1, 2, 3])])
    engine.start(researcher, None, run_id="a", faults=plan)
    engine.run_until_idle()
    failed = engine.run("a")
    assert failed.status == "failed" and failed.error.position == 3
    assert [t for t, _ in executed] == [0, 1]   # the faults stopped search before the call
    executed.clear()
    fork = engine.fork("a", at=3, policies=dl.RetryPolicy(max_attempts=5, jitter="none"))
    engine.run_until_idle()
    run = engine.run(fork)
    assert run.status == "completed"
    assert [t for t, _ in executed] == ["search", 2]     # the two model calls: replayed
    assert list(run.attempts.query("position == 3")["outcome"]) == [
        "transient", "transient", "transient", "ok"]


def test_fork_with_another_version_of_the_code(engine):
    engine.start(agent, 2, run_id="a")
    engine.run_until_idle()

    @version_of(agent)
    def cautious(ctx, turns):
        answers = [ctx.activity("model", model, t) for t in range(turns)]
        ctx.activity("model", model, "check")          # v2 asks once more
        return {"turns": len(answers) + 1}
    executed.clear()
    fork = engine.fork("a", at=3, workflow=cautious)
    engine.run_until_idle()
    assert engine.run(fork).result == {"turns": 3} and executed == [("check", f"{fork}:3")]


def test_fork_copies_the_signals_its_history_consumed(engine):
    def approval(ctx, _):
        first = ctx.wait_signal("approval")
        second = ctx.wait_signal("approval")
        return [first, second]
    engine.start(approval, None, run_id="s")
    engine.signal("s", "approval", "yes", signal_id="click-1")
    engine.signal("s", "approval", "again", signal_id="click-2")
    engine.run_until_idle()
    fork = engine.fork("s", at=3)          # replays the first wait, waits anew for the second
    engine.run_until_idle()
    assert engine.run(fork).status == "waiting"
    assert engine.signal(fork, "approval", "yes", signal_id="click-1") is False  # seen
    engine.signal(fork, "approval", "fresh")
    engine.run_until_idle()
    assert engine.run(fork).result == ["yes", "fresh"]


def test_fork_is_durable_and_listed_after_a_reopen(db_path):
    engine = dl.Engine(db_path)
    engine.start(agent, 3, run_id="a")
    engine.run_until_idle()
    fork = engine.fork("a", at=3)
    engine.crash()                         # before the fork ran: it recovers from its copy
    engine.run_until_idle()
    engine.close()
    assert [t for t, _ in executed] == [0, 1, 2, 2]
    with dl.Engine(db_path) as engine:
        runs = engine.runs().set_index("run_id")
        assert runs.loc[fork, "forked_from"] == "a" and runs.loc[fork, "status"] == "completed"
        assert len(engine.run(fork).history) == 4


def test_fork_refuses_bad_arguments_with_the_fix(engine):
    engine.start(agent, 1, run_id="a")
    engine.run_until_idle()
    for at in (0, 4, "2", True):
        with pytest.raises(ValueError, match=r"at must be a history position from 1 to 3"):
            engine.fork("a", at=at)
    with pytest.raises(dl.RunNotFoundError, match="engine.runs"):
        engine.fork("nope", at=1)
    with pytest.raises(TypeError, match="seed"):
        engine.fork("a", at=1, seed="x")
    assert list(engine.runs()["run_id"]) == ["a"]          # nothing was recorded
