"""A LangGraph agent under durablelab: fault plans on its nodes, @task functions and calls,
`retry_on` against LangGraph's default, the crash explorer recovering as a user would, and
`dl.from_langgraph` reading a SqliteSaver file (read-only, JSON only, never pickle)."""

import hashlib
import os
import json
import sqlite3
import subprocess
import sys
import textwrap
from typing import TypedDict

import pytest

pytest.importorskip("langgraph", reason="the LangGraph extra is not installed: "
                                        "pip install -e '.[langgraph]'")
pytest.importorskip("langgraph.checkpoint.sqlite", reason="langgraph-checkpoint-sqlite is "
                    "not installed: pip install -e '.[langgraph]'")

import httpx  # noqa: E402 (langchain-core brings it)
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer  # noqa: E402
from langgraph.checkpoint.sqlite import SqliteSaver  # noqa: E402
from langgraph.func import entrypoint, task  # noqa: E402
from langgraph.graph import END, START, StateGraph  # noqa: E402
from langgraph.types import RetryPolicy  # noqa: E402

import durablelab as dl  # noqa: E402
from durablelab.backends import langgraph as lgb  # noqa: E402
from durablelab.errors import (BadType, BadValue, FrameworkError,  # noqa: E402
                               LangGraphReadError)
from durablelab.faults import (Crash, Fail, Hang, Latency, Malformed, RateLimit,  # noqa: E402
                               ServerError, Timeout)
from durablelab.sim import Email, Payments  # noqa: E402

FAST = dict(initial_interval=0.0, jitter=False, max_attempts=3)   # no real sleeps in tests


class State(TypedDict, total=False):
    order: str
    found: dict
    charged: dict
    sent: dict
    answer: str


def chain(nodes, checkpointer=None, retry=None):
    """A graph running `nodes` ({name: fn}) one after another."""
    g = StateGraph(State)
    previous = START
    for name, fn in nodes.items():
        g.add_node(name, fn, retry_policy=retry)
        g.add_edge(previous, name)
        previous = name
    g.add_edge(previous, END)
    return g.compile(checkpointer=checkpointer)


def saver(path):
    return SqliteSaver(sqlite3.connect(str(path), check_same_thread=False))


def thread(name="t"):
    return {"configurable": {"thread_id": name}}


def rows(frame, *columns):
    """The frame's rows as lists, missing values as None (pandas shows NaN in text columns)."""
    frame = frame[list(columns)].astype(object)
    return frame.where(frame.notna(), None).values.tolist()


# --- retries: LangGraph's default against retry_on ---------------------------------------

def http_error(status):
    request = httpx.Request("POST", "http://127.0.0.1/v1/charge")
    response = httpx.Response(status, request=request, headers={"Retry-After": "0"})
    return httpx.HTTPStatusError(f"{status} from the payment API", request=request,
                                 response=response)


class BadRequest(Exception):
    """A client library's own class for an HTTP 400, as many SDKs raise."""
    status_code = 400


def calls_until_it_gives_up(error, retry_on=None):
    calls = []

    def charge(state):
        calls.append(1)
        raise error

    policy = RetryPolicy(**FAST) if retry_on is None else RetryPolicy(**FAST, retry_on=retry_on)
    with pytest.raises(type(error)):
        chain({"charge": charge}, retry=policy).invoke({"order": "A-1"})
    return len(calls)


def test_langgraph_default_retries_a_5xx_but_not_an_httpx_429():
    assert calls_until_it_gives_up(http_error(503)) == 3
    assert calls_until_it_gives_up(http_error(429)) == 1


def test_langgraph_default_retries_a_400_raised_as_its_own_class():
    assert calls_until_it_gives_up(BadRequest("400: card number is invalid")) == 3


def test_retry_on_retries_429_and_5xx_and_not_a_400_in_any_class():
    assert calls_until_it_gives_up(http_error(429), lgb.retry_on) == 3
    assert calls_until_it_gives_up(http_error(503), lgb.retry_on) == 3
    assert calls_until_it_gives_up(BadRequest("400: card number is invalid"),
                                   lgb.retry_on) == 1
    assert calls_until_it_gives_up(http_error(400), lgb.retry_on) == 1
    assert lgb.retry_on(dl.RateLimited("injected")) and not lgb.retry_on(ValueError("bug"))
    assert not lgb.retry_on(dl.ModelOutputError("truncated JSON"))


# --- the injector --------------------------------------------------------------------------

def test_a_rule_fails_a_node_by_name_and_langgraph_retries_it_as_the_next_attempt():
    payments = Payments()
    inj = lgb.faults([Fail("charge", status=503, attempts=[1])])
    graph = chain({"lookup": inj.wrap(lambda s: {"found": {"amount": 5.0}}, "lookup"),
                   "charge": inj.wrap(lambda s: {"charged": payments.charge("c", 5.0)},
                                      "charge")},
                  retry=RetryPolicy(**FAST, retry_on=lgb.retry_on))
    out = graph.invoke({"order": "A-1"})
    assert out["charged"]["id"] == "ch_1" and len(payments.effects) == 1
    assert rows(inj.attempts, "position", "activity", "attempt", "outcome",
                "error_class") == [[1, "lookup", 1, "ok", None],
                                    [2, "charge", 1, "transient", "Transient"],
                                    [2, "charge", 2, "ok", None]]
    assert inj.unmatched() == []


def test_the_injectors_run_shows_the_retries_langgraph_does_not_record(tmp_path):
    inj = lgb.faults([RateLimit("charge", attempts=[1, 2])])
    graph = chain({"charge": inj.wrap(lambda s: {"charged": {"id": "ch_1"}}, "charge")},
                  saver(tmp_path / "lg.sqlite"), RetryPolicy(**FAST, retry_on=lgb.retry_on))
    graph.invoke({"order": "A-1"}, thread())
    recorded = dl.from_langgraph(tmp_path / "lg.sqlite", "t")
    seen = inj.run(tmp_path / "lg.sqlite", "t")
    assert rows(recorded.attempts, "activity", "attempt", "outcome") == [["charge", None, "ok"]]
    assert rows(seen.attempts, "activity", "attempt", "outcome") == [
        ["charge", 1, "rate_limited"], ["charge", 2, "rate_limited"], ["charge", 3, "ok"]]
    table = dl.compare([recorded, seen])
    assert table.retries.tolist() == [0, 2] and table.retries_rate_limited.tolist() == [0, 2]
    assert seen.history.equals(recorded.history)     # what LangGraph recorded, unchanged


def test_rules_are_drawn_as_the_engine_draws_them():
    """The same plan and seed fail the same (position, attempt) pairs on a chain of four
    LangGraph nodes as on four activities of a durablelab workflow."""
    plan = dl.FaultPlan([ServerError("step_*", p=0.5)])
    names = [f"step_{i}" for i in range(1, 5)]
    policy = dl.RetryPolicy(max_attempts=6, initial=1.0, jitter="none")

    def workflow(ctx, _):
        return [ctx.activity(name, lambda: name, policy=policy) for name in names]

    engine = dl.Engine()
    run_id = engine.start(workflow, None, faults=plan, seed=11)
    engine.run_until_idle()
    on_engine = engine.run(run_id).attempts[["position", "attempt", "outcome"]]
    engine.close()

    inj = lgb.faults(plan, seed=11)
    graph = chain({name: inj.wrap(lambda s: {}, name) for name in names},
                  retry=RetryPolicy(initial_interval=0.0, jitter=False, max_attempts=6,
                                    retry_on=lgb.retry_on))
    graph.invoke({"order": "A-1"})
    on_langgraph = inj.attempts[["position", "attempt", "outcome"]]
    assert on_langgraph.values.tolist() == on_engine.values.tolist()
    assert "transient" in set(on_engine.outcome)      # the seed does fail something


def test_calls_inside_a_node_are_units_and_unmatched_names_are_said():
    inj = lgb.faults([RateLimit("charge_card", attempts=[1]), Fail("charge_crad", status=400)])
    payments = Payments()

    def act(state):
        return {"charged": inj.call("charge_card", payments.charge, "c-7", 42.5)}

    chain({"act": act}, retry=RetryPolicy(**FAST, retry_on=lgb.retry_on)).invoke({})
    assert inj.attempts[["position", "activity", "attempt", "outcome"]].values.tolist() == [
        [1, "charge_card", 1, "rate_limited"], [1, "charge_card", 2, "ok"]]
    assert [(i, r.activity) for i, r in inj.unmatched()] == [(1, "charge_crad")]
    assert "unmatched: charge_crad" in repr(inj)


def test_malformed_runs_the_call_then_breaks_its_answer():
    payments = Payments()
    inj = lgb.faults([Malformed("charge_card", kind="truncated")])
    with pytest.raises(dl.ModelOutputError, match="injected malformed output"):
        inj.call("charge_card", payments.charge, "c-7", 42.5)
    assert len(payments.effects) == 1      # the call ran: its effect happened


def test_an_async_task_function_is_wrapped_too():
    import asyncio
    async def fetch(x):
        return x * 2

    inj = lgb.faults([ServerError("fetch", position=[1])])   # outside a graph, each call
    wrapped = inj.wrap(fetch)                                  # is a unit of its own
    with pytest.raises(dl.Transient):
        asyncio.run(wrapped(2))
    assert asyncio.run(wrapped(2)) == 4


@pytest.mark.parametrize("rule, words", [
    (Latency("charge", 2.0), "Latency needs durablelab's virtual clock"),
    (Timeout("charge"), "Timeout needs durablelab's virtual clock"),
    (Hang("charge"), "Hang needs durablelab's virtual clock"),
    (Fail("charge", between=(0, 5)), "between= is a window of virtual seconds"),
    (Crash("charge", point="during_wait"), "no durable waits"),
    (Crash("charge", point="after_record"), "explore_crashes crashes there"),
])
def test_rules_that_cannot_apply_to_langgraph_are_refused_with_the_reason(rule, words):
    with pytest.raises(BadValue, match=words) as info:
        lgb.faults([rule])
    assert "rule 0" in str(info.value) and "charge" in str(info.value)


def test_bad_arguments_to_the_injector_are_our_errors():
    with pytest.raises(BadType, match="not a fault plan"):
        lgb.faults("ServerError('x')")
    with pytest.raises(BadType, match="not callable"):
        lgb.faults().wrap(42)
    with pytest.raises(BadValue, match="give the unit a name"):
        lgb.faults().wrap(lambda s: s)


def test_a_crash_outside_the_explorer_ends_the_process_as_kill_9(tmp_path):
    """A real process death: the child exits 137 right after the charge; a fresh graph in
    this process resumes the thread from the same file, and runs the whole node again."""
    ledger, db = tmp_path / "charges.txt", tmp_path / "lg.sqlite"
    child = textwrap.dedent(f"""
        import sqlite3, sys
        sys.path.insert(0, {os.path.dirname(os.path.abspath(__file__))!r})
        from test_langgraph import shop_graph, saver
        from durablelab.backends import langgraph as lgb
        from durablelab.faults import Crash
        inj = lgb.faults([Crash("send_receipt", point="before_activity")])
        shop_graph(saver({str(db)!r}), inj, {str(ledger)!r}).invoke(
            {{"order": "A-1"}}, {{"configurable": {{"thread_id": "t"}}}})
        print("not reached")
    """)
    done = subprocess.run([sys.executable, "-c", child], capture_output=True, text=True,
                          timeout=120, env={**os.environ, "PYTHONPATH": os.path.dirname(
                              os.path.dirname(os.path.abspath(__file__)))})
    assert done.returncode == 137, done.stderr
    assert "not reached" not in done.stdout
    assert "Crash rule 0 ('send_receipt' at before_activity)" in done.stderr
    assert ledger.read_text().splitlines() == ["charge A-1"]
    out = shop_graph(saver(db), lgb.faults(), str(ledger)).invoke(None, thread())
    assert out["answer"] == "charged and sent"
    assert ledger.read_text().splitlines() == ["charge A-1", "charge A-1", "receipt A-1"]


def shop_graph(checkpointer, inj, ledger):
    """The seed's agent as one graph node making two tool calls (used by a child process)."""
    def write(line):
        with open(ledger, "a") as f:
            f.write(line + "\n")
        return {"ok": line}

    def act(state):
        c = inj.call("charge_card", write, f"charge {state['order']}")
        s = inj.call("send_receipt", write, f"receipt {state['order']}")
        return {"charged": c, "sent": s}

    return chain({"act": inj.wrap(act), "answer": lambda s: {"answer": "charged and sent"}},
                 checkpointer)


# --- the crash explorer ------------------------------------------------------------------

class Shop:
    """A world whose services ignore idempotency keys: every repeat is a second effect."""

    def __init__(self, clock=None):
        self.payments, self.email = Payments(honor_keys=False), Email(honor_keys=False)


def each_effect_once(run, world):
    assert run.status == "completed", f"run {run.status}"
    assert len(world.payments.effects) == 1, f"{len(world.payments.effects)} charges"
    assert len(world.email.effects) == 1, f"{len(world.email.effects)} receipts"


def graph_agent(checkpointer, world):
    """Graph API: look up, then one node that charges and sends the receipt, then answer."""
    inj = lgb.faults()

    def act(state):
        c = inj.call("charge_card", world.payments.charge, "c-7", 42.5,
                     idempotency_key=f"charge:{state['order']}")
        s = inj.call("send_receipt", world.email.send, "ada@example.com", "receipt",
                     idempotency_key=f"receipt:{state['order']}")
        return {"charged": c, "sent": s}

    return chain({"lookup": inj.wrap(lambda s: {"found": {"order": s["order"]}}, "lookup"),
                  "act": inj.wrap(act),
                  "answer": inj.wrap(lambda s: {"answer": "done"}, "answer")}, checkpointer)


def functional_agent(checkpointer, world):
    """Functional API: the same agent, each tool an @task."""
    inj = lgb.faults()
    lookup = task(inj.wrap(lambda order: {"order": order}, "lookup_order"))
    charge = task(inj.wrap(lambda order: world.payments.charge(
        "c-7", 42.5, idempotency_key=f"charge:{order}"), "charge_card"))
    send = task(inj.wrap(lambda order: world.email.send(
        "ada@example.com", "receipt", idempotency_key=f"receipt:{order}"), "send_receipt"))

    @entrypoint(checkpointer=checkpointer)
    def order_agent(request):
        found = lookup(request["order"]).result()
        return {"charged": charge(found["order"]).result(),
                "sent": send(found["order"]).result()}

    return order_agent


def broken(report):
    return sorted((row.activity, row.point) for row in report.broken.itertuples())


def test_graph_api_runs_the_whole_node_again_so_the_first_call_repeats():
    report = lgb.explore_crashes(graph_agent, {"order": "A-1"}, each_effect_once, world=Shop)
    assert report.frame.fired[1:].all() and report.frame.holds[0]
    # a crash anywhere in the node after the charge charges again, not just in the window
    # between the charge and its record
    assert broken(report) == [("act", "after_effect"), ("charge_card", "after_effect"),
                              ("send_receipt", "after_effect"),
                              ("send_receipt", "before_activity")]
    row = report.frame[(report.frame.activity == "send_receipt")
                       & (report.frame.point == "before_activity")].iloc[0]
    assert row.detail.startswith("2 charges") and row.status == "completed"
    attempts = row.run.attempts
    charge = attempts[attempts.activity == "charge_card"]
    assert charge[["attempt", "outcome"]].values.tolist() == [[1, "ok"], [2, "ok"]]
    assert attempts[attempts.activity == "act"].outcome.tolist() == ["crashed", "ok"]
    assert row.run.crashes.point.tolist() == ["before_activity"]
    assert row.run.history.name.tolist() == ["lookup", "act", "answer"]   # LangGraph's view
    # after the node's writes were saved, recovery runs nothing again
    held = report.frame[(report.frame.point == "after_record") & report.frame.holds]
    assert sorted(held.activity) == ["act", "answer", "lookup"]


def test_functional_api_runs_only_the_unfinished_task_again():
    report = lgb.explore_crashes(functional_agent, {"order": "A-1"}, each_effect_once,
                                 world=Shop)
    assert report.frame.fired[1:].all() and report.frame.holds[0]
    assert broken(report) == [("charge_card", "after_effect"), ("send_receipt", "after_effect")]
    assert len(report.points) == 9        # three tasks, three points each
    row = report.broken.iloc[0]
    assert row.run.history.name.tolist() == ["task 1", "task 2", "task 3"]


def test_durability_exit_loses_the_whole_run():
    report = lgb.explore_crashes(functional_agent, {"order": "A-1"}, each_effect_once,
                                 world=Shop, durability="exit")
    assert report.frame.holds[0]
    crashed = report.frame[report.frame.point != "none"]
    assert crashed.fired.all() and not crashed.holds.any()
    assert set(crashed.status) == {"failed"}
    run = crashed.run.iloc[-1]
    assert "invoke(None, config) found nothing to resume: the run is lost" in str(run.error)
    assert run.history.empty and len(run.attempts) == 3     # the injector saw the work


def test_explore_crashes_refuses_bad_arguments():
    with pytest.raises(BadType, match="build=42 is not callable"):
        lgb.explore_crashes(42, {}, each_effect_once)
    with pytest.raises(BadValue, match="durability='fast'"):
        lgb.explore_crashes(graph_agent, {}, each_effect_once, durability="fast")
    with pytest.raises(BadType, match="not a compiled graph"):
        lgb.explore_crashes(lambda checkpointer: None, {}, each_effect_once)
    with pytest.raises(BadValue, match="ran no unit that an injector wraps"):
        lgb.explore_crashes(lambda cp: chain({"a": lambda s: {"answer": "x"}}, cp),
                            {"order": "A-1"}, lambda run, world: True)


# --- dl.from_langgraph --------------------------------------------------------------------

def fingerprint(folder):
    return {p.name: (hashlib.sha256(p.read_bytes()).hexdigest(), p.stat().st_mtime_ns)
            for p in sorted(folder.iterdir())}


def test_from_langgraph_reads_a_graph_thread_read_only(tmp_path):
    db = tmp_path / "lg.sqlite"
    writer = sqlite3.connect(str(db), check_same_thread=False)
    graph = chain({"lookup": lambda s: {"found": {"order": s["order"], "amount": 42.5}},
                   "charge": lambda s: {"charged": {"id": "ch_1"}}}, SqliteSaver(writer))
    graph.invoke({"order": "A-1"}, thread("order-A-1"))
    writer.close()
    before = fingerprint(tmp_path)
    run = dl.from_langgraph(db, "order-A-1")
    assert fingerprint(tmp_path) == before           # nothing written, nothing created
    assert (run.run_id, run.status, run.source) == ("order-A-1", "completed", "langgraph")
    assert run.input == {"order": "A-1"}
    assert run.result == {"order": "A-1", "found": {"order": "A-1", "amount": 42.5},
                          "charged": {"id": "ch_1"}}
    assert run.history[["position", "kind", "name", "ok"]].values.tolist() == [
        [1, "activity", "lookup", True], [2, "activity", "charge", True]]
    assert run.history.value.tolist() == [{"found": {"order": "A-1", "amount": 42.5}},
                                          {"charged": {"id": "ch_1"}}]
    assert (run.history.recorded_at.diff().dropna() >= 0).all()
    assert any("records no attempts" in n for n in run.notes)
    assert any("records no crashes" in n for n in run.notes)
    assert dl.compare([run]).loc["order-A-1", "status"] == "completed"


def test_from_langgraph_names_functional_tasks_by_call_index_and_says_so(tmp_path):
    db = tmp_path / "lg.sqlite"

    @task
    def double(x):
        return x * 2

    @entrypoint(checkpointer=saver(db))
    def twice(x):
        return double(double(x).result()).result()

    assert twice.invoke(3, thread()) == 12
    run = dl.from_langgraph(str(db), "t")
    assert (run.workflow, run.status, run.result, run.input) == ("twice", "completed", 12, 3)
    assert run.history[["name", "value"]].values.tolist() == [["task 1", 6], ["task 2", 12]]
    assert any("without its name or time" in n for n in run.notes)


def test_from_langgraph_shows_a_failed_step_and_a_typed_value_without_building_it(tmp_path):
    from langchain_core.messages import AIMessage
    db = tmp_path / "lg.sqlite"

    def fail(state):
        raise ValueError("order not found")

    graph = chain({"think": lambda s: {"found": {"msg": AIMessage(content="hi")}},
                   "lookup": fail}, saver(db))
    with pytest.raises(ValueError):
        graph.invoke({"order": "A-1"}, thread())
    run = dl.from_langgraph(db, "t")
    assert run.status == "failed" and "order not found" in str(run.error)
    last = run.history.iloc[-1]
    assert (last["name"], last["ok"], last["error_class"], last["outcome"]) == (
        "lookup", False, "ValueError", "non_retryable")
    message = run.history.value.iloc[0]["found"]["msg"]
    assert message["__type__"] == "langchain_core.messages.ai.AIMessage"
    assert message["value"]["content"] == "hi"
    assert any("never imports or builds them" in n for n in run.notes)


def test_from_langgraph_says_a_thread_stopped_at_an_interrupt_is_waiting(tmp_path):
    from langgraph.types import interrupt
    db = tmp_path / "lg.sqlite"
    graph = chain({"lookup": lambda s: {"found": {"order": s["order"]}},
                   "approve": lambda s: {"answer": interrupt("charge 42.50?")}}, saver(db))
    graph.invoke({"order": "A-1"}, thread())
    run = dl.from_langgraph(db, "t")
    assert run.status == "waiting" and run.ended_at is None
    assert run.history.name.tolist() == ["lookup"]


def test_from_langgraph_refuses_a_pickled_value(tmp_path):
    db = tmp_path / "lg.sqlite"
    pickling = SqliteSaver(sqlite3.connect(str(db), check_same_thread=False),
                           serde=JsonPlusSerializer(pickle_fallback=True))
    chain({"make": lambda s: {"found": {"thing": Unpackable()}}}, pickling).invoke(
        {"order": "A-1"}, thread())
    types = {r[0] for r in sqlite3.connect(db).execute("SELECT type FROM writes")}
    assert "pickle" in types                      # LangGraph really fell back to pickle
    with pytest.raises(LangGraphReadError, match="was stored with pickle") as info:
        dl.from_langgraph(db, "t")
    assert info.value.what == "pickle" and info.value.thread_id == "t"
    assert "unpickling a file runs its code" in str(info.value)


class Unpackable:
    """A value msgpack cannot hold, so LangGraph's serializer falls back to pickle."""


def test_a_stored_constructor_is_never_called(tmp_path):
    """A hand-made row naming os.system: LangGraph's own loader would import and call it."""
    import ormsgpack
    db = tmp_path / "lg.sqlite"
    chain({"a": lambda s: {"answer": "x"}}, saver(db)).invoke({"order": "A-1"}, thread())
    marker = tmp_path / "pwned"
    evil = ormsgpack.packb(ormsgpack.Ext(0, ormsgpack.packb(
        ["os", "system", f"touch {marker}"])))
    con = sqlite3.connect(db)
    con.execute("UPDATE writes SET type = 'msgpack', value = ? WHERE channel = 'answer'",
                (evil,))
    con.commit()
    con.close()
    run = dl.from_langgraph(db, "t")
    assert run.history.value.iloc[0]["answer"] == {"__type__": "os.system",
                                                   "value": f"touch {marker}"}
    assert not marker.exists()


DEEP_JSON = "[" * 100_000 + "]" * 100_000


@pytest.mark.parametrize("sql, params, words", [
    ("ALTER TABLE writes DROP COLUMN task_path", (), "not the ones a SqliteSaver writes"),
    ("ALTER TABLE checkpoints RENAME TO old; CREATE TABLE checkpoints (thread_id, "
     "checkpoint_ns); INSERT INTO checkpoints VALUES ('t', '')", (),
     "not the ones a SqliteSaver writes"),
    ("UPDATE writes SET task_path = x'00ff'", (), "column 'task_path'"),
    ("UPDATE writes SET channel = x'00'", (), "column 'channel'"),
    ("UPDATE checkpoints SET parent_checkpoint_id = x'01'", (), "column 'parent_checkpoint_id'"),
    ("UPDATE writes SET type = 'json', value = ?", (DEEP_JSON,), "is not valid json"),
    ("UPDATE checkpoints SET type = 'json', checkpoint = ?", (DEEP_JSON,),
     "is not valid json"),
])
def test_a_crafted_checkpoint_file_is_refused_naming_what_is_wrong(tmp_path, sql, params,
                                                                   words):
    """A stranger's file: a column missing, a name stored as a blob, JSON nested 100,000
    deep each raised sqlite3, TypeError or RecursionError tracebacks."""
    db = tmp_path / "lg.sqlite"
    chain({"a": lambda s: {"answer": "x"}}, saver(db)).invoke({"order": "A-1"}, thread())
    con = sqlite3.connect(db)
    con.execute(sql, params) if params else con.executescript(sql)
    con.commit()
    con.close()
    with pytest.raises(LangGraphReadError, match=words):
        dl.from_langgraph(db, "t")


def test_a_checkpoint_whose_channel_values_are_not_an_object_still_reads(tmp_path):
    db = tmp_path / "lg.sqlite"
    chain({"a": lambda s: {"answer": "x"}}, saver(db)).invoke({"order": "A-1"}, thread())
    con = sqlite3.connect(db)
    con.execute("UPDATE checkpoints SET type = 'json', checkpoint = ?",
                (json.dumps({"ts": "2024-01-01T00:00:00+00:00", "channel_values": [1, 2]}),))
    con.commit()
    con.close()
    run = dl.from_langgraph(db, "t")
    assert run.input is None and run.status == "completed"


@pytest.mark.parametrize("make, what, words", [
    (lambda p: p.write_text("not a database, just text " * 40), "file",
     "not a SQLite database"),
    (lambda p: sqlite3.connect(p).execute("CREATE TABLE t (x)").connection.commit(), "file",
     "without LangGraph's 'checkpoints' and 'writes' tables"),
    (lambda p: None, "path", "no such file"),
])
def test_from_langgraph_refuses_what_is_not_a_checkpoint_file(tmp_path, make, what, words):
    path = tmp_path / "x.sqlite"
    make(path)
    with pytest.raises(LangGraphReadError, match=words) as info:
        dl.from_langgraph(path, "t")
    assert info.value.what == what and isinstance(info.value, ValueError)


def test_from_langgraph_names_the_threads_there_for_an_unknown_thread(tmp_path):
    db = tmp_path / "lg.sqlite"
    chain({"a": lambda s: {"answer": "x"}}, saver(db)).invoke({"order": "A-1"},
                                                              thread("order-A-1"))
    with pytest.raises(LangGraphReadError, match="no checkpoints for thread 'order-A-2'; "
                       "threads in the file: 'order-A-1'") as info:
        dl.from_langgraph(db, "order-A-2")
    assert info.value.what == "thread_id"
    with pytest.raises(BadType, match="thread_id=7"):
        dl.from_langgraph(db, 7)


def test_a_version_outside_the_supported_range_is_named():
    with pytest.raises(FrameworkError, match=r"LangGraph 0\.6\.4 is installed, but "
                       r"durablelab's bridge is tested with langgraph>=1\.0,<2") as info:
        lgb.check_versions(version=lambda package: "0.6.4")
    assert (info.value.framework, info.value.version, info.value.extra) == (
        "LangGraph", "0.6.4", "langgraph")
    assert isinstance(info.value, ImportError)
    assert set(lgb.check_versions()) == {"langgraph", "langgraph-checkpoint-sqlite"}


def test_a_missing_checkpointer_package_names_the_extra():
    from importlib.metadata import PackageNotFoundError

    def version(package):
        if package == "langgraph-checkpoint-sqlite":
            raise PackageNotFoundError(package)
        return "1.2.0"

    with pytest.raises(FrameworkError, match=r"pip install 'durablelab\[langgraph\]'"):
        lgb.check_versions(version=version)
