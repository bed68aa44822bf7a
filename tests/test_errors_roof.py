"""Errors under one roof: every usage error is a `dl.DurableLabError` and still the
`ValueError` or `TypeError` callers catch, worded in durablelab/errors/; an activity that fails for
good says what, where it was called, and the fix."""

import ast
import math
from pathlib import Path

import pytest

import durablelab as dl
from durablelab.errors import BadType, BadValue

CORE = ["activities", "breaker", "budget", "clock", "context", "engine", "faults", "history",
        "retry", "run", "store"]


@pytest.mark.parametrize("module", CORE)
def test_core_modules_raise_no_bare_builtin_errors(module):
    source = (Path(dl.__file__).parent / f"{module}.py").read_text()
    bare = [node.lineno for node in ast.walk(ast.parse(source))
            if isinstance(node, ast.Raise) and isinstance(node.exc, ast.Call)
            and getattr(node.exc.func, "id", None) in ("ValueError", "TypeError",
                                                       "RuntimeError", "KeyError")]
    assert bare == [], f"durablelab/{module}.py raises a bare built-in at lines {bare}"


def test_no_module_refuses_an_argument_with_a_bare_value_or_type_error():
    """Outside the core too (lab tools, importers, views, lessons' helpers), a refused
    argument is a BadValue or BadType: a DurableLabError callers can catch as one."""
    package = Path(dl.__file__).parent
    bare = [f"{path.relative_to(package)}:{node.lineno}"
            for path in sorted(package.rglob("*.py"))
            for node in ast.walk(ast.parse(path.read_text()))
            if isinstance(node, ast.Raise) and isinstance(node.exc, ast.Call)
            and getattr(node.exc.func, "id", None) in ("ValueError", "TypeError")]
    assert bare == [], f"bare ValueError/TypeError raised at {', '.join(bare)}"


@pytest.mark.parametrize("make, kind, words", [
    (lambda: dl.RetryPolicy(backoff=0.5), ValueError, "backoff=0.5 must be a number >= 1"),
    (lambda: dl.RetryPolicy(jitter="some"), ValueError, "jitter='some'"),
    (lambda: dl.Engine(durability="fast"), ValueError, "durability='fast' is not a durability"),
    (lambda: dl.Engine(workflows=print), TypeError, "workflows="),
    (lambda: dl.Budget(cost=-1), ValueError, "Budget: cost=-1 must be a finite number"),
    (lambda: dl.Budget(cost="1"), TypeError, "Budget: cost='1'"),
    (lambda: dl.CircuitBreaker(failures=0), ValueError, "failures=0 must be an int >= 1"),
    (lambda: dl.CircuitBreaker(reset_after=math.inf), ValueError, "reset_after=inf"),
    (lambda: dl.faults.Crash("x", point="nowhere"), ValueError, "point='nowhere'"),
    (lambda: dl.FaultPlan.from_json('{"version": 2}'), ValueError, "version 2"),
    (lambda: dl.FaultPlan.from_json('{"version": 1, "rules": [{"type": "Crash", '
                                    '"activity": "x", "colour": 1}]}'), ValueError,
     "unknown field 'colour'"),
])
def test_usage_errors_are_durablelab_errors_and_builtins(make, kind, words):
    with pytest.raises(kind, match=words) as info:
        make()
    assert isinstance(info.value, dl.DurableLabError)
    assert isinstance(info.value, BadValue if kind is ValueError else BadType)


def test_engine_calls_refuse_bad_arguments_with_ours(engine):
    def wf(ctx, _):
        return ctx.wait_signal("go")
    engine.start(wf, None, run_id="r")
    for call, kind in ((lambda: engine.start(wf, None, budget={"cost": 1}), BadType),
                       (lambda: engine.start(wf, None, run_id=7), BadType),
                       (lambda: engine.start(wf, None, seed="7"), BadType),
                       (lambda: engine.advance(-1), BadValue),
                       (lambda: engine.signal("r", None), BadType)):
        with pytest.raises(kind):
            call()


@pytest.mark.parametrize("call, words", [
    (lambda ctx: ctx.sleep(-5), "ctx.sleep(seconds) at"),
    (lambda ctx: ctx.wait_signal("go", timeout=-1), "timeout=-1"),
    (lambda ctx: ctx.wait_signal("go", deadline=1, timeout=1), "not both"),
    (lambda ctx: ctx.activity("x", print, start_to_close=math.nan), "start_to_close=nan"),
    (lambda ctx: ctx.patched(3), "change_id=3"),
])
def test_a_bad_ctx_call_fails_the_run_with_the_right_advice(engine, call, words):
    def wf(ctx, _):
        call(ctx)
    run_id = engine.start(wf, None)
    engine.run_until_idle()
    error = engine.run(run_id).error
    assert isinstance(error, dl.WorkflowError) and words in str(error)
    assert "was given a value it cannot use" in str(error) and "Fix that call" in str(error)
    assert "move it into ctx.activity" not in str(error)
    assert "test_errors_roof.py" in str(error)


def test_activity_failed_says_what_where_and_the_fix_without_a_doubled_prefix(engine):
    def slow():
        raise TimeoutError("read timed out")
    def wf(ctx, _):
        return ctx.activity("fetch", slow, policy=dl.RetryPolicy(max_attempts=2, jitter="none"))
    run_id = engine.start(wf, None, run_id="r")
    engine.run_until_idle()
    error = engine.run(run_id).error
    text = str(error)
    assert isinstance(error, dl.ActivityFailed)
    assert "Transient: TimeoutError" not in text
    assert text.startswith("Activity 'fetch' (run 'r', position 1) failed for good after 2 "
                           "attempt(s): its retries are spent (max_attempts=2).")
    assert "last error: TimeoutError: read timed out (a Transient error)" in text
    assert error.call_site.rpartition(":")[0].endswith("test_errors_roof.py")
    assert "Fix: give it more attempts" in text


def test_a_non_retryable_failure_advises_against_retrying(engine):
    def reject():
        raise PermissionError("not allowed")
    run_id = engine.start(lambda ctx, _: ctx.activity("pay", reject), None)
    engine.run_until_idle()
    text = str(engine.run(run_id).error)
    assert "its error is not retryable" in text and "a retry cannot help" in text
    assert "last error: PermissionError: not allowed (a NonRetryable error)" in text
