"""The worker's registry and one engine per file: which code runs a recorded run.

A store is data. An engine runs only workflows registered in this process (by `start()`,
`Engine(workflows=...)` or `@dl.workflow`); a name a store row holds is never looked up
anywhere else, so opening a stranger's file runs none of its code.
"""

import functools
import os
import sys
import types
import warnings

import duckdb
import pytest

import durablelab as dl


def waits(ctx, _):
    ctx.activity("step", lambda: 1)
    return ctx.wait_signal("go")


def stored_runs(path):
    con = duckdb.connect(path, read_only=True)
    try:
        return con.execute("SELECT run_id, workflow, status, input FROM runs "
                           "ORDER BY run_id").fetchall()
    finally:
        con.close()


def craft_store(path, workflow, input_json):
    """A store whose one unfinished run names `workflow`: what a stranger could send."""
    dl.Engine(path).close()
    con = duckdb.connect(path)
    con.execute("INSERT INTO runs VALUES ('evil', ?, ?, 0, NULL, NULL, NULL, 'running', "
                "NULL, NULL, 0.0, NULL, NULL)", [workflow, input_json])
    con.close()


@pytest.mark.parametrize("name", ["os:renames", "os:makedirs", "shutil:rmtree",
                                  "builtins:exec", "subprocess:run"])
def test_a_crafted_workflow_name_runs_nothing(tmp_path, name):
    target = tmp_path / "made" / "by" / "the" / "store"
    path = str(tmp_path / "stranger.duckdb")
    craft_store(path, name, f'"{target}"')
    before = sorted(os.listdir(tmp_path))
    with pytest.warns(dl.UnknownWorkflowWarning) as caught:
        engine = dl.Engine(path)
    engine.advance(3600)
    engine.run_until_idle()
    run = engine.run("evil")
    assert run.status == "running" and run.history.empty and run.wakeups.empty
    assert run.workflow_registered is False
    diagnosis = dl.diagnose(run)
    assert diagnosis.state == "unregistered"
    assert name in str(diagnosis) and "workflows=[" in str(diagnosis)
    engine.close()
    assert sorted(os.listdir(tmp_path)) == before and not target.exists()
    text = str(caught[0].message)
    assert name in text and "'evil'" in text and "workflows=[" in text
    assert stored_runs(path)[0][:3] == ("evil", name, "running")   # left as recorded


def test_an_unregistered_name_imports_nothing(tmp_path):
    path = str(tmp_path / "stranger.duckdb")
    craft_store(path, "json.tool:main", '"x"')
    sys.modules.pop("json.tool", None)
    with pytest.warns(dl.UnknownWorkflowWarning):
        dl.Engine(path).close()
    assert "json.tool" not in sys.modules


def test_a_reopened_file_warns_about_each_unknown_workflow_and_resumes_once_registered(
        db_path):
    module = types.ModuleType("registry_flows")
    sys.modules["registry_flows"] = module
    try:
        exec("def flow(ctx, _):\n    return ctx.wait_signal('go')\n", module.__dict__)
        with dl.Engine(db_path) as engine:
            engine.start(module.flow, None, run_id="r-1")
            engine.start(waits, None, run_id="r-2")
            engine.run_until_idle()
        dl.registry.REGISTRY.pop("registry_flows:flow")      # a new process knows neither
        dl.registry.REGISTRY.pop(dl.registry.workflow_name(waits))
        with pytest.warns(dl.UnknownWorkflowWarning) as caught:
            engine = dl.Engine(db_path)
        text = str(caught[0].message)
        assert "registry_flows:flow: 1 run(s) ('r-1')" in text
        assert "test_registry:waits: 1 run(s) ('r-2')" in text
        assert engine.run("r-1").status == "waiting"        # as recorded; not run
        dl.workflow(module.flow)                             # registering adopts its runs
        engine.signal("r-1", "go", 5)
        engine.run_until_idle()
        assert engine.run("r-1").result == 5
        assert engine.run("r-2").workflow_registered is False
        engine.close()
    finally:
        del sys.modules["registry_flows"]


def test_redefining_a_workflow_with_runs_in_flight_warns_and_replays_the_new_code(db_path):
    module = types.ModuleType("redefined_cell")
    sys.modules["redefined_cell"] = module
    try:
        cell = ("import durablelab as dl\n@dl.workflow\ndef flow(ctx, _):\n"
                "    ctx.wait_signal('go')\n    return {!r}\n")
        exec(cell.format("old"), module.__dict__)
        engine = dl.Engine(db_path)
        engine.start(module.flow, None, run_id="r")
        engine.run_until_idle()
        with pytest.warns(dl.WorkflowRedefinedWarning, match="'r'.*patched"):
            exec(cell.format("new"), module.__dict__)        # the notebook cell, run again
        engine.signal("r", "go")
        engine.run_until_idle()
        assert engine.run("r").result == "new"
        engine.close()
        with warnings.catch_warnings():
            warnings.simplefilter("error")                   # nothing in flight: no warning
            exec(cell.format("newer"), module.__dict__)
    finally:
        del sys.modules["redefined_cell"]


def test_partials_and_callable_objects_are_not_workflows(engine):
    class Flow:
        def __call__(self, ctx, _):
            return 1
    for bad in (functools.partial(waits), Flow(), print):
        with pytest.raises(dl.errors.BadType, match="not a workflow function") as info:
            engine.start(bad, None)
        assert isinstance(info.value, TypeError) and isinstance(info.value, dl.DurableLabError)
        with pytest.raises(TypeError, match="def my_flow"):
            dl.Engine(workflows=[bad])
        with pytest.raises(TypeError):
            dl.workflow(bad)
    assert engine.runs().empty                                # nothing recorded
    with pytest.raises(TypeError, match=r"workflows=\[my_flow\]"):
        dl.Engine(workflows=waits)


def test_two_closures_with_one_qualname_each_resume_with_their_own_code():
    def make(answer):
        def flow(ctx, _):
            ctx.sleep(10)
            return answer
        return flow
    first, second = make("first"), make("second")
    assert dl.registry.workflow_name(first) == dl.registry.workflow_name(second)
    with dl.Engine() as engine:
        engine.start(first, None, run_id="a")
        engine.start(second, None, run_id="b")
        engine.advance(5)
        engine.crash()                                        # both reload by name
        engine.run_until_idle()
        assert engine.run("a").result == "first" and engine.run("b").result == "second"


def test_a_second_engine_on_a_file_takes_it_over(db_path):
    calls = []
    def effect(n):
        calls.append(n)
        return n
    def flow(ctx, _):
        ctx.activity("effect", effect, 1)
        ctx.wait_signal("go")
        return ctx.activity("effect", effect, 2)
    older = dl.Engine(db_path, durability="exit")
    older.start(flow, None, run_id="r")
    older.run_until_idle()                                    # events held, not committed
    newer = dl.Engine(db_path, durability="exit")
    assert len(newer.run("r").history) == 2                   # older committed as close() does
    for call in (lambda: older.run("r"), lambda: older.start(flow, None),
                 older.run_until_idle, lambda: older.signal("r", "go")):
        with pytest.raises(dl.errors.EngineClosedError, match="superseded") as info:
            call()
        assert isinstance(info.value, RuntimeError) and info.value.superseded is True
    older.close()                                             # harmless
    newer.signal("r", "go")
    newer.run_until_idle()
    assert newer.run("r").result == 2 and calls == [1, 2]     # each effect once
    newer.close()
    rows = duckdb.connect(db_path, read_only=True).execute(
        "SELECT position, count(*) FROM events GROUP BY position ORDER BY position").fetchall()
    assert rows == [(1, 1), (2, 1), (3, 1), (4, 1)]           # no position written twice


def test_a_bad_second_engine_leaves_the_first_alone(db_path):
    first = dl.Engine(db_path)
    with pytest.raises(ValueError, match="durability='fast'"):
        dl.Engine(db_path, durability="fast")
    first.start(waits, None, run_id="r")                      # still open
    first.close()
    with pytest.raises(dl.errors.EngineClosedError, match="is closed") as info:
        first.runs()
    assert info.value.superseded is False
