"""Every durablelab exception, and the one place their messages are worded.

Two families live here. The *retry classes* (`Transient`, `RateLimited`, `NonRetryable`,
`ModelOutputError`) say what kind of failure an activity attempt had, which decides whether
and when it is retried. The *engine errors* say what went wrong with a run or with a call to
the engine. Every error carries its facts as attributes, so tests and views never parse the
text, and every error round-trips through JSON (`to_json` / `error_from_json`) so a run read
back from a file shows the same error it failed with. Rebuilding only ever looks up classes
in this module: reading a stranger's history never imports or runs code.
"""

from __future__ import annotations

import json
import math
from typing import Any


class DurableLabError(Exception):
    """Base of every error durablelab raises."""

    #: names of the attributes that describe this error; they go to JSON and back.
    fields: tuple[str, ...] = ()

    def __init__(self, message: str = "", **facts: Any):
        super().__init__(message)
        self.message = message
        for name in self.fields:
            setattr(self, name, facts.get(name))

    def to_json(self) -> dict:
        return {
            "class": type(self).__name__,
            "message": self.message,
            "fields": {name: getattr(self, name, None) for name in self.fields},
        }

    def __reduce__(self):  # keep errors copyable although __init__ takes keywords
        return (_rebuild, (self.to_json(),))


# --- retry classes: what kind of failure an attempt had ---------------------------------


class ActivityError(DurableLabError):
    """Base of the four retry classes; `error_class` is the class name."""

    fields = ("cause_class",)

    @property
    def error_class(self) -> str:
        return type(self).__name__


class Transient(ActivityError):
    """Timeouts, HTTP 5xx, connection resets: worth retrying with backoff."""


class RateLimited(Transient):
    """HTTP 429: retried, waiting at least `retry_after` seconds when the server said so."""

    fields = ("cause_class", "retry_after")

    def __init__(self, message: str = "rate limited", retry_after: float | None = None, **facts):
        super().__init__(message, retry_after=retry_after, **facts)


class NonRetryable(ActivityError):
    """HTTP 4xx, validation, permission, business rejections: a retry cannot help."""


class ModelOutputError(ActivityError):
    """Malformed JSON, schema violations, refusals: retried on a small separate budget,
    with the error fed back to the next attempt. `usage` is the usage dict (input_tokens,
    output_tokens, cost) of the answer it threw away, when known: those tokens were paid
    for, so budgets count them."""

    fields = ActivityError.fields + ("usage",)


# --- engine errors -----------------------------------------------------------------------


class ActivityFailed(DurableLabError):
    """An activity failed for good: its retries are spent or its error is not retryable.

    Workflow code may catch it (to compensate, or to take another path). The failure is
    recorded in history, so on replay the same `ActivityFailed` is raised at the same place.
    """

    fields = ("run_id", "activity", "position", "attempts", "error_class", "cause_class",
              "cause_message")
    #: "file:line" of the ctx.activity call. Not part of the recorded error (history keeps
    #: it beside the event, and a temporary notebook file name would make the bytes vary).
    call_site: str | None = None


class CompensationFailed(ActivityFailed):
    """A saga's compensation failed for good and nobody answered its escalation signal
    (``"compensate:<activity>"``) before the deadline. `activity` is the compensation,
    `not_run` the compensations left undone, `failure` the error that started compensating."""

    fields = ActivityFailed.fields + ("waited", "not_run", "failure")


class ChildFailed(ActivityFailed):
    """A child run (`ctx.child`, `ctx.start_child`) ended without a result: it failed, or
    was cancelled. `child_run_id` names it and `child_status` says how it ended; the other
    fields are an `ActivityFailed`'s, so code that catches that catches this too."""

    fields = ActivityFailed.fields + ("child_run_id", "child_status")


class Cancelled(DurableLabError):
    """`engine.cancel(run_id)` asked this run to stop. Raised at the ctx call its code is
    blocked in, or at its next one. Code may catch it to clean up (activities still run and
    are recorded); if it propagates, the run ends with the status ``cancelled``. A
    `ctx.saga()` block runs its compensations on it, as on `ActivityFailed`."""

    fields = ("run_id", "reason", "position")


class NonDeterminismError(DurableLabError):
    """Replay found the workflow code asking for something other than what history recorded.

    Attributes: `run_id`, `workflow`, `position`, `recorded` and `requested` (each a dict with
    `kind`, `name`, `digest`, or None when there is nothing on that side), `call_site`
    ("file:line" of the ctx call, or None), `reason` (a short code: "different_call",
    "different_arguments", "history_not_consumed"), `hint` (the likely fix), and
    `recorded_args` / `requested_args`: the canonical JSON of each side's arguments,
    ``[args, kwargs]``, cut at 2,000 characters (None for a call without input, and for
    history written before durablelab kept arguments: then only the digests show).
    """

    fields = ("run_id", "workflow", "position", "recorded", "requested", "call_site",
              "reason", "hint", "recorded_args", "requested_args")

    @property
    def table(self) -> str:
        """The two sides side by side, as the message shows them: a row for what history
        recorded and one for what the code requested (kind, name, arguments, digest)."""
        return divergence_table(self.recorded, self.requested, self.recorded_args,
                                self.requested_args)


class WorkflowError(DurableLabError):
    """Workflow code itself raised (not an activity). The run fails at once; it is not
    retried, because re-running the same deterministic code would raise the same way."""

    fields = ("run_id", "workflow", "cause_class", "cause_message", "location")


class DeterminismGuardError(WorkflowError):
    """Workflow code called something whose answer differs between executions (the clock,
    randomness, a uuid, the environment, a file), and the determinism guard stopped it at
    the call. The run fails, even if the code catches this error. Besides the fields of
    `WorkflowError`: `call` (e.g. "time.time()") and `replacement` (what to use instead).
    `Engine(guard=False)` turns the guard off (see `durablelab.guard`)."""

    fields = WorkflowError.fields + ("call", "replacement")


class BudgetExceeded(DurableLabError):
    """A run spent more than its `Budget` allows; it stopped (status failed)."""

    fields = ("run_id", "limit", "spent", "allowed", "activity", "position")

    @classmethod
    def build(cls, run_id, limit, spent, allowed, activity, position) -> "BudgetExceeded":
        return cls(
            f"Run {run_id!r} went over its budget of {limit}: {spent:g} spent, {allowed:g} "
            f"allowed, at activity {activity!r} (position {position}). The run stopped "
            f"there (status failed); what it recorded is kept. Raise the limit in "
            f"Budget({limit}=...) if the spend is expected, or look for a loop that does "
            f"not end (a model that keeps asking for the same tool).",
            run_id=run_id, limit=limit, spent=spent, allowed=allowed, activity=activity,
            position=position)


class RunTimedOut(DurableLabError):
    """A run passed its workflow time-out (`start(..., timeout=)`); it stopped."""

    fields = ("run_id", "timeout", "deadline", "waiting")

    @classmethod
    def build(cls, run_id, timeout, deadline, waiting) -> "RunTimedOut":
        return cls(
            f"Run {run_id!r} timed out: its workflow time-out of {timeout:g}s passed at "
            f"t={deadline:g}s while it was {waiting}. The run stopped (status failed); what it "
            f"recorded is kept. A run-level time-out is the last line of defence: give "
            f"activities their own start_to_close, and signal waits a deadline.",
            run_id=run_id, timeout=timeout, deadline=deadline, waiting=waiting)


class SerializationError(DurableLabError, TypeError):
    """A value that must go into history is not JSON (a workflow input, an activity
    argument, a signal value)."""

    fields = ("what", "where")


class HeartbeatError(DurableLabError, RuntimeError):
    """`dl.heartbeat()` or `dl.last_heartbeat()` was called outside an activity attempt."""

    fields = ("call",)


class RunNotFoundError(DurableLabError, KeyError):
    """No run with this id exists in this engine's store."""

    fields = ("run_id",)

    def __str__(self) -> str:  # KeyError would otherwise print the message in quotes
        return self.message


class RunFinishedError(DurableLabError):
    """The run has ended (completed, failed or continued) and cannot take this call."""

    fields = ("run_id", "status")


class DuplicateRunError(DurableLabError):
    """`start()` was given a run id that already exists."""

    fields = ("run_id",)


class StoreLockedError(DurableLabError):
    """Another process holds the DuckDB file."""

    fields = ("path", "pid")


class StoreFormatError(DurableLabError):
    """The DuckDB file is not a durablelab store, or was written by another schema version."""

    fields = ("path", "found", "expected")


class PolicyError(DurableLabError, ValueError):  # a usage error: see UsageError below
    """A retry policy (or a map of activity globs to policies) that cannot be used: a bad
    `start(policies=)`, or a policy's JSON with an unknown key or a bad value."""

    fields = ("where", "key")


def policy_error(where: str, key: str | None, problem: str) -> PolicyError:
    from .retry import _FIELDS
    if key is not None:
        problem = (f"{problem} {key!r}; a RetryPolicy's keys are "
                   f"{', '.join(_FIELDS)}")
    return PolicyError(f"{where}: {problem}. See help(dl.RetryPolicy).", where=where, key=key)


class UsageError(DurableLabError):
    """A call to durablelab was given something it cannot use. Each concrete error is also
    a `ValueError` (`BadValue`) or a `TypeError` (`BadType`), so code that catches the
    built-in keeps working."""

    fields = ("call", "argument")


class BadValue(UsageError, ValueError):
    """An argument of the right type with a value durablelab refuses (a NaN time, a
    negative latency, an unknown mode)."""


class BadType(UsageError, TypeError):
    """An argument of the wrong type (a string where seconds go, a partial as a workflow)."""


class EngineClosedError(DurableLabError, RuntimeError):
    """The engine was closed, or superseded by a newer engine on the same file."""

    fields = ("path", "superseded")


# --- files from elsewhere: exports, imported histories, DBOS --------------------------------


class ExportFormatError(DurableLabError):
    """A file given to `dl.load` is not a readable durablelab export: wrong format or
    version, a missing or unknown field, invalid JSON, a cut-short file, a pickle. Fields:
    `path`, `line` (1-based line of a JSON Lines file or row of a Parquet file, or None
    for the whole file) and `problem` (what was wrong, in a sentence)."""

    fields = ("path", "line", "problem")


class TemporalHistoryError(DurableLabError):
    """A Temporal history could not be imported: `path` says which file ("<JSON text>" or
    "<JSON object>" when none), `problem` what was wrong with it."""

    fields = ("path", "problem")


class TemporalRunEnded(DurableLabError):
    """Temporal ended an imported run from outside its code: it was terminated or canceled.
    durablelab has no such ending, so the run shows as failed with this error."""

    fields = ("run_id", "ended_by", "reason", "identity")


class RunnerOpenError(DurableLabError, RuntimeError):
    """A second `DBOSRunner` in a process that already has one open (DBOS is one instance
    per process: a second configuration would silently be ignored)."""

    fields = ("url",)


class UnknownWorkflowError(DurableLabError, LookupError):
    """A run names a workflow this process did not register with the runner."""

    fields = ("run_id", "workflow")


class DBOSReadError(DurableLabError, ValueError):
    """A DBOS database or row that cannot be read as a durablelab run."""

    fields = ("url", "workflow_id", "what")


class LangGraphReadError(DurableLabError, ValueError):
    """A LangGraph checkpoint file, thread or value that cannot be read as a durablelab run
    (not a SqliteSaver file, no such thread, a pickled value). `what` says which."""

    fields = ("path", "thread_id", "what")


class DatasetError(DurableLabError, FileNotFoundError):
    """A dataset the lessons read (named fault plans, recorded histories, model scenarios)
    is not where this durablelab keeps them: `path` is where it looked, `what` what was
    missing. A listing that comes back empty is this error, never an empty loop."""

    fields = ("path", "what")


def dataset_missing(path, what: str) -> DatasetError:
    return DatasetError(
        f"{what} not found: durablelab looked in {path}. The lessons' datasets ship inside "
        f"the package (durablelab/lessons/datasets in a wheel) and live in datasets/ in a "
        f"source checkout; reinstall durablelab (pip install --force-reinstall durablelab), "
        f"or run it from a checkout", path=str(path), what=what)


class DurableLabWarning(UserWarning):
    """Base of durablelab's warnings."""


class UnknownWorkflowWarning(DurableLabWarning):
    """An engine opened a store whose unfinished runs name workflows nobody registered
    in this process: they are left as recorded and not run."""


class ObserverWarning(DurableLabWarning):
    """An observer of an engine (a tracer, a custom `Observer`) raised: it was removed, and
    the engine carried on."""


class WorkflowRedefinedWarning(DurableLabWarning):
    """A registered workflow was given a new definition while runs of it are in flight."""


class UnmatchedFaultRuleWarning(DurableLabWarning):
    """A sweep's fault plan has a rule whose activity name matched no activity any of its
    runs reached (a typo tests nothing, and the sweep would look like a success)."""


class GuardOffWarning(DurableLabWarning):
    """The determinism guard could not run (a profiler holds the hook it needs), so this
    wake-up ran unguarded."""


class HeartbeatIgnoredWarning(DurableLabWarning):
    """An activity called `dl.heartbeat()` on an engine without heartbeats (DBOS
    Transact): its details were not kept."""


def _full_stop(text: str) -> str:
    return text if text.endswith(".") else text + "."


def bad_value(call: str, argument: str, message: str) -> BadValue:
    return BadValue(f"{call}: {_full_stop(message)}", call=call, argument=argument)


def bad_type(call: str, argument: str, message: str) -> BadType:
    return BadType(f"{call}: {_full_stop(message)}", call=call, argument=argument)


def limit_error(call: str, argument: str, value, rule: str) -> BadValue | BadType:
    """A Budget or CircuitBreaker limit that is not a usable number."""
    maker = bad_type if isinstance(value, bool) or not isinstance(value, (int, float)) \
        else bad_value
    return maker(call, argument, f"{argument}={value!r} must be {rule}")


def plan_error(message: str) -> BadValue:
    """A fault plan's JSON (text or file) that cannot be read as a plan; `message` names the
    source, the rule and the field."""
    return BadValue(message, call="FaultPlan.from_json", argument=None)


def not_a_workflow(fn) -> BadType:
    kind = type(fn).__name__
    return bad_type("workflow", "workflow", (
        f"{fn!r} (a {kind}) is not a workflow function. History records a workflow as "
        f"'module:qualname' to find it again, so a workflow is a function defined with def "
        f"(or a lambda) taking (ctx, input); a functools.partial or a callable object has "
        f"no such name. Wrap it: def my_flow(ctx, input): return inner(ctx, input, ...)."))


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


class AgentConfigError(DurableLabError, ValueError, TypeError):
    """`dl.agents.react` or a tool was given something it cannot use (a tool without a
    docstring or type hints, an approval naming no tool, a model answer of the wrong
    shape). A usage error: also a ValueError and a TypeError."""

    fields = ("what",)


class FrameworkError(DurableLabError, ImportError):
    """A bridge to another framework (`durablelab.agents.pydantic_ai`,
    `durablelab.backends.langgraph`) cannot load: the
    framework is not installed, or its version is outside the range the bridge is tested
    with. `extra` names the durablelab extra that installs a supported one."""

    fields = ("framework", "version", "supported", "extra")


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


class RetryAmplificationWarning(DurableLabWarning):
    """A model client retries on its own inside an activity (the openai client's
    ``max_retries``): its retries hide failures from the engine and multiply its own."""


class SweepError(UsageError, ValueError):
    """A sweep that cannot run as asked: a bad name, policy, plan, input or option, a
    workflow or world that spawned ``processes=`` or an ``executor=`` could not import, a
    sweep data form a worker cannot read, or a results file made by another sweep."""

    fields = ("argument",)


class ConfigError(DurableLabError, ValueError):
    """A sweep config file (TOML or JSON) that cannot be used: it names the file, the key
    and what is allowed there."""

    fields = ("path", "key", "allowed")


class ReplayCheckError(DurableLabError, ValueError):
    """`replay_check` could not check: no such file, a file it cannot read, or no run of
    the workflow in the source (which must fail a CI job, not pass it)."""

    fields = ("workflow", "source")

    @classmethod
    def nothing_to_check(cls, workflow: str, source: str, found: list) -> "ReplayCheckError":
        held = (f"it holds runs of {', '.join(repr(n) for n in found[:5])}"
                + (f" and {len(found) - 5} more" if len(found) > 5 else "")
                if found else "it holds no runs at all")
        return cls(
            f"replay_check: no run in {source} was recorded under workflow {workflow!r} "
            f"({held}), so nothing was checked. A renamed or moved workflow must not pass "
            f"vacuously: give the workflow as the runs recorded it (module:function), or "
            f"mark the new function with @durablelab.versioning.version_of(old_function).",
            workflow=workflow, source=source)




class StoreOpenError(DurableLabError, OSError):
    """The path cannot be opened as a DuckDB file at all (a directory, a missing folder, a
    file that is not DuckDB or is cut short). `found` is what DuckDB reported."""

    fields = ("path", "found")


class DamagedRunError(StoreFormatError):
    """One run's rows in a store cannot be read (a damaged row, a gap or a duplicate in its
    positions). The run is set aside: still listed by `runs()`, never run; the others open."""

    fields = ("path", "found", "expected", "run_id", "position", "what")


def store_open_error(path: str, found: str, head: bytes | None) -> StoreOpenError:
    """Say what DuckDB found at `path` (`head`: the file's first bytes, if it is one)."""
    import os
    parent = os.path.dirname(os.path.abspath(path))
    if os.path.isdir(path):
        what = (f"it is a directory, not a file. Give dl.Engine a file inside it, for "
                f"example {os.path.join(path, 'runs.duckdb')!r}")
    elif not os.path.isdir(parent):
        what = (f"the folder {parent!r} does not exist, so the store cannot be created there. "
                f"Create it first (os.makedirs({parent!r}, exist_ok=True)) or give another path")
    elif head is not None and "not a valid DuckDB database file" in found:
        if not head:
            kind = "an empty file (0 bytes)"
        elif head.lstrip()[:1] in (b"{", b"["):
            kind = "a file of JSON text (a durablelab export? read it with dl.load(path))"
        elif all(32 <= b < 127 or b in (9, 10, 13) for b in head):
            kind = "a plain-text file"
        else:
            kind = "a file of some other format"
        what = (f"it is {kind}, not a DuckDB database. Nothing was written to it; give the "
                f"Engine a new path (or delete the file if it is yours to lose)")
    elif "Could not read enough bytes" in found:
        what = ("the DuckDB file is cut short (truncated or damaged: a copy that did not "
                "finish?). Nothing was written to it; restore it from a complete copy, or give "
                "the Engine a new path")
    else:
        what = "DuckDB could not open it. Give the Engine another path"
    return StoreOpenError(f"Cannot open {path} as a durablelab store: {what}. (DuckDB said: "
                          f"{found})", path=path, found=found)


def damaged_run(path, run_id: str, position: int | None, what: str, detail: str = "",
                expected: int | None = None, table: str | None = None) -> DamagedRunError:
    """`table`: where to look at the damaged row (events if there is a position, else runs)."""
    where = f" at history position {position}" if position is not None else ""
    table = table or ("events" if position is not None else "runs")
    return DamagedRunError(
        f"Run {run_id!r} in {path or 'the in-memory store'} cannot be read: {what}{where}"
        f"{detail}. "
        f"It is set aside: listed by engine.runs(), never run or changed; the other runs "
        f"opened and run as usual. Nothing was lost by opening it. To look at its rows, open "
        f"the file read-only in DuckDB (SELECT * FROM {table} WHERE run_id = '{run_id}'); to "
        f"carry on, start the work again as a new run (or restore the file from a copy).",
        path=path, found=position, expected=expected, run_id=run_id, position=position,
        what=what)


# --- checking what a caller gives ---------------------------------------------------------
# Each check returns the value (as the store will keep it) or raises a usage error naming
# the call, the argument and the fix. A value that would poison a store (an infinite or NaN
# time, a negative latency, an int DuckDB cannot keep) is refused where it is given.

def check_seconds(value, call: str, argument: str, *, positive: bool = False,
                  none_ok: bool = False) -> float | None:
    """`value` as float seconds: a finite number >= 0 (> 0 when `positive`)."""
    if value is None and none_ok:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise bad_type(call, argument, f"{argument}={value!r} must be a number of seconds "
                                       f"(an int or a float)")
    try:
        seconds = float(value)
    except OverflowError:
        seconds = math.inf
    if not math.isfinite(seconds):
        raise bad_value(call, argument, (
            f"{argument}={value!r} is not a finite number of seconds. An infinite or NaN "
            f"time would be saved in history and break every later run on the file; give a "
            f"finite number"))
    if seconds < 0 or (positive and seconds == 0):
        raise bad_value(call, argument, f"{argument}={value!r} must be seconds "
                                        f"{'> 0' if positive else '>= 0'} (time in history "
                                        f"only runs forwards)")
    return seconds


def check_probability(value, call: str, argument: str = "p") -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise bad_type(call, argument, f"{argument}={value!r} must be a probability, a number "
                                       f"in [0, 1] (p=1.0 fires every time)")
    if not 0.0 <= value <= 1.0:   # NaN fails this too
        raise bad_value(call, argument, f"{argument}={value!r} must be a probability in [0, 1]")
    return float(value)


def check_int(value, call: str, argument: str, minimum: int, none_ok: bool = False,
              what: str = "") -> int | None:
    if value is None and none_ok:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise bad_type(call, argument, f"{argument}={value!r} must be an int >= {minimum}"
                                       f"{' or None' if none_ok else ''}{what}")
    if value < minimum:
        raise bad_value(call, argument, f"{argument}={value!r} must be an int >= {minimum}"
                                        f"{' or None' if none_ok else ''}{what}")
    return value


def check_seed(value, call: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise bad_type(call, "seed", f"seed={value!r} must be an int")
    if not -2 ** 63 <= value < 2 ** 63:
        raise bad_value(call, "seed", (
            f"seed={value!r} is outside the 64-bit range the store keeps (-2**63 to "
            f"2**63 - 1). Seeds only need to differ: use a smaller int"))
    return value


def check_text(value, call: str, argument: str, *, none_ok: bool = False,
               empty_ok: bool = False) -> str | None:
    """A name the store keeps as text: a str, not empty, valid Unicode (no lone surrogate,
    which UTF-8 cannot hold)."""
    if value is None and none_ok:
        return None
    if not isinstance(value, str):
        raise bad_type(call, argument, f"{argument}={value!r} must be a string "
                                       f"(it is a {type(value).__name__})")
    if not value and not empty_ok:
        raise bad_value(call, argument, f"{argument}={value!r} must be a non-empty string")
    if not value.isascii():
        try:
            value.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise bad_value(call, argument, (
                f"{argument}={value!r} holds a lone surrogate ({value[exc.start]!r} at index "
                f"{exc.start}), which is not text UTF-8 can store; names must be valid "
                f"Unicode")) from None
    return value


def check_json_keys(value, what: str, where: str, root: str = "input") -> None:
    """Refuse a dict key that JSON would quietly turn into a string (an int, a float, a
    bool, None): history holds JSON, so after replay the code would read ``"1"`` where it
    wrote ``1``, and the `KeyError` would blame the workflow. Raises `SerializationError`
    naming the key, its type and where it is (``input['items'][2]``, `root` naming the
    value); keys that JSON cannot hold at all (tuples, ...) are left to the JSON encoder."""
    pending = [(value, root)]
    while pending:
        item, path = pending.pop()
        if isinstance(item, dict):
            for key, inner in item.items():
                if isinstance(key, (int, float)) or key is None:     # bool is an int
                    becomes = next(iter(json.loads(json.dumps({key: 0}))))
                    raise SerializationError(
                        f"{what} has a dict key {key!r} (of type {type(key).__name__}) in "
                        f"{path}, at {where}. History holds JSON, whose keys are strings: after "
                        f"replay the code would read the key {becomes!r} instead, and a "
                        f"KeyError would blame the workflow. Use string keys ({becomes!r}), "
                        f"or a list of [key, value] pairs.", what=what, where=where)
                if isinstance(inner, (dict, list, tuple)):
                    pending.append((inner, f"{path}[{key!r}]"))
        elif isinstance(item, (list, tuple)):
            pending.extend((inner, f"{path}[{i}]") for i, inner in enumerate(item)
                           if isinstance(inner, (dict, list, tuple)))


def history_gap(path, run_id: str, position: int, expected: int) -> DamagedRunError:
    """A stored history whose positions do not run 1, 2, 3, ...: the table has no primary
    key (it would cost a sixth of a sync step), so a duplicate is caught here, on load."""
    what = "its history has a second event" if position < expected else \
        "its history has a gap before the event"
    return damaged_run(path, run_id, position, what, (
        f" (expected position {expected}: the file was edited by hand, or written by two "
        f"engines at once)"), expected=expected)


def _error_classes() -> dict[str, type[DurableLabError]]:
    found: dict[str, type[DurableLabError]] = {}
    pending = [DurableLabError]
    while pending:
        cls = pending.pop()
        found[cls.__name__] = cls
        pending.extend(cls.__subclasses__())
    return found


#: class name -> class, as `_error_classes` last found them: a replay rebuilds a recorded
#: failure at every wake-up, and walking the subclasses each time cost more than the rest.
_FOUND: dict[str, type[DurableLabError]] = {}


def error_from_json(data: dict) -> DurableLabError:
    """Rebuild an error written by `to_json`. Only durablelab's own classes are looked up;
    an unknown class name comes back as a plain `DurableLabError` with the same message."""
    name = data.get("class", "")
    cls = _FOUND.get(name)
    if cls is None:   # not seen yet, or a class defined since: look again
        _FOUND.update(_error_classes())
        cls = _FOUND.get(name, DurableLabError)
    fields = data.get("fields") or {}
    err = cls.__new__(cls)
    DurableLabError.__init__(err, data.get("message", ""))
    for name in cls.fields:
        setattr(err, name, fields.get(name))
    return err


def _rebuild(data: dict) -> DurableLabError:
    return error_from_json(data)


# --- messages ----------------------------------------------------------------------------
# Each builder words one error: what happened in one sentence, where, recorded versus
# requested on aligned lines, what was and was not recorded, and the likely fix.

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


# --- reading stores without writing, and the command line ---------------------------------
# `Engine(path, read_only=True)` and the `durablelab` command look at a store without
# changing a byte of it. Their messages are one line each (the command prints them as they
# are), name the file, and end with the fix.


class ReadOnlyEngineError(UsageError, ValueError):
    """A call that records something (`start`, `signal`, `advance`, ...) on an engine opened
    with `read_only=True`, or `read_only=True` without a file to read or beside an engine of
    this process that holds the file."""

    fields = ("path", "call", "argument")


class CommandError(DurableLabError):
    """The `durablelab` command cannot do what it was asked: `path` names the file (or None),
    `problem` says what is wrong with it and `fix` what to do. Printed on one line, exit 1."""

    fields = ("path", "problem", "fix")


def read_only_engine(path, call: str) -> ReadOnlyEngineError:
    return ReadOnlyEngineError(
        f"Engine({path!r}, read_only=True) cannot {call}(): it was opened to look at runs "
        f"only, and records nothing. Open dl.Engine({path!r}) without read_only to run "
        f"them (close other engines on that file first).", path=path, call=call)


def read_only_needs_path() -> ReadOnlyEngineError:
    return ReadOnlyEngineError(
        "Engine(read_only=True) needs the path of an existing DuckDB file: an in-memory "
        "store starts empty, so there would be nothing to read.", path=None, call="Engine",
        argument="path")


def no_such_source(call: str, path) -> StoreOpenError:
    """A path to read runs from that holds nothing."""
    return StoreOpenError(f"{call}: cannot read {path}: no such file. Give the path of a "
                          f"DuckDB store (written by dl.Engine(path)) or of an export "
                          f"(dl.export), or the engine itself", path=str(path),
                          found="no such file")


def ops_now_error(now: float, source: str, first: float, first_run: str, latest: float,
                  latest_run: str) -> BadValue:
    """`dl.ops(now=...)` earlier than what the source already recorded."""
    where = (f"before the first instant {source} recorded (t={first:g}, when run "
             f"{first_run!r} started)" if now < first else
             f"before the latest instant {source} recorded")
    return bad_value("dl.ops(now=...)", "now", (
        f"now={now:g} is {where}. The runs' states are as of t={latest:g} (run "
        f"{latest_run!r}), so ages and deadlines read at an earlier instant would be wrong "
        f"(a run would wait since after now). Give now >= {latest:g}, or leave now=None to "
        f"read at the engine's clock or that instant"))


def read_only_beside_writer(path) -> ReadOnlyEngineError:
    return ReadOnlyEngineError(
        f"Engine({path!r}, read_only=True): an engine of this process already has that file "
        f"open, and DuckDB refuses a read-only connection beside it. Read the runs through "
        f"that engine (engine.run(run_id), engine.runs()), or close it first.", path=path,
        call="Engine", argument="read_only")


def command_error(where, problem: str, fix: str, path=None) -> CommandError:
    """'{where}: {problem}. {fix}' (`where` the file, or None when `problem` names it)."""
    path = where if path is None else path
    prefix = f"{where}: " if where is not None else ""
    return CommandError(f"{prefix}{problem}. {fix}", path=None if path is None else str(path),
                        problem=problem, fix=fix)


#: What to give a command that reads runs, said the same way in every message.
READABLE = ("give a DuckDB store written by dl.Engine(path), or an export written by "
            "dl.export (.jsonl, .parquet)")

# What DuckDB says when it cannot open a file, in the learner's words.
_DUCKDB_SAID = (
    ("does not exist", "no such file"),
    ("Is a directory", "this is a directory, not a file"),
    ("not a valid DuckDB database", "this is not a DuckDB database file"),
    ("Could not read enough bytes", "this DuckDB file is cut short (damaged, or copied while "
                                    "it was being written)"),
)


def store_unreadable(path, said: str) -> StoreFormatError:
    """A file DuckDB refused to open read-only, for another reason than a lock."""
    problem = next((words for phrase, words in _DUCKDB_SAID if phrase in said),
                   f"DuckDB cannot open it ({said})")
    return StoreFormatError(f"Cannot read {path}: {problem}. {_sentence(READABLE)}",
                            path=path, found=said, expected=None)


def store_not_readable_as_is(path, found, expected) -> StoreFormatError:
    """A DuckDB file opened read-only that is not a store of this schema version (a
    read-only open neither creates a schema nor upgrades one)."""
    if found is None:
        problem = ("it is a DuckDB database but not a durablelab store (it has no "
                   "schema_version in a 'meta' table)")
        fix = READABLE
    elif str(found).isdigit() and int(found) < expected:
        problem = f"it holds durablelab schema version {found}, older than this one's ({expected})"
        fix = (f"open it once with dl.Engine({str(path)!r}) (not read-only), which upgrades it "
               f"in place, then read it")
    else:
        problem = f"it holds durablelab schema version {found}; this durablelab reads {expected}"
        fix = "read it with the durablelab version that wrote it, or export its runs there"
    return StoreFormatError(f"Cannot read {path}: {problem}. {_sentence(fix)}", path=path,
                            found=found, expected=expected)


def _sentence(text: str) -> str:
    return text[:1].upper() + text[1:] + ("" if text.endswith(".") else ".")


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


# --- times that would overflow, and arguments of the wrong kind ---------------------------
# A finite time can still poison a store: the clock plus a finite duration can exceed the
# largest float and become `inf`, which is saved and breaks every later wake-up on the file.
# So a duration is checked against the instant it is added to, where it is given.

def check_later(now: float, seconds: float, call: str, argument: str) -> float:
    """The instant `now + seconds`, or a `BadValue` when that sum is not a finite float.
    `seconds` has passed `check_seconds` already; `call` and `argument` name where it came
    from."""
    instant = now + seconds
    if not math.isfinite(instant):
        raise bad_value(call, argument, (
            f"{argument}={seconds!r} seconds after t={now:g}s is past the largest time a "
            f"float can hold (the sum is {instant!r}); an infinite instant saved in history "
            f"would break every later wake-up on the file. Give a shorter time"))
    return instant


def not_a_clock(clock) -> BadType:
    return bad_type("Engine", "clock", (
        f"clock={clock!r} is not a clock. Give dl.VirtualClock() (simulated time, the "
        f"default) or dl.WallClock() (real time), or an object with now(), "
        f"advance_to(instant), sleep_until(instant) and a `virtual` flag"))


def not_a_path(path) -> BadType:
    return bad_type("Engine", "path", (
        f"path={path!r} must be a file name (a str or a pathlib.Path) or None for an "
        f"in-memory store, for example dl.Engine(\"runs.duckdb\")"))


def not_a_policy(call: str, policy) -> BadType:
    return bad_type(call, "policy", (
        f"policy={policy!r} must be a dl.RetryPolicy, or None for the default "
        f"(3 attempts), for example policy=dl.RetryPolicy(max_attempts=5)"))


def not_callable(call: str, fn) -> BadType:
    return bad_type(call, "fn", (
        f"fn={fn!r} is not callable: pass the function the activity runs (not its result), "
        f"for example ctx.activity(\"charge\", charge, order_id)"))


# --- a file is data: what a store must be before durablelab reads it -----------------------

class ForeignStoreError(StoreFormatError):
    """A file given as a store that durablelab will not read: another kind of database
    (`table` None), or a store whose `table` is not the base table durablelab's DDL creates
    (a view, which would run the file's own SQL, or a table of other columns)."""

    fields = ("path", "found", "expected", "table")


def foreign_store(path, what: str) -> ForeignStoreError:
    """A file refused by its first bytes, before DuckDB sees it (`what`: what it is)."""
    return ForeignStoreError(
        f"Cannot open {path} as a durablelab store: it is {what}, not a DuckDB store. "
        f"durablelab opens no other kind of database (DuckDB would fetch an extension to "
        f"read it). Nothing was read or written; {READABLE}, or give the Engine a new path.",
        path=str(path), found=what, expected="a DuckDB store", table=None)


def store_tampered(path, table: str, problem: str) -> ForeignStoreError:
    """A store whose `table` is not what durablelab's DDL makes of it (`problem` says how)."""
    return ForeignStoreError(
        f"Cannot open {path} as a durablelab store: {problem}. A store is data: durablelab "
        f"reads only the tables it created, so nothing in this file was read or written. "
        f"Open a store written by dl.Engine(path); for runs someone sent you, ask for an "
        f"export instead (dl.export(engine, 'runs.jsonl')), which is read as data only.",
        path=str(path), found=problem, expected="the table durablelab creates", table=table)
