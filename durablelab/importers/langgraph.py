"""Read a LangGraph thread from a SqliteSaver file into a `durablelab.Run`.

LangGraph's checkpointer is its durability layer. `SqliteSaver` keeps two tables:
``checkpoints`` (one row per super-step: the state of every channel, a timestamp, the parent
checkpoint) and ``writes`` (what each task wrote, keyed to the checkpoint it started from;
its ``task_path`` names the node). `from_langgraph` lays them out as a `Run`: each task
LangGraph recorded is one ``activity`` event, in the order of the thread's checkpoints.

What LangGraph does not keep cannot be shown, and `run.notes` says so rather than invent
it: failed attempts its `RetryPolicy` retried and the waits between them, crashes and the
work they made run twice, and in the functional API (``@entrypoint`` / ``@task``) the
names and times of tasks (a task's result is a ``__return__`` write in call order).

The file is opened read-only and its values are decoded as data only. LangGraph's serializer
can fall back to pickle, and its msgpack extensions name classes it would import and call
when loading; reading a stranger's file must never run code, so a pickled value is refused
and a typed value is shown as ``{"__type__": "module.Class", "value": ...}`` without
importing anything.
"""

from __future__ import annotations

import base64
import json
import sqlite3
from datetime import datetime
from pathlib import Path
from typing import Any

import pandas as pd

from ..activities import outcome_of
from ..errors import LangGraphReadError, WorkflowError, bad_type
from ..retry import classify
from ..run import ATTEMPT_COLUMNS, CRASH_COLUMNS, HISTORY_COLUMNS, WAKEUP_COLUMNS, Run

#: channels that start a task in the next super-step (see `_status`).
TRIGGERS = ("branch:to:", "join:", "__start__", "__pregel_tasks")
#: channels of LangGraph's own bookkeeping, not part of a node's output.
CONTROL = ("branch:to:", "join:", "__pregel_", "__interrupt__", "__resume__", "__scheduled__")

NOTES = (
    "LangGraph (SqliteSaver): wall-clock seconds since the first checkpoint; an event's "
    "time is when its super-step was saved.",
    "LangGraph records no attempts and no retry waits: a retried node shows its last "
    "attempt only.",
    "LangGraph records no crashes: an interrupted node runs again, whole, on recovery; "
    "repeated effects show only in the world it acted on.",
)
FUNCTIONAL_NOTE = (
    "Functional API: each @task result is kept in call order without its name or time: "
    "tasks are named 'task 1', 'task 2', ... and share their super-step's time.")
TYPED_NOTE = (
    "Typed values (pydantic models, LangChain messages, datetimes) are shown as "
    "{'__type__': 'module.Class', 'value': ...}: durablelab never imports or builds them.")


def _fail(path, thread_id, what: str, message: str) -> LangGraphReadError:
    return LangGraphReadError(f"dl.from_langgraph({str(path)!r}, {thread_id!r}): {message}",
                              path=str(path), thread_id=thread_id, what=what)


class _Decoder:
    """Turns LangGraph's stored values into JSON values, never running code."""

    def __init__(self, path, thread_id):
        self.path, self.thread_id, self.typed = path, thread_id, False
        try:
            import ormsgpack
        except ImportError:   # pragma: no cover - ormsgpack comes with langgraph-checkpoint
            raise _fail(path, thread_id, "driver", "needs ormsgpack to read LangGraph's "
                        "msgpack values: pip install 'durablelab[langgraph]'") from None
        self._msgpack = ormsgpack

    def _ext(self, code: int, data: bytes) -> Any:
        inner = self._unpack(data)
        if code == 7:                       # a delta snapshot: the value itself
            return inner
        self.typed = True
        if code == 6:                       # a numpy array: its metadata, not its buffer
            return {"__type__": "numpy.ndarray", "value": None}
        if isinstance(inner, (list, tuple)) and len(inner) >= 3:
            return {"__type__": f"{inner[0]}.{inner[1]}", "value": inner[2]}
        return {"__type__": f"msgpack extension {code}", "value": inner}

    def _unpack(self, data: bytes) -> Any:
        m = self._msgpack
        return m.unpackb(data, ext_hook=self._ext, option=m.OPT_NON_STR_KEYS)

    def __call__(self, kind: str | None, data, where: str) -> Any:
        """The value of one stored (type, bytes) pair, as JSON."""
        if kind == "pickle":
            raise _fail(self.path, self.thread_id, "pickle",
                        f"{where} was stored with pickle (LangGraph's serializer falls back to "
                        f"it, with pickle_fallback=True, for values msgpack cannot hold). "
                        f"durablelab reads JSON values only, since unpickling a file runs its "
                        f"code. Keep the graph's state to JSON-like values (or pydantic "
                        f"models), and read the file with LangGraph itself only if you trust "
                        f"who wrote it.")
        if kind in (None, "null") or data is None:
            return None
        try:
            if kind == "msgpack":
                return _jsonable(self._unpack(data))
            if kind == "json":
                return json.loads(data)       # no object hook: LangChain's constructors stay
            if kind in ("bytes", "bytearray"):    # dicts, never called
                return {"__type__": kind, "value": base64.b64encode(bytes(data)).decode()}
        except (ValueError, TypeError, RecursionError) as exc:   # Recursion: nested deep
            raise _fail(self.path, self.thread_id, "value",
                        f"{where} is not valid {kind}: {exc}") from None
        raise _fail(self.path, self.thread_id, "serializer",
                    f"{where} was stored with serializer type {kind!r}, which durablelab "
                    f"does not read (it reads msgpack, json, null and bytes; encrypted "
                    f"values need the key, which only LangGraph's EncryptedSerializer has).")


def _jsonable(value):
    """msgpack's tuples, bytes and non-string keys as JSON holds them."""
    if isinstance(value, dict):
        return {k if isinstance(k, str) else json.dumps(_jsonable(k)): _jsonable(v)
                for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, (bytes, bytearray)):
        return {"__type__": "bytes", "value": base64.b64encode(bytes(value)).decode()}
    return value


def _open(path, thread_id) -> sqlite3.Connection:
    file = Path(path)
    if not file.is_file():
        raise _fail(path, thread_id, "path", "no such file. Give the path of the SQLite "
                    "file a SqliteSaver wrote (SqliteSaver(sqlite3.connect(path))).")
    # mode=ro: reading never changes the file. SqliteSaver keeps it in WAL mode, where even
    # a read-only reader creates -wal and -shm files beside it; with no writer's -wal there
    # (the writer closed), immutable=1 reads the file as it is and creates nothing. With
    # one, its changes are read through it, as any reader of a live database does.
    live = Path(f"{file}-wal").exists()
    con = sqlite3.connect(f"{file.resolve().as_uri()}?mode=ro{'' if live else '&immutable=1'}",
                          uri=True)
    try:
        tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master "
                                            "WHERE type = 'table'")}
    except sqlite3.DatabaseError as exc:
        con.close()
        raise _fail(path, thread_id, "file", f"not a SQLite database ({exc}). Give the "
                    f"file a LangGraph SqliteSaver wrote.") from None
    if not {"checkpoints", "writes"} <= tables:
        con.close()
        raise _fail(path, thread_id, "file", f"a SQLite database without LangGraph's "
                    f"'checkpoints' and 'writes' tables (it has: "
                    f"{', '.join(sorted(tables)) or 'no tables'}). Give the file a "
                    f"SqliteSaver wrote.")
    return con


def _rows(con, path, thread_id, ns, missing_ok=False) -> tuple[list, list]:
    """The thread's checkpoint and write rows; a table of another shape (a column missing,
    a name or id stored as a blob or a number) is refused here, naming what is wrong."""
    try:
        return _read_rows(con, path, thread_id, ns, missing_ok)
    except sqlite3.Error as exc:
        raise _fail(path, thread_id, "file", f"its 'checkpoints' and 'writes' tables are not "
                    f"the ones a SqliteSaver writes ({exc}). Give the file a SqliteSaver "
                    f"wrote.") from None


#: Columns a SqliteSaver writes as text (or null), by (table, index in the SELECT below).
TEXT_COLUMNS = {"checkpoints": {0: "checkpoint_id", 1: "parent_checkpoint_id", 2: "type"},
                "writes": {0: "checkpoint_id", 1: "task_id", 2: "task_path", 4: "channel",
                           5: "type"}}


def _text_columns(rows, table, path, thread_id) -> None:
    for row in rows:
        for index, column in TEXT_COLUMNS[table].items():
            if row[index] is not None and not isinstance(row[index], str):
                raise _fail(path, thread_id, "file", f"a row of {table!r} holds "
                            f"{type(row[index]).__name__} {str(row[index])[:40]!r} in column "
                            f"{column!r}, which a SqliteSaver writes as text. Give the file a "
                            f"SqliteSaver wrote.")


def _read_rows(con, path, thread_id, ns, missing_ok) -> tuple[list, list]:
    checkpoints = con.execute(
        "SELECT checkpoint_id, parent_checkpoint_id, type, checkpoint, metadata "
        "FROM checkpoints WHERE thread_id = ? AND checkpoint_ns = ? ORDER BY checkpoint_id",
        (thread_id, ns)).fetchall()
    if not checkpoints and missing_ok:
        return [], []
    if not checkpoints:
        threads = [r[0] for r in con.execute(
            "SELECT DISTINCT thread_id FROM checkpoints ORDER BY thread_id LIMIT 6")]
        there = ", ".join(map(repr, threads[:5])) + (", ..." if len(threads) > 5 else "")
        raise _fail(path, thread_id, "thread_id",
                    f"no checkpoints for thread {thread_id!r}"
                    + (f" in namespace {ns!r}" if ns else "")
                    + (f"; threads in the file: {there}" if threads else
                       "; the file holds no thread yet"))
    writes = con.execute(
        "SELECT checkpoint_id, task_id, task_path, idx, channel, type, value FROM writes "
        "WHERE thread_id = ? AND checkpoint_ns = ? ORDER BY rowid", (thread_id, ns)).fetchall()
    _text_columns(checkpoints, "checkpoints", path, thread_id)
    _text_columns(writes, "writes", path, thread_id)
    return checkpoints, writes


def _lineage(checkpoints) -> list:
    """The checkpoints the thread's latest state descends from, oldest first (a thread that
    was forked or replayed has others beside them)."""
    by_id = {row[0]: row for row in checkpoints}
    chain, row = [], checkpoints[-1]
    while row is not None and len(chain) <= len(by_id):
        chain.append(row)
        row = by_id.get(row[1])
    return chain[::-1]


def _epoch(ts) -> float | None:
    try:
        return datetime.fromisoformat(ts).timestamp()
    except (TypeError, ValueError):
        return None


def _task_name(path: str) -> tuple[str, bool, int | None]:
    """(node name, whether it is a pushed task (an @task call or a Send), its call index)
    from a write's ``task_path``: '~__pregel_pull, charge' or '~__pregel_push,
    ~__pregel_pull, workflow, 0000000001, 0000000001'."""
    parts = [p.strip() for p in (path or "").split(",")]
    if parts and parts[0] == "~__pregel_pull" and len(parts) >= 2:
        return parts[1], False, None
    if parts and parts[0] == "~__pregel_push":
        index = next((int(p) for p in parts[1:] if p.isdigit()), None)
        return (f"task {index + 1}" if index is not None else "task"), True, index
    return (parts[-1] if parts and parts[-1] else "task"), False, None


def from_langgraph(path, thread_id: str, checkpoint_ns: str = "") -> Run:
    """One LangGraph thread, read from a SqliteSaver file, as a `Run`.

    Use it to put a LangGraph agent's record beside durablelab's views: `run.history` has
    one ``activity`` event per task LangGraph recorded (a node of the graph API, an
    ``@task`` call of the functional API, named by call index since LangGraph keeps no
    name), `run.attempts` one row per event (its last attempt: LangGraph keeps no others),
    and `run.notes` what LangGraph does not record. The status is ``completed`` when the
    graph reached its end, ``waiting`` at an interrupt, ``failed`` when its last step
    raised, else ``running`` (interrupted: a crash, or still going).

    Args:
        path: the SQLite file (opened read-only: nothing is written to it or beside it,
            unless a writer still has it open, whose log is then read too).
        thread_id: the ``thread_id`` of the graph's config.
        checkpoint_ns: the namespace ("" for the top-level graph; a subgraph's otherwise).

    Raises `LangGraphReadError` (a ValueError) for a missing file, a file that is not a
    SqliteSaver's, an unknown thread, or a value stored with pickle.
    """
    return read(path, thread_id, checkpoint_ns)[0]


def read(path, thread_id: str, checkpoint_ns: str = "", missing_ok: bool = False,
         origin: float | None = None):
    """(the `Run`, the epoch seconds its times count from) of `from_langgraph`; with
    `missing_ok`, (None, None) for a thread the file does not hold. `origin`: the epoch
    seconds to count from (default: the first checkpoint's time)."""
    if not isinstance(path, (str, Path)):
        raise bad_type("dl.from_langgraph", "path", f"path={path!r} must be the path of a "
                                                   f"SqliteSaver file")
    if not isinstance(thread_id, str) or not isinstance(checkpoint_ns, str):
        raise bad_type("dl.from_langgraph", "thread_id", f"thread_id={thread_id!r} and "
                       f"checkpoint_ns={checkpoint_ns!r} must be strings, as in the graph's "
                       f"config {{'configurable': {{'thread_id': ...}}}}")
    con = _open(path, thread_id)
    try:
        checkpoints, writes = _rows(con, path, thread_id, checkpoint_ns, missing_ok)
    finally:
        con.close()
    if not checkpoints:
        return None, None
    decode = _Decoder(path, thread_id)
    chain = _lineage(checkpoints)
    states = [decode(kind, blob, f"checkpoint {cid}") for cid, _, kind, blob, _ in chain]
    states = [state if isinstance(state, dict) else {} for state in states]
    stamps = [_epoch(s.get("ts")) for s in states]
    if origin is None:
        origin = next((t for t in stamps if t is not None), 0.0)
    at = lambda t: None if t is None else round(t - origin, 6)   # noqa: E731

    by_checkpoint: dict[str, list] = {}
    for row in writes:
        by_checkpoint.setdefault(row[0], []).append(row)

    history, attempts = [], []
    workflow, result, functional, failed, interrupted = "graph", None, False, None, False
    for i, (row, state) in enumerate(zip(chain, states)):
        started = at(stamps[i])
        ended = at(stamps[i + 1]) if i + 1 < len(chain) else None
        last = i + 1 == len(chain)
        tasks: dict[str, list] = {}
        for w in by_checkpoint.get(row[0], ()):
            tasks.setdefault(w[1], []).append(w)
        # pushed tasks (@task calls) in call order; pulled nodes in the order they wrote
        order = sorted(tasks.values(), key=lambda ws: (_task_name(ws[0][2])[2] is None,
                                                       _task_name(ws[0][2])[2] or 0))
        for ws in order:
            name, pushed, _ = _task_name(ws[0][2])
            channels = {w[4]: decode(w[5], w[6], f"the write of task {name!r} to channel "
                                                 f"{w[4]!r} (checkpoint {row[0]})")
                        for w in ws}
            if name == "__start__" or (not pushed and "__end__" in channels):
                if "__end__" in channels:          # the entrypoint itself: the workflow
                    workflow, functional = name, True
                continue
            functional = functional or pushed
            if "__interrupt__" in channels:
                interrupted = interrupted or last
                continue
            error = channels.get("__error__")
            ok = "__error__" not in channels
            if not ok and last:
                failed = error
            value = channels.get("__return__") if "__return__" in channels else {
                k: v for k, v in channels.items() if not k.startswith(CONTROL)
                and k != "__error__"}
            position = len(history) + 1
            error_class, outcome = (None, "ok") if ok else _error_outcome(error)
            recorded = ended if ok else started
            history.append((position, "activity", name, ok, value if ok else error, None,
                            recorded, None, outcome, error_class, None, None, None))
            attempts.append((position, name, None, started, recorded, outcome, error_class,
                             None if ok else str(error), None, None))

    final = _channels(states[-1]) if states else {}
    pending = any(k.startswith(TRIGGERS) for k in final)
    if interrupted:
        status = "waiting"
    elif failed is not None:
        status = "failed"
    elif pending:
        status = "running"
    else:
        status = "completed"
        result = final.get("__end__") if "__end__" in final else {
            k: v for k, v in final.items() if not k.startswith(CONTROL)
            and not k.startswith("__")}
    first = _channels(states[0]) if states else {}
    notes = list(NOTES) + ([FUNCTIONAL_NOTE] if functional else []) + (
        [TYPED_NOTE] if decode.typed else [])
    run = Run(
        run_id=thread_id if not checkpoint_ns else f"{thread_id}/{checkpoint_ns}",
        workflow=workflow, status=status, input=first.get("__start__"), result=result,
        error=None if failed is None else WorkflowError(
            f"LangGraph recorded an error in thread {thread_id!r}'s last step: {failed}",
            run_id=thread_id, workflow=workflow, cause_class=_error_outcome(failed)[0],
            cause_message=str(failed)),
        seed=0, started_at=0.0,
        ended_at=at(stamps[-1]) if status in ("completed", "failed") else None,
        parent_run_id=None,
        history=pd.DataFrame(history, columns=HISTORY_COLUMNS).astype(
            {"attempt": "Int64", "handle": "Int64"}),
        attempts=pd.DataFrame(attempts, columns=ATTEMPT_COLUMNS).astype(
            {"attempt": "Int64", "max_attempts": "Int64"}),
        wakeups=pd.DataFrame([], columns=WAKEUP_COLUMNS),
        crashes=pd.DataFrame([], columns=CRASH_COLUMNS), source="langgraph",
        notes=tuple(notes))
    return run, origin


def _channels(state: dict) -> dict:
    """A checkpoint's channel values: an object, or (in a crafted file) nothing."""
    values = state.get("channel_values")
    return values if isinstance(values, dict) else {}


def _error_outcome(error) -> tuple[str, str]:
    """(error class, attempt outcome) of an error LangGraph stored as its repr text
    ("ValueError('boom')"). A Python built-in is rebuilt and put through `dl.classify`;
    any other class is never imported, and counts as `classify` counts an unknown class:
    transient."""
    import builtins
    text = str(error)
    name = text.partition("(")[0].strip() or "Error"
    cls = getattr(builtins, name, None)
    if isinstance(cls, type) and issubclass(cls, Exception):
        try:
            return name, outcome_of(classify(cls(text)))
        except Exception:    # a built-in that wants other arguments (UnicodeError's kin)
            pass
    return name, "transient"


__all__ = ["from_langgraph"]
