"""dl.compare over every source: a run from the engine, an export, a Temporal history, DBOS
and LangGraph each give one row with a ``source`` column, and ``world=`` adds what the
simulated world's ledgers counted (model calls paid, effects, duplicate effects), so what
each framework repeated is one table, not a run record each framework keeps differently.

The plan is the same for each: the receipt's first request fails with a 503. The agent is
the seed's: charge the card, then send the receipt, with services that ignore idempotency
keys (a repeat is a second effect). The engine and DBOS retry the receipt alone; a LangGraph
node that makes both calls is retried whole, so the card is charged twice, and LangGraph's
checkpoint records one node that succeeded: only the world's ledger shows the repeat."""

from __future__ import annotations

import sqlite3

import pandas as pd
import pytest

import durablelab as dl
from durablelab.compare import LEDGER_COLUMNS, compare, ledgers
from durablelab.errors import BadType, BadValue
from durablelab.faults import ServerError
from durablelab.sim import Email, Payments, SimLLM

from test_temporal import HISTORIES, needs_histories  # noqa: E402

QUICK = dl.RetryPolicy(max_attempts=3, initial=0.01, jitter="none")
PLAN = [ServerError("send_receipt", attempts=[1])]
WORLD: dict = {}      # the services the activities reach (DBOS has no ctx.world)


def fresh_world() -> dict:
    WORLD.clear()
    WORLD.update(payments=Payments(honor_keys=False), email=Email(honor_keys=False))
    return dict(WORLD)


def charge_card(order: str, idempotency_key=None) -> dict:
    return WORLD["payments"].charge("c-7", 42.5, idempotency_key=idempotency_key)


def send_receipt(order: str, idempotency_key=None) -> dict:
    return WORLD["email"].send("ada@example.com", f"receipt {order}",
                               idempotency_key=idempotency_key)


def shop(ctx, order):
    charged = ctx.activity("charge_card", charge_card, order, policy=QUICK)
    sent = ctx.activity("send_receipt", send_receipt, order, policy=QUICK)
    return {"charged": charged["id"], "sent": sent["id"]}


def engine_run(run_id="shop-1"):
    world = fresh_world()
    with dl.Engine() as engine:
        engine.start(shop, "A-1", run_id=run_id, faults=PLAN)
        engine.run_until_idle()
        return engine.run(run_id), world


RETRIED_RECEIPT = {"status": "completed", "attempts": 3, "activities": 2, "retries": 1,
                   "retries_transient": 1, "crashes": 0, "model_calls_paid": 0,
                   "effects": 2, "duplicate_effects": 0}


def picked(row, keys=RETRIED_RECEIPT):
    return {key: row[key] for key in keys}


# --- each source ------------------------------------------------------------------------

def test_engine_run_row_has_its_source_and_the_worlds_ledgers():
    run, world = engine_run()
    row = compare(run, world=world).loc["shop-1"]
    assert row["source"] == "durablelab"
    assert picked(row) == RETRIED_RECEIPT
    assert row["virtual_duration"] == 0.01 and row["cost_paid"] == 0.0
    assert [e["op"] for e in world["payments"].effects + world["email"].effects] == [
        "charge", "send"]


def test_an_export_gives_the_same_row_as_the_engine(tmp_path):
    run, world = engine_run()
    path = dl.export([run], tmp_path / "runs.jsonl")
    loaded = compare(str(path), world={"shop-1": world})
    pd.testing.assert_frame_equal(loaded, compare(run, world=world))
    assert dl.load(path)[0].source == "durablelab"


@needs_histories
def test_a_temporal_history_is_a_row_whose_ledgers_are_missing_without_a_world():
    go = dl.load_temporal(HISTORIES / "sdk-go/gogoproto-payload-workflow.json")
    mine, world = engine_run()
    table = compare([go, mine], world={"shop-1": world})
    assert table["source"].tolist() == ["temporal", "durablelab"]
    # Temporal records each activity's last attempt number: 6 activities ran 3 times
    row = table.loc[go.run_id]
    assert (row["activities"], row["attempts"], row["retries"], row["retries_other"]) == (
        13, 25, 12, 12)
    assert table["effects"].isna().tolist() == [True, False]
    assert table["effects"].tolist()[1] == 2


def test_dbos_runs_read_back_with_from_dbos_are_rows_of_their_own(tmp_path):
    pytest.importorskip("dbos", reason="the DBOS extra is not installed: "
                                       "pip install -e '.[dbos]'")
    from durablelab.backends.dbos import DBOSRunner
    url = f"sqlite:///{tmp_path / 'dbos.sqlite'}"
    world = fresh_world()
    runner = DBOSRunner(url, workflows=[shop])
    try:
        runner.start(shop, "A-1", run_id="dbos-1", faults=PLAN)
        assert runner.result("dbos-1", timeout=60) == {"charged": "ch_1", "sent": "msg_1"}
        live = runner.run("dbos-1")
    finally:
        runner.close()
    read = dl.from_dbos(url, "dbos-1")     # DBOS's own tables, as any DBOS app leaves them
    for run in (read, live):
        row = compare(run, world=world).loc["dbos-1"]
        assert row["source"] == "dbos"
        assert picked(row) == RETRIED_RECEIPT
    mine, mine_world = engine_run()
    table = compare([mine, read], world={"shop-1": mine_world, "dbos-1": world})
    assert table["source"].tolist() == ["durablelab", "dbos"]
    assert (table["effects"].tolist(), table["duplicate_effects"].tolist()) == ([2, 2], [0, 0])


def test_langgraph_repeats_what_its_checkpoint_does_not_show_and_the_ledger_does(tmp_path):
    pytest.importorskip("langgraph.checkpoint.sqlite", reason="the LangGraph extra is not "
                        "installed: pip install -e '.[langgraph]'")
    from langgraph.checkpoint.sqlite import SqliteSaver
    from langgraph.graph import END, START, StateGraph
    from langgraph.types import RetryPolicy
    from durablelab.backends import langgraph as lgb
    world = fresh_world()
    inj = lgb.faults(PLAN)

    def act(state):     # one node, two tool calls: a retry runs both again
        c = inj.call("charge_card", charge_card, state["order"],
                     idempotency_key=f"charge:{state['order']}")
        s = inj.call("send_receipt", send_receipt, state["order"],
                     idempotency_key=f"receipt:{state['order']}")
        return {"charged": c["id"], "sent": s["id"]}

    graph = StateGraph(dict)
    graph.add_node("act", act, retry_policy=RetryPolicy(initial_interval=0.0, jitter=False,
                                                         retry_on=lgb.retry_on))
    graph.add_edge(START, "act")
    graph.add_edge("act", END)
    db = tmp_path / "lg.sqlite"
    with sqlite3.connect(str(db), check_same_thread=False) as conn:
        out = graph.compile(checkpointer=SqliteSaver(conn)).invoke(
            {"order": "A-1"}, {"configurable": {"thread_id": "lg-1"}})
    assert out["charged"] == "ch_2"
    recorded = dl.from_langgraph(db, "lg-1")
    mine, mine_world = engine_run()
    table = compare([mine, recorded], world={"shop-1": mine_world, "lg-1": world})
    assert table["source"].tolist() == ["durablelab", "langgraph"]
    lg = table.loc["lg-1"]
    # LangGraph's checkpoint: one node that succeeded, no attempts, no retries
    assert (lg["status"], lg["activities"], lg["retries"]) == ("completed", 1, 0)
    # the world: the card charged twice for one key, the receipt sent once
    assert (lg["effects"], lg["duplicate_effects"]) == (3, 1)
    assert (table.loc["shop-1", "effects"], table.loc["shop-1", "duplicate_effects"]) == (2, 0)


# --- the ledgers --------------------------------------------------------------------------

def test_ledgers_count_models_paid_and_services_once_each():
    llm = SimLLM(clock=dl.VirtualClock(), prices={"input": 1_000_000.0, "output": 0.0})
    llm.complete("hello")
    llm.complete("hello again")
    payments = Payments()
    payments.charge("c", 1.0, idempotency_key="k")
    payments.charge("c", 1.0, idempotency_key="k")      # honoured: no second effect
    loose = Email(honor_keys=False)
    loose.send("a@b", "s", idempotency_key="k")
    loose.send("a@b", "s", idempotency_key="k")
    loose.send("a@b", "s")
    world = {"llm": llm, "payments": payments, "alias": payments, "email": loose}
    counted = ledgers(world)
    assert counted["model_calls_paid"] == 2
    assert counted["cost_paid"] == pytest.approx(llm.usage["input_tokens"] * 1.0)
    assert (counted["effects"], counted["duplicate_effects"]) == (1 + 3, 1)
    assert ledgers(loose) == {"model_calls_paid": 0, "cost_paid": 0.0, "effects": 3,
                              "duplicate_effects": 1}


def test_without_a_world_the_frame_has_no_ledger_columns():
    run, _ = engine_run()
    assert not set(LEDGER_COLUMNS) & set(compare(run).columns)
    assert compare(run).columns[0] == "source"


def test_a_world_that_cannot_be_told_apart_is_refused_with_the_fix():
    first, world = engine_run("a")
    second, _ = engine_run("b")
    with pytest.raises(BadValue, match=r"world=\{run_id: world\}"):
        compare([first, second], world=world)
    with pytest.raises(BadValue, match="names run 'c', which is not among"):
        compare([first, second], world={"a": world, "c": world})
    experiment = dl.sweep(shop, ["A-1"], seeds=range(1), world=lambda clock: fresh_world())
    with pytest.raises(BadType, match="world= goes with runs, not experiments"):
        compare(experiment, world=world)
