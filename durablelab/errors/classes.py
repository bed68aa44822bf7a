"""Every exception and warning durablelab raises, as classes: the hierarchy in one place.

Two families. The *retry classes* (`Transient`, `RateLimited`, `NonRetryable`,
`ModelOutputError`) say what kind of failure an activity attempt had, which decides whether
and when it is retried. The *engine errors* say what went wrong with a run, a call or a file.
Every error carries its facts as attributes (`fields`), so tests and views never parse the
text, and round-trips through JSON (`to_json` / `error_from_json`), so a run read back from a
file shows the error it failed with. Rebuilding only looks up these classes: reading a
stranger's history never imports or runs code.
"""

from __future__ import annotations

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
        from .messages import divergence_table
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


# --- a file is data: what a store must be before durablelab reads it -----------------------

class ForeignStoreError(StoreFormatError):
    """A file given as a store that durablelab will not read: another kind of database
    (`table` None), or a store whose `table` is not the base table durablelab's DDL creates
    (a view, which would run the file's own SQL, or a table of other columns)."""

    fields = ("path", "found", "expected", "table")


# --- reading an error back ------------------------------------------------------------


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
    if not isinstance(fields, dict):
        fields = {}
    err = cls.__new__(cls)
    message = data.get("message", "")
    DurableLabError.__init__(err, message if isinstance(message, str) else str(message))
    for name in cls.fields:
        setattr(err, name, _as_recorded(name, fields.get(name)))
    return err


#: The fields every view reads as numbers. An error read back from a stranger's file may
#: hold anything there; a wrong type reads as missing, as views already show a None.
_WHOLE = {"position", "attempts", "line", "pid"}
_SECONDS = {"retry_after", "timeout", "deadline", "waited"}


def _as_recorded(name: str, value):
    if name in _WHOLE and (isinstance(value, bool) or not isinstance(value, int)):
        return None
    if name in _SECONDS and (isinstance(value, bool) or not isinstance(value, (int, float))
                             or not math.isfinite(value)):
        return None
    return value


def _rebuild(data: dict) -> DurableLabError:
    return error_from_json(data)
