"""Operating runs: what an operator watches across a whole store, not one run at a time.

`dl.diagnose` and `dl.compare` answer for the runs you point at. An operator asks other
questions, of every run of every workflow at once: how many runs started, completed and
failed per workflow; which errors make activities retry and fail, and how often; what
the model billed per run (broken answers included); how much replay costs per wake-up and
how large histories grow; and above all which runs are *waiting*, on what, since when, and
whether they are past their deadline. A run that waits for an approval nobody gives does
not fail: nothing alerts unless someone looks at how long it has waited. `ops` looks.

    board = dl.ops(engine)            # or a store path, an export, a list of runs
    board.workflows                   # a row per workflow
    board.overdue                     # waiting runs past their deadline
    board.oldest_waiting              # seconds: the age of the oldest waiting run

Times are seconds on the runs' clock (the engine's `VirtualClock` by default), and `now`
is the instant the board is read at: by default the engine's clock, or the latest instant
the source recorded. Reading never changes the source: a store path is opened read-only.

An engine's runs (a store path's, through a read-only engine) are measured from the engine's
state of each, as a sweep measures its runs (`runner.state_rows`, `metrics.measure`), not
from a `Run` per run: building four DataFrames a run cost about a hundred times more
(`python bench/ops.py` prints both, over 1,000 runs in memory and in a file). Runs given
as `Run`s (an export, an imported history) are measured from their frames, as `dl.compare`
measures them; both give the same board (tests/test_ops.py).
"""

from __future__ import annotations

import math
import warnings
from collections import Counter
from pathlib import Path
from typing import NamedTuple

import pandas as pd

from .compare import metrics
from .errors import bad_type, bad_value, no_such_source, ops_now_error
from .metrics import by_class, json_bytes, latest_at, measure, text_bytes
from .records import waiting_columns
from .run import Run

#: the statuses a run can have (DESIGN section 6), in the order the board shows them.
STATUSES = ("running", "waiting", "completed", "failed", "continued", "cancelled", "diverged")
WAITING_COLUMNS = ["run_id", "workflow", "on", "position", "since", "deadline", "age",
                   "overdue", "overdue_by"]


def ops(source, now=None) -> "Ops":
    """The operator's board over `source`: a row per workflow, the waiting runs, the
    overdue ones, the age of the oldest waiting run.

    Args:
        source: an `Engine` (its runs as it sees them), the path of a DuckDB store (opened
            read-only, never written) or of an export (`dl.export`), a `Run`, or a list of
            runs.
        now: the instant to read ages and deadlines at, in seconds on the runs' clock.
            None: the engine's clock (for a store, the clock it was closed at), or for runs
            the latest instant they recorded.

    Returns an `Ops`. Runs a store sets aside as unreadable are counted (``damaged``) and
    listed in `Ops.damaged`, never dropped silently.

    Raises `BadValue` when `now` is before the latest instant the source recorded (the
    runs' states are as of then, so an earlier `now` would give negative ages), `BadType`
    for a `now` or a source of the wrong type, `StoreOpenError` for a store that cannot be
    read, `ExportFormatError` for a file that is not an export of runs.
    """
    runs, damaged, clock_now, label = _read(source)
    return Ops(runs, damaged, _checked_now(now, runs, clock_now, label), label)


class Ops:
    """A board of the runs of a source at one instant (`now`). Build it with `dl.ops`.

    `workflows` has a row per workflow (its `module:qualname`, or a Temporal workflow type):

    - ``runs`` and one column per status (``running``, ``waiting``, ``completed``,
      ``failed``, ``continued``, ``cancelled``, ``diverged``), ``damaged`` (set aside as
      unreadable), ``overdue`` (waiting past their deadline at `now`), ``oldest_waiting``
      (seconds; 0 when none waits).
    - ``attempts``; ``retry_rate``: retries per attempt; ``failure_rate``: activities that
      failed for good per activity; ``retry_rate_<ErrorClass>`` and
      ``failure_rate_<ErrorClass>``: the same, for each error class seen (``Transient``,
      ``RateLimited``, ``ModelOutputError``, ``NonRetryable``, a Temporal failure type).
    - ``model_calls_per_run``, ``tokens_per_run``, ``cost_per_run`` and their totals
      ``model_calls``, ``tokens``, ``cost``: what the model billed, broken answers included
      (as `dl.compare` counts).
    - ``replayed_per_wakeup``: events handed back from history per wake-up, the price of
      replay; ``history_events_mean``/``_max`` and ``history_bytes_mean``/``_max``: how
      large histories grow (Temporal warns at 10,240 events or 10 MB).
    """

    def __init__(self, runs: list["Measured"], damaged: list[tuple], now: float, label: str):
        self.now = float(now)
        self.source = label
        #: a row per run: its workflow, status, what it waits on, and its `dl.compare` metrics.
        self.frame = pd.DataFrame([run.row for run in runs], columns=_RUN_COLUMNS)
        #: runs the store set aside as unreadable: run_id, workflow, status, problem.
        self.damaged = pd.DataFrame(damaged, columns=["run_id", "workflow", "status",
                                                      "problem"])
        waiting = [_waiting_row(run, self.now) for run in runs if run.waiting is not None]
        #: each waiting run: on what, since when, its deadline (NaN: none), its age, and
        #: whether (and by how much) `now` is past the deadline; oldest first.
        self.waiting = (pd.DataFrame(waiting, columns=WAITING_COLUMNS)
                        .astype({"since": float, "deadline": float, "age": float,
                                 "overdue": bool, "overdue_by": float})
                        .sort_values(["age", "run_id"], ascending=[False, True], kind="stable")
                        .reset_index(drop=True))
        self.workflows = _workflows(self.frame, self.damaged, self.waiting)

    @property
    def overdue(self) -> pd.DataFrame:
        """The waiting runs past their deadline at `now` (the ones to alert on), most
        overdue first. A wait without a deadline is never overdue: that is the risk."""
        late = self.waiting[self.waiting["overdue"]]
        return late.sort_values(["overdue_by", "run_id"], ascending=[False, True],
                                kind="stable").reset_index(drop=True)

    @property
    def oldest_waiting(self) -> float:
        """Seconds the oldest waiting run has waited at `now`; 0.0 when no run waits."""
        return float(self.waiting["age"].max()) if len(self.waiting) else 0.0

    def __repr__(self) -> str:
        return (f"Ops({self.source}: {len(self.frame)} run(s) of {len(self.workflows)} "
                f"workflow(s) at t={self.now:g}; {len(self.waiting)} waiting, "
                f"{len(self.overdue)} overdue, oldest waiting {self.oldest_waiting:g}s"
                f"{f'; {len(self.damaged)} damaged' if len(self.damaged) else ''})")

    def _repr_html_(self) -> str:
        from .viz.ops_card import ops_html
        return ops_html(self)


# --- reading a source -------------------------------------------------------------------------


class Measured(NamedTuple):
    """What the board needs of one run, however it was read: its row of `_RUN_COLUMNS`,
    what it waits on (None: it does not wait), its start, the latest instant it recorded
    (`Run.latest_at`) and its end (None: it has not ended)."""

    run_id: str
    row: tuple
    waiting: dict | None
    started_at: float
    latest_at: float
    ended_at: float | None

    @property
    def latest(self) -> float | None:
        """The latest instant the run is known at: its end, or how far it got; None for a
        run that has not begun (``start(start_at=...)`` later than now): its start is a
        plan, not something recorded, and must not move the board's `now`."""
        if self.ended_at is None and not any(self.row[i] for i in _BEGAN):
            return None
        return max(self.latest_at, float(self.ended_at) if self.ended_at is not None else 0.0)


def _read(source) -> tuple[list[Measured], list[tuple], float | None, str]:
    """(readable runs measured, damaged runs, the clock's now or None, a label for
    messages)."""
    if isinstance(source, (str, Path)):
        from .export import as_runs, file_kind
        kind = file_kind(source)
        if kind == "missing":
            raise no_such_source("dl.ops(source)", source)
        if kind == "duckdb":
            return _read_store(source)
        return [_from_run(run) for run in as_runs(source)], [], None, str(source)
    if callable(getattr(source, "runs", None)) and callable(getattr(source, "working_state",
                                                                     None)):
        return _read_engine(source, f"engine on {getattr(source, 'path', None) or 'memory'}")
    if isinstance(source, Run):
        return [_from_run(source)], [], None, "1 run"
    if isinstance(source, (list, tuple)):
        from .export import as_runs
        return [_from_run(run) for run in as_runs(list(source))], [], None, \
            f"{len(source)} run(s)"
    raise bad_type("dl.ops(source)", "source",
                   f"source is {type(source).__name__}; give an Engine, the path of a DuckDB "
                   f"store or of an export, a Run or a list of runs")


def _read_engine(engine, label: str) -> tuple[list[Measured], list[tuple], float | None, str]:
    """Every run of `engine`, measured from the engine's state of it (`working_state`), as
    a sweep measures its runs; a read-only engine's, from its store read whole
    (`loading.read_all`), which is what that engine shows."""
    from .budget import discarded_usage
    from .loading import read_all
    runs, damaged = [], []
    if getattr(engine, "read_only", False):
        # A reader's runs are what its store holds: read them all at once, not a run's
        # history at a time (a query per table per run, on a file).
        states = read_all(engine.store, engine.path)
    else:
        states = [engine.working_state(run_id) for run_id in engine.runs()["run_id"]]
    burnt = engine.store.burnt_all()      # broken answers' usage, billed: one statement
    for state in states:
        if state.damage is not None:   # set aside by the store: counted, not dropped
            damaged.append((state.run_id, state.workflow, state.status, state.damage.message))
        else:
            runs.append(_from_state(state, discarded_usage(burnt.get(state.run_id))))
    clock = getattr(engine, "clock", None)
    return runs, damaged, clock.now() if clock is not None else None, label


def _read_store(path) -> tuple[list[Measured], list[tuple], float | None, str]:
    """A store's runs through a read-only engine: DuckDB itself refuses any write."""
    import duckdb

    from .engine import Engine
    from .errors import store_open_error
    try:
        with warnings.catch_warnings():
            # A store may name workflows this process does not know: ops runs no workflow.
            warnings.simplefilter("ignore")
            engine = Engine(path, read_only=True)
        try:
            return _read_engine(engine, str(path))
        finally:
            engine.close()
    except duckdb.Error as exc:   # opened, then a read hit damage (a file cut short, say)
        with open(path, "rb") as f:
            head = f.read(64)
        raise store_open_error(str(path), str(exc).splitlines()[0], head) from None


def _checked_now(now, runs: list[Measured], clock_now, label: str) -> float:
    began = [r for r in runs if r.latest is not None]
    first = min((r.started_at for r in began), default=None)
    latest = max((r.latest for r in began), default=None)
    if now is None:
        candidates = [t for t in (clock_now, latest) if t is not None]
        return max(candidates) if candidates else min((r.started_at for r in runs),
                                                      default=0.0)
    if isinstance(now, bool) or not isinstance(now, (int, float)):
        raise bad_type("dl.ops(now=...)", "now", f"now={now!r} is {type(now).__name__}; give "
                       f"seconds on the runs' clock (a float), or None")
    if not math.isfinite(now):
        raise bad_value("dl.ops(now=...)", "now", f"now={now!r} is not a finite number of "
                        f"seconds; give an instant on the runs' clock, or None")
    if latest is not None and now < latest:
        first_run = min(began, key=lambda r: r.started_at)
        latest_run = max(began, key=lambda r: r.latest)
        raise ops_now_error(now, label, first, first_run.run_id, latest, latest_run.run_id)
    return float(now)


# --- the frames -------------------------------------------------------------------------------

_RUN_COLUMNS = ["run_id", "workflow", "status", "waiting_on", "waiting_until", "attempts",
                "activities", "retries", "failed_activities", "retried_by_class",
                "failed_by_class", "model_calls", "tokens", "cost", "wakeups",
                "events_replayed", "history_events", "history_bytes"]
#: a run has begun once it has attempts, wake-ups or events (these columns of its row).
_BEGAN = tuple(_RUN_COLUMNS.index(c) for c in ("attempts", "wakeups", "history_events"))


def _from_run(run: Run) -> Measured:
    """A `Run` (an export's, an imported history's) measured from its frames, as
    `dl.compare` measures it."""
    m = metrics(run)
    attempts, history = run.attempts, run.history
    retried, failed = by_class(
        zip(attempts["position"].tolist(), attempts["outcome"].tolist(),
            attempts["error_class"].tolist()),
        zip(history["kind"].tolist(), history["ok"].tolist(), history["outcome"].tolist(),
            history["error_class"].tolist()))
    row = _row(run.run_id, run.workflow, run.status, run.waiting, m, retried, failed,
               m["history_bytes"])
    return Measured(run.run_id, row, run.waiting, float(run.started_at),
                    float(run.latest_at), run.ended_at)


def _from_state(state, broken: dict | None) -> Measured:
    """A run measured from the engine's state of it (`Engine.working_state`), over the
    plain rows a sweep reads (`runner.state_rows`), to the numbers `_from_run` gives for
    the same run's `Run`; `broken`: what its broken model answers cost (`Run.discarded`).
    tests/test_ops.py holds the two equal."""
    from .experiments.runner import state_rows
    rows, usages, instants = state_rows(state)
    history = state.history
    m = measure(status=state.status, started_at=state.started_at, ended_at=state.ended_at,
                instants=instants, attempts=rows, usages=usages, discarded=broken,
                crashes=0,   # (the board does not show crashes)
                replayed=[w[3] for w in state.wakeups], history_events=len(history))
    retried, failed = by_class(((r[0], r[2], r[5]) for r in rows),
                               ((e.kind, e.ok, e.outcome, e.error_class) for e in history))
    size = sum(text_bytes(e.name) + json_bytes(e.value) for e in history)
    wait = state.waiting_detail()
    row = _row(state.run_id, state.workflow, state.status, wait, m, retried, failed, size)
    return Measured(state.run_id, row, wait, float(state.started_at),
                    latest_at(state.started_at, instants), state.ended_at)


def _row(run_id, workflow, status, wait, m: dict, retried: Counter, failed: Counter,
         history_bytes: int) -> tuple:
    on, until = waiting_columns(wait)
    return (run_id, workflow, status, on, until, m["attempts"], m["activities"],
            m["retries"], sum(failed.values()), dict(retried), dict(failed),
            m["model_calls"], m["tokens"], m["cost"], m["wakeups"], m["events_replayed"],
            m["history_events"], history_bytes)


def _waiting_row(run: Measured, now: float) -> tuple:
    wait = run.waiting
    on, until = waiting_columns(wait)
    since = wait.get("since")
    since = float(since) if isinstance(since, (int, float)) else run.latest_at
    deadline = float(until) if until is not None else math.nan
    late = until is not None and now > deadline
    return (run.run_id, run.row[1], on, wait.get("position"), since, deadline, now - since,
            late, now - deadline if late else 0.0)


def _workflows(frame: pd.DataFrame, damaged: pd.DataFrame, waiting: pd.DataFrame
               ) -> pd.DataFrame:
    """A row per workflow (see `Ops.workflows`)."""
    names = sorted(set(frame["workflow"]) | set(damaged["workflow"]))
    classes_retried = sorted({c for d in frame["retried_by_class"] for c in d})
    classes_failed = sorted({c for d in frame["failed_by_class"] for c in d})
    rows = []
    for name in names:
        mine = frame[frame["workflow"] == name]
        waits = waiting[waiting["workflow"] == name]
        statuses = Counter(mine["status"])
        attempts, activities = int(mine["attempts"].sum()), int(mine["activities"].sum())
        retried = sum((Counter(d) for d in mine["retried_by_class"]), Counter())
        failed = sum((Counter(d) for d in mine["failed_by_class"]), Counter())
        n, wakeups = len(mine), int(mine["wakeups"].sum())
        row = {"workflow": name, "runs": n + int((damaged["workflow"] == name).sum()),
               **{s: statuses.get(s, 0) for s in STATUSES},
               "damaged": int((damaged["workflow"] == name).sum()),
               "overdue": int(waits["overdue"].sum()),
               "oldest_waiting": float(waits["age"].max()) if len(waits) else 0.0,
               "attempts": attempts,
               "retry_rate": _rate(int(mine["retries"].sum()), attempts),
               "failure_rate": _rate(int(mine["failed_activities"].sum()), activities),
               **{f"retry_rate_{c}": _rate(retried.get(c, 0), attempts) for c in classes_retried},
               **{f"failure_rate_{c}": _rate(failed.get(c, 0), activities)
                  for c in classes_failed},
               "model_calls_per_run": _mean(mine["model_calls"]),
               "tokens_per_run": _mean(mine["tokens"]),
               "cost_per_run": _mean(mine["cost"]),
               "model_calls": int(mine["model_calls"].sum()),
               "tokens": int(mine["tokens"].sum()),
               "cost": float(mine["cost"].sum()),
               "replayed_per_wakeup": _rate(int(mine["events_replayed"].sum()), wakeups),
               "history_events_mean": _mean(mine["history_events"]),
               "history_events_max": int(mine["history_events"].max()) if n else 0,
               "history_bytes_mean": _mean(mine["history_bytes"]),
               "history_bytes_max": int(mine["history_bytes"].max()) if n else 0}
        rows.append(row)
    columns = (["workflow", "runs", *STATUSES, "damaged", "overdue", "oldest_waiting",
                "attempts", "retry_rate", "failure_rate"]
               + [f"retry_rate_{c}" for c in classes_retried]
               + [f"failure_rate_{c}" for c in classes_failed]
               + ["model_calls_per_run", "tokens_per_run", "cost_per_run", "model_calls",
                  "tokens", "cost", "replayed_per_wakeup", "history_events_mean",
                  "history_events_max", "history_bytes_mean", "history_bytes_max"])
    return pd.DataFrame(rows, columns=columns).set_index("workflow")


def _rate(part: int, whole: int) -> float:
    return part / whole if whole else 0.0


def _mean(column: pd.Series) -> float:
    return float(column.mean()) if len(column) else 0.0


__all__ = ["ops", "Ops", "STATUSES", "WAITING_COLUMNS"]
