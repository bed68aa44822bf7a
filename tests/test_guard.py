"""The determinism guard: unsafe calls made by workflow code fail the run at the call, with
the call, the workflow line and the replacement named; calls from activities, ctx methods,
libraries and durablelab itself go through."""

import cProfile
import datetime
import logging
import os
import pathlib
import random
import secrets
import sys
import textwrap
import time
import uuid

import pytest

import durablelab as dl
from durablelab.guard import GuardOffWarning

CALLS = {
    "time.time()": (lambda: time.time(), "ctx.now()"),
    "time.time_ns()": (lambda: time.time_ns(), "ctx.now()"),
    "time.localtime()": (lambda: time.localtime(), "ctx.now()"),
    "time.strftime()": (lambda: time.strftime("%Y"), "ctx.now()"),
    "datetime.now()": (lambda: datetime.datetime.now(), "ctx.now()"),
    "datetime.utcnow()": (lambda: datetime.datetime.utcnow(), "ctx.now()"),
    "datetime.today()": (lambda: datetime.datetime.today(), "ctx.now()"),
    "date.today()": (lambda: datetime.date.today(), "ctx.now()"),
    "random.random()": (lambda: random.random(), "ctx.random()"),
    "random.randint()": (lambda: random.randint(1, 6), "ctx.random()"),
    "random.choice()": (lambda: random.choice("ab"), "ctx.random()"),
    "random.shuffle()": (lambda: random.shuffle([1, 2]), "ctx.random()"),
    "random.seed()": (lambda: random.seed(), "ctx.random()"),
    "uuid.uuid1()": (lambda: uuid.uuid1(), "ctx.uuid()"),
    "uuid.uuid4()": (lambda: uuid.uuid4(), "ctx.uuid()"),
    "secrets.token_hex()": (lambda: secrets.token_hex(4), "ctx.random()"),
    "secrets.choice()": (lambda: secrets.choice("ab"), "ctx.random()"),
    "os.environ": (lambda: os.environ["PATH"], "the workflow's input"),
    "os.environ.get()": (lambda: os.environ.get("PATH"), "the workflow's input"),
    "os.getenv()": (lambda: os.getenv("PATH"), "the workflow's input"),
    "open()": (lambda: open(__file__).close(), "an activity"),
}


def hello():
    return "hi"


def run_one(workflow, guard=True, input=None):
    engine = dl.Engine(guard=guard)
    try:
        engine.start(workflow, input, run_id="r-1")
        engine.run_until_idle()
        return engine.run("r-1")
    finally:
        engine.close()


@pytest.mark.parametrize("call", sorted(CALLS))
def test_unsafe_call_fails_the_run_naming_call_line_and_replacement(call):
    unsafe, replacement = CALLS[call]

    def workflow(ctx, _):
        ctx.activity("hello", hello)
        unsafe()
        return "done"

    run = run_one(workflow)
    assert run.status == "failed"
    err = run.error
    assert isinstance(err, dl.DeterminismGuardError) and isinstance(err, dl.WorkflowError)
    assert err.call == call and replacement in err.replacement
    line = CALLS[call][0].__code__.co_firstlineno
    assert err.location == f"{__file__}:{line}"
    text = str(err)
    assert text.startswith(f"Determinism guard: workflow code called {call} in run 'r-1'")
    assert f"test_guard.py:{line}" in text and replacement in text
    assert "09_non_determinism" in text and "guard=False" in text
    assert list(run.history["kind"]) == ["activity"]      # the step before is kept


@pytest.mark.parametrize("call", sorted(CALLS))
def test_catching_the_guard_error_does_not_save_the_run(call):
    unsafe, _ = CALLS[call]

    def workflow(ctx, _):
        try:
            unsafe()
        except Exception:
            pass
        return "carried on"

    run = run_one(workflow)
    assert run.status == "failed" and run.error.call == call


def test_ctx_call_after_a_swallowed_trip_raises_again_and_records_nothing():
    def workflow(ctx, _):
        try:
            time.time()
        except dl.DeterminismGuardError:
            pass
        ctx.activity("hello", hello)
        return "carried on"

    run = run_one(workflow)
    assert run.status == "failed" and run.error.call == "time.time()"
    assert len(run.history) == 0


def test_guard_off_lets_every_call_through():
    def workflow(ctx, _):
        for unsafe, _ in CALLS.values():
            unsafe()
        return "done"

    assert run_one(workflow, guard=False).status == "completed"


def stamped():
    # An activity may read the clock, the environment and files: it runs once, recorded.
    with open(__file__) as f:
        f.read(1)
    return {"t": time.time() > 0, "path": bool(os.environ.get("PATH")),
            "u": len(str(uuid.uuid4())), "r": random.random() < 1,
            "d": datetime.datetime.now().year > 2000}


def test_activities_ctx_methods_and_libraries_are_let_through():
    log = logging.getLogger("durablelab.test_guard")

    def workflow(ctx, _):
        facts = ctx.activity("stamped", stamped)
        log.warning("stamped %s", facts)        # logging calls time.time for the record
        text = pathlib.Path(__file__).read_text()[:1]  # pathlib opens the file, not us
        seeded = random.Random(7).random()      # the workflow's own seeded generator
        ctx.sleep(60)
        return [facts["t"], text, seeded, ctx.now(), ctx.random() < 1, len(ctx.uuid())]

    run = run_one(workflow)
    assert run.status == "completed", run.error
    assert run.result[:2] == [True, "\""] and run.result[2] == random.Random(7).random()


def helper_reads_clock():
    return time.time()


def test_helpers_in_the_workflow_module_are_workflow_code():
    def workflow(ctx, _):
        return helper_reads_clock()

    run = run_one(workflow)
    assert run.error.call == "time.time()"
    assert run.error.location.endswith(f":{helper_reads_clock.__code__.co_firstlineno + 1}")


def test_ctx_call_sites_still_name_the_workflow_line():
    def workflow(ctx, _):
        ctx.activity("hello", hello)
        ctx.sleep(1)
        return ctx.now()

    first = workflow.__code__.co_firstlineno
    run = run_one(workflow)
    sites = [s.rsplit(":", 1)[1] for s in run.history["call_site"]]
    assert sites == [str(first + 1), str(first + 2), str(first + 2), str(first + 3)]


def test_a_workflow_installed_in_site_packages_is_guarded(tmp_path, monkeypatch):
    packages = tmp_path / "lib" / "python3" / "site-packages"
    packages.mkdir(parents=True)
    (packages / "guarded_wf_pkg.py").write_text(textwrap.dedent("""
        import time

        def workflow(ctx, _):
            return time.time()
    """))
    monkeypatch.syspath_prepend(str(packages))
    import guarded_wf_pkg
    run = run_one(guarded_wf_pkg.workflow)
    assert run.error.call == "time.time()"
    assert "site-packages/guarded_wf_pkg.py:5" in run.error.location
    sys.modules.pop("guarded_wf_pkg", None)


def test_the_hook_is_gone_after_every_wake_up():
    def workflow(ctx, _):
        ctx.sleep(5)
        time.time()

    before = sys.getprofile()
    run_one(workflow)
    assert sys.getprofile() is before is None


def test_under_a_profiler_the_guard_says_it_is_off_and_stays_out_of_the_way():
    def workflow(ctx, _):
        ctx.activity("hello", hello)            # ctx methods leave the profiler alone
        ctx.sleep(1)
        return time.time() > 0

    profiler = cProfile.Profile()
    with pytest.warns(GuardOffWarning, match="determinism guard is off while a profiler"):
        profiler.enable()
        try:
            run = run_one(workflow)
        finally:
            profiler.disable()
    assert run.status == "completed" and run.result is True
    assert any("workflow" in str(key) for key in profiler.getstats())  # it still profiled
    assert sys.getprofile() is None


def test_the_guard_error_survives_a_file(db_path):
    def workflow(ctx, _):
        return uuid.uuid4().hex

    with dl.Engine(db_path) as engine:
        engine.start(workflow, None, run_id="r-1")
        engine.run_until_idle()
        expected = engine.run("r-1").error
    with dl.Engine(db_path) as engine:
        err = engine.run("r-1").error
    assert type(err) is dl.DeterminismGuardError
    assert err.to_json() == expected.to_json() and err.call == "uuid.uuid4()"


def test_saga_compensations_run_under_the_guard():
    undone = []

    def undo(what):
        undone.append((what, time.time() > 0))

    def fail():
        raise dl.NonRetryable("no")

    def workflow(ctx, _):
        try:
            with ctx.saga() as saga:
                ctx.activity("book", hello)
                saga.add("unbook", undo, "book")
                ctx.activity("pay", fail)
        except dl.ActivityFailed:
            return "compensated"

    run = run_one(workflow)
    assert run.result == "compensated" and undone == [("book", True)]
