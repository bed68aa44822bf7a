"""Replay either reproduces the recorded requests exactly, or stops with a
NonDeterminismError that says where and why, and records nothing (invariant 3)."""

import pytest

import durablelab as dl

NEW_CODE = {"insert_step": False, "argument": "v-42", "drop_tail": False, "patch": False}
executions = []


def step(name):
    def fn(*args):
        executions.append(name)
        return {"step": name, "args": list(args)}
    fn.__name__ = name
    return fn


fetch, screen, audit, notify = step("fetch"), step("screen"), step("audit"), step("notify")


def deployed(ctx, _):
    """A workflow whose code 'changes' between deploys through NEW_CODE."""
    ctx.activity("fetch", fetch, NEW_CODE["argument"])
    if NEW_CODE["insert_step"]:
        ctx.activity("audit", audit)
    ctx.activity("screen", screen, 1)
    ctx.sleep(60)
    if not NEW_CODE["drop_tail"]:
        ctx.activity("notify", notify)
    return "done"


@pytest.fixture(autouse=True)
def old_code():
    NEW_CODE.update(insert_step=False, argument="v-42", drop_tail=False, patch=False)
    executions.clear()


def start_and_wait(engine):
    run_id = engine.start(deployed, None, run_id="r-1")
    engine.advance(1)          # fetch and screen recorded; the run sleeps
    assert engine.run(run_id).status == "waiting"
    return run_id


def history_rows(engine):
    return engine.store.fetch("SELECT * FROM events WHERE run_id = 'r-1' ORDER BY position")


def test_inserted_step_diverges_with_both_sides_named(engine):
    run_id = start_and_wait(engine)
    before = history_rows(engine)
    NEW_CODE["insert_step"] = True
    engine.crash()                      # a fresh worker replays with the new code
    engine.run_until_idle()
    run = engine.run(run_id)
    assert run.status == "diverged"
    err = run.error
    assert isinstance(err, dl.NonDeterminismError)
    assert err.position == 2 and err.reason == "different_call"
    assert err.recorded["kind"] == "activity" and err.recorded["name"] == "screen"
    assert err.requested["kind"] == "activity" and err.requested["name"] == "audit"
    assert err.run_id == "r-1" and err.workflow.endswith(":deployed")
    assert err.call_site.endswith(f"{__file__.split('/')[-1]}:{deployed.__code__.co_firstlineno + 4}")
    text = str(err)
    assert text.startswith("Non-determinism in run 'r-1'")
    assert "recorded:" in text and "requested:" in text and "ctx.patched" in text
    assert "Nothing was recorded" in text
    assert 'ctx.activity("audit", audit)' in text          # the line of code, not only file:line
    assert history_rows(engine) == before          # nothing recorded, nothing altered
    assert executions.count("audit") == 0          # the new step did not run


def test_error_message_aligns_recorded_and_requested(engine):
    start_and_wait(engine)
    NEW_CODE["insert_step"] = True
    engine.crash()
    engine.run_until_idle()
    lines = str(engine.run("r-1").error).splitlines()
    recorded = next(line for line in lines if line.strip().startswith("recorded:"))
    requested = next(line for line in lines if line.strip().startswith("requested:"))
    assert recorded.index("screen") == requested.index("audit")


def test_changed_activity_argument_diverges(engine):
    run_id = start_and_wait(engine)
    NEW_CODE["argument"] = "v-43"
    engine.crash()
    engine.run_until_idle()
    err = engine.run(run_id).error
    assert engine.run(run_id).status == "diverged"
    assert err.reason == "different_arguments" and err.position == 1
    assert err.recorded["name"] == err.requested["name"] == "fetch"
    assert err.recorded["digest"] != err.requested["digest"]
    assert "different arguments" in str(err)


def test_code_that_finishes_before_history_does_diverges(engine):
    run_id = engine.start(deployed, None, run_id="r-1")
    engine.run_until_idle()
    assert engine.run(run_id).status == "completed"
    # A completed run is not replayed; so check a run waiting at the end instead.
    def shrinking(ctx, _):
        ctx.activity("fetch", fetch, "v-42")
        if NEW_CODE["drop_tail"]:
            return "short"
        ctx.activity("screen", screen, 1)
        ctx.wait_signal("go")
        return "long"
    rid = engine.start(shrinking, None, run_id="r-2")
    engine.run_until_idle()
    assert engine.run(rid).status == "waiting"
    NEW_CODE["drop_tail"] = True                                 # deploy the shorter code
    engine.crash()
    engine.run_until_idle()
    err = engine.run(rid).error
    assert engine.run(rid).status == "diverged"
    assert err.reason == "history_not_consumed" and err.position == 2
    assert err.requested is None and err.recorded["name"] == "screen"


def test_diverged_run_resumes_when_fixed_code_is_deployed(db_path):
    engine = dl.Engine(db_path)
    start_and_wait(engine)
    NEW_CODE["insert_step"] = True
    engine.crash()
    engine.run_until_idle()
    assert engine.run("r-1").status == "diverged"
    engine.close()
    NEW_CODE["insert_step"] = False                # roll back the deploy
    engine = dl.Engine(db_path, workflows=[deployed])
    engine.run_until_idle()
    run = engine.run("r-1")
    assert run.status == "completed" and run.result == "done"
    assert executions == ["fetch", "screen", "notify"]   # each step ran once, ever
    engine.close()


def test_swallowed_divergence_still_diverges(engine):
    def sneaky(ctx, _):
        try:
            ctx.activity("fetch", fetch, NEW_CODE["argument"])
        except Exception:
            pass                                     # code that hides every error
        ctx.activity("notify", notify)
        ctx.sleep(10)
        return "ok"
    rid = engine.start(sneaky, None, run_id="s-1")
    engine.advance(1)
    NEW_CODE["argument"] = "changed"
    engine.crash()
    engine.run_until_idle()
    run = engine.run(rid)
    assert run.status == "diverged" and run.error.reason == "different_arguments"
    assert executions.count("notify") == 1


def test_patched_keeps_old_runs_on_the_old_path(engine):
    def versioned(ctx, _):
        ctx.activity("fetch", fetch, "v-42")
        if NEW_CODE["patch"] and ctx.patched("add-audit"):
            ctx.activity("audit", audit)
        ctx.activity("screen", screen, 1)
        ctx.sleep(60)
        if not NEW_CODE["patch"]:
            return "before the change"
        return "patched" if ctx.patched("add-audit") else "old"
    old = engine.start(versioned, None, run_id="r-1")   # recorded by the old code
    engine.advance(1)
    NEW_CODE["patch"] = True                            # deploy the change
    engine.crash()
    new = engine.start(versioned, None, run_id="r-new")
    engine.run_until_idle()
    assert engine.run(old).status == "completed"
    assert engine.run(new).status == "completed"
    assert engine.run(old).result == "old" and engine.run(new).result == "patched"
    assert "audit" not in set(engine.run(old).history["name"])
    assert list(engine.run(new).history["kind"][:3]) == ["activity", "patched", "activity"]


def test_nondeterminism_error_round_trips_through_the_store(db_path):
    engine = dl.Engine(db_path)
    start_and_wait(engine)
    NEW_CODE["insert_step"] = True
    engine.crash()
    engine.run_until_idle()
    live = engine.run("r-1").error
    copy = dl.errors.error_from_json(live.to_json())
    assert type(copy) is dl.NonDeterminismError
    assert (copy.position, copy.recorded, copy.requested, copy.reason) == (
        live.position, live.recorded, live.requested, live.reason)
    assert str(copy) == str(live)
    engine.close()


@pytest.mark.parametrize("recorded, requested", [(1, 1.0), (1, True), (0, False), ("1", 1),
                                                  ({"a": 1}, {"a": 1.0}), ([1, 2], [2, 1])])
def test_arguments_equal_in_python_but_not_in_json_diverge(engine, recorded, requested):
    """1 == 1.0 == True in Python, but history holds JSON: a warm replay must catch the
    change exactly as a cold one (comparing digests) does."""
    args = {"value": recorded}
    def wf(ctx, _):
        ctx.activity("call", lambda v: v, args["value"])
        ctx.sleep(10)
    run_id = engine.start(wf, None)
    engine.advance(1)
    args["value"] = requested
    engine.advance(20)            # warm: the same worker replays from memory
    run = engine.run(run_id)
    assert run.status == "diverged" and run.error.reason == "different_arguments"


def test_same_json_is_exact():
    from durablelab.fastjson import same_json
    assert same_json([("a", 1), {"k": [1.5, None]}], [["a", 1], {"k": [1.5, None]}])
    assert not same_json([1], [1.0]) and not same_json([True], [1])
    assert not same_json({"a": 1}, {"a": 1, "b": 2})
