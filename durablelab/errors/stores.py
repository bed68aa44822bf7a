"""The words of a file durablelab will not read, and of reading stores without writing.

A store, an export or a history may come from a stranger: what it is decides what is said
(a SQLite file, a folder, a DuckDB file cut short, a table that is a view), never what it
asks for. `Engine(path, read_only=True)` and the `durablelab` command look at a store without
changing a byte of it; their messages are one line each (the command prints them as they
are), name the file, and end with the fix. A run whose own rows do not read back is set
aside as damaged (`damaged_run`), named with its position, and the other runs go on.
"""

from __future__ import annotations

from .checks import bad_value
from .classes import (BadValue, CommandError, DamagedRunError, ForeignStoreError,
                      ReadOnlyEngineError, StoreFormatError, StoreOpenError)


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


def history_gap(path, run_id: str, position: int, expected: int) -> DamagedRunError:
    """A stored history whose positions do not run 1, 2, 3, ...: the table has no primary
    key (it would cost a sixth of a sync step), so a duplicate is caught here, on load."""
    what = "its history has a second event" if position < expected else \
        "its history has a gap before the event"
    return damaged_run(path, run_id, position, what, (
        f" (expected position {expected}: the file was edited by hand, or written by two "
        f"engines at once)"), expected=expected)


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
    ("with a different configuration than existing connections",
     "an engine in this process holds it open (close it first: engine.close())"),
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


def _sentence(text: str) -> str:
    return text[:1].upper() + text[1:] + ("" if text.endswith(".") else ".")
