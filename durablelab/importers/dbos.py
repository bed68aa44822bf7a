"""Read a DBOS Transact run into a `durablelab.Run`, so the same views work on it.

DBOS keeps a workflow in a few tables of its system database: ``workflow_status`` (name,
status, times), ``workflow_input`` / ``workflow_output``, ``operation_outputs`` (one row per
step, sleep, recv, send or patch, with its output) and ``notifications`` (messages sent to
it). `from_dbos` turns those rows into the frames a `Run` has, without DBOS installed (only
SQLAlchemy, which DBOS brings). Runs the durablelab `DBOSRunner` started carry each
attempt's outcome and argument digest in their step outputs, so history and attempts are
complete; for runs of plain DBOS code, each step is one activity and `run.notes` lists what
DBOS does not record rather than inventing it.

Rows are read as JSON only: a row DBOS wrote with its default (pickle) serializer is
refused, because unpickling a stranger's database would let it run code.
"""

from __future__ import annotations

import json
from typing import Any

import pandas as pd

from ..activities import outcome_of
from ..errors import DBOSReadError, WorkflowError, error_from_json
from ..run import (ATTEMPT_COLUMNS, CRASH_COLUMNS, HISTORY_COLUMNS, WAKEUP_COLUMNS, Run)

RUNNER_WORKFLOW, ATTEMPT_STEP, VALUE_STEP = "durablelab.run", "durablelab.attempt", \
    "durablelab.value"
FAULT_STEP = "durablelab.fault"     # a Crash rule fired here; the process ended after it
JSON_FORMATS = (None, "portable_json")
STATUS = {"SUCCESS": "completed", "ERROR": "failed", "CANCELLED": "failed",
          "MAX_RECOVERY_ATTEMPTS_EXCEEDED": "failed", "PENDING": "running",
          "ENQUEUED": "running", "DELAYED": "waiting"}
NOT_RECORDED = (
    "DBOS does not record failed attempts of its own retried steps (@DBOS.step(retries_"
    "allowed=True)) nor their retry delays: each step shows its last attempt only.",
    "Work a crash interrupted leaves no trace in DBOS: a step that was running when its "
    "process died is simply run again by the recovering process.",
    "DBOS records no argument digests for plain steps, so a changed argument replays "
    "silently; durablelab's DBOSRunner records them.")


def _fail(url, workflow_id, what, message) -> DBOSReadError:
    return DBOSReadError(f"dl.from_dbos({url!r}, {workflow_id!r}): {message}",
                         url=url, workflow_id=workflow_id, what=what)


def _rows(url: str, workflow_id: str) -> tuple[dict, dict | None, dict | None, list, dict]:
    try:
        import sqlalchemy as sa
    except ImportError:  # pragma: no cover - SQLAlchemy comes with the dbos extra
        raise _fail(url, workflow_id, "driver", "needs SQLAlchemy: pip install "
                    "'durablelab[dbos]'") from None
    schema = "" if url.startswith("sqlite") else "dbos."
    engine = sa.create_engine(url)
    try:
        with engine.connect() as con:
            def query(sql: str) -> list[dict]:
                return [dict(r._mapping) for r in con.execute(
                    sa.text(sql.replace("{s}", schema)), {"id": workflow_id})]
            status = query("SELECT * FROM {s}workflow_status WHERE workflow_uuid = :id")
            inputs = query("SELECT * FROM {s}workflow_input WHERE workflow_uuid = :id")
            output = query("SELECT * FROM {s}workflow_output WHERE workflow_uuid = :id")
            steps = query("SELECT * FROM {s}operation_outputs WHERE workflow_uuid = :id "
                          "ORDER BY function_id")
            topics = {r["consumed_by_function_id"]: r["topic"] for r in query(
                "SELECT topic, consumed_by_function_id FROM {s}notifications "
                "WHERE destination_uuid = :id AND consumed_by_function_id IS NOT NULL")}
    except sa.exc.SQLAlchemyError as exc:
        raise _fail(url, workflow_id, "database",
                    f"cannot read DBOS's tables there ({str(exc).splitlines()[0]}). Give "
                    f"the system database URL DBOS was configured with.") from None
    finally:
        engine.dispose()
    if not status:
        raise _fail(url, workflow_id, "workflow_id", "no such workflow in workflow_status")
    return status[0], (inputs or [None])[0], (output or [None])[0], steps, topics


def _json(url, workflow_id, text, serialization, where) -> Any:
    if text is None:
        return None
    if serialization not in JSON_FORMATS:
        raise _fail(url, workflow_id, "serialization",
                    f"{where} was written with DBOS's {serialization!r} serializer (pickle); "
                    f"durablelab reads JSON only, since unpickling a database runs its code. "
                    f"Configure DBOS with serializer=DBOSPortableJSON.")
    try:
        return json.loads(text)
    except (ValueError, TypeError, RecursionError):   # a number or blob; nested thousands deep
        raise _fail(url, workflow_id, "row", f"{where} is not JSON: {str(text)[:60]!r}") from None


def dbos_steps(url: str, workflow_id: str) -> pd.DataFrame:
    """DBOS's own record of a workflow's operations (``operation_outputs``), one row per
    step, sleep, recv or patch: what DBOS itself keeps, before `from_dbos` reads it."""
    status, _, _, steps, _ = _rows(url, workflow_id)
    created = status["created_at"]
    return pd.DataFrame(
        [(s["function_id"], s["function_name"],
          (s["completed_at_epoch_ms"] - created) / 1000.0,
          _json(url, workflow_id, s["output"], s.get("serialization"),
                f"step {s['function_id']}")) for s in steps],
        columns=["function_id", "function_name", "completed_at", "output"])


def from_dbos(url: str, workflow_id: str) -> Run:
    """One DBOS workflow as a `Run`: history from its step outputs, attempts from the
    runner's attempt steps (or one per plain step), times in seconds since its first step.

    `url`: the DBOS system database, ``"sqlite:///file.sqlite"`` or a PostgreSQL URL.
    Raises `DBOSReadError` for a missing workflow, a database that is not DBOS's, or a row
    stored with pickle.
    """
    status, inputs, output, steps, topics = _rows(url, workflow_id)
    reading = {"row": "the workflow's status, input or first step row"}   # for the error
    try:
        return _run(url, workflow_id, status, inputs, output, steps, topics, reading)
    except DBOSReadError:   # a ValueError too: already says what and where
        raise
    except _MISFITS as exc:
        raise _fail(url, workflow_id, "row", f"{reading['row']} holds a value of a type or "
                    f"shape DBOS does not write ({type(exc).__name__}: {str(exc)[:120]}); "
                    f"the database was damaged or edited") from None


#: What a crafted row's values raise in the mapping below (a string where a time was, an
#: object without the keys the runner writes): the net that turns them into a DBOSReadError.
_MISFITS = (TypeError, KeyError, AttributeError, ValueError, IndexError, OverflowError,
            RecursionError)


def _run(url, workflow_id, status, inputs, output, steps, topics, reading) -> Run:
    fmt = status.get("serialization")
    # The clock starts at the first step: DBOS stamps created_at to the second on SQLite.
    first = steps[0]["started_at_epoch_ms"] if steps else None
    origin = (first if first is not None else status["created_at"]) / 1000.0
    t = lambda ms: None if ms is None else ms / 1000.0 - origin  # noqa: E731
    args = _json(url, workflow_id, inputs and inputs["inputs"], fmt, "the workflow input")
    positional = (args or {}).get("positionalArgs", [])
    runner = status["name"] == RUNNER_WORKFLOW
    runner = runner and len(positional) in (2, 3)
    workflow, run_input = (positional[0], positional[1]) if runner \
        else (status["name"], positional)
    options = positional[2] if runner and len(positional) == 3 else None
    seed = options.get("seed", 0) if isinstance(options, dict) else 0

    history, attempts, crashes = [], [], []
    position = 0

    def event(kind, name, ok, value, at, attempt=None, outcome=None, error_class=None,
              digest=None):
        nonlocal position
        position += 1
        history.append((position, kind, name, ok, value, digest, at, attempt, outcome,
                        error_class, None, None, None))   # no call site, arguments or
        # handle kept (the runner makes one step at a time)

    pending: list[dict] = []   # attempts of the activity being read, until its last
    previous = None
    for step in steps:
        reading["row"] = f"step {str(step.get('function_id'))[:20]} of operation_outputs"
        name, at = step["function_name"], t(step["completed_at_epoch_ms"])
        value = _json(url, workflow_id, step["output"], step.get("serialization"),
                      f"step {step['function_id']} ({name})")
        error = _json(url, workflow_id, step["error"], step.get("serialization"),
                      f"the error of step {step['function_id']} ({name})")
        if name == ATTEMPT_STEP and isinstance(value, dict):
            if pending and value.get("delay_before") is not None:
                # the backoff the workflow chose after the previous, failed attempt
                attempts[-1] = (*attempts[-1][:8], value["delay_before"], None)
            pending.append(value)
            err = None if value["ok"] else value["error"]
            attempts.append((value["position"], value["activity"], value["attempt"],
                             value["started_at"] - origin, value["ended_at"] - origin,
                             "ok" if value["ok"] else outcome_of(error_from_json(err)),
                             None if value["ok"] else err["class"],
                             None if value["ok"] else err["message"], None, None))
            if value["ok"] or not _retried_next(steps, step):
                event("activity", value["activity"], value["ok"],
                      value.get("value") if value["ok"] else err, at, value["attempt"],
                      attempts[-1][5], attempts[-1][6], value["digest"])
                pending = []
        elif name == "DBOS.sleep" and (pending or previous == "DBOS.recv"):
            pass   # a backoff between attempts, or the deadline DBOS.recv keeps for itself
        elif name == VALUE_STEP:
            event(value["kind"], value["kind"], True, value["value"], at)
        elif name == FAULT_STEP and isinstance(value, dict):
            # the runner's Crash rule ended the process here (os._exit(137))
            crashes.append((value["at"] - origin, workflow_id, value["position"],
                            value["point"], f"Crash rule {value['rule']} "
                            f"({value['activity']!r} at {value['point']}): the process "
                            f"exited with status 137"))
            if value["point"] == "after_effect":   # the attempt in flight died with it
                attempts.append((value["position"], value["activity"], value["attempt"],
                                 value["at"] - origin, value["at"] - origin, "crashed", None,
                                 "the process running this attempt died", None, None))
        elif name == "DBOS.sleep":
            event("sleep", "sleep", True, value, t(step["started_at_epoch_ms"]))
            event("timer_fired", "sleep", True, None, at)
        elif name == "DBOS.recv":
            topic = topics.get(step["function_id"], "")   # DBOS keeps no topic for a timeout
            event("wait_signal", topic, True, None, t(step["started_at_epoch_ms"]))
            event("signal_received" if value is not None else "signal_timeout", topic, True,
                  value, at)
        elif name.startswith("DBOS.patch-"):
            event("patched", name[len("DBOS.patch-"):], True, True, at)
        elif not name.startswith("DBOS."):
            # a plain DBOS step: one activity, its last attempt only
            event("activity", name, error is None, value if error is None else error, at, 1,
                  "ok" if error is None else "transient",
                  None if error is None else (error or {}).get("name"))
            attempts.append((position, name, None, t(step["started_at_epoch_ms"]), at,
                             "ok" if error is None else "transient",
                             None if error is None else (error or {}).get("name"),
                             None if error is None else (error or {}).get("message"),
                             None, None))
        else:
            event(name.removeprefix("DBOS.").lower(), name, error is None, value, at)
        previous = name

    reading["row"] = "the workflow_status or workflow_output row"
    result = error = None
    run_status = STATUS.get(status["status"], "running")
    if output is not None:
        result = _json(url, workflow_id, output["output"], fmt, "the workflow output")
        failure = _json(url, workflow_id, output["error"], fmt, "the workflow error")
        if failure is not None:
            data = failure.get("data")
            error = error_from_json(data) if isinstance(data, dict) and "class" in data else \
                WorkflowError(f"{failure.get('name')}: {failure.get('message')}",
                              cause_class=failure.get("name"),
                              cause_message=failure.get("message"))
    notes = ["Recorded by DBOS Transact: times are wall-clock seconds since the run's first "
             "step; DBOS records no wake-ups or replays, so those are not shown."]
    if not runner:
        notes += NOT_RECORDED
    # DBOS stamps the status row to the second on SQLite; its steps to the millisecond.
    ended = max([t(status["updated_at"]), t(status.get("completed_at")), *(
        t(s["completed_at_epoch_ms"]) for s in steps)], key=lambda x: x or 0.0) \
        if run_status in ("completed", "failed") else None
    return Run(
        run_id=workflow_id, workflow=workflow, status=run_status, input=run_input,
        result=result, error=error, seed=seed, started_at=0.0, ended_at=ended,
        parent_run_id=status.get("forked_from") or status.get("parent_workflow_id"),
        history=pd.DataFrame(history, columns=HISTORY_COLUMNS).astype({"attempt": "Int64"}),
        attempts=pd.DataFrame(attempts, columns=ATTEMPT_COLUMNS).astype(
            {"attempt": "Int64", "max_attempts": "Int64"}),
        wakeups=pd.DataFrame([], columns=WAKEUP_COLUMNS),
        crashes=pd.DataFrame(crashes, columns=CRASH_COLUMNS), source="dbos", notes=tuple(notes))


def _retried_next(steps: list[dict], step: dict) -> bool:
    """Whether another attempt of the same activity follows this failed one."""
    later = [s for s in steps if s["function_id"] > step["function_id"]
             and s["function_name"] not in ("DBOS.sleep", FAULT_STEP)]
    if not later or later[0]["function_name"] != ATTEMPT_STEP:
        return False
    try:
        this = json.loads(step["output"])
        nxt = json.loads(later[0]["output"])
    except (TypeError, ValueError):
        return False
    return nxt.get("position") == this.get("position")
