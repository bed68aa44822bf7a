"""Spend counts what the model billed, broken answers included, in every reader: a run
whose answers came back malformed shows the same model calls, tokens and cost in
`dl.compare` (from the engine, from a reopened store, from an export) and in a sweep's
table as the model's own ledger. Before, only the answers history kept counted: 41 of the
103 tokens billed in the first test's run."""

from __future__ import annotations

import json

import duckdb
import pytest

import durablelab as dl
from durablelab.budget import discarded_usage
from durablelab.faults import Malformed
from durablelab.sim import SimLLM

PROMPT = "What is the capital of France? Answer in JSON."
#: the first two answers come back broken; the third is kept
TWICE_BROKEN = dl.FaultPlan([Malformed("ask", attempts=[1, 2])])
#: every world a sweep made, so the test can read their ledgers
WORLDS: list = []


class ModelWorld:
    """A sweep's world: one SimLLM, whose ledger says what it billed."""

    def __init__(self, clock):
        self.llm = SimLLM(clock=clock, seed=1)
        WORLDS.append(self)


def ask_wf(ctx, prompt):
    return ctx.activity("ask", ctx.world.llm.complete, prompt)


def billed(*llms) -> tuple[int, int, float]:
    """(model calls, tokens, cost) the models' ledgers hold."""
    return (sum(m.usage["calls"] for m in llms),
            sum(m.usage["input_tokens"] + m.usage["output_tokens"] for m in llms),
            sum(m.usage["cost"] for m in llms))


def reported(row) -> tuple[int, int, float]:
    return int(row["model_calls"]), int(row["tokens"]), float(row["cost"])


def ask_run(engine, run_id="r", faults=TWICE_BROKEN):
    world = ModelWorld(engine.clock)
    engine.world = world
    engine.start(ask_wf, PROMPT, run_id=run_id, faults=faults)
    engine.run_until_idle()
    return world


def test_compare_counts_the_broken_answers_the_model_billed():
    with dl.Engine() as engine:
        world = ask_run(engine)
        run = engine.run("r")
    assert run.status == "completed"
    assert run.attempts.outcome.tolist() == ["malformed", "malformed", "ok"]
    row = dl.compare([run]).loc["r"]
    calls, tokens, cost = billed(world.llm)
    assert (calls, tokens) == (3, 103)              # what SimLLM billed for three answers
    assert reported(row)[:2] == (calls, tokens) and row["cost"] == pytest.approx(cost)
    assert run.discarded["calls"] == 2              # the two answers thrown away
    assert row["input_tokens"] + row["output_tokens"] == row["tokens"]


def test_a_run_without_broken_answers_has_nothing_discarded():
    with dl.Engine() as engine:
        world = ask_run(engine, faults=None)
        run = engine.run("r")
    assert run.discarded is None
    assert reported(dl.compare([run]).loc["r"])[:2] == billed(world.llm)[:2]


def test_a_reopened_store_and_an_export_count_them_too(tmp_path):
    path = tmp_path / "runs.duckdb"
    engine = dl.Engine(path)
    world = ask_run(engine)
    expected = dl.compare(engine)
    thrown = engine.run("r").discarded
    engine.close()
    with dl.Engine(path, read_only=True) as reader:
        again = dl.compare(reader)
    assert reported(again.loc["r"])[:2] == billed(world.llm)[:2]
    for suffix in (".jsonl", ".parquet"):
        with dl.Engine(path, read_only=True) as reader:
            exported = dl.export(reader, tmp_path / f"runs{suffix}")
        loaded = dl.load(exported)
        assert loaded[0].discarded == thrown and thrown["calls"] == 2
        assert dl.compare(loaded).equals(expected)


@pytest.mark.parametrize("contention", [False, True])
def test_a_sweep_counts_them_as_compare_does(contention):
    WORLDS.clear()
    experiment = dl.sweep(ask_wf, [PROMPT], fault_plans={"broken": TWICE_BROKEN, "calm": None},
                          seeds=range(3), world=ModelWorld, contention=contention)
    frame = experiment.frame
    calls, tokens, cost = billed(*(w.llm for w in WORLDS))
    assert (frame["model_calls"].sum(), frame["tokens"].sum()) == (calls, tokens)
    assert frame["cost"].sum() == pytest.approx(cost)
    broken = frame[frame.fault_plan == "broken"]
    assert (broken["model_calls"] == 3).all() and (broken["tokens"] == 103).all()
    # each row is what dl.compare says of the same run made on an engine
    with dl.Engine() as engine:
        ask_run(engine, run_id=broken.run_id.iloc[0])
        row = dl.compare(engine).iloc[0]
    assert reported(broken.iloc[0]) == pytest.approx(reported(row))


def test_a_budget_and_compare_agree_on_a_structured_answer_thrown_away():
    from pydantic import BaseModel

    class City(BaseModel):
        city: str

    llm_holder = {}

    def extract(ctx, prompt):
        return ctx.activity("extract", dl.structured(llm_holder["llm"], City), prompt)

    with dl.Engine() as engine:
        llm = llm_holder["llm"] = SimLLM(clock=engine.clock, seed=3, malformed_rate=1.0)
        engine.start(extract, "Where is the Louvre?", run_id="s",
                     budget=dl.Budget(tokens=10_000))
        engine.run_until_idle()
        run = engine.run("s")
    assert (run.attempts.outcome == "malformed").sum() >= 1
    assert reported(dl.compare([run]).loc["s"])[:2] == billed(llm)[:2]


def test_a_hand_edited_discarded_sum_counts_nothing_and_breaks_no_view(tmp_path):
    path = tmp_path / "runs.duckdb"
    engine = dl.Engine(path)
    ask_run(engine)
    engine.close()
    con = duckdb.connect(str(path))
    con.execute("UPDATE meta SET value = 'not json' WHERE key = 'burnt:r'")
    con.close()
    with dl.Engine(path, read_only=True) as reader:
        run = reader.run("r")
    assert run.status == "completed" and run.discarded is None
    assert dl.compare([run]).loc["r", "model_calls"] == 1


def test_discarded_usage_reads_only_numbers():
    assert discarded_usage(json.dumps({"calls": 2, "input_tokens": 5, "cost": 0.5})) == {
        "calls": 2, "input_tokens": 5, "output_tokens": 0, "cost": 0.5}
    assert discarded_usage({"calls": "x", "input_tokens": -3, "output_tokens": float("nan"),
                            "cost": True}) == {"calls": 0, "input_tokens": 0,
                                               "output_tokens": 0, "cost": 0.0}
    for value in (None, "[1]", "{", 7, [1, 2]):
        assert discarded_usage(value) is None


def test_a_forgotten_store_forgets_what_broken_answers_cost():
    # An engine emptied by `forget` serves the next run, which may have the same id (the
    # crash explorer's rows, a sweep's borrowed runner): it must not inherit the cost.
    with dl.Engine() as engine:
        ask_run(engine)
        assert engine.run("r").discarded["calls"] == 2
        engine.forget()
        ask_run(engine, faults=None)
        assert engine.run("r").discarded is None
