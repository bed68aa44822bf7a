"""No value poisons a store (issue 20): a finite time whose sum overflows the clock, an
argument of the wrong kind, a NaN in a model's tool arguments, and a log line repeated by
every recovery.

Each case shows the error (class and words), that the file still opens, and that a healthy
run on it still completes afterwards.
"""

import math
import os
import sys
from pathlib import Path

import pytest

import durablelab as dl
from durablelab import agents
from durablelab.errors import BadType, BadValue, ReadOnlyEngineError

HUGE = 1e308          # finite; two of them are not
LAST = sys.float_info.max


def ok(x=None):
    return {"ok": x}


def healthy(ctx, _):
    ctx.activity("step", ok, 1)
    ctx.sleep(5)
    return "done"


def store_is_healthy(path):
    """The file opens, every time it holds is finite, and a new run completes on it."""
    with dl.Engine(path) as engine:
        assert math.isfinite(engine.clock.now())
        rows = engine.store.fetch("SELECT recorded_at FROM events")
        assert all(math.isfinite(t) for (t,) in rows)
        engine.start(healthy, None, run_id="healthy-after")
        engine.run_until_idle()
        run = engine.run("healthy-after")
        assert run.status == "completed" and run.result == "done", run.error


def failed_at_the_call(run, words):
    assert run.status == "failed" and isinstance(run.error, dl.WorkflowError)
    assert words in str(run.error), str(run.error)
    assert "test_poison.py:" in str(run.error)      # where, in the learner's file
    assert run.error.cause_class in ("BadValue", "BadType")


# --- A. a time whose sum overflows is refused where it is given ----------------------------

def test_a_second_finite_advance_that_overflows_is_refused_and_the_clock_stays(db_path):
    with dl.Engine(db_path) as engine:
        engine.advance(HUGE)
        with pytest.raises(BadValue, match=r"advance: seconds=1e\+308 seconds after "
                                           r"t=1e\+308s is past the largest time a float can "
                                           r"hold .* Give a shorter time") as info:
            engine.advance(HUGE)
        assert isinstance(info.value, ValueError) and info.value.argument == "seconds"
        assert engine.clock.now() == HUGE
    store_is_healthy(db_path)


@pytest.mark.parametrize("second, words", [
    (lambda ctx: ctx.sleep(HUGE), "ctx.sleep(seconds) at"),
    (lambda ctx: ctx.wait_signal("go", timeout=HUGE), "ctx.wait_signal('go') at"),
    (lambda ctx: ctx.activity("a", ok, start_to_close=HUGE), "start_to_close=1e+308"),
    (lambda ctx: ctx.activity("a", ok, schedule_to_close=HUGE), "schedule_to_close=1e+308"),
    (lambda ctx: ctx.activity("a", ok, heartbeat=HUGE), "heartbeat=1e+308"),
], ids=["sleep", "wait_signal", "start_to_close", "schedule_to_close", "heartbeat"])
def test_a_sleep_then_a_wait_that_overflows_fails_the_run_at_the_call(db_path, second, words):
    def wf(ctx, _):
        ctx.sleep(HUGE)
        second(ctx)
    with dl.Engine(db_path) as engine:
        engine.start(wf, None, run_id="r")
        engine.run_until_idle()
        run = engine.run("r")
        failed_at_the_call(run, words)
        assert "past the largest time a float can hold" in str(run.error)
        assert run.history.kind.tolist() == ["sleep", "timer_fired"]   # the sleep is kept
    store_is_healthy(db_path)


def test_start_and_fork_refuse_a_time_out_past_the_last_instant(db_path):
    with dl.Engine(db_path) as engine:
        engine.start(healthy, None, run_id="src", timeout=HUGE)   # deadline 1e308: fine
        engine.advance(HUGE)                                         # src completes on the way
        assert engine.run("src").status == "completed" and engine.clock.now() == HUGE
        with pytest.raises(BadValue, match=r"start\(.*healthy\): timeout=1e\+308 seconds "
                                           r"after t=.* is past the largest time"):
            engine.start(healthy, None, timeout=HUGE)
        with pytest.raises(BadValue, match=r"fork\('src'\): timeout=1e\+308"):
            engine.fork("src", at=1)
        assert set(engine.runs().run_id) == {"src"}                 # nothing was recorded
    store_is_healthy(db_path)


def always_down():
    raise dl.Transient("down")


def test_a_retry_backoff_past_the_last_instant_is_clamped_not_saved_as_inf(db_path):
    """Clamped, not refused at construction: a policy cannot know when it is used."""
    policy = dl.RetryPolicy(initial=HUGE, max_interval=HUGE, jitter="none", max_attempts=3)

    def wf(ctx, _):
        ctx.activity("down", always_down, policy=policy)
    with dl.Engine(db_path, clock=dl.VirtualClock(start=HUGE)) as engine:
        engine.start(wf, None, run_id="r")
        engine.run_until_idle()
        run = engine.run("r")
        assert run.status == "failed" and isinstance(run.error, dl.ActivityFailed)
        assert run.error.attempts == 3
        assert engine.clock.now() == LAST
        for started, ended, delay in engine.store.fetch(
                "SELECT started_at, ended_at, delay FROM attempts"):
            assert math.isfinite(started) and math.isfinite(ended + delay)
    store_is_healthy(db_path)


def test_a_rate_limit_retry_after_past_the_last_instant_is_clamped(engine):
    calls = []

    def limited():
        calls.append(engine.clock.now())
        if len(calls) == 1:
            raise dl.RateLimited(retry_after=HUGE)
        return "ok"

    def wf(ctx, _):
        ctx.sleep(HUGE)
        return ctx.activity("limited", limited)
    engine.start(wf, None, run_id="r")
    engine.run_until_idle()
    assert engine.run("r").result == "ok" and calls[-1] == LAST


@pytest.mark.parametrize("start", [math.inf, -math.inf, math.nan, 10 ** 400])
def test_a_virtual_clock_must_start_at_a_finite_time(start):
    with pytest.raises(BadValue, match=r"VirtualClock: start=.* is not a finite number of "
                                       r"seconds.*Give a finite number"):
        dl.VirtualClock(start=start)
    with pytest.raises(BadType, match=r"VirtualClock: start='0' must be a number"):
        dl.VirtualClock(start="0")


# --- B. arguments of the wrong kind are refused where they are given ---------------------

@pytest.mark.parametrize("call, words", [
    (lambda ctx: ctx.activity("charge", ok, policy="fast"),
     "policy='fast' must be a dl.RetryPolicy, or None for the default"),
    (lambda ctx: ctx.activity("charge", ok, policy={"max_attempts": 5}),
     "policy={'max_attempts': 5} must be a dl.RetryPolicy"),
    (lambda ctx: ctx.activity("charge", ok()),
     "fn={'ok': None} is not callable: pass the function the activity runs"),
], ids=["str", "dict", "result-not-function"])
def test_an_activity_call_of_the_wrong_kind_fails_the_run_at_the_call(db_path, call, words):
    def wf(ctx, _):
        ctx.activity("first", ok, 1)
        call(ctx)
    with dl.Engine(db_path) as engine:
        engine.start(wf, None, run_id="r")
        engine.run_until_idle()
        run = engine.run("r")
        failed_at_the_call(run, words)
        assert "has no attribute" not in str(run.error)
        assert run.history.name.tolist() == ["first"]                # the step is kept
    store_is_healthy(db_path)


def test_fork_on_a_read_only_engine_is_refused_up_front(db_path):
    with dl.Engine(db_path) as engine:
        engine.start(healthy, None, run_id="src")
        engine.run_until_idle()
    before = Path(db_path).read_bytes()
    with dl.Engine(db_path, read_only=True) as reader:
        with pytest.raises(ReadOnlyEngineError, match=r"read_only=True\) cannot fork\(\): "
                                                      r"it was opened to look at runs only"):
            reader.fork("src", at=1)
    assert Path(db_path).read_bytes() == before
    store_is_healthy(db_path)


@pytest.mark.parametrize("clock", ["virtual", 0, dl.VirtualClock])
def test_engine_refuses_something_that_is_not_a_clock(db_path, clock):
    with pytest.raises(BadType, match=r"Engine: clock=.* is not a clock\. Give "
                                      r"dl\.VirtualClock\(\) .* or dl\.WallClock\(\)"):
        dl.Engine(db_path, clock=clock)
    assert not os.path.exists(db_path)                           # nothing was created
    store_is_healthy(db_path)


@pytest.mark.parametrize("path", [123, 1.5, b"runs.duckdb", ["runs.duckdb"]])
def test_engine_refuses_a_path_that_is_not_a_file_name(tmp_path, monkeypatch, path):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(BadType, match=r"Engine: path=.* must be a file name \(a str or a "
                                      r"pathlib\.Path\) or None"):
        dl.Engine(path)
    assert os.listdir(tmp_path) == []                            # no file called "123"
    store_is_healthy(tmp_path / "runs.duckdb")                   # a Path is a file name


# --- B. a NaN or infinite number in a model's tool arguments goes back to the model -------

def charge(amount: float) -> dict:
    """Charge an amount."""
    return {"charged": amount}


@pytest.mark.parametrize("text, words", [
    ('{"amount": NaN}', "hold NaN at amount"),
    ('{"amount": 1e400}', "hold a number too large for a float (Infinity, 1e400) at amount"),
    ('{"amount": -Infinity}', "too large for a float"),
    ({"amount": float("nan")}, "hold NaN at amount"),
    ({"amount": [1.0, {"x": float("inf")}]}, "at amount.1.x"),
])
def test_check_call_refuses_numbers_json_cannot_carry(text, words):
    with pytest.raises(dl.ModelOutputError, match="not a finite JSON number: give a finite "
                                                  "number") as info:
        agents.check_call(charge, text)
    assert words in info.value.message


def test_nan_tool_arguments_go_back_to_the_model_and_never_reach_the_tool(db_path):
    charged, asked = [], []

    def tracked(amount: float) -> dict:
        """Charge an amount."""
        charged.append(amount)
        return {"charged": amount}

    def model(messages, tools, feedback=None):
        asked.append(feedback)
        usage = {"input_tokens": 1, "output_tokens": 1, "cost": 0.0}
        if messages[-1]["role"] == "tool":
            return {"content": "charged", "tool_calls": [], "usage": usage}
        amount = "NaN" if len(asked) == 1 else ("1e400" if len(asked) == 2 else "12.5")
        return {"content": None, "usage": usage, "tool_calls": [
            {"id": "c1", "name": "tracked", "arguments": '{"amount": %s}' % amount}]}

    def wf(ctx, task):
        return agents.react(ctx, task, model=model, tools=[tracked])
    with dl.Engine(db_path) as engine:
        engine.start(wf, "charge 12.5", run_id="r")
        engine.run_until_idle()
        run = engine.run("r")
        assert run.status == "completed", run.error
        assert run.result["answer"] == "charged"
        first = run.attempts[run.attempts.position == 1]
        assert first.outcome.tolist() == ["malformed", "malformed", "ok"]
        assert "hold NaN at amount" in first.error.iloc[0]
    assert charged == [12.5]                                     # the tool saw no NaN
    assert "hold NaN at amount" in asked[1] and "1e400" in asked[2]   # the model was told
    store_is_healthy(db_path)


# --- C. ctx.is_replaying holds until new ground, so ctx.log prints each line once --------

def logged(out):
    return [line.split("] ", 1)[1] for line in out.splitlines() if line.startswith("[")]


def test_log_prints_each_line_once_across_retries_crashes_and_recoveries(db_path, capsys):
    failures = {"flaky": 2}
    replaying = []

    def flaky():
        if failures["flaky"]:
            failures["flaky"] -= 1
            raise dl.Transient("blip")
        return 1

    def wf(ctx, _):
        replaying.append(("top", ctx.is_replaying))
        ctx.log("one")
        ctx.activity("flaky", flaky)              # two retries: the code runs from the top
        ctx.log("two")
        ctx.activity("crashes", ok)               # the worker dies here, once
        replaying.append(("after crashes", ctx.is_replaying))
        ctx.log("three")
        ctx.sleep(5)
        ctx.log("four")
        return "done"
    plan = dl.FaultPlan([dl.faults.Crash("crashes", p=1.0, times=1)])
    with dl.Engine(db_path) as engine:
        engine.start(wf, None, run_id="r", faults=plan)
        engine.run_until_idle()
        run = engine.run("r")
        assert run.status == "completed" and len(run.crashes) == 1
        assert run.wakeups.shape[0] >= 5                       # it woke up again and again
    assert logged(capsys.readouterr().out) == ["one", "two", "three", "four"]
    assert replaying[0] == ("top", False)
    assert all(flag for where, flag in replaying[1:] if where == "top")
    assert replaying.count(("after crashes", False)) == 1      # new ground exactly once

    with dl.Engine(db_path) as engine:                   # a new process: nothing new to say
        engine.start(wf, None, run_id="r2")
        engine.run_until_idle()
    assert logged(capsys.readouterr().out) == ["one", "two", "three", "four"]


def test_log_after_a_worker_crash_during_an_attempt_in_flight_prints_once(capsys):
    def wf(ctx, _):
        ctx.log("before")
        ctx.activity("slow", ok)
        ctx.log("after")
    plan = dl.FaultPlan([dl.faults.Latency("slow", seconds=10),
                         dl.faults.Crash("slow", p=1.0, times=1, point="after_effect")])
    with dl.Engine() as engine:
        engine.start(wf, None, run_id="r", faults=plan)
        engine.run_until_idle()
        assert engine.run("r").status == "completed"
    assert logged(capsys.readouterr().out) == ["before", "after"]


def test_a_fork_logs_its_new_ground(engine, capsys):
    def wf(ctx, _):
        ctx.log("a")
        ctx.activity("x", ok)
        ctx.log("b")
        ctx.activity("y", ok)
        ctx.log("c")
    engine.start(wf, None, run_id="src")
    engine.run_until_idle()
    assert logged(capsys.readouterr().out) == ["a", "b", "c"]
    engine.fork("src", at=2)                 # replays x, runs y afresh
    engine.run_until_idle()
    assert logged(capsys.readouterr().out) == ["b", "c"]
