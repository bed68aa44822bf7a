"""dl.sweep and Experiment: reproducible tables, isolation equal to a fresh engine per run,
contention that changes the outcome, processes equal to one process, resuming a sweep
killed with SIGKILL, presets, export and load, and bad arguments refused clearly."""

from __future__ import annotations

import dataclasses
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import duckdb
import numpy as np
import pandas as pd
import pytest

import durablelab as dl

TESTS = Path(__file__).resolve().parent
if str(TESTS) not in sys.path:
    sys.path.insert(0, str(TESTS))

import sweep_worker as sw  # noqa: E402

MIXED = {"calm": None,
         "rough": dl.FaultPlan([
             dl.faults.ServerError("quote", p=0.3),
             dl.faults.RateLimit("charge", p=0.2, retry_after=5),
             dl.faults.Crash("charge", point="after_effect", p=0.3),
             dl.faults.Timeout("notify", p=0.2),
             dl.faults.Crash("*", point="during_wait", p=0.2)])}


def small(**options):
    args = dict(inputs=sw.INPUTS, policies=sw.POLICIES, fault_plans=MIXED, seeds=range(8),
                world=sw.Shop)
    args.update(options)
    return dl.sweep(sw.order_flow, **args)


def test_a_repeated_sweep_gives_the_same_table_to_the_byte():
    first, second = small(), small()
    assert len(first.frame) == 2 * 2 * 8 * 2
    assert first.frame.to_csv() == second.frame.to_csv()      # virtual_duration included
    assert first.cells.to_csv() == second.cells.to_csv()
    assert first.load.to_csv() == second.load.to_csv()
    assert list(first.frame["run_id"][:3]) == ["steady/calm/0/0", "steady/calm/0/1",
                                              "steady/calm/1/0"]
    rough = first.frame[first.frame.fault_plan == "rough"]
    assert rough["crashes"].sum() > 0 and rough["retries"].sum() > 0
    assert (first.frame["duplicate_effects"] == 0).all()      # keys honoured across crashes


def test_isolated_runs_measure_what_a_fresh_engine_per_run_measures():
    experiment = small(seeds=range(5))
    runs = experiment.runs()          # each made again in a fresh Engine around a fresh world
    by_compare = dl.compare(list(runs))
    shared = [c for c in by_compare.columns if c in experiment.frame.columns]
    assert {"virtual_duration", "attempts", "retries", "retries_transient", "crashes",
            "model_calls", "cost", "wakeups", "events_replayed"} <= set(shared)
    mine = experiment.frame.set_index("run_id")[shared]
    pd.testing.assert_frame_equal(mine, by_compare[shared], check_dtype=False,
                                  check_index_type=False)


def test_contended_runs_that_ended_before_a_crash_are_made_again_too():
    """With contention a crash reloads the cell's store, so runs that had ended are kept
    as rows only; made again, each is read back (it raised TypeError) and matches its row."""
    inputs = [{"item": f"i{k}", "customer": f"c{k}"} for k in range(6)]
    late = dl.FaultPlan([dl.faults.Crash("notify", point="after_effect", p=0.5)])
    experiment = dl.sweep(sw.order_flow, inputs, fault_plans={"late": late}, seeds=range(2),
                          world=sw.Shop, contention=True)
    frame = experiment.frame
    assert frame["crashes"].sum() > 0 and (frame["status"] == "completed").all()
    runs = experiment.runs()
    made = [runs[run_id] for run_id in frame["run_id"]]
    assert [run.status for run in made] == list(frame["status"])
    assert [len(run.history) for run in made] == list(frame["history_events"])


def test_model_usage_is_counted_as_compare_counts_it():
    experiment = dl.sweep(sw.plain_flow, [{"n": 1}, {"n": 3}], seeds=range(2))
    assert list(experiment.frame["tokens"]) == [11, 33, 11, 33]
    assert experiment.cells["cost"].iloc[0] == pytest.approx(2 * 0.004)
    assert experiment.cells["model_calls"].iloc[0] == 4


def test_contention_makes_runs_meet_in_the_shared_limiter():
    inputs = [{"item": f"i{k}", "customer": f"c{k}"} for k in range(40)]
    shared = dl.sweep(sw.order_flow, inputs, policies=sw.POLICIES, seeds=range(1),
                      world=sw.Shop, contention=True)
    alone = dl.sweep(sw.order_flow, inputs, policies=sw.POLICIES, seeds=range(1),
                     world=sw.Shop)
    # 40 runs at t=0 share 10 tokens: 30 are refused, and refused again as they come back
    assert (shared.cells["retries_rate_limited"] >= 30).all()
    assert (shared.frame["status"] == "completed").all()
    # isolated, each run has the limiter to itself: nobody is refused
    assert (alone.frame["retries_rate_limited"] == 0).all()
    assert shared.cells["p50"].min() > alone.cells["p50"].max()


def test_without_jitter_the_retries_hit_the_next_service_as_one_storm():
    # The quote API is down for the first second: all 40 runs fail there at t=0. Without
    # jitter they all retry at t=8, succeed, and charge in the same second; full jitter
    # spreads their retries over [0, 8] s, so the payments service sees a lower peak.
    inputs = [{"item": f"i{k}", "customer": f"c{k}"} for k in range(40)]
    policies = {"steady": dl.RetryPolicy(max_attempts=6, initial=8.0, jitter="none"),
                "jittered": dl.RetryPolicy(max_attempts=6, initial=8.0)}
    experiment = dl.sweep(sw.order_flow, inputs, policies=policies, seeds=range(1),
                          world=sw.OutageShop, contention=True)
    cells = experiment.cells.set_index("policy")
    assert cells.loc["steady", "peak_load_charge"] == 40
    assert cells.loc["jittered", "peak_load_charge"] <= 20
    load = experiment.load
    steady = load[(load.policy == "steady") & (load.source == "charge")]
    assert list(steady["second"]) == [8] and list(steady["requests"]) == [40]


@pytest.mark.parametrize("contention", [False, True])
def test_processes_give_exactly_the_serial_results(contention):
    serial = small(contention=contention)
    parallel = small(contention=contention, processes=2)
    assert serial.frame.to_csv() == parallel.frame.to_csv()
    assert serial.load.to_csv() == parallel.load.to_csv()


def test_forked_workers_inherit_a_notebook_style_workflow_world_and_factory_instance():
    # A closure workflow, a lambda world and a factory instance: none has an import path,
    # and none is sent anywhere: forked workers inherit them.
    def cell_flow(ctx, order):
        return sw.order_flow(ctx, order)

    class Factory:
        def __init__(self, rate):
            self.rate = rate

        def __call__(self, clock):
            return sw.Shop(clock, rate=self.rate)

    for world in (lambda clock: sw.Shop(clock), Factory(10.0)):
        args = dict(inputs=sw.INPUTS, policies=sw.POLICIES, fault_plans=MIXED,
                    seeds=range(4), world=world)
        serial = dl.sweep(cell_flow, **args)
        parallel = dl.sweep(cell_flow, **args, processes=2)
        assert serial.frame.to_csv() == parallel.frame.to_csv()
        assert (serial.frame["status"] == "completed").any()


@pytest.fixture
def spawned(monkeypatch):
    """processes= as on macOS and Windows: workers spawned, the sweep sent as data."""
    import importlib
    sweep_module = importlib.import_module("durablelab.experiments.sweep")  # not dl.sweep
    monkeypatch.setattr(sweep_module, "START_METHOD", "spawn")


def test_spawned_workers_rebuild_the_sweep_from_data_and_give_the_serial_table(spawned):
    serial = small(seeds=range(4))
    parallel = small(seeds=range(4), processes=2)
    assert serial.frame.to_csv() == parallel.frame.to_csv()
    assert serial.load.to_csv() == parallel.load.to_csv()


def test_spawned_workers_refuse_what_has_no_import_path_before_any_worker_starts(spawned):
    with pytest.raises(dl.SweepError, match=r"sweep\(processes=2\) \(worker processes are "
                       r"spawned .*the world <function .*<lambda>.* cannot be found by the "
                       r"workers.*Define it at the top level of a module"):
        small(world=lambda clock: sw.Shop(clock), processes=2)
    with pytest.raises(dl.SweepError, match=r"the world .*WorldFactory.* is a WorldFactory "
                       r"instance.*a class \(a subclass can fix its arguments\) or a function"):
        small(world=WorldFactory(), processes=2)

    def cell_flow(ctx, order):
        return sw.order_flow(ctx, order)
    with pytest.raises(dl.SweepError, match=r"the workflow .*cell_flow.* import it as "
                       r"test_sweep:test_spawned.*<locals>.cell_flow"):
        dl.sweep(cell_flow, sw.INPUTS, world=sw.Shop, processes=2)


class WorldFactory:
    """A factory whose instance is the world, as bench/sweep.py makes: an instance has no
    import path of its own."""

    def __call__(self, clock):
        return sw.Shop(clock)


def test_unlimited_retries_end_at_the_sweep_timeout():
    always = {"down": dl.FaultPlan([dl.faults.ServerError("quote")])}
    experiment = dl.sweep(sw.order_flow, sw.INPUTS[:1], fault_plans=always, seeds=range(2),
                          world=sw.Shop, timeout=3600,
                          policies={"temporal": dl.presets["temporal-default"]})
    assert set(experiment.frame["status"]) == {"failed"}
    assert set(experiment.frame["error"]) == {"RunTimedOut"}
    # 1, 2, 4, ..., 64 s, then every 100 s: 8 attempts by 127 s, 34 more by 3527 s
    assert set(experiment.frame["attempts"]) == {42}


def test_a_sweep_killed_with_sigkill_resumes_without_redoing_finished_cells(tmp_path):
    results, ledger = tmp_path / "sweep.duckdb", tmp_path / "ledger.txt"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(TESTS.parent), str(TESTS)]),
           "TQDM_DISABLE": "1"}
    worker = subprocess.Popen([sys.executable, str(TESTS / "sweep_worker.py"), str(results),
                               str(ledger)], env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE)
    per_cell = len(sw.INPUTS) * 6
    deadline = time.monotonic() + 120
    try:   # kill it once two cells are done and the third is under way
        while time.monotonic() < deadline and worker.poll() is None:
            made = ledger.read_text().count("world") if ledger.exists() else 0
            if made >= 2 * per_cell + 3:
                break
            time.sleep(0.01)
        assert worker.poll() is None, worker.stderr.read().decode()
        worker.send_signal(signal.SIGKILL)
        worker.wait(30)
    finally:
        if worker.poll() is None:
            worker.kill()
    with duckdb.connect(str(results)) as con:
        finished = [row[0] for row in
                    con.execute("SELECT cell FROM sweep_cells ORDER BY cell").fetchall()]
        runs_kept = con.execute("SELECT count(*) FROM sweep_runs").fetchone()[0]
    assert len(finished) >= 2 and len(finished) < 4
    assert runs_kept == len(finished) * per_cell          # nothing of the cut-off cell
    before = ledger.read_text().count("world")
    sw.LEDGER.update(path=str(ledger), sleep=0.0)
    try:
        resumed = sw.sweep_for_kill(results)
    finally:
        sw.LEDGER.update(path=None, sleep=0.0)
    made_again = ledger.read_text().count("world") - before
    assert made_again == (4 - len(finished)) * per_cell   # only the unfinished cells
    sw.LEDGER.update(path=None)
    whole = sw.sweep_for_kill(None)
    assert resumed.frame.to_csv() == whole.frame.to_csv()
    # and a finished sweep, asked again, makes nothing
    sw.LEDGER.update(path=str(ledger))
    try:
        again = sw.sweep_for_kill(results)
    finally:
        sw.LEDGER.update(path=None)
    assert ledger.read_text().count("world") == before + made_again
    assert again.frame.to_csv() == whole.frame.to_csv()


def test_a_results_file_of_another_sweep_is_refused(tmp_path):
    path = tmp_path / "r.duckdb"
    small(seeds=range(1), path=path)
    with pytest.raises(dl.SweepError, match=r"another sweep \(it differs in seeds\)"):
        small(seeds=range(2), path=path)


def test_a_results_file_with_its_cells_in_another_order_is_refused(tmp_path):
    # The same policies in another order describe the same sweep, but number its cells
    # differently: resuming would skip one cell and make another twice.
    path = tmp_path / "r.duckdb"
    first = small(seeds=range(2), path=path)
    reordered = {name: sw.POLICIES[name] for name in reversed(list(sw.POLICIES))}
    with pytest.raises(dl.SweepError, match=r"in another order \(cell 0 is steady/calm "
                       r"there, jittered/calm here\)\. Give policies= and fault_plans= in "
                       r"the order of the call that made the file"):
        small(seeds=range(2), path=path, policies=reordered)
    assert small(seeds=range(2), path=path).frame.to_csv() == first.frame.to_csv()


def test_export_load_and_compare_across_experiments(tmp_path):
    jitter = small(seeds=range(3))
    steady = small(seeds=range(3), policies={"steady": sw.POLICIES["steady"]})
    for suffix in (".jsonl", ".parquet"):
        path = dl.export(jitter, tmp_path / f"exp{suffix}")
        back = dl.load(path)
        assert isinstance(back, dl.Experiment)
        pd.testing.assert_frame_equal(back.frame, jitter.frame)
        pd.testing.assert_frame_equal(back.load, jitter.load)
        pd.testing.assert_frame_equal(back.cells, jitter.cells)
        assert back.spec == json.loads(json.dumps(jitter.spec))
    side = dl.compare({"before": back, "after": steady})
    assert list(side.columns[:3]) == ["experiment", "policy", "fault_plan"]
    assert len(side) == len(jitter.cells) + len(steady.cells)
    with pytest.raises(dl.SweepError, match="loaded from a file.*never carries code"):
        back.runs()
    with pytest.raises(dl.SweepError, match=r"ran with the world .*Shop.*world=Shop"):
        back.runs(workflow=sw.order_flow)   # made without it, every run would differ
    assert jitter.runs(workflow=sw.order_flow)[0].status == jitter.frame["status"][0]
    run = back.runs(workflow=sw.order_flow, world=sw.Shop)["jittered/rough/2/1"]
    assert run.run_id == "jittered/rough/2/1" and run.status in ("completed", "failed")


def test_a_damaged_experiment_export_is_refused(tmp_path):
    path = dl.export(small(seeds=range(1)), tmp_path / "exp.jsonl")
    lines = path.read_text().splitlines()
    (tmp_path / "cut.jsonl").write_text("\n".join(lines[:-2]) + "\n")
    with pytest.raises(dl.ExportFormatError, match="cut short"):
        dl.load(tmp_path / "cut.jsonl")
    extra = json.loads(lines[2])
    extra["data"]["surprise"] = 1
    (tmp_path / "extra.jsonl").write_text("\n".join([*lines[:2], json.dumps(extra),
                                                     *lines[3:]]) + "\n")
    with pytest.raises(dl.ExportFormatError, match=r"line 3.*unknown \['surprise'\]"):
        dl.load(tmp_path / "extra.jsonl")


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    """An experiment export's lines (header, experiment, runs, load), to damage."""
    path = dl.export(small(seeds=range(1)), tmp_path_factory.mktemp("exp") / "exp.jsonl")
    return [json.loads(line) for line in path.read_text().splitlines()]


def _first(records, kind):
    return next(i for i, r in enumerate(records) if r["record"] == kind)


def _damaged(records, kind, key, value):
    records = json.loads(json.dumps(records))
    records[_first(records, kind)]["data"][key] = value
    return records


@pytest.mark.parametrize("kind, key, value, words", [
    ("run", "seed", 1.9, "(line 3): seed must be a whole number, not 1.9"),
    ("run", "input", True, "input must be a whole number >= 0, not True"),
    ("run", "input", 7, "input 7 is not an index of the experiment's inputs"),
    ("run", "seed", 10 ** 30, "seed must be a whole number, not 1000000000000000000"),
    ("run", "attempts", -2, "attempts must be a whole number >= 0, not -2"),
    ("run", "policy", 7, "policy must be a string, not 7"),
    ("run", "policy", "other", "policy 'other' is not one of the experiment's policies"),
    ("run", "status", ["x"], "status must be a string"),
    ("run", "cost", "free", "cost must be a number >= 0 or null"),
    ("load", "source", None, "source must be a string, not None"),
    ("load", "second", -5, "second must be a whole number >= 0, not -5"),
    ("load", "second", 10 ** 30, "second must be a whole number >= 0"),
    ("experiment", "fault_plans", None, "fault_plans must be an object of names"),
    ("experiment", "policies", [], "policies must be an object of names"),
    ("experiment", "inputs", "x", "inputs must be a non-empty list"),
    ("experiment", "seeds", [0.5], "seeds must be a list of whole numbers"),
    ("experiment", "contention", 1, "contention must be true or false"),
    ("header", "runs", "24", "the header's runs must be a whole number >= 0, not '24'"),
    ("header", "runs", True, "the header's runs must be a whole number"),
    ("header", "version", True, "version True is not 'durablelab-experiment' version 1"),
])
def test_an_export_with_values_of_the_wrong_kind_is_refused_naming_the_line(
        tmp_path, exported, kind, key, value, words):
    """A file from a stranger: every value is checked as the sweep writes it, so nothing
    loads that would drop runs from `.cells`, crash a plot later or overflow."""
    path = tmp_path / "bad.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in _damaged(exported, kind, key, value)))
    with pytest.raises(dl.ExportFormatError, match=re.escape(words)):
        dl.load(path)


def test_an_export_reformatted_or_reordered_still_loads_and_a_hostile_one_is_refused(
        tmp_path, exported):
    spaced = tmp_path / "spaced.jsonl"     # json.dumps' spacing, fields in another order
    records = [{"data": dict(reversed(list(r["data"].items()))), "record": r["record"]}
               for r in exported]
    spaced.write_text("\n".join(json.dumps(r, indent=None) for r in records) + "\n")
    back = dl.load(spaced)
    assert isinstance(back, dl.Experiment) and len(back.frame) == exported[0]["data"]["runs"]
    deep = tmp_path / "deep.jsonl"
    deep.write_text(json.dumps(exported[0]) + "\n" + "[" * 50_000 + "]" * 50_000 + "\n")
    with pytest.raises(dl.ExportFormatError, match=r"\(line 2\): invalid JSON"):
        dl.load(deep)
    huge = tmp_path / "huge.jsonl"
    huge.write_text("\n".join(json.dumps(r) for r in _damaged(
        exported, "run", "virtual_duration", "HUGE")).replace('"HUGE"', "1e999"))
    with pytest.raises(dl.ExportFormatError, match="out of range"):
        dl.load(huge)


def test_a_damaged_parquet_export_is_refused_naming_the_row(tmp_path):
    path = dl.export(small(seeds=range(1)), tmp_path / "exp.parquet")
    meta = "KV_METADATA {format: 'durablelab-experiment', version: '1'}"
    for name, data, words in [("null", "NULL", r"\(row 1\): the record has no data"),
                              ("text", "'{nope'", r"\(row 1\): invalid JSON in data"),
                              ("nan", "'{\"x\": NaN}'", r"\(row 1\): invalid JSON in data")]:
        bad = tmp_path / f"{name}.parquet"
        duckdb.execute(f"COPY (SELECT format_version, record, seq, {data} AS data FROM "
                       f"'{path}') TO '{bad}' (FORMAT parquet, {meta})")
        with pytest.raises(dl.ExportFormatError, match=words):
            dl.load(bad)
    bare = tmp_path / "bare.parquet"
    duckdb.execute(f"COPY (SELECT record FROM '{path}') TO '{bare}' (FORMAT parquet, {meta})")
    with pytest.raises(dl.ExportFormatError, match="not the columns of an experiment"):
        dl.load(bare)


def test_heatmap_and_load_plot_draw_labelled_figures():
    experiment = small(seeds=range(3))
    fig = experiment.heatmap("success_rate")
    ax = fig.axes[0]
    assert ax.get_xlabel() == "fault plan" and ax.get_ylabel() == "retry policy"
    labels = [t.get_text() for t in ax.texts]
    assert len(labels) == 4 and all("[" in t for t in labels)
    fig = experiment.load_plot("api_calls")
    ax = fig.axes[0]
    assert ax.get_ylabel() == "requests per virtual second"
    assert len(ax.get_legend().get_texts()) == 4
    with pytest.raises(ValueError, match="not a column of experiment.cells"):
        experiment.heatmap("speed")
    with pytest.raises(ValueError, match="no requests were recorded for it.*quote"):
        experiment.load_plot("nothing")
    for until in (-1, float("nan"), "10"):
        with pytest.raises(ValueError, match="a number >= 0, or None"):
            experiment.load_plot("api_calls", until=until)


def test_presets_mimic_documented_defaults_and_say_where():
    assert list(dl.presets) == ["temporal-default", "langgraph-default",
                                "openai-client-default", "tenacity-bare", "stamina-default",
                                "prefect-task-retries", "no-retries"]
    for name, policy in dl.presets.items():
        assert isinstance(policy, dl.RetryPolicy)
        assert "http" in dl.presets.sources[name] or name == "no-retries"
    temporal = dl.presets["temporal-default"]
    assert (temporal.max_attempts, temporal.initial, temporal.backoff,
            temporal.max_interval) == (None, 1.0, 2.0, 100.0)
    assert dl.presets["openai-client-default"].max_attempts == 3
    assert dl.presets["no-retries"].max_attempts == 1


def test_bad_sweeps_are_refused_up_front_with_the_fix():
    with pytest.raises(dl.SweepError, match="retries without limit and without waiting"):
        dl.sweep(sw.order_flow, sw.INPUTS, policies={"bare": dl.presets["tenacity-bare"]},
                 world=sw.Shop)
    waited = dataclasses.replace(dl.presets["tenacity-bare"], initial=0.1, max_interval=0.1)
    assert len(dl.sweep(sw.plain_flow, [{"n": 1}], policies={"w": waited},
                        seeds=range(1)).frame) == 1
    with pytest.raises(dl.SweepError, match="without '/'"):
        small(policies={"a/b": dl.RetryPolicy()})
    with pytest.raises(dl.SweepError, match="seeds=range\\(5\\)"):
        small(seeds=5)
    with pytest.raises(dl.SweepError, match="seed 1 appears twice"):
        small(seeds=[1, 1])
    with pytest.raises(dl.SweepError, match="seed 9223372036854775808 is outside the 64-bit"):
        small(seeds=[0, 2 ** 63])      # said before any run starts, not by the first engine
    assert small(seeds=np.arange(2)).frame.to_csv() == small(seeds=range(2)).frame.to_csv()
    with pytest.raises(dl.SweepError, match="not a dl.RetryPolicy"):
        small(policies={"x": 3})
    with pytest.raises(dl.SweepError, match="timeout"):
        small(timeout=-1)
    with pytest.raises(TypeError, match="JSON"):
        dl.sweep(sw.plain_flow, [{"n": object()}])
    with pytest.raises(dl.SweepError, match="processes=0"):
        small(processes=0)


def _model(prompt):
    return {"answer": prompt}


def _ask(ctx, prompt):
    return ctx.activity("model", _model, prompt,
                        policy=dl.RetryPolicy(max_attempts=3, jitter="none"))


def test_a_rule_that_matched_no_activity_is_named_in_a_warning_and_the_experiment():
    from durablelab.errors import UnmatchedFaultRuleWarning
    plans = {"typo": dl.FaultPlan([dl.faults.RateLimit("modle", p=1.0),
                                   dl.faults.ServerError("mod*", attempts=[1])]),
             "calm": None}
    with pytest.warns(UnmatchedFaultRuleWarning,
                      match=r"fault plan 'typo': rule 0 RateLimit\('modle'\) matched no "
                            r"activity its runs reached \(model\)") as caught:
        experiment = dl.sweep(_ask, ["hi"], fault_plans=plans, seeds=range(2))
    assert len(caught) == 1
    assert experiment.unmatched_rules.to_dict("records") == [
        {"fault_plan": "typo", "rule": 0, "type": "RateLimit", "activity": "modle",
         "met": "model"}]
    assert experiment.frame.retries.tolist() == [1, 1, 0, 0]    # rule 1 did apply


def test_a_sweep_whose_rules_all_match_warns_nothing(recwarn):
    plans = {"blip": dl.FaultPlan([dl.faults.ServerError("model", attempts=[1])])}
    experiment = dl.sweep(_ask, ["hi"], fault_plans=plans, seeds=range(1))
    assert experiment.unmatched_rules.empty
    assert not [w for w in recwarn if "matched no activity" in str(w.message)]


@pytest.mark.parametrize("env, hidden", [("1", True), (None, None)])
def test_tqdm_disable_hides_the_progress_bar_in_a_notebook_too(monkeypatch, env, hidden):
    """TQDM_DISABLE=1 (CI, the notebook refresh) hides the sweep's bar, also where tqdm
    would draw a widget; without it the bar shows wherever output is a terminal or a page."""
    import tqdm.auto
    asked = []
    real = tqdm.auto.tqdm

    def recording(*args, **kwargs):
        asked.append(kwargs.get("disable"))
        return real(*args, **{**kwargs, "disable": True})

    monkeypatch.setattr(tqdm.auto, "tqdm", recording)
    if env is None:
        monkeypatch.delenv("TQDM_DISABLE", raising=False)
    else:
        monkeypatch.setenv("TQDM_DISABLE", env)
    small(seeds=range(1))
    assert asked == [hidden]
