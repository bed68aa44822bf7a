"""`durablelab sweep CONFIG --out DIR`: the shipped configs, a real run, and bad configs
refused in one line that names the file, the key and what is allowed (exit 1; 2 for a
usage error), never a traceback."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import durablelab as dl
from durablelab.cli import main
from durablelab.experiments import config

ROOT = Path(__file__).resolve().parent.parent
CONFIGS = sorted((ROOT / "datasets" / "experiments").glob("*.*"))

TINY = {"workflow": "durablelab.examples.storm:triage",
        "world": "durablelab.examples.storm:world", "seeds": 2,
        "inputs": [{"id": "t-0", "customer": "c-0", "refund": 5.0}],
        "policies": {"code": "code", "none": "no-retries"},
        "plans": {"none": "none", "reset": {"version": 1, "rules": [
            {"type": "ConnectionReset", "activity": "refund", "p": 0.5}]}}}


def test_the_shipped_configs_are_valid():
    assert len(CONFIGS) == 2 and {c.suffix for c in CONFIGS} == {".toml", ".json"}
    for path in CONFIGS:
        kwargs = config.read(path)
        assert callable(kwargs["workflow"]) and kwargs["inputs"]
        assert len(kwargs["policies"]) >= 2 and len(kwargs["fault_plans"]) >= 2


def test_sweep_writes_results_and_an_export_that_loads_back(tmp_path, capsys):
    cfg = tmp_path / "tiny.json"
    cfg.write_text(json.dumps(TINY))
    assert main(["sweep", str(cfg), "--out", str(tmp_path / "out")]) == 0
    printed = capsys.readouterr().out
    assert "success_rate" in printed and "results.duckdb" in printed
    back = dl.load(tmp_path / "out" / "experiment.jsonl")
    assert isinstance(back, dl.Experiment) and len(back.frame) == 2 * 2 * 2
    # run again: resumed, nothing left to do, the same table
    assert main(["sweep", str(cfg), "--out", str(tmp_path / "out")]) == 0
    again = dl.load(tmp_path / "out" / "experiment.jsonl")
    assert again.frame.to_csv() == back.frame.to_csv()


@pytest.mark.parametrize("change, key, words", [
    ({"retries": 3}, "retries", "unknown key. Allowed: workflow, world, inputs"),
    ({"seeds": "many"}, "seeds", "a number n"),
    ({"workflow": "nowhere.at_all:flow"}, "workflow", "cannot import 'nowhere.at_all'"),
    ({"workflow": "durablelab.examples.storm"}, "workflow", "not 'module:function'"),
    ({"inputs": []}, "inputs", "a non-empty list"),
    ({"policies": {"x": "temporal"}}, "policies.x", "unknown preset 'temporal'"),
    ({"policies": {"x": {"tries": 3}}}, "policies.x", "unknown key 'tries'"),
    ({"plans": {"p": "missing.json"}}, "plans.p", "no fault plan file"),
    ({"plans": {"p": {"version": 1, "rules": [{"type": "Meteor", "activity": "*"}]}}},
     "plans.p", "unknown type 'Meteor'"),
    ({"processes": 0}, "processes", "from 1 to"),
])
def test_a_bad_config_is_one_line_naming_file_key_and_what_is_allowed(tmp_path, capsys,
                                                                     change, key, words):
    cfg = tmp_path / "bad.json"
    cfg.write_text(json.dumps({**TINY, **change}))
    assert main(["sweep", str(cfg), "--out", str(tmp_path / "out")]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert f"{cfg}: {key}:" in err and words in err


def test_unreadable_and_malformed_files(tmp_path, capsys):
    assert main(["sweep", str(tmp_path / "none.toml"), "--out", str(tmp_path)]) == 1
    assert "cannot read the sweep config" in capsys.readouterr().err
    bad = tmp_path / "bad.toml"
    bad.write_text("workflow = \n")
    assert main(["sweep", str(bad), "--out", str(tmp_path)]) == 1
    assert "not valid TOML" in capsys.readouterr().err
    assert main(["sweep", str(bad)]) == 2          # --out missing: a usage error
    assert "--out" in capsys.readouterr().err


def test_a_sweep_in_which_no_run_completed_exits_1_and_says_why(tmp_path, capsys):
    """Without `world`, a workflow that reads ctx.world fails every run: the sweep used to
    exit 0 with a success rate of 0."""
    cfg = tmp_path / "no-world.json"
    cfg.write_text(json.dumps({k: v for k, v in TINY.items() if k != "world"}))
    assert main(["sweep", str(cfg), "--out", str(tmp_path / "out")]) == 1
    captured = capsys.readouterr()
    assert "success_rate" in captured.out                     # the table is still shown
    err = captured.err.strip()
    assert err.startswith("durablelab: not one of the 8 runs completed (8 failed")
    assert "the config names no world, and a workflow that reads ctx.world gets None" in err
    assert len(err.splitlines()) == 1 and "Traceback" not in err
