"""A file is data (issue 20): a sweep config chooses among code you have and never runs any
other (a registered workflow, a world written in Python outside the standard library, plan
files in its own folder, at most a process per CPU); a value holding a lone surrogate,
which the engine accepts, exports and loads back; the command line on an exported
experiment lists its rows or says in one line what the file is."""

from __future__ import annotations

import json
import os
import sys
import uuid
from pathlib import Path

import pandas as pd
import pytest

import durablelab as dl
from durablelab.cli import main
from durablelab.errors import ConfigError
from durablelab.export import data_type
from durablelab.experiments import config

ROOT = Path(__file__).resolve().parent.parent
SHIPPED = sorted((ROOT / "datasets" / "experiments").glob("*.*"))
LONE = "\ud800"   # a Python str may hold it; UTF-8 (and so DuckDB text) cannot


def write(folder: Path, body: dict, name: str = "sweep.json") -> Path:
    path = folder / name
    path.write_text(json.dumps(body))
    return path


def refused(path: Path, key: str) -> ConfigError:
    """config.read's error, checked to name the file and the key, with what is allowed."""
    with pytest.raises(ConfigError) as info:
        config.read(path)
    error = info.value
    assert error.path == str(path) and error.key == key
    assert str(error).startswith(f"{path}: {key}: ") and "Allowed: " in str(error)
    return error


def module_beside(folder: Path, source: str) -> str:
    """A module of its own name in `folder` (a name no other test imports)."""
    name = f"sealed_{uuid.uuid4().hex[:12]}"
    (folder / f"{name}.py").write_text(source)
    return name


# --- what a config may name ---------------------------------------------------------------
def test_a_stdlib_function_as_workflow_is_refused_and_runs_nothing(tmp_path, capsys):
    marker = tmp_path / "MARKER"
    cfg = write(tmp_path, {"workflow": "pydoc:pipepager", "seeds": 1,
                           "inputs": [f"touch {marker}"]})
    error = refused(cfg, "workflow")
    assert "standard library module 'pydoc'" in str(error)
    assert main(["sweep", str(cfg), "--out", str(tmp_path / "out")]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err and f"{cfg}: workflow:" in err
    assert not marker.exists() and not (tmp_path / "out").exists()


def test_an_unregistered_function_is_refused_before_it_runs(tmp_path):
    marker = tmp_path / "CALLED"
    name = module_beside(tmp_path, f"def flow(ctx, x):\n    open({str(marker)!r}, 'w')\n")
    cfg = write(tmp_path, {"workflow": f"{name}:flow", "inputs": [1], "seeds": 1})
    error = refused(cfg, "workflow")
    assert "is not a registered durablelab workflow" in str(error)
    assert "@dl.workflow" in str(error) and "dl.workflow(flow)" in str(error)
    assert not marker.exists()


def test_a_registered_workflow_and_a_python_world_beside_the_config_load(tmp_path):
    name = module_beside(tmp_path, "import durablelab as dl\n\n"
                                   "@dl.workflow\ndef flow(ctx, x):\n    return x\n\n"
                                   "class World:\n    def __init__(self, clock):\n"
                                   "        self.clock = clock\n")
    cfg = write(tmp_path, {"workflow": f"{name}:flow", "world": f"{name}:World",
                           "inputs": [1, 2], "seeds": 2})
    kwargs = config.read(cfg)
    assert kwargs["workflow"] is sys.modules[name].flow
    assert kwargs["world"] is sys.modules[name].World
    experiment = dl.sweep(**kwargs)
    assert set(experiment.frame["status"]) == {"completed"}


@pytest.mark.parametrize("world, words", [
    ("subprocess:Popen", "standard library module 'subprocess'"),
    ("builtins:open", "standard library module 'builtins'"),
    ("os.path:join", "standard library module 'os.path'"),
    ("numpy:ndarray", "not a class or function written in Python"),
    ("durablelab.examples.storm:MODEL", "is not a world factory"),
    ("durablelab.examples.storm:dl.sweep", "is not a world factory"),
    ("durablelab.examples.storm:StormWorld.__init__", "no dunder"),
    # a Python function of an installed package (here durablelab.s own): it was called
    ("durablelab.experiments.config:read", "registers no durablelab workflow"),
])
def test_a_world_that_is_not_python_code_of_your_own_is_refused(tmp_path, world, words):
    cfg = write(tmp_path, {"workflow": "durablelab.examples.storm:triage", "world": world,
                           "inputs": [{"id": "t", "customer": "c", "refund": 0.0}]})
    assert words in str(refused(cfg, "world"))


def test_a_main_module_is_never_imported(tmp_path):
    marker = tmp_path / "IMPORTED"
    package = f"sealed_{uuid.uuid4().hex[:12]}"
    (tmp_path / package).mkdir()
    (tmp_path / package / "__init__.py").write_text("")
    (tmp_path / package / "__main__.py").write_text(f"open({str(marker)!r}, 'w')\n"
                                                   f"def flow(ctx, x):\n    return x\n")
    cfg = write(tmp_path, {"workflow": f"{package}.__main__:flow", "inputs": [1]})
    assert "a program's entry point" in str(refused(cfg, "workflow"))
    assert not marker.exists() and f"{package}.__main__" not in sys.modules


def test_every_other_key_is_checked_before_any_module_is_imported(tmp_path):
    marker = tmp_path / "IMPORTED"
    name = module_beside(tmp_path, f"open({str(marker)!r}, 'w')\n")
    cfg = write(tmp_path, {"workflow": f"{name}:flow", "inputs": [1], "seeds": "many"})
    refused(cfg, "seeds")
    assert not marker.exists() and name not in sys.modules


def test_a_module_beside_the_config_never_shadows_an_installed_one(tmp_path):
    # A json.py beside the config would be imported by anything importing json afterwards,
    # were the folder first on the path.
    (tmp_path / "json.py").write_text("raise SystemExit('shadowed')\n")
    cfg = write(tmp_path, {"workflow": "json:loads", "inputs": [1]})
    assert "standard library module 'json'" in str(refused(cfg, "workflow"))
    assert str(tmp_path) not in sys.path


# --- plans: files in the config's folder only -------------------------------------------------
PLAN = {"version": 1, "rules": [{"type": "ServerError", "activity": "model", "p": 0.5}]}
STORM = {"workflow": "durablelab.examples.storm:triage", "seeds": 1,
         "inputs": [{"id": "t", "customer": "c", "refund": 0.0}]}


def test_a_plan_file_inside_the_folder_loads(tmp_path):
    (tmp_path / "plans").mkdir()
    (tmp_path / "plans" / "p.json").write_text(json.dumps(PLAN))
    cfg = write(tmp_path, {**STORM, "plans": {"p": "plans/p.json", "q": "./plans/../plans/p.json"}})
    plans = config.read(cfg)["fault_plans"]
    assert plans["p"].to_json() == plans["q"].to_json() == dl.FaultPlan.from_json(
        json.dumps(PLAN)).to_json()


@pytest.mark.parametrize("where", ["up", "absolute", "link"])
def test_a_plan_file_outside_the_folder_is_refused(tmp_path, where):
    folder = tmp_path / "configs"
    folder.mkdir()
    outside = tmp_path / "outside.json"
    outside.write_text(json.dumps(PLAN))   # a real plan: refused for where it is, not what
    value = {"up": "../outside.json", "absolute": str(outside), "link": "inside.json"}[where]
    if where == "link":
        (folder / "inside.json").symlink_to(outside)
    cfg = write(folder, {**STORM, "plans": {"p": value}})
    error = refused(cfg, "plans.p")
    assert "outside the config's folder" in str(error) and "inline" in str(error)


# --- processes -------------------------------------------------------------------------------
@pytest.mark.parametrize("n", [0, -1, (os.cpu_count() or 1) + 1, 10 ** 6, True, 1.5, "2"])
def test_processes_is_a_whole_number_up_to_the_cpu_count(tmp_path, n):
    cfg = write(tmp_path, {**STORM, "processes": n})
    error = refused(cfg, "processes")
    assert f"from 1 to {os.cpu_count() or 1}" in str(error)


def test_processes_up_to_the_cpu_count_are_allowed(tmp_path):
    cfg = write(tmp_path, {**STORM, "processes": os.cpu_count() or 1})
    assert config.read(cfg)["processes"] == (os.cpu_count() or 1)


# --- the shipped configs -----------------------------------------------------------------------
@pytest.mark.parametrize("path", SHIPPED, ids=[p.name for p in SHIPPED])
def test_the_shipped_configs_load_and_run(path):
    kwargs = config.read(path)
    assert kwargs["workflow"] is dl.registry.REGISTRY["durablelab.examples.storm:triage"]
    kwargs.update(seeds=[0], inputs=kwargs["inputs"][:2])   # every cell, a few runs each
    experiment = dl.sweep(**kwargs)
    assert len(experiment.cells) == len(kwargs["policies"]) * len(kwargs["fault_plans"])
    assert experiment.frame["status"].isin(["completed", "failed"]).all()


def test_the_storm_config_names_no_file():
    text = (ROOT / "datasets" / "experiments" / "storm.toml").read_text()
    storm = config.read(ROOT / "datasets" / "experiments" / "storm.toml")["fault_plans"]["storm"]
    assert "../" not in text
    assert storm.to_json() == dl.FaultPlan.from_json(
        ROOT / "datasets" / "faults" / "rate_limit_storm.json").to_json()


# --- a lone surrogate exports and loads back -----------------------------------------------------
def surrogate_flow(ctx, text):
    echoed = ctx.activity("echo", lambda: "result " + LONE)
    signalled = ctx.wait_signal("go")
    return {"input": text, "echoed": echoed, "signalled": signalled}


def surrogate_run(engine) -> str:
    run_id = engine.start(surrogate_flow, "input " + LONE)
    engine.run_until_blocked()
    engine.signal(run_id, "go", {"key " + "\udfff": [LONE, "plain"]})
    engine.run_until_idle()
    return run_id


@pytest.mark.parametrize("suffix", [".jsonl", ".parquet"])
def test_a_lone_surrogate_exports_and_loads_back_equal(tmp_path, suffix):
    with dl.Engine() as engine:
        run = engine.run(surrogate_run(engine))
        plain = engine.start(surrogate_flow, "plain")     # the other runs are exported too
        engine.signal(plain, "go", 1)
        engine.run_until_idle()
        path = dl.export(engine, tmp_path / f"runs{suffix}")
        others = engine.run(plain)
    assert run.status == "completed" and run.result["echoed"] == "result " + LONE
    back = {r.run_id: r for r in dl.load(path)}
    for original in (run, others):
        loaded = back[original.run_id]
        assert (loaded.input, loaded.result, loaded.status) == (
            original.input, original.result, original.status)
        for frame in ("history", "attempts", "wakeups", "crashes"):
            pd.testing.assert_frame_equal(getattr(loaded, frame), getattr(original, frame))
    assert back[run.run_id].result["signalled"] == {"key \udfff": [LONE, "plain"]}
    if suffix == ".jsonl":
        path.read_bytes().decode("utf-8")     # UTF-8 text: the surrogate is escaped
        assert b"\\ud800" in path.read_bytes()
    # the same runs give the same bytes
    again = dl.export(list(back.values()), tmp_path / f"again{suffix}")
    assert dl.load(again)[0].result == dl.load(path)[0].result


def parquet_data_type(path) -> str:
    import duckdb
    with duckdb.connect() as con:
        return con.execute("SELECT column_type FROM (DESCRIBE SELECT * FROM read_parquet(?)) "
                           "WHERE column_name = 'data'", [str(path)]).fetchone()[0]


def test_parquet_keeps_its_json_column_unless_a_value_holds_a_surrogate(tmp_path):
    with dl.Engine() as engine:
        # a backslash before "ud800" and a real surrogate pair (an emoji) are no lone one
        engine.start(plain_flow, ["\\ud800", "\U0001F600"])
        engine.run_until_idle()
        assert parquet_data_type(dl.export(engine, tmp_path / "plain.parquet")) == "JSON"
        surrogate_run(engine)
        assert parquet_data_type(dl.export(engine, tmp_path / "lone.parquet")) == "VARCHAR"
    assert data_type([json.dumps("\\ud800"), json.dumps("\\\\ud800")]) == "JSON"
    assert data_type([json.dumps(LONE, ensure_ascii=True)]) == "VARCHAR"


def plain_flow(ctx, value):
    return ctx.activity("echo", lambda: value)


@pytest.mark.parametrize("suffix", [".jsonl", ".parquet"])
def test_an_experiment_with_a_lone_surrogate_exports_and_loads_back(tmp_path, suffix):
    experiment = dl.sweep(surrogate_flow_no_wait, ["in " + LONE, "plain"], seeds=range(2))
    back = dl.load(experiment.export(tmp_path / f"experiment{suffix}"))
    assert back.spec == experiment.spec and back.spec["inputs"][0] == "in " + LONE
    pd.testing.assert_frame_equal(back.frame, experiment.frame)


def surrogate_flow_no_wait(ctx, text):
    return {"input": text, "echoed": ctx.activity("echo", lambda: "result " + LONE)}


def test_compare_counts_a_lone_surrogate():
    with dl.Engine() as engine:
        run = engine.run(surrogate_run(engine))
    assert dl.compare([run])["history_bytes"].iloc[0] > 0


# --- the command line on an exported experiment ---------------------------------------------------
@pytest.fixture(scope="module")
def experiment_files(tmp_path_factory):
    folder = tmp_path_factory.mktemp("experiment")
    experiment = dl.sweep(surrogate_flow_no_wait, ["a", "b"], seeds=range(2))
    return experiment, [experiment.export(folder / "e.jsonl"),
                        experiment.export(folder / "e.parquet")]


def one_line(capsys) -> str:
    captured = capsys.readouterr()
    assert captured.err.count("\n") == 1 and "Traceback" not in captured.err
    assert "a bug" not in captured.err
    return captured.err


def test_runs_lists_an_experiments_rows(experiment_files, capsys):
    experiment, files = experiment_files
    for path in files:
        assert main(["runs", str(path)]) == 0
        out = capsys.readouterr().out
        for run_id in experiment.frame["run_id"]:
            assert run_id in out
        assert "4 run(s) of" in out and "exported experiment" in out


@pytest.mark.parametrize("command", [
    ["show", "code/none/0/0", "--db", "{path}"],
    ["timeline", "code/none/0/0", "--db", "{path}", "-o", "{out}.png"],
    ["export", "{path}", "-o", "{out}.jsonl", "--run", "code/none/0/0"],
    ["replay-check", "--workflow", "durablelab.examples.storm:triage", "--from", "{path}"],
], ids=["show", "timeline", "export --run", "replay-check"])
def test_commands_that_need_histories_say_what_the_file_is(experiment_files, capsys, tmp_path,
                                                           command):
    for path in experiment_files[1]:
        argv = [a.format(path=path, out=tmp_path / "out") for a in command]
        assert main(argv) == 1
        err = one_line(capsys)
        assert f"{path}: this is an exported experiment" in err
        assert f"durablelab runs {path}" in err
    assert not list(tmp_path.iterdir())


def test_export_converts_an_experiment_whole(experiment_files, tmp_path, capsys):
    experiment, (jsonl, _) = experiment_files
    assert main(["export", str(jsonl), "-o", str(tmp_path / "e.parquet")]) == 0
    assert "wrote the experiment (4 run(s))" in capsys.readouterr().out
    pd.testing.assert_frame_equal(dl.load(tmp_path / "e.parquet").frame, experiment.frame)


def test_replay_check_of_an_experiment_names_what_it_is(experiment_files):
    with pytest.raises(dl.ExportFormatError, match="this is an exported experiment"):
        dl.replay_check(surrogate_flow_no_wait, experiment_files[1][0])


def test_a_module_that_fails_to_import_is_one_line_naming_file_and_key(tmp_path, capsys):
    name = module_beside(tmp_path, "raise RuntimeError('no network here')\n")
    cfg = write(tmp_path, {"workflow": f"{name}:flow", "inputs": [1]})
    assert "RuntimeError: no network here" in str(refused(cfg, "workflow"))
    assert main(["sweep", str(cfg), "--out", str(tmp_path / "out")]) == 1
    assert f"{cfg}: workflow: cannot import" in one_line(capsys)
