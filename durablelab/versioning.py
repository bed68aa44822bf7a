"""Versioning: will today's code still replay the runs recorded by yesterday's?

A run in flight is a history plus the code that wrote it. Deploy new code and every run
that wakes up replays its history against the new code: if the new code asks for the same
things in the same order, the run carries on; if not, it stops `diverged` with a
`NonDeterminismError` (the run is parked, nothing is lost, and an engine with fixed code
replays it again). Two tools keep that from surprising you in production:

- `ctx.patched("change-id")` puts a change behind a marker: runs that recorded history
  before the change replay the old path, new runs take the new one and record the marker.
  Once no run in flight carries the old path, delete it (the deprecation step).
- `replay_check(workflow, source)` replays recorded histories against today's code before
  you deploy it, the way a CI job would, and runs no activity: every recorded value comes
  from history, and a request past the end of history is noted, never executed.

    report = dl.replay_check(onboard_vendor, "runs.duckdb")   # or an export, or runs
    assert report.ok, str(report)

From the shell: ``durablelab replay-check --workflow module:function --from FILE`` exits 1
if any run diverges (and 2 on a usage error).

What counts as diverged: any `NonDeterminismError` on the way (a different call, other
arguments, history left over when the code returns), and for a run that ended by returning
(completed) or by `continue_as_new` (continued): code that now asks for more steps, or that
ends another way. An unfinished run may ask for more: that is where it was going next.

`version_of(original)` marks a function as a new version of a workflow: it takes the
original's name ('module:qualname'), so histories recorded by the old code replay against
it in `replay_check`, and `engine.fork(..., workflow=new)` runs it. Two versions can then
live side by side in one module, as they do in `durablelab.examples.onboarding` and in the
lessons; `deployed(new)` makes one of them the module's current definition for a block,
which is what a deploy does to every engine that resolves the name.
"""

from __future__ import annotations

import contextlib
import json
import sys
from pathlib import Path
from typing import Any, Callable

import pandas as pd

from . import history as h
from .clock import VirtualClock
from .context import Context, Suspend, execute
from .errors import BadType, NonDeterminismError, ReplayCheckError, damaged_run, history_gap

FRAME_COLUMNS = ["run_id", "status", "position", "recorded", "requested", "cause"]
#: Recorded statuses that say how the code ended; replay must end the same way.
_ENDED_BY_CODE = ("completed", "continued")


def version_of(original: Callable) -> Callable[[Callable], Callable]:
    """Decorator: the function is a new version of the workflow `original`.

    It takes `original`'s module, name and qualname, so `dl.Engine` and `replay_check` treat
    it as that workflow: runs recorded by the old code replay against the new. Use it to keep
    two versions side by side (a deploy in a lesson, a test of a change); in production the
    new version simply replaces the old definition in its module.
    """
    if not callable(original):
        raise BadType(f"version_of({original!r}): give the workflow function this "
                        f"version replaces")

    def mark(fn: Callable) -> Callable:
        fn.__module__, fn.__qualname__ = original.__module__, original.__qualname__
        fn.__name__ = original.__name__
        return fn
    return mark


@contextlib.contextmanager
def deployed(new: Callable):
    """Within the block, `new` is the current definition of the workflow it is a version of
    (see `version_of`): its module's attribute names it, so an engine resolving that workflow
    runs `new`, exactly as after a deploy that edited the module. Restored on exit.

        with dl.versioning.deployed(onboarding.onboard_vendor_v2):
            engine = dl.Engine(path, workflows=[onboarding.onboard_vendor_v2])
            engine.run_until_idle()
            engine.close()
    """
    module = sys.modules.get(new.__module__)
    if module is None or "<locals>" in new.__qualname__ or "." in new.__qualname__:
        raise BadType(f"deployed({new!r}): give a module-level workflow function (marked "
                        f"@version_of(original) when it is a new version of one)")
    before = getattr(module, new.__name__, None)
    setattr(module, new.__name__, new)
    try:
        yield new
    finally:
        setattr(module, new.__name__, before)


class _ReplayOnly:
    """The `context.Port` of a replay only: anything new ends the replay as a wait would,
    unwinding the code (no activity runs, nothing is recorded, no signal arrives)."""

    world = None

    def __init__(self):
        self.clock = VirtualClock()

    def blocking(self, ctx, call, *args):
        return call(*args)   # a replay keeps no code: it ends at the first wait

    def execute_activity(self, state, cursor, request):
        raise Suspend(None, h.ACTIVITY, name=request.name)

    def record_event(self, state, cursor, kind, name, args, value_json, call_site,
                     kwargs=None):
        raise Suspend(None, kind, name=name)

    def signal_for(self, state, name, k):
        return None

    # Started work runs nowhere in a replay: its end is in history, or the replay ends at
    # the wait for it.
    def launch(self, state, position, request):
        pass

    def start_child(self, state, position, workflow, input_json, child_run_id, policies):
        pass

    def child_ended(self, state, position, child_run_id):
        pass


def describe(side: dict | None, args: Any = None, digest: bool = False) -> str:
    """A recorded or requested request in the words the code uses: ctx.activity('fetch'),
    followed by its arguments (or, for files that kept none, their digest) when asked."""
    if side is None:
        return ""
    kind, name = side.get("kind"), side.get("name")
    if kind in (h.NOW, h.RANDOM, h.UUID):
        text = f"ctx.{kind}()"
    elif kind in (h.SLEEP, h.TIMER_FIRED):
        text = "ctx.sleep" if kind == h.SLEEP else "the end of ctx.sleep"
    elif kind in (h.SIGNAL_RECEIVED, h.SIGNAL_TIMEOUT):
        text = f"the end of ctx.wait_signal({name!r})"
    elif kind is None:
        text = str(name)
    else:
        text = f"ctx.{kind}({name!r})"
    if not digest:
        return text
    if args is not None:
        text += f" {json.dumps(args, sort_keys=True)[:80]}"
    elif side.get("digest"):
        text += f" digest {side['digest']}"
    return text


class ReplayReport:
    """What `replay_check` found: `ok`, a `frame` with a row per run, and `errors` (the
    `NonDeterminismError` of each diverged run, by run id). ``str(report)`` lists the
    divergences grouped by cause, the way a CI log should show them."""

    def __init__(self, workflow: str, source: str, rows: list[tuple], errors: dict,
                 events: int):
        self.workflow, self.source = workflow, source
        self.frame = pd.DataFrame(rows, columns=FRAME_COLUMNS, dtype=object).astype(
            {"position": "Int64"})
        self.errors = errors
        #: events replayed in all, for the reader who wants a per-event cost.
        self.events = events

    @property
    def ok(self) -> bool:
        """True when every run replays against today's code."""
        return bool((self.frame["status"] == "ok").all())

    @property
    def diverged(self) -> pd.DataFrame:
        """The rows of the runs that no longer replay."""
        return self.frame[self.frame["status"] == "diverged"].reset_index(drop=True)

    def __str__(self) -> str:
        n, bad = len(self.frame), self.diverged
        head = (f"replay-check {self.workflow} against {self.source}: {n} run(s), "
                f"{n - len(bad)} replay, {len(bad)} diverged")
        if bad.empty:
            return head
        lines = [head]
        # One group per cause, position and call: runs that differ only in their arguments
        # (a change of argument in 1,000 runs) are one group, shown by its first run.
        calls = bad.assign(rec=bad["recorded"].fillna("").str.split(" ").str[0],
                           req=bad["requested"].fillna("").str.split(" ").str[0])
        groups = calls.groupby(["cause", "position", "rec", "req"], sort=False, dropna=False)
        for (cause, position, _, _), group in sorted(
                groups, key=lambda item: (-len(item[1]), str(item[0]))):
            ids = list(group["run_id"])
            recorded, requested = group["recorded"].iloc[0], group["requested"].iloc[0]
            shown = ", ".join(ids[:5]) + (f" and {len(ids) - 5} more" if len(ids) > 5 else "")
            lines += ["", f"{cause} at position {position}: {len(ids)} run(s) ({shown})",
                      f"  recorded:  {recorded or '(nothing)'}",
                      f"  requested: {requested or '(the code returned)'}"]
            hint = getattr(self.errors.get(ids[0]), "hint", None)
            if hint:
                lines.append(f"  fix: {hint}")
        return "\n".join(lines)

    def __repr__(self) -> str:
        return (f"ReplayReport({self.workflow}, {len(self.frame)} runs, "
                f"{len(self.diverged)} diverged)")


def replay_check(workflow: Callable, source) -> ReplayReport:
    """Replay the recorded runs of `workflow` in `source` against today's code.

    Use it before a deploy (in CI): it answers "would the runs in flight survive this
    code?" without running a single activity.

    Args:
        workflow: the workflow function as it is now. Only runs recorded under its name
            ('module:qualname', see `version_of`) are replayed.
        source: a DuckDB file written by `dl.Engine(path)` (opened read-only), an export
            (.jsonl or .parquet, see `dl.export`), a `Run`, or a list of runs.

    Returns a `ReplayReport`. Raises `ReplayCheckError` (also a ValueError) when `source`
    holds no run of that workflow: a renamed module must fail the check, not pass it.
    """
    from .registry import workflow_name
    name = workflow_name(workflow)
    label, runs = _runs_of(name, source)
    if not runs:
        raise ReplayCheckError.nothing_to_check(name, label, _names_in(source, label))
    engine = _ReplayOnly()
    rows, errors, events = [], {}, 0
    for run_id, status, input_json, seed, history, retried in runs:
        row, error = _replay(engine, workflow, name, run_id, status, input_json, seed, history,
                             retried)
        rows.append(row)
        events += len(history)
        if error is not None:
            errors[run_id] = error
    return ReplayReport(name, label, rows, errors, events)


def _replay(engine, fn, name, run_id, status, input_json, seed, history, retried):
    """Replay one run; returns (its frame row, its NonDeterminismError or None).
    `retried`: {position: [(run_id, position, activity)]} of the failed attempts past the
    end of history (a run parked mid-retry), so new code asking for another activity there
    diverges as it would in an engine."""
    from .runstate import RunState
    state = RunState(run_id, name, input_json, seed, None, None, None, status, None, None,
                     0.0, None, fn=fn, history=history, attempts=retried)
    cursor = h.Cursor(history, run_id, name)
    ctx = Context(engine, state, cursor)
    how, value = execute(lambda: fn(ctx, json.loads(input_json)), ctx, cursor)
    if how == "diverged":
        return _diverged(run_id, value)
    if how == "suspended":   # the code asks for something history does not hold yet
        if status in _ENDED_BY_CODE:
            requested = {"kind": value.reason, "name": value.name or value.reason}
            error = NonDeterminismError(
                f"Non-determinism in run {run_id!r} (workflow {name}): the run {status}, "
                f"and the code now asks for more at history position {cursor.position + 1}: "
                f"{describe(requested)}.", run_id=run_id, workflow=name,
                position=cursor.position + 1, recorded=None, requested=requested,
                reason="more_steps",
                hint="Put the new step behind `if ctx.patched(\"my-change\"):` so runs "
                     "recorded before it do not take it.")
            return _diverged(run_id, error)
        return (run_id, "ok", None, None, None, None), None
    ending = how if how != "raised" else f"failed ({type(value).__name__}: {value})"
    if status in _ENDED_BY_CODE and ending != status:
        error = NonDeterminismError(
            f"Non-determinism in run {run_id!r} (workflow {name}): the run {status}, and "
            f"replaying its whole history the code now ends another way: {ending}.",
            run_id=run_id, workflow=name, position=len(history), recorded=None,
            requested=None, reason="different_ending",
            hint="The code after the last recorded step changed how the run ends; keep the "
                 "old ending for recorded runs behind ctx.patched.")
        return _diverged(run_id, error, status, ending)
    return (run_id, "ok", None, None, None, None), None


def _diverged(run_id, error: NonDeterminismError, recorded=None, requested=None):
    args = error.reason == "different_arguments"   # then the arguments are the news
    recorded = recorded or describe(error.recorded, getattr(error, "recorded_args", None), args)
    requested = requested or describe(error.requested, getattr(error, "requested_args", None),
                                      args)
    return (run_id, "diverged", error.position, recorded, requested, error.reason), error


# --- sources --------------------------------------------------------------------------------
def _is_export(path: Path) -> bool:
    with open(path, "rb") as f:
        head = f.read(4)
    return head == b"PAR1" or path.suffix.lower() in (".jsonl", ".parquet")


def _runs_of(name: str, source) -> tuple[str, list[tuple]]:
    """(a label for the source, [(run_id, status, input_json, seed, [Event], retried)]) of
    the runs recorded under workflow `name` (`retried`: see `_replay`)."""
    if isinstance(source, (str, Path)):
        path = Path(source)
        if not path.is_file():
            raise ReplayCheckError(
                f"replay_check: no such file {str(path)!r}. Give a DuckDB file written by "
                f"dl.Engine(path), or an export (.jsonl, .parquet) written by dl.export.",
                workflow=name, source=str(path))
        if not _is_export(path):
            return str(path), _runs_in_store(name, path)
        from .export import as_runs
        runs = as_runs(path)     # an exported experiment holds no history: refused there
        label = str(path)
    else:
        from .export import as_runs
        runs = as_runs(source)
        label = f"{len(runs)} run(s)"
    return label, [(run.run_id, run.status, h.compact(run.input), int(run.seed),
                    _events_of(run), _retried_of(run)) for run in runs if run.workflow == name]


def _events_of(run) -> list[h.Event]:
    """A `Run.history` frame back as the Events replay walks (values as JSON text)."""
    frame = run.history
    handles = frame["handle"] if "handle" in frame else [None] * len(frame)
    out = []
    for position, kind, name, ok, value, digest, handle in zip(
            frame["position"], frame["kind"], frame["name"], frame["ok"], frame["value"],
            frame["digest"], handles):
        out.append(h.Event(int(position), kind, name, None if pd.isna(digest) else digest,
                           bool(ok), None if value is None else h.compact(value), 0.0,
                           handle=None if handle is None or pd.isna(handle) else int(handle)))
    return out


def _retried_of(run) -> dict:
    """The failed attempts past the end of a `Run`'s history whose retry was scheduled."""
    frame, out = run.attempts, {}
    if frame.empty or "delay" not in frame:
        return out
    late = frame[(frame["position"] > len(run.history)) & frame["delay"].notna()]
    for position, activity in zip(late["position"], late["activity"]):
        out.setdefault(int(position), []).append((run.run_id, int(position), activity))
    return out


def _open(path: Path, name: str | None = None):
    """The store at `path`, opened read-only as the `durablelab` command opens it (sealed,
    its tables checked to be durablelab's, nothing created or upgraded). A file another
    engine holds, or one that is not a store of this version, is a `ReplayCheckError`
    that says so; a crafted store keeps its own error (`ForeignStoreError`)."""
    from .errors import ForeignStoreError, StoreFormatError, StoreLockedError
    from .store import Store
    try:
        return Store(str(path), read_only=True)
    except ForeignStoreError:
        raise
    except StoreLockedError as exc:
        raise ReplayCheckError(
            f"replay_check: cannot open {str(path)!r} read-only: {exc.message} Or export the "
            f"runs (durablelab export) and check the export.", workflow=name,
            source=str(path)) from None
    except StoreFormatError as exc:
        raise ReplayCheckError(f"replay_check: {exc.message}", workflow=name,
                               source=str(path)) from None


def _runs_in_store(name: str, path: Path) -> list[tuple]:
    """The runs of workflow `name` in a DuckDB store, read as an engine reads them
    (`Store.load`): a run whose rows do not read back is named, with its position."""
    store = _open(path, name)
    try:
        runs = [row for row in store.run_rows() if row.workflow == name]
        loaded = store.load("workflow = ?", [name], tables=("attempts",))
    finally:
        store.close()
    if loaded["damaged"]:
        run_id, position, what, table = loaded["damaged"][0]
        raise damaged_run(str(path), run_id, position, what, table=table)
    histories: dict[str, list] = {run.run_id: [] for run in runs}
    for row in loaded["events"]:   # (run_id, position, ...): the `events` view's columns
        history = histories[row[0]]
        if row[1] != len(history) + 1:
            raise history_gap(str(path), row[0], row[1], len(history) + 1)
        history.append(h.Event(*row[1:]))
    unfinished = {run.run_id for run in runs if run.status in ("running", "waiting",
                                                                  "diverged")}
    retried: dict[str, dict] = {}
    for row in loaded["attempts"]:   # failed attempts past the end of a history
        if row.run_id in unfinished and row.position > len(histories[row.run_id]):
            retried.setdefault(row.run_id, {}).setdefault(row.position, []).append(
                (row.run_id, row.position, row.activity))
    return [(run.run_id, run.status, run.input, run.seed, histories[run.run_id],
             retried.get(run.run_id, {})) for run in runs]


def _names_in(source, label: str) -> list[str]:
    """The workflow names a source does hold, for the error that it holds none of ours."""
    if isinstance(source, (str, Path)) and not _is_export(Path(source)):
        store = _open(Path(source))
        try:
            return sorted({row.workflow for row in store.run_rows()})
        finally:
            store.close()
    from .export import as_runs
    return sorted({run.workflow for run in as_runs(source)})


__all__ = ["replay_check", "ReplayReport", "version_of", "deployed", "describe"]
