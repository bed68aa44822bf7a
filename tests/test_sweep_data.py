"""A sweep's data form (`Spec.to_data` / `Spec.from_data`): what travels to spawned worker
processes and to an executor's workers instead of Python objects. It round-trips every
policy, plan, seed and input; a text that is malformed, hostile or names what does not
resolve is refused with the fix and runs nothing; and the sweep module serializes no
object at all."""

from __future__ import annotations

import concurrent.futures as cf
import importlib
import json
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import durablelab as dl
from durablelab.experiments.spec import Spec

TESTS = Path(__file__).resolve().parent
if str(TESTS) not in sys.path:
    sys.path.insert(0, str(TESTS))

import sweep_worker as sw  # noqa: E402

sweep_module = importlib.import_module("durablelab.experiments.sweep")  # not dl.sweep


def spec(**options) -> Spec:
    args = dict(workflow=sw.order_flow, inputs=sw.INPUTS, policies=sw.POLICIES,
                fault_plans=sw.PLANS, seeds=range(3), world=sw.Shop, contention=False,
                timeout=3600)
    args.update(options)
    return Spec(**args)


# --- round trip ----------------------------------------------------------------------------
names = st.text("abcxyz-_ .", min_size=1, max_size=6)
seconds = st.floats(0.001, 1e6)    # a wait: a sweep refuses unlimited retries without one
policies = st.builds(
    dl.RetryPolicy, max_attempts=st.one_of(st.none(), st.integers(1, 50)),
    initial=st.floats(0.001, 100), backoff=st.floats(1, 10), max_interval=seconds,
    jitter=st.sampled_from(["full", "none"]),
    non_retryable=st.lists(st.sampled_from(["NonRetryable", "KeyError", ValueError]),
                           max_size=2),
    model_output_budget=st.integers(0, 5))
glob_policies = st.dictionaries(st.sampled_from(["*", "charge", "quote", "model*"]), policies,
                                min_size=1, max_size=3)
activity = st.sampled_from(["charge", "quote", "notify", "*"])
probability = st.floats(0, 1)
rules = st.one_of(
    st.builds(dl.faults.ServerError, activity, p=probability),
    st.builds(dl.faults.RateLimit, activity, p=probability,
              retry_after=st.one_of(st.none(), st.floats(0, 60))),
    st.builds(dl.faults.Timeout, activity, p=probability),
    st.builds(dl.faults.Crash, activity, point=st.sampled_from(
        ["before_activity", "after_effect", "after_record", "during_wait"]), p=probability),
    st.builds(dl.faults.Fail, activity, status=st.sampled_from([400, 401, 404]),
              attempts=st.one_of(st.none(), st.lists(st.integers(1, 5), min_size=1,
                                                     max_size=3))))
plans = st.one_of(st.none(), st.lists(rules, min_size=1, max_size=4).map(dl.FaultPlan))
json_values = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(-2 ** 53, 2 ** 53),
              st.floats(allow_nan=False, allow_infinity=False), st.text(max_size=8)),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner,
                                                                  max_size=3),
    max_leaves=8)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(policies=st.dictionaries(names, st.one_of(st.none(), policies, glob_policies),
                                min_size=1, max_size=4),
       plans=st.dictionaries(names, plans, min_size=1, max_size=3),
       seeds=st.lists(st.integers(-2 ** 63, 2 ** 63 - 1), min_size=1, max_size=6, unique=True),
       inputs=st.lists(json_values, min_size=1, max_size=3),
       world=st.sampled_from([None, sw.Shop, sw.OutageShop]),
       contention=st.booleans(),
       timeout=st.one_of(st.none(), st.floats(0.5, 1e7), st.integers(1, 10 ** 6)))
def test_the_data_form_rebuilds_the_same_sweep(policies, plans, seeds, inputs, world,
                                               contention, timeout):
    original = Spec(sw.order_flow, inputs, policies, plans, seeds, world, contention, timeout)
    text = original.to_data()
    rebuilt = Spec.from_data(text)
    assert rebuilt.to_data() == text                          # a fixed point
    assert rebuilt.describe() == original.describe()          # what a results file keeps
    assert rebuilt.inputs_json == original.inputs_json        # the inputs' text, exactly
    assert rebuilt.cells == original.cells                    # cell numbers mean the same
    assert (rebuilt.workflow, rebuilt.world) == (sw.order_flow, world)
    assert (rebuilt.seeds, rebuilt.contention, rebuilt.timeout) == (
        original.seeds, original.contention, original.timeout)
    for name, plan in original.plans.items():
        assert (plan is None) == (rebuilt.plans[name] is None)
        if plan is not None:
            assert rebuilt.plans[name].to_json() == plan.to_json()
    for name, overrides in original.policies.items():
        assert (None if overrides is None else overrides.to_dict()) == (
            None if rebuilt.policies[name] is None else rebuilt.policies[name].to_dict())


def test_jobs_rebuilt_from_the_data_form_give_the_rows_of_the_original_spec():
    original = spec(fault_plans={"rough": dl.FaultPlan([
        dl.faults.ServerError("quote", p=0.4), dl.faults.Crash("charge", point="after_effect",
                                                               p=0.3)])})
    rebuilt = Spec.from_data(original.to_data())
    runner = sweep_module.Isolated()
    try:
        for cell in range(len(original.cells)):
            job = (cell, original.runs_of(cell))
            assert sweep_module.do_job(rebuilt, runner, job) == sweep_module.do_job(
                original, runner, job)
    finally:
        runner.close()


# --- malformed and hostile texts ---------------------------------------------------------
def edited(**changes) -> str:
    data = json.loads(spec().to_data())
    data.update(changes)
    return json.dumps(data)


def without(key: str) -> str:
    data = json.loads(spec().to_data())
    del data[key]
    return json.dumps(data)


BAD = [
    ("not JSON", "\x80\x04\x95 a pickle's opening bytes", r"it is not JSON"),
    ("bytes", b'{"format": "durablelab.sweep.spec"}', r"it is a bytes, not JSON text"),
    ("JSON, not an object", "[1, 2]", r"not a sweep's data form"),
    ("another format", json.dumps({"format": "pickle"}), r"not a sweep's data form"),
    ("a newer version", edited(version=2), r"version 2; this durablelab reads version 1"),
    ("an unknown key", edited(run="os.system('x')"), r"key 'run' is unknown"),
    ("a missing key", without("seeds"), r"key 'seeds' is missing"),
    ("a module that does not exist", edited(workflow="no_such_module_x:flow"),
     r"the workflow 'no_such_module_x:flow' cannot be imported: module 'no_such_module_x' "
     r"\(ModuleNotFoundError"),
    ("a name the module lacks", edited(workflow="sweep_worker:no_such_flow"),
     r"is not a workflow function: module 'sweep_worker' has no def no_such_flow"),
    ("a workflow that is a builtin", edited(workflow="os:system"),
     r"the workflow 'os:system' names the standard library module 'os'"),
    ("a world that is C code", edited(world="numpy:ndarray"),
     r"the world 'numpy:ndarray' is not a world factory: .* not a class or function "
     r"written in Python"),
    ("a __main__ module", edited(world="pip.__main__:Shop"), r"a program's entry point"),
    ("a workflow that is a class", edited(workflow="sweep_worker:Shop"),
     r"the workflow 'sweep_worker:Shop' is not a workflow function"),
    ("a world that is not callable", edited(world="sweep_worker:INPUTS"),
     r"the world 'sweep_worker:INPUTS' is not a world factory: .*INPUTS \(found list\)"),
    ("a world reached through an attribute", edited(world="sweep_worker:dl.sweep"),
     r"the world 'sweep_worker:dl.sweep' is not a world factory"),
    ("a dunder walk", edited(world="sweep_worker:Shop.__init__.__globals__"),
     r"is not an import path 'module:qualname'"),
    ("no colon", edited(world="sweep_worker.Shop"), r"is not an import path"),
    ("a relative module", edited(world="..sweep_worker:Shop"), r"is not an import path"),
    ("__main__", edited(world="__main__:Shop"), r"is defined in __main__"),
    ("a plan given as a file path", edited(fault_plans={"p": "/etc/passwd"}),
     r"fault_plans\['p'\] is a str, not an object or null"),
    ("a plan with an unknown rule", edited(fault_plans={"p": {"version": 1, "rules": [
        {"type": "Exec", "activity": "*"}]}}), r"Spec.from_data.*rule 0.*'Exec'"),
    ("a policy with an unknown key", edited(policies={"x": {"*": {"code": "import os"}}}),
     r"Spec.from_data.*unknown key 'code'"),
    ("seeds as a string", edited(seeds="range(10)"), r"'seeds' is a str, not list"),
    ("a repeated seed", edited(seeds=[1, 1]), r"seed 1 appears twice"),
    ("contention as a number", edited(contention=1), r"'contention' is a int, not bool"),
    ("a negative timeout", edited(timeout=-5), r"timeout=-5"),
    ("a name with a slash", edited(policies={"a/b": None}), r"without '/'"),
]


@pytest.mark.parametrize("text, message", [(t, m) for _, t, m in BAD],
                         ids=[name for name, _, _ in BAD])
def test_a_bad_data_form_is_refused_with_what_and_the_fix(text, message):
    with pytest.raises(dl.SweepError, match=message) as info:
        Spec.from_data(text)
    assert str(info.value).startswith("Spec.from_data: the text is not a sweep this worker "
                                      "can run:")
    assert "Fix: " in str(info.value) and info.value.argument == "data"


def test_a_bad_data_form_on_an_executor_worker_runs_nothing(tmp_path):
    ledger = tmp_path / "ledger.txt"
    sw.LEDGER.update(path=str(ledger), sleep=0.0)
    try:
        good = spec(world=sw.LoggedShop).to_data()
        assert sweep_module.job_on_executor(good, (0, [(0, 0)]))[1][0]["status"] == "completed"
        assert ledger.read_text() == "world\n"             # a run makes its world
        bad = good.replace("sweep_worker:order_flow", "sweep_worker:no_such_flow")
        with pytest.raises(dl.SweepError, match="no def no_such_flow"):
            sweep_module.job_on_executor(bad, (0, [(0, 1)]))
        assert ledger.read_text() == "world\n"             # the bad one made none
        assert sweep_module._EXECUTOR_WORKER.data == good   # and kept the good one cached
    finally:
        sw.LEDGER.update(path=None, sleep=0.0)


# --- executors -------------------------------------------------------------------------------
def test_a_thread_pool_executor_gives_the_serial_table():
    # Its threads share one process: each keeps its own engine, or runs would mix.
    args = dict(inputs=sw.INPUTS, policies=sw.POLICIES, fault_plans=sw.PLANS, seeds=range(60),
                world=sw.Shop)
    serial = dl.sweep(sw.order_flow, **args)
    with cf.ThreadPoolExecutor(4) as pool:
        threaded = dl.sweep(sw.order_flow, **args, executor=pool)
    assert serial.frame.to_csv() == threaded.frame.to_csv()
    assert serial.load.to_csv() == threaded.load.to_csv()


class Factory:
    def __call__(self, clock):
        return sw.Shop(clock)


def test_an_executor_refuses_what_cannot_travel_by_import_path_up_front():
    submitted = []

    class Recording(cf.ThreadPoolExecutor):
        def submit(self, fn, *args, **kwargs):
            submitted.append(args)
            return super().submit(fn, *args, **kwargs)

    def cell_flow(ctx, order):
        return sw.order_flow(ctx, order)

    with Recording(1) as pool:
        with pytest.raises(dl.SweepError, match=r"sweep\(executor=...\): the world .*Factory "
                           r"object.* is a Factory instance; the workers find the world by "
                           r"import path"):
            dl.sweep(sw.order_flow, sw.INPUTS, world=Factory(), executor=pool)
        with pytest.raises(dl.SweepError, match=r"sweep\(executor=...\): the world .*<lambda>"
                           r".*cannot be found by the workers, which import it as "
                           r"test_sweep_data:test_an_.*<lambda>"):
            dl.sweep(sw.order_flow, sw.INPUTS, world=lambda clock: sw.Shop(clock),
                     executor=pool)
        with pytest.raises(dl.SweepError, match=r"the workflow .*cell_flow.* cannot be found"):
            dl.sweep(cell_flow, sw.INPUTS, world=sw.Shop, executor=pool)
    assert submitted == []                                  # refused before any job left


def test_the_sweep_modules_serialize_no_object():
    root = TESTS.parent / "durablelab" / "experiments"
    for module in ("sweep.py", "spec.py"):
        text = (root / module).read_text()
        assert "pickle" not in text and "marshal" not in text and "eval(" not in text, module
