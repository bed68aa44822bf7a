"""Export runs to a file and load them back: the way runs leave the lab.

An export is how a run is shared, attached to a bug report, compared with runs made under
another policy, or replayed against new code (`dl.replay_check`). So the file must hold
everything the views need, read back *exactly* (the same frames, dtypes and values), and be
safe to open when a stranger sent it: it holds JSON only, never pickle; loading never
imports, evaluates or unpickles anything, and errors are rebuilt by
`durablelab.errors.error_from_json`, which only looks up durablelab's own classes. A
crafted or damaged file fails with an `ExportFormatError` naming the file, the line (or
row) and what is wrong.

Format ``durablelab-runs``, version 1
-------------------------------------
A file is a sequence of *records*. Each has a type (``record``), the run it belongs to
(``run_id``, null for the header) and a JSON object, ``data``:

``header`` (the first record, once)
    ``format``: ``"durablelab-runs"``; ``version``: 1 (a reader refuses other versions
    rather than guess); ``created_by``: e.g. ``"durablelab 0.1.0"``; ``runs``: how many
    run records follow, so a file cut short at a record boundary is still detected.

``run`` (once per run, before that run's rows)
    ``run_id``, ``workflow`` ('module:qualname'), ``status``, ``input`` and ``result``
    (JSON values), ``error`` (null, or the error's ``to_json()``: ``{"class", "message",
    "fields"}``), ``seed``, ``started_at`` and ``ended_at`` (float seconds on the engine's
    clock; ``ended_at`` null while unfinished), ``parent_run_id``, ``source``
    ("durablelab", "temporal"), ``notes`` (a list of caveats), and ``frames``: for each of
    ``history``, ``attempts``, ``wakeups``, ``crashes`` an object ``{"columns": [...],
    "dtypes": [...], "rows": n}``: the column order, the pandas dtypes (used to restore
    nullable integer columns such as ``attempt``; strings and objects are re-inferred, so
    a file written under pandas 3 loads under pandas 2) and the row count.

``event``, ``attempt``, ``wakeup``, ``crash`` (one per row of ``Run.history``,
``Run.attempts``, ``Run.wakeups``, ``Run.crashes``, in frame order)
    ``data`` maps every column of that frame to its value; a missing value is null. The
    columns are those documented in `durablelab.run` (``position, kind, name, ok, value,
    digest, recorded_at, attempt, outcome, error_class, call_site, args`` for an event,
    and so on; ``args`` is absent from files written before durablelab kept arguments).
    An event's ``value`` is the decoded JSON value itself, not JSON text. A crash row's
    own ``run_id`` column is the run whose fault killed the worker, which can be another
    run: that is why a row's data is nested and never merged with the record's ``run_id``.

A reader is strict, because a lenient one would hand views a run they cannot show: every
field above is required (``created_by`` aside), an unknown field or record type is an error
(a new field means a new version), the documented columns must have their JSON types
(``position`` an integer, ``kind`` a string, ...), and the counts in the header and in
``frames`` must match what the file holds. `export` runs the same checks on what it is
about to write, so whatever it writes loads back.

Two containers hold the same records:

- **JSON Lines** (``.jsonl``): one record per line, ``{"record", "run_id", "data"}``,
  UTF-8, strict JSON (no NaN). Readable with ``head``, ``jq``, ``pandas.read_json(lines=
  True)`` or DuckDB's ``read_json``, and diffable in a pull request.
- **Parquet** (``.parquet``, written by DuckDB's ``COPY ... (FORMAT parquet)``): one row per
  record with columns ``format_version`` (INTEGER), ``record``, ``run_id`` (VARCHAR),
  ``seq`` (INTEGER: the row's order within its run and record type, from 0) and ``data``
  (JSON; VARCHAR if some value holds a lone surrogate, ``"\\ud800"``, which JSON text can
  escape but DuckDB's JSON type refuses). One long table rather than a wide one per frame, because one file then holds
  runs and all four frames, and because an event's ``value`` is a different JSON type on
  every row (a dict, a float, a string, null), which no typed Parquet column holds without
  losing the difference between 1 and 1.0 or null and a missing key: JSON text keeps it
  exactly. Every row carries its ``format_version`` and ``seq`` because tables get
  filtered and re-sorted elsewhere. It is still useful outside durablelab, e.g. in DuckDB::

      SELECT run_id, data->>'kind' AS kind, data->>'name' AS name,
             CAST(data->>'recorded_at' AS DOUBLE) AS recorded_at
      FROM 'runs.parquet' WHERE record = 'event' ORDER BY run_id, seq;

The same runs always give the same bytes (nothing like the wall clock goes in), so an
export can be committed as a fixture and diffed.
"""

from __future__ import annotations

import base64
import binascii
import json
import math
import os
import re
from pathlib import Path
from typing import Any, Iterator

import pandas as pd

from .budget import discarded_usage
from .errors import BadType, BadValue, ExportFormatError, SerializationError, error_from_json
from .history import compact
from .run import Run
from .version import __version__

FORMAT = "durablelab-runs"
VERSION = 1

#: record type of each frame's rows, in the order a run's rows are written.
FRAMES = {"history": "event", "attempts": "attempt", "wakeups": "wakeup", "crashes": "crash"}
RECORD_FRAMES = {record: name for name, record in FRAMES.items()}
RECORDS = ("header", "run", *FRAMES.values())
PARQUET_COLUMNS = ("format_version", "record", "run_id", "seq", "data")

# JSON type of each documented column ("?": may be null). Columns a source adds beyond these
# may hold any JSON; the ones marked required must be there, for the views rely on them.
COLUMN_TYPES = {
    "history": {"position": "int", "kind": "str", "name": "str", "ok": "bool", "value": "any",
                "digest": "str?", "recorded_at": "num", "attempt": "int?", "outcome": "str?",
                "error_class": "str?", "call_site": "str?", "args": "str?", "handle": "int?"},
    "attempts": {"position": "int", "activity": "str", "attempt": "int?", "started_at": "num",
                 "ended_at": "num", "outcome": "str", "error_class": "str?", "error": "str?",
                 "delay": "num?", "max_attempts": "int?"},
    "wakeups": {"woke_at": "num", "reason": "str", "replayed": "int", "recorded": "int"},
    "crashes": {"crashed_at": "num", "run_id": "str?", "position": "num?", "point": "str?",
                "cause": "str"},
}
REQUIRED_COLUMNS = {
    "history": ("position", "kind", "name", "ok", "value"),
    "attempts": ("position", "activity", "attempt", "started_at", "ended_at", "outcome",
                 "error_class", "error", "delay"),
    "wakeups": ("woke_at", "reason", "replayed", "recorded"),
    "crashes": ("crashed_at", "run_id", "position", "point", "cause"),
}
# Field -> JSON type of a run record ("json": any JSON value).
RUN_FIELDS = {"run_id": "str", "workflow": "str", "status": "str", "input": "json",
              "result": "json", "error": "object?", "seed": "int?", "started_at": "num",
              "ended_at": "num?", "parent_run_id": "str?", "source": "str", "notes": "list",
              "frames": "object", "waiting": "object?", "discarded": "object?"}
HEADER_FIELDS = {"format": "str", "version": "int", "created_by": "str", "runs": "int"}
# Dtypes a load restores after inference: nullable integers, numbers and pandas' "string".
# Everything else is re-inferred from the values, exactly as `Run.from_snapshot` builds the
# frames. Not "str" (pandas 2 would turn None into "None") nor "bool" (None into False).
RESTORED_DTYPES = {"Int8", "Int16", "Int32", "Int64", "UInt8", "UInt16", "UInt32", "UInt64",
                   "Float32", "Float64", "boolean", "string", "int64", "int32", "float64",
                   "float32"}

JSON_TYPES = {"int": int, "num": (int, float), "str": str, "bool": bool, "list": list,
              "object": dict}
KIND_WORDS = {"int": "an integer", "num": "a number", "str": "a string", "bool": "a boolean",
              "list": "a list", "object": "an object"}
PICKLE_HINT = (" (it looks like a base64-encoded Python pickle: an export holds JSON only, "
               "and durablelab never unpickles)")


#: What an exported experiment is, where runs were wanted, and what to do instead.
EXPERIMENT_NOT_RUNS = ("this is an exported experiment (a sweep's table: a row of metrics per "
                       "run, no run histories), not exported runs; dl.load(path) gives the "
                       "Experiment, and experiment.runs(workflow=..., world=...) makes its "
                       "runs again")


# --- exporting ---------------------------------------------------------------------------


def export(runs_or_experiment, path) -> Path:
    """Write runs to `path` as JSON Lines (``.jsonl``) or Parquet (``.parquet``).

    Use it to keep runs after the engine is gone, to compare runs made under different
    policies (`dl.compare(dl.load(path))`), or to hand a history to someone else: the file
    holds JSON only and is documented field by field in this module's docstring.

    Args:
        runs_or_experiment: a `Run`, a list of runs, or anything with ``runs()`` (a
            DataFrame with a ``run_id`` column) and ``run(run_id)``, such as an `Engine`:
            then all its runs. An `Experiment` (from `dl.sweep`) is written in its own
            format (`durablelab.experiments.io`: its spec, a row per run, the load), and
            `load` gives the `Experiment` back.
        path: the file to write; its extension picks the format. It is written to a
            temporary file first and renamed, so a crash never leaves half an export.

    Returns the path. Raises ValueError for another extension, a run id that appears twice
    or a frame without the documented columns, and `SerializationError` for a value that is
    not JSON (naming the run, the frame, the row and the column).
    """
    from .experiments import Experiment
    if isinstance(runs_or_experiment, Experiment):   # its own format: durablelab.experiments.io
        return runs_or_experiment.export(path)
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix not in (".jsonl", ".parquet"):
        raise BadValue(f"export(path={str(path)!r}): the extension picks the format; use "
                         f"'.jsonl' (JSON Lines) or '.parquet'")
    records = _records(as_runs(runs_or_experiment))
    texts = [_encode(record) for record in records]
    partial = path.with_name(path.name + ".partial")
    try:
        if suffix == ".jsonl":
            with open(partial, "w", encoding="utf-8", newline="\n") as out:
                for (kind, run_id, _, _), data in zip(records, texts):
                    out.write(f'{{"record":{compact(kind)},"run_id":'
                              f'{compact(run_id)},"data":{data}}}\n')
        else:
            _write_parquet(partial, records, texts)
        os.replace(partial, path)
    finally:
        partial.unlink(missing_ok=True)
    return path


def as_runs(source) -> list[Run]:
    """A list of `Run` from a run, a list of runs, a file written by `export`, or an
    engine-like object (``runs()`` and ``run(run_id)``)."""
    if isinstance(source, Run):
        return [source]
    if isinstance(source, (str, Path)):
        runs = load(source)
        if not isinstance(runs, list):   # an exported Experiment: a row per run, no history
            raise _error(source, None, "file", EXPERIMENT_NOT_RUNS)
        return runs
    if callable(getattr(source, "runs", None)) and callable(getattr(source, "run", None)):
        return [source.run(run_id) for run_id in source.runs()["run_id"]]
    runs = list(source)
    for i, run in enumerate(runs):
        if not isinstance(run, Run):
            raise BadType(f"item {i} is {type(run).__name__}, not a durablelab Run "
                            f"(engine.run(run_id) makes one; so does dl.load(path))")
    return runs


def _records(runs: list[Run]) -> list[tuple[str, str | None, int, dict]]:
    """(record, run_id, seq, data) for every record of the file, checked by the same
    reader `load` uses, so what is written can always be read back."""
    reader = _Reader("<export>", "record")
    header = {"format": FORMAT, "version": VERSION, "created_by": f"durablelab {__version__}",
              "runs": len(runs)}
    items = [("header", None, 0, header)]
    for run in runs:
        frames = {name: getattr(run, name) for name in FRAMES}
        extra = {} if run.waiting is None else {"waiting": run.waiting}
        if run.discarded is not None:
            extra["discarded"] = run.discarded
        items.append(("run", run.run_id, 0, {
            "run_id": run.run_id, "workflow": run.workflow, "status": run.status,
            "input": run.input, "result": run.result, "error": _error_json(run.error),
            "seed": run.seed, "started_at": _plain(run.started_at),
            "ended_at": _plain(run.ended_at), "parent_run_id": run.parent_run_id,
            "source": run.source, "notes": list(run.notes),
            "frames": {name: {"columns": [str(c) for c in frame.columns],
                              "dtypes": [str(t) for t in frame.dtypes], "rows": len(frame)}
                       for name, frame in frames.items()}, **extra}))
        for name, record in FRAMES.items():
            columns = [str(c) for c in frames[name].columns]
            # One conversion per frame: itertuples would cost several times more.
            rows = frames[name].to_numpy(dtype=object).tolist()
            for seq, row in enumerate(rows):
                items.append((record, run.run_id, seq, dict(zip(columns, map(_plain, row)))))
    for number, (record, run_id, _, data) in enumerate(items, 1):
        try:
            reader.feed(number, {"record": record, "run_id": run_id, "data": data})
        except ExportFormatError as exc:
            raise BadValue(f"cannot export run {run_id!r}: {exc.problem}") from None
    return items


def _error_json(error) -> dict | None:
    if error is None:
        return None
    if callable(getattr(error, "to_json", None)):
        return error.to_json()
    # Not a durablelab error (a view built by hand): keep its class name and message; it
    # loads back as a plain DurableLabError, for no other class is ever looked up.
    return {"class": type(error).__name__, "message": str(error), "fields": {}}


def _plain(value: Any) -> Any:
    """A frame cell as a plain JSON value: numpy scalars unwrapped, NaN and NA as None."""
    if value is None or value is pd.NA or value is pd.NaT:
        return None
    if hasattr(value, "item") and not isinstance(value, (list, dict, str)):
        try:
            value = value.item()   # numpy scalar -> int, float, bool
        except (TypeError, ValueError):
            return value
    if isinstance(value, float) and math.isnan(value):
        return None
    return value


def _encode(record: tuple) -> str:
    """Compact strict JSON of a record's data (`history.compact`: a lone surrogate is
    escaped, as the store keeps it), or a SerializationError that says where."""
    kind, run_id, seq, data = record
    try:
        return compact(data)
    except (TypeError, ValueError) as exc:
        for key, value in data.items():
            try:
                compact(value)
            except (TypeError, ValueError):
                where = (f"run {run_id!r}, field {key!r}" if kind == "run" else
                         f"run {run_id!r}, {kind} row {seq}, column {key!r}")
                raise SerializationError(
                    f"Cannot export {where}: {value!r} is not JSON ({exc}). An export holds "
                    f"JSON only (no NaN or infinity, no Python objects) so that loading it "
                    f"never runs code.", what=repr(value), where=where) from None
        raise


#: An escaped UTF-16 surrogate (``\\ud800`` to ``\\udfff``) in JSON text: a backslash that is
#: not itself escaped, then ``ud`` and 8 to f.
_SURROGATE = re.compile(r"(?<!\\)(?:\\\\)*\\u[dD][89a-fA-F]")


def data_type(texts: list[str]) -> str:
    """The Parquet type of a ``data`` column: JSON, or VARCHAR when some text holds an
    escaped surrogate, for a lone one ("\\ud800", which a Python string can hold and UTF-8
    cannot) is valid JSON that DuckDB's JSON type refuses. A reader takes either."""
    if any(("\\ud" in text or "\\uD" in text) and _SURROGATE.search(text) for text in texts):
        return "VARCHAR"
    return "JSON"


def _write_parquet(path: Path, records: list[tuple], texts: list[str]) -> None:
    """One row per record, through DuckDB's Parquet writer (rows handed over as Arrow)."""
    import duckdb
    import pyarrow as pa

    batch = pa.table({
        "i": pa.array(range(len(records)), pa.int64()),
        "format_version": pa.array([VERSION] * len(records), pa.int32()),
        "record": pa.array([r[0] for r in records], pa.string()),
        "run_id": pa.array([r[1] for r in records], pa.string()),
        "seq": pa.array([r[2] for r in records], pa.int32()),
        "data": pa.array(texts, pa.string())})
    target = str(path).replace("'", "''")
    with duckdb.connect() as con:
        con.register("records", batch)
        con.execute(
            f"COPY (SELECT format_version, record, run_id, seq, data::{data_type(texts)} AS "
            f"data FROM records ORDER BY i) TO '{target}' (FORMAT parquet, "
            f"KV_METADATA {{format: '{FORMAT}', version: '{VERSION}'}})")


# --- loading -----------------------------------------------------------------------------


def load(path) -> list[Run]:
    """Read runs written by `export` (JSON Lines or Parquet; told apart by their bytes).
    A file holding an exported `Experiment` gives that `Experiment` back instead.

    The runs come back with the same frames, dtypes, results and errors they were exported
    with, so every view (`Run.timeline`, `dl.compare`, the replay explorer) accepts them,
    with no engine. Nothing in the file is ever executed, imported or unpickled.

    Raises `ExportFormatError` (with `path`, `line`, `problem`) for anything that is not a
    well-formed export of a version this durablelab reads.
    """
    path = Path(path)
    kind = file_kind(path)
    if kind == "directory":
        raise _error(path, None, "file", "this is a directory, not a file; give the path of "
                     "an export written by dl.export (.jsonl, .parquet)")
    if kind == "special":
        raise _error(path, None, "file", "this is not a regular file (a pipe or a device); "
                     "give the path of an export written by dl.export (.jsonl, .parquet)")
    if kind in ("parquet", "text"):
        from .experiments.io import is_experiment_file, load_experiment
        if is_experiment_file(path):                  # an exported Experiment
            return load_experiment(path)
    if kind == "pickle":
        raise _error(path, None, "file", "this is a Python pickle, not a durablelab export, "
                     "and durablelab never unpickles (loading a pickle can run any code); ask "
                     "for the runs as dl.export(runs, 'runs.jsonl') or '.parquet'")
    if kind == "duckdb":
        raise _error(path, None, "file", f"this is a DuckDB store (written by dl.Engine(path))"
                     f", not an export; open it with dl.Engine({str(path)!r}, read_only=True) "
                     f"and take runs with engine.run(run_id), or convert it to an export with "
                     f"`durablelab export {path} -o runs.jsonl`")
    if kind == "parquet":
        reader = _Reader(path, "row")
        rows = _parquet_records(path)
    else:
        if path.suffix.lower() == ".parquet":
            raise _error(path, None, "file", "not a Parquet file (it does not start with the "
                         "bytes 'PAR1'); it may be damaged or another kind of file")
        reader = _Reader(path, "line")
        rows = _jsonl_records(path)
    for number, record in rows:
        reader.feed(number, record)
    return reader.finish()


#: Bytes 8 to 11 of every DuckDB database file.
DUCKDB_MAGIC = b"DUCK"


def file_kind(path) -> str:
    """What a file holds, told by its first bytes and never by its name: "duckdb" (a store
    written by `dl.Engine(path)`), "parquet", "pickle", "empty", "text" (JSON Lines, or any
    other text or bytes), "directory", "special" (a pipe or a device: reading it could wait
    for ever or never end) or "missing". Reading 12 bytes of a regular file opens nothing
    else: this is how `dl.load` and the `durablelab` command decide how to read a path."""
    path = Path(path)
    if path.is_dir():
        return "directory"
    if not path.exists():
        return "missing"
    if not path.is_file():
        return "special"
    with open(path, "rb") as f:
        head = f.read(12)
    if not head:
        return "empty"
    if head[8:12] == DUCKDB_MAGIC:
        return "duckdb"
    if head[:4] == b"PAR1":
        return "parquet"
    if head[:1] == b"\x80" and head[1:2] in (b"\x02", b"\x03", b"\x04", b"\x05"):
        return "pickle"
    return "text"


def _error(path, line, unit, problem) -> ExportFormatError:
    where = f" ({unit} {line})" if line is not None else ""
    return ExportFormatError(f"Cannot load runs from {path}{where}: {problem}.",
                             path=str(path), line=line, problem=problem)


def _reject_constant(name: str):
    raise BadValue(f"{name} is not JSON")


def _finite(text: str) -> float:
    """A JSON number as a float, refused when it is beyond float's range: JSON's grammar
    allows 1e999, which Python reads as infinity, and an export never holds one (`export`
    writes strict JSON), so a time of 1e999 is a crafted file, not a run to draw."""
    number = float(text)
    if not math.isfinite(number):
        raise BadValue(f"the number {text[:40]} is beyond a float's range (an export holds "
                       f"finite numbers only)")
    return number


def _parse_json(text: str) -> Any:
    return json.loads(text, parse_constant=_reject_constant, parse_float=_finite)


def _looks_pickled(value: Any) -> bool:
    """Whether a string is the base64 of a Python pickle (protocol 2 to 5)."""
    if not isinstance(value, str) or len(value) < 8:
        return False
    try:
        start = base64.b64decode(value.strip()[:8], validate=True)
    except (binascii.Error, ValueError):
        return False
    return start[:1] == b"\x80" and 2 <= start[1] <= 5


def _jsonl_records(path: Path) -> Iterator[tuple[int, Any]]:
    raw = path.read_bytes()
    # Split on "\n" only: str.splitlines would also split on U+2028 and friends, which
    # may appear inside JSON strings written with ensure_ascii=False.
    lines = raw.split(b"\n")
    complete = raw.endswith(b"\n")
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            text = line.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise _error(path, number, "line", f"the line is not UTF-8 text ({exc.reason} at "
                         f"byte {exc.start})") from None
        try:
            record = _parse_json(text)
        except (ValueError, RecursionError) as exc:
            if number == len(lines) and not complete:
                problem = ("the file is truncated: its last line is incomplete JSON (the file "
                           "was cut short while being written or copied)")
            else:
                problem = f"invalid JSON ({exc})" + (PICKLE_HINT if _looks_pickled(text) else "")
            raise _error(path, number, "line", problem) from None
        yield number, record


def _parquet_records(path: Path) -> Iterator[tuple[int, Any]]:
    import duckdb

    with duckdb.connect() as con:
        try:
            schema = dict(con.execute("SELECT column_name, column_type FROM (DESCRIBE SELECT * "
                                      "FROM read_parquet(?))", [str(path)]).fetchall())
        except duckdb.Error as exc:
            raise _error(path, None, "file", f"not a readable Parquet file (truncated or "
                         f"damaged): {str(exc).splitlines()[0]}") from None
        for column in PARQUET_COLUMNS:
            if column not in schema:
                raise _error(path, None, "file", f"the Parquet file has no column {column!r} "
                             f"(a durablelab export has {', '.join(PARQUET_COLUMNS)}; it has "
                             f"{', '.join(schema)})")
        for column, wanted in (("format_version", "INT"), ("seq", "INT"), ("record", "VARCHAR"),
                               ("run_id", "VARCHAR"), ("data", ("VARCHAR", "JSON"))):
            kinds = wanted if isinstance(wanted, tuple) else (wanted,)
            if not any(k in schema[column] for k in kinds):
                raise _error(path, None, "file", f"column {column!r} has type {schema[column]}"
                             f", where a durablelab export has {kinds[0]}")
        try:
            rows = con.execute(
                "SELECT format_version, record, run_id, seq, CAST(data AS VARCHAR) FROM "
                "read_parquet(?, file_row_number=true) ORDER BY file_row_number",
                [str(path)]).fetchall()
        except duckdb.Error as exc:
            raise _error(path, None, "file", f"not a readable Parquet file (truncated or "
                         f"damaged): {str(exc).splitlines()[0]}") from None
    seen: dict[tuple, int] = {}
    for number, (version, record, run_id, seq, text) in enumerate(rows, 1):
        if version != VERSION:
            raise _error(path, number, "row", f"format_version {version!r} is not supported "
                         f"(this durablelab reads version {VERSION})")
        expected = seen.get((run_id, record), 0)
        if seq != expected:
            raise _error(path, number, "row", f"seq {seq!r} where {expected} was expected: "
                         f"rows of run {run_id!r} ({record}) are missing or out of order")
        seen[(run_id, record)] = expected + 1
        if text is None:
            raise _error(path, number, "row", "column 'data' is null")
        try:
            data = _parse_json(text)
        except (ValueError, RecursionError) as exc:
            raise _error(path, number, "row", f"column 'data' is not valid JSON ({exc})"
                         + (PICKLE_HINT if _looks_pickled(text) else "")) from None
        yield number, {"record": record, "run_id": run_id, "data": data}


def _is(value: Any, kind: str) -> bool:
    """Whether a JSON value has `kind`: int, num, str, bool, list, object, json, any; a
    trailing '?' allows null."""
    if value is None:
        return kind.endswith("?") or kind in ("json", "any")
    kind = kind.rstrip("?")
    if kind in ("int", "num") and isinstance(value, bool):
        return False
    types = JSON_TYPES.get(kind)
    return types is None or isinstance(value, types)


def _describe(value: Any) -> str:
    names = {type(None): "null", bool: "a boolean", int: "an integer", float: "a number",
             str: "a string", list: "a list", dict: "an object"}
    return names.get(type(value), type(value).__name__) + (
        PICKLE_HINT if _looks_pickled(value) else "")


class _Reader:
    """Checks records one by one, in file order, and builds the runs at the end. `export`
    feeds it what it is about to write, so a file it writes always loads back."""

    def __init__(self, path, unit: str):
        self.path, self.unit = path, unit
        self.header: dict | None = None
        self.runs: dict[str, dict] = {}       # run_id -> run record data
        self.rows: dict[str, dict] = {}       # run_id -> frame name -> list of row tuples
        self.lines: dict[str, int] = {}       # run_id -> line of its run record
        self.specs: dict[str, dict] = {}      # run_id -> frame name -> {column: JSON type}

    def fail(self, line, problem) -> ExportFormatError:
        return _error(self.path, line, self.unit, problem)

    def check_fields(self, line, data, spec: dict, what: str, optional=()) -> None:
        for name, kind in spec.items():
            if name not in data:
                if name in optional:
                    continue
                raise self.fail(line, f"{what} has no field {name!r}")
            if not _is(data[name], kind):
                wanted = KIND_WORDS[kind.rstrip("?")] + (" or null" if kind.endswith("?") else "")
                raise self.fail(line, f"{what}: field {name!r} is {_describe(data[name])}, "
                                f"where {wanted} was expected")
        unknown = [name for name in data if name not in spec]
        if unknown:
            raise self.fail(line, f"{what} has an unknown field {unknown[0]!r} (known: "
                            f"{', '.join(spec)})")

    def feed(self, line: int, record: Any) -> None:
        if not isinstance(record, dict):
            raise self.fail(line, f"a record is a JSON object, not {_describe(record)}")
        if self.header is None and "record" not in record:
            raise self.fail(line, f"the first record must be the header (format {FORMAT!r}, "
                            f"version {VERSION}), and this one has no field 'record': this is "
                            f"not a durablelab export")
        self.check_fields(line, record, {"record": "str", "run_id": "str?", "data": "object"},
                          "the record")
        kind, run_id, data = record["record"], record["run_id"], record["data"]
        if self.header is None and kind != "header":
            raise self.fail(line, f"the first record must be the header (format {FORMAT!r}, "
                            f"version {VERSION}), not a {kind!r} record: this is not a "
                            f"durablelab export")
        if kind == "header":
            self.read_header(line, data)
        elif kind == "run":
            self.read_run(line, run_id, data)
        elif kind in RECORDS:
            self.read_row(line, kind, run_id, data)
        else:
            raise self.fail(line, f"unknown record type {kind!r} (known: {', '.join(RECORDS)})")

    def read_header(self, line, data) -> None:
        if self.header is not None:
            raise self.fail(line, "a second header record (two exports joined together?)")
        if "format" in data and data["format"] != FORMAT:
            raise self.fail(line, f"format {data['format']!r} is not {FORMAT!r}: this is not "
                            f"a durablelab export")
        if "version" in data and data["version"] != VERSION:
            raise self.fail(line, f"version {data['version']!r} is not supported (this "
                            f"durablelab reads version {VERSION}; a newer one may read it)")
        self.check_fields(line, data, HEADER_FIELDS, "the header", optional=("created_by",))
        self.header = data

    def read_run(self, line, run_id, data) -> None:
        self.check_fields(line, data, RUN_FIELDS, "the run record", optional=("waiting", "discarded"))
        if run_id != data["run_id"]:
            raise self.fail(line, f"the record's run_id {run_id!r} differs from its data's "
                            f"{data['run_id']!r}")
        if run_id in self.runs:
            raise self.fail(line, f"run {run_id!r} appears twice")
        error = data["error"]
        if error is not None:
            self.check_fields(line, error, {"class": "str", "message": "str", "fields": "object"},
                              f"the error of run {run_id!r}", optional=("fields",))
        frames = data["frames"]
        self.check_fields(line, frames, {name: "object" for name in FRAMES},
                          f"'frames' of run {run_id!r}")
        for name, spec in frames.items():
            what = f"frame {name!r} of run {run_id!r}"
            self.check_fields(line, spec, {"columns": "list", "dtypes": "list", "rows": "int"},
                              what)
            columns, dtypes = spec["columns"], spec["dtypes"]
            if not all(isinstance(c, str) for c in columns + dtypes) or len(columns) != len(
                    dtypes) or len(set(columns)) != len(columns):
                raise self.fail(line, f"{what}: 'columns' and 'dtypes' must be lists of as many "
                                f"strings, with no column twice")
            missing = [c for c in REQUIRED_COLUMNS[name] if c not in columns]
            if missing:
                raise self.fail(line, f"{what} lacks the column {missing[0]!r}, which views "
                                f"rely on")
        self.runs[run_id] = data
        self.rows[run_id] = {name: [] for name in FRAMES}
        self.specs[run_id] = {name: {c: COLUMN_TYPES[name].get(c, "any")
                                     for c in frames[name]["columns"]} for name in FRAMES}
        self.lines[run_id] = line

    def read_row(self, line, kind, run_id, data) -> None:
        if run_id not in self.runs:
            raise self.fail(line, f"a {kind!r} record for run {run_id!r}, whose run record "
                            f"does not come before it")
        name = RECORD_FRAMES[kind]
        spec = self.specs[run_id][name]
        self.check_fields(line, data, spec, f"the {kind} of run {run_id!r}")
        self.rows[run_id][name].append(tuple(data[c] for c in spec))

    def finish(self) -> list[Run]:
        if self.header is None:
            raise self.fail(None, "the file is empty (no header record)")
        if len(self.runs) != self.header["runs"]:
            raise self.fail(None, f"the header announces {self.header['runs']} run(s) and the "
                            f"file holds {len(self.runs)}: it was cut short or edited")
        return [self.build(run_id, data) for run_id, data in self.runs.items()]

    def build(self, run_id: str, data: dict) -> Run:
        frames = {}
        for name, spec in data["frames"].items():
            rows = self.rows[run_id][name]
            if len(rows) != spec["rows"]:
                raise self.fail(self.lines[run_id], f"run {run_id!r} announces {spec['rows']} "
                                f"{FRAMES[name]} row(s) and the file holds {len(rows)}: it "
                                f"was cut short or edited")
            frames[name] = self.frame(run_id, name, rows, spec)
        return Run(
            run_id=run_id, workflow=data["workflow"], status=data["status"],
            input=data["input"], result=data["result"],
            error=None if data["error"] is None else error_from_json(data["error"]),
            seed=data["seed"], started_at=data["started_at"], ended_at=data["ended_at"],
            parent_run_id=data["parent_run_id"], source=data["source"],
            notes=tuple(data["notes"]), waiting=data.get("waiting"),
            discarded=discarded_usage(data.get("discarded")), **frames)

    def frame(self, run_id, name, rows, spec) -> pd.DataFrame:
        """The frame as `Run.from_snapshot` builds it: rows of plain values, dtypes inferred
        by pandas, then the nullable integer columns and the columns kept as objects
        restored."""
        try:
            frame = pd.DataFrame(rows, columns=spec["columns"])
        except UnicodeEncodeError:   # a lone surrogate ("\ud800") in a column of text
            frame = _objects_kept(rows, spec["columns"])
        inferred = [str(t) for t in frame.dtypes]
        for index, (column, dtype, found) in enumerate(zip(spec["columns"], spec["dtypes"],
                                                           inferred)):
            if dtype == "object" and found != dtype:   # kept as objects (a history's values)
                frame[column] = pd.Series([row[index] for row in rows], dtype=object)
            elif dtype in RESTORED_DTYPES and found != dtype:
                try:
                    frame[column] = frame[column].astype(dtype)
                except (TypeError, ValueError, OverflowError) as exc:   # 10**30 in int64
                    raise self.fail(self.lines[run_id], f"column {column!r} of frame {name!r} "
                                    f"(run {run_id!r}) does not fit its dtype {dtype}: "
                                    f"{exc}") from None
        return frame


def _objects_kept(rows: list[tuple], columns: list[str]) -> pd.DataFrame:
    """The frame of `rows`, each column inferred by pandas, except that a column holding a
    lone surrogate (which pandas' string dtype cannot hold: it is UTF-8) keeps its values
    as objects, as `Run.from_snapshot` does for the run the engine shows."""
    data = {}
    for column, values in zip(columns, zip(*rows)):
        try:
            data[column] = pd.Series(values)
        except UnicodeEncodeError:
            data[column] = pd.Series(values, dtype=object)
    return pd.DataFrame(data, columns=columns)


__all__ = ["export", "load", "as_runs", "file_kind", "ExportFormatError", "FORMAT", "VERSION"]
