"""The words of a run's errors: each builder words one error in the same shape.

What happened in one sentence; where (run, workflow, position, the workflow line); recorded
versus requested on aligned lines; what was and was not recorded; the likely fix, and the
lesson that shows it. The facts also go on the error as attributes, for code.
"""

from __future__ import annotations

import json

from .classes import (ActivityError, ActivityFailed, Cancelled, ChildFailed, CompensationFailed,
                      DatasetError, DeterminismGuardError, EngineClosedError, FrameworkError,
                      NonDeterminismError, SerializationError, UnknownWorkflowWarning,
                      UsageError, WorkflowError, WorkflowRedefinedWarning, error_from_json)


def dataset_missing(path, what: str) -> DatasetError:
    return DatasetError(
        f"{what} not found: durablelab looked in {path}. The lessons' datasets ship inside "
        f"the package (durablelab/lessons/datasets in a wheel) and live in datasets/ in a "
        f"source checkout; reinstall durablelab (pip install --force-reinstall durablelab), "
        f"or run it from a checkout", path=str(path), what=what)


def engine_closed(path, superseded: bool) -> EngineClosedError:
    where = path or "in memory"
    if superseded:
        message = (f"This Engine ({where}) was superseded: a newer dl.Engine opened the same "
                   f"file in this process and took it over (this one committed what it held "
                   f"and closed, so two engines never run the same runs). Use the newer "
                   f"engine.")
    elif path is None:
        message = ("This in-memory Engine is closed, and its runs went with it (only a file "
                   "outlives its engine). Open a new dl.Engine() for new runs, or give "
                   "dl.Engine a path to keep them.")
    else:
        message = (f"This Engine ({where}) is closed; open a new dl.Engine on the same path "
                   f"to carry on with its runs.")
    return EngineClosedError(message, path=path, superseded=superseded)


def unknown_workflows(path, unknown: dict[str, list[str]]) -> UnknownWorkflowWarning:
    """The warning an engine gives when it opens a store with runs it may not run."""
    lines = []
    for name, run_ids in sorted(unknown.items()):
        shown = ", ".join(repr(r) for r in run_ids[:3])
        more = f" and {len(run_ids) - 3} more" if len(run_ids) > 3 else ""
        lines.append(f"  {name}: {len(run_ids)} run(s) ({shown}{more})")
    first = sorted(unknown)[0].rpartition(":")[2].rpartition(".")[2]
    return UnknownWorkflowWarning(
        f"{path or 'The in-memory store'} has unfinished runs of workflows this process has "
        f"not registered, so this engine leaves them as recorded (not run, not scheduled):\n"
        + "\n".join(lines) + "\n"
        f"A store is data: durablelab runs only workflows you register. To resume them, "
        f"import the code and open the engine with workflows=[...], for example "
        f"dl.Engine({str(path)!r}, workflows=[{first}]), or decorate the function with "
        f"@dl.workflow before opening.")


def workflow_redefined(name: str, run_ids: list[str]) -> WorkflowRedefinedWarning:
    shown = ", ".join(repr(r) for r in run_ids[:3])
    more = f" and {len(run_ids) - 3} more" if len(run_ids) > 3 else ""
    return WorkflowRedefinedWarning(
        f"Workflow {name} was redefined while {len(run_ids)} run(s) of it are in flight "
        f"({shown}{more}): from their next wake-up they replay against the new code. If the "
        f"change adds, removes or reorders steps, guard it with `if ctx.patched(\"my-change\"):` "
        f"or those runs will stop with a NonDeterminismError.")


def framework_missing(module: str, framework: str, extra: str, said: str) -> FrameworkError:
    return FrameworkError(
        f"{module} needs {framework}, which is not installed ({said}). Install the extra: "
        f"pip install 'durablelab[{extra}]'", framework=framework, extra=extra)


def framework_version(framework: str, package: str, version: str, supported: str,
                      extra: str) -> FrameworkError:
    return FrameworkError(
        f"{framework} {version} is installed, but durablelab's bridge is tested with "
        f"{package}{supported} (the durable-execution API it builds on changes between "
        f"major versions). Install a supported one: pip install '{package}{supported}' "
        f"(or pip install 'durablelab[{extra}]')", framework=framework, version=version,
        supported=supported, extra=extra)


_LESSON = ("The lessons: notebooks/01_replay.ipynb (section 'Breaking replay'), "
           "09_non_determinism.ipynb (each way to break replay, and the guard) and "
           "10_versioning.ipynb (deploying while runs wait).")

_DIVERGENCE = {
    "different_call": (
        "the workflow code asked for a different step than history recorded",
        "The code changed while this run was in flight (a step was added, removed or "
        "reordered before this point), or it branches on something history does not hold "
        "(the wall clock, random, os.environ, set or dict order). Read time and randomness "
        "through ctx.now(), ctx.random() and ctx.uuid(); to change code under running runs, "
        "guard the change with `if ctx.patched(\"my-change\"):` so old runs keep their path."),
    "different_arguments": (
        "the workflow code made the recorded call with different arguments",
        "An argument is computed from something history does not hold (time, randomness, "
        "the environment, a global that changed), or the code changed how it builds it. "
        "Build arguments only from the workflow input and recorded results, or guard the "
        "change with `if ctx.patched(\"my-change\"):`."),
    "history_not_consumed": (
        "the workflow code returned, but history holds more events",
        "A step was removed, or the code took a shorter branch than when the run recorded "
        "it. Keep the step for runs that recorded it: guard the removal with "
        "`if ctx.patched(\"my-change\"):` so only new runs skip it."),
}


#: characters of an argument list shown in a message's table (the fields hold more).
SHOWN_ARGS = 60


def _arguments(text: str | None) -> str:
    """A call's canonical-JSON arguments, [args, kwargs], written as a call's argument list
    (``"v-42", region="eu"``), cut at SHOWN_ARGS characters."""
    if text is None:
        return "-"
    try:
        args, kwargs = json.loads(text)
        parts = [json.dumps(a, ensure_ascii=False) for a in args]
        parts += [f"{k}={json.dumps(v, ensure_ascii=False)}" for k, v in kwargs.items()]
        shown = ", ".join(parts) or "(none)"
    except (ValueError, TypeError):     # cut at history.ARGS_CAP: not JSON any more
        shown = text
    return shown if len(shown) <= SHOWN_ARGS else shown[:SHOWN_ARGS - 1] + "…"


def _side(event: dict | None, fallback: str, args: str | None) -> tuple[str, ...]:
    if event is None:
        return (fallback, "", "", "")
    return (event["kind"], event["name"], _arguments(args), event.get("digest") or "-")


def _with_source(call_site: str | None) -> str | None:
    """'file:line' followed by that line of code, when the source can be found (notebook
    cells included), so the reader sees the call, not only a temporary file name."""
    if not call_site:
        return call_site
    import linecache
    filename, _, line = call_site.rpartition(":")
    code = linecache.getline(filename, int(line)).strip() if line.isdigit() else ""
    return f"{call_site}\n             {code}" if code else call_site


def divergence_table(recorded, requested, recorded_args=None, requested_args=None) -> str:
    """What history recorded against what the code requested, one aligned row each."""
    rows = [("", "kind", "name", "arguments", "input digest"),
            ("recorded:", *_side(recorded, "(nothing)", recorded_args)),
            ("requested:", *_side(requested, "(the code returned)", requested_args))]
    widths = [max(len(str(r[i])) for r in rows) for i in range(5)]
    return "\n".join("  " + "  ".join(str(c).ljust(w) for c, w in zip(r, widths)).rstrip()
                     for r in rows)


def non_determinism(run_id, workflow, position, recorded, requested, call_site, reason,
                    remaining=None, recorded_args=None,
                    requested_args=None) -> NonDeterminismError:
    what, hint = _DIVERGENCE[reason]
    table = divergence_table(recorded, requested, recorded_args, requested_args)
    extra = f" ({remaining} event(s) left unreplayed)" if reason == "history_not_consumed" else ""
    message = (
        f"Non-determinism in run {run_id!r} (workflow {workflow}) at history position "
        f"{position}: {what}{extra}.\n{table}\n"
        f"  asked at:  {_with_source(call_site) or 'the end of the workflow function'}\n"
        f"Nothing was recorded: the run is now 'diverged' and its history is unchanged; an "
        f"engine with fixed code replays it again and carries on.\n"
        f"Likely fix: {hint}\n{_LESSON}")
    return NonDeterminismError(
        message, run_id=run_id, workflow=workflow, position=position, recorded=recorded,
        requested=requested, call_site=call_site, reason=reason, hint=hint,
        recorded_args=recorded_args, requested_args=requested_args)


_GIVE_UP_FIX = {
    "NonRetryable": "a retry cannot help this error: fix what the activity was given, or "
                    "catch dl.ActivityFailed around the call to take another path",
    "ModelOutputError": "raise model_output_budget in its dl.RetryPolicy, make the answer "
                        "easier to get right (a simpler schema, the error fed back through "
                        "feedback=), or catch dl.ActivityFailed around the call",
    "schedule_to_close": "raise schedule_to_close on the ctx.activity call, or give the "
                         "service fewer, later attempts",
    "retry quota": "this is the quota doing its job while the service fails for many runs; "
                   "to retry more, give dl.RetryQuota a larger capacity or cheaper retries "
                   "(retry_cost=, timeout_cost=), or catch dl.ActivityFailed around the call",
}


def activity_failed(run_id, activity, position, attempts, error: ActivityError,
                    why: str, call_site: str | None = None) -> ActivityFailed:
    """The error an activity that failed for good raises in its workflow code."""
    if "schedule_to_close" in why:
        fix = _GIVE_UP_FIX["schedule_to_close"]
    elif why.startswith("the retry quota"):
        fix = _GIVE_UP_FIX["retry quota"]
    else:
        fix = _GIVE_UP_FIX.get(error.error_class, (
            "give it more attempts or a longer backoff (dl.RetryPolicy(max_attempts=..., "
            "max_interval=...)), a start_to_close= if it can hang, or catch "
            "dl.ActivityFailed around the call to take another path"))
    message = (f"Activity {activity!r} (run {run_id!r}, position {position}) failed for good "
               f"after {attempts} attempt(s): {why}.\n"
               f"  last error: {error.message} (a {error.error_class} error)\n"
               f"The failure is recorded, so a replay raises it again at the same call. "
               f"Fix: {fix}.")
    failed = ActivityFailed(message, run_id=run_id, activity=activity, position=position,
                            attempts=attempts, error_class=error.error_class,
                            cause_class=error.cause_class or error.error_class,
                            cause_message=error.message)
    failed.call_site = call_site
    return failed


def child_failed(run_id: str, workflow: str, position: int, child_run_id: str,
                 status: str, error_json: str | None, call_site: str | None) -> ChildFailed:
    """The error a child run that ended without a result raises in its parent."""
    cause = error_from_json(json.loads(error_json)) if error_json else None
    cause_class = type(cause).__name__ if cause is not None else "Cancelled"
    why = getattr(cause, "message", "") or status
    failed = ChildFailed(
        f"Child run {child_run_id!r} (workflow {workflow!r}, started by run {run_id!r} at "
        f"position {position}) ended {status}: {why.splitlines()[0] if why else status}. "
        f"The parent records this, so a replay raises it again at the same call. Fix: look "
        f"at the child with engine.run({child_run_id!r}); catch dl.ChildFailed around "
        f"ctx.child(...) to take another path.", run_id=run_id, activity=workflow,
        position=position, attempts=1, error_class="ChildFailed", cause_class=cause_class,
        cause_message=why, child_run_id=child_run_id, child_status=status)
    failed.call_site = call_site
    return failed


def cancelled(run_id: str, reason: str | None, position: int) -> Cancelled:
    """The error cancelled workflow code gets at the ctx call it is blocked in."""
    said = f" ({reason})" if reason else ""
    return Cancelled(
        f"Run {run_id!r} was cancelled{said}; its code was told at position {position}. "
        f"Catch dl.Cancelled to clean up (activities still run and are recorded); let it "
        f"propagate and the run ends 'cancelled'.", run_id=run_id, reason=reason,
        position=position)


def compensation_failed(failed: ActivityFailed, waited: float, not_run: list,
                        failure: BaseException) -> CompensationFailed:
    left = ", ".join(not_run) if not_run else "none"
    message = (f"Compensation {failed.activity!r} (run {failed.run_id!r}, position "
               f"{failed.position}) failed for good ({failed.error_class}: "
               f"{failed.cause_message}) and nobody answered the signal "
               f"'compensate:{failed.activity}' within {waited:g}s, so the saga stopped. Still "
               f"to undo: {left}. Undo them by hand, or signal "
               f"{{\"retry\": True}} sooner next time (ctx.saga(escalate_after=...) sets the "
               f"wait). The failure that started compensating: {failure}")
    return CompensationFailed(message, run_id=failed.run_id, activity=failed.activity,
                              position=failed.position, attempts=failed.attempts,
                              error_class=failed.error_class, cause_class=failed.cause_class,
                              cause_message=failed.cause_message, waited=waited,
                              not_run=list(not_run), failure=str(failure))


def workflow_error(run_id, workflow, exc: BaseException, location: str | None) -> WorkflowError:
    cause = type(exc).__name__
    if isinstance(exc, (UsageError, SerializationError)):   # a ctx call refused its arguments
        message = (
            f"A ctx call in run {run_id!r} (workflow {workflow}) at "
            f"{location or 'an unknown line'} was given a value it cannot use, so the run "
            f"failed before recording anything for that call (the same code would fail the "
            f"same way on every replay): {str(exc).rstrip('.')}. Fix that call in the workflow "
            f"code.")
    else:
        message = (
            f"Workflow code raised {cause} in run {run_id!r} (workflow {workflow}) at "
            f"{location or 'an unknown line'}: {exc}. This came from the workflow function "
            f"itself, not from an activity, so it is not retried (the same code would raise "
            f"the same way on every replay) and the run failed. Fix the workflow code; if the "
            f"failing work touches the outside world, move it into ctx.activity(...) so it "
            f"gets retries.")
    return WorkflowError(message, run_id=run_id, workflow=workflow, cause_class=cause,
                         cause_message=str(exc), location=location)


def determinism_guard(run_id, workflow, call, replacement, location) -> DeterminismGuardError:
    message = (
        f"Determinism guard: workflow code called {call} in run {run_id!r} (workflow "
        f"{workflow}) at {_with_source(location)}\n"
        f"Workflow code runs again from the top on every wake-up, so {call} would answer "
        f"differently on a replay than when the run recorded its history, and replay would "
        f"diverge. The run failed here (even if the code catches this error), and nothing "
        f"was recorded for the call.\n"
        f"Use instead: {replacement}.\n"
        f"Engine(guard=False) turns the guard off, to watch the divergence it prevents. "
        f"The lesson: notebooks/09_non_determinism.ipynb.")
    return DeterminismGuardError(
        message, run_id=run_id, workflow=workflow, cause_class="DeterminismGuardError",
        cause_message=f"{call} called from workflow code", location=location, call=call,
        replacement=replacement)
