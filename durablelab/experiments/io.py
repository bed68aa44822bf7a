"""Exporting an experiment, and loading it back on any machine.

Format ``durablelab-experiment``, version 1: a sequence of records, as JSON Lines (one
``{"record", "data"}`` object a line) or Parquet (one row a record: ``format_version``,
``record``, ``seq``, ``data`` as JSON, or VARCHAR if a value holds a lone surrogate), like
the runs format of `durablelab.export`:

``header`` (first, once): ``format``, ``version``, ``created_by``, ``runs`` and ``load``
    (how many of each record follow, so a file cut short is noticed).
``experiment`` (once): the sweep as `Experiment.spec` describes it: ``workflow``
    ('module:qualname'), ``inputs``, ``policies`` ({name: {glob: RetryPolicy JSON} or
    null}), ``fault_plans`` ({name: plan JSON or null}), ``seeds``, ``contention``,
    ``timeout``, ``world`` (the factory's name; informative only).
``run`` (one per row of `Experiment.frame`): every column of the frame.
``load`` (one per row of `Experiment.load`): policy, fault_plan, source, second, requests.

JSON only: loading a file never imports, evaluates or unpickles anything, and an unknown
record, a missing field, a wrong count or a value of another kind than the sweep writes (a
type, a negative count, a name the spec lacks) is an `ExportFormatError` naming the file and
the line (or row).
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

import pandas as pd

from ..export import ExportFormatError, _is, _reject_constant, data_type
from ..history import compact
from .runner import METRICS
from .sweep import LOAD_SCHEMA, RUN_SCHEMA
from ..errors import BadValue

FORMAT = "durablelab-experiment"
VERSION = 1
RUN_COLUMNS = ["input", "policy", "fault_plan", "seed", "run_id", *METRICS]
LOAD_COLUMNS = ["policy", "fault_plan", "source", "second", "requests"]
SPEC_KEYS = {"workflow", "inputs", "policies", "fault_plans", "seeds", "contention",
             "timeout", "world"}


def _plain(value):
    if hasattr(value, "item"):   # numpy scalars
        value = value.item()
    if isinstance(value, float) and value != value:
        return None
    return value


def _records(experiment) -> list[tuple[str, dict]]:
    from ..version import __version__
    frame, load = experiment.frame, experiment.load
    out = [("header", {"format": FORMAT, "version": VERSION,
                       "created_by": f"durablelab {__version__}", "runs": len(frame),
                       "load": len(load)}),
           ("experiment", experiment.spec)]
    for row in frame[RUN_COLUMNS].itertuples(index=False, name=None):
        out.append(("run", {c: _plain(v) for c, v in zip(RUN_COLUMNS, row)}))
    for row in load[LOAD_COLUMNS].itertuples(index=False, name=None):
        out.append(("load", {c: _plain(v) for c, v in zip(LOAD_COLUMNS, row)}))
    return out


def export_experiment(experiment, path) -> Path:
    """Write `experiment` to `path` (``.jsonl`` or ``.parquet``); returns the path."""
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix not in (".jsonl", ".parquet"):
        raise BadValue(f"export(path={str(path)!r}): the extension picks the format; use "
                         f"'.jsonl' (JSON Lines) or '.parquet'")
    records = _records(experiment)
    texts = [compact(data) for _, data in records]   # a lone surrogate escaped, as in a store
    partial = path.with_name(path.name + ".partial")
    try:
        if suffix == ".jsonl":
            with open(partial, "w", encoding="utf-8", newline="\n") as out:
                for (kind, _), text in zip(records, texts):
                    out.write(f'{{"record":{compact(kind)},"data":{text}}}\n')
        else:
            _write_parquet(partial, records, texts)
        os.replace(partial, path)
    finally:
        partial.unlink(missing_ok=True)
    return path


def _write_parquet(path: Path, records, texts) -> None:
    import duckdb
    import pyarrow as pa

    seqs, counts = [], {}
    for kind, _ in records:
        seqs.append(counts.get(kind, 0))
        counts[kind] = seqs[-1] + 1
    batch = pa.table({"i": pa.array(range(len(records)), pa.int64()),
                      "format_version": pa.array([VERSION] * len(records), pa.int32()),
                      "record": pa.array([k for k, _ in records], pa.string()),
                      "seq": pa.array(seqs, pa.int32()),
                      "data": pa.array(texts, pa.string())})
    target = str(path).replace("'", "''")
    with duckdb.connect() as con:
        con.register("records", batch)
        con.execute(f"COPY (SELECT format_version, record, seq, data::{data_type(texts)} AS "
                    f"data FROM records ORDER BY i) TO '{target}' (FORMAT parquet, "
                    f"KV_METADATA {{format: '{FORMAT}', version: '{VERSION}'}})")


# --- loading -----------------------------------------------------------------------------------
def is_experiment_file(path: Path) -> bool:
    """Whether `path` holds an exported experiment (rather than exported runs)."""
    with open(path, "rb") as f:
        head = f.read(4)
        if head == b"PAR1":
            import duckdb
            try:
                with duckdb.connect() as con:
                    rows = con.execute("SELECT decode(key), decode(value) FROM "
                                       "parquet_kv_metadata(?)", [str(path)]).fetchall()
            except duckdb.Error:
                return False
            return ("format", FORMAT) in rows
        f.seek(0)
        first = f.readline(4096)
    try:   # parsed, not matched as bytes: a file reformatted by another tool is still one
        record = json.loads(first.decode("utf-8"))
    except (ValueError, UnicodeDecodeError, RecursionError):
        return False
    return (isinstance(record, dict) and record.get("record") == "header"
            and isinstance(record.get("data"), dict) and record["data"].get("format") == FORMAT)


def load_experiment(path):
    """The `Experiment` exported to `path` (JSON Lines or Parquet)."""
    from .view import Experiment, _typed, _typed_load
    path = Path(path)
    unit = "line"
    if open(path, "rb").read(4) == b"PAR1":
        unit, records = "row", _parquet(path)
    else:
        records = _jsonl(path)

    def fail(number, problem):
        return _error(path, unit, number, problem)

    header, spec, runs, load = None, None, [], []
    for number, record in records:
        if not isinstance(record, dict) or set(record) != {"record", "data"} or \
                not isinstance(record["data"], dict):
            raise fail(number, "expected an object with 'record' and 'data' (an object)")
        kind, data = record["record"], record["data"]
        if header is None and kind != "header":
            raise fail(number, f"the first record must be the header, not {kind!r}")
        if kind == "header":
            if header is not None:
                raise fail(number, "a second header")
            expected = {"format", "version", "created_by", "runs", "load"}
            if set(data) != expected:
                raise fail(number, f"the header has fields {sorted(data)}; expected "
                                   f"{sorted(expected)}")
            if data["format"] != FORMAT or not _is(data["version"], "int") or \
                    data["version"] != VERSION:
                raise fail(number, f"format {data['format']!r} version {data['version']!r} "
                                   f"is not {FORMAT!r} version {VERSION}")
            header = data
        elif kind == "experiment":
            if spec is not None or set(data) != SPEC_KEYS:
                raise fail(number, f"the experiment record must come once with fields "
                                   f"{sorted(SPEC_KEYS)}")
            spec = data
        elif kind in ("run", "load"):
            columns = RUN_COLUMNS if kind == "run" else LOAD_COLUMNS
            if set(data) != set(columns):
                missing = sorted(set(columns) - set(data))
                extra = sorted(set(data) - set(columns))
                raise fail(number, f"a {kind} row with missing {missing} or unknown {extra} "
                                   f"fields")
            (runs if kind == "run" else load).append((number, data))
        else:
            raise fail(number, f"unknown record type {kind!r} (known: header, experiment, "
                               f"run, load)")
    if header is None or spec is None:
        raise fail(None, "the file has no header or no experiment record (empty or cut short)")
    problem = _spec_problem(spec) or _counts_problem(header)
    if problem:
        raise fail(None, problem)
    for rows, kinds in ((runs, _RUN_KINDS), (load, _LOAD_KINDS)):
        for number, data in rows:
            problem = _row_problem(data, kinds, spec)
            if problem:
                raise fail(number, problem)
    runs = [data for _, data in runs]
    load = [data for _, data in load]
    if len(runs) != header["runs"] or len(load) != header["load"]:
        raise fail(None, f"the header promises {header['runs']} runs and {header['load']} load "
                         f"rows, the file holds {len(runs)} and {len(load)}: it was cut short")
    try:
        frame = _typed(pd.DataFrame(runs, columns=RUN_COLUMNS))
        load_frame = _typed_load(pd.DataFrame(load, columns=LOAD_COLUMNS))
    except (TypeError, ValueError) as exc:
        raise fail(None, f"a value has the wrong type ({exc})") from None
    return Experiment(spec, frame, load_frame, None, name=path.stem)


def _error(path, unit: str, number: int | None, problem: str) -> ExportFormatError:
    """The error of a file that is not a loadable experiment, at line or row `number`."""
    where = "" if number is None else f" ({unit} {number})"
    return ExportFormatError(f"Cannot load the experiment from {path}{where}: {problem}.",
                             path=str(path), line=number, problem=problem)


# --- what the values of a loaded file may be -------------------------------------------------
def _kinds(schema) -> dict[str, str]:
    return {f.name: str(f.type) for f in schema if f.name != "cell"}


#: Each column's type as the sweep writes it: "int64", "double" or "string".
_RUN_KINDS = _kinds(RUN_SCHEMA)
_LOAD_KINDS = {**_kinds(LOAD_SCHEMA), "policy": "string", "fault_plan": "string"}
#: Columns that may hold a negative number (every other int counts something).
_SIGNED = {"seed"}
#: String columns that may be null.
_OPTIONAL = {"error"}


def _shown(value) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _row_problem(data: dict, kinds: dict[str, str], spec: dict) -> str | None:
    """What is wrong with a run or load row's values, or None: each column's type as the
    sweep writes it (as JSON kinds: `export._is`), counts >= 0, and names and input indexes
    the spec has."""
    for column, value in data.items():
        kind = kinds[column]
        if kind == "int64":
            if not _is(value, "int") or not -2 ** 63 <= value < 2 ** 63 or (
                    value < 0 and column not in _SIGNED):
                return (f"{column} must be a whole number"
                        f"{'' if column in _SIGNED else ' >= 0'}, not {_shown(value)}")
        elif kind == "double":
            if not _is(value, "num?") or (value is not None and value < 0):
                return f"{column} must be a number >= 0 or null, not {_shown(value)}"
        elif not _is(value, "str?" if column in _OPTIONAL else "str"):
            return f"{column} must be a string, not {_shown(value)}"
    if data["policy"] not in spec["policies"]:
        return f"policy {_shown(data['policy'])} is not one of the experiment's policies"
    if data["fault_plan"] not in spec["fault_plans"]:
        return f"fault_plan {_shown(data['fault_plan'])} is not one of the experiment's plans"
    if "input" in data and data["input"] >= len(spec["inputs"]):
        return f"input {data['input']} is not an index of the experiment's inputs"
    return None


def _spec_problem(spec: dict) -> str | None:
    """What is wrong with the experiment record's values, or None."""
    def names(value, what) -> str | None:
        if not _is(value, "object") or not value or not all(
                _is(k, "str") and _is(v, "object?") for k, v in value.items()):
            return (f"the experiment's {what} must be an object of names, each an object or "
                    f"null, not {_shown(value)}")
        return None
    if not _is(spec["workflow"], "str"):
        return f"the experiment's workflow must be a string, not {_shown(spec['workflow'])}"
    if not _is(spec["inputs"], "list") or not spec["inputs"]:
        return f"the experiment's inputs must be a non-empty list, not {_shown(spec['inputs'])}"
    problem = names(spec["policies"], "policies") or names(spec["fault_plans"], "fault_plans")
    if problem:
        return problem
    seeds = spec["seeds"]
    if not _is(seeds, "list") or not all(_is(x, "int") for x in seeds):
        return f"the experiment's seeds must be a list of whole numbers, not {_shown(seeds)}"
    if not _is(spec["contention"], "bool"):
        return (f"the experiment's contention must be true or false, not "
                f"{_shown(spec['contention'])}")
    timeout = spec["timeout"]
    if not _is(timeout, "num?") or (timeout is not None and timeout <= 0):
        return f"the experiment's timeout must be a number > 0 or null, not {_shown(timeout)}"
    if not _is(spec["world"], "str?"):
        return f"the experiment's world must be a string or null, not {_shown(spec['world'])}"
    return None


def _counts_problem(header: dict) -> str | None:
    for key in ("runs", "load"):
        if not _is(header[key], "int") or header[key] < 0:
            return f"the header's {key} must be a whole number >= 0, not {_shown(header[key])}"
    return None


def _jsonl(path: Path):
    for number, line in enumerate(path.read_bytes().split(b"\n"), 1):
        if not line.strip():
            continue
        try:
            yield number, _decode(line.decode("utf-8"))
        except (ValueError, UnicodeDecodeError, RecursionError) as exc:
            raise ExportFormatError(f"Cannot load the experiment from {path} (line {number}): "
                                    f"invalid JSON ({exc}).", path=str(path), line=number,
                                    problem="invalid JSON") from None


def _finite(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):   # 1e999: JSON's grammar, but no float can hold it
        raise BadValue(f"the number {text[:40]} is out of range")
    return value


def _decode(text: str):
    """A record's JSON: no NaN or Infinity, no number too large for a float."""
    return json.loads(text, parse_constant=_reject_constant, parse_float=_finite)


def _parquet(path: Path):
    import duckdb

    def bad(number, problem):
        return _error(path, "row", number, problem)
    try:
        with duckdb.connect() as con:
            rows = con.execute("SELECT record, CAST(data AS VARCHAR) FROM read_parquet(?, "
                               "file_row_number=true) ORDER BY file_row_number",
                               [str(path)]).fetchall()
    except duckdb.Error as exc:
        raise bad(None, f"not the columns of an experiment export (record, data): "
                        f"{str(exc).splitlines()[0]}") from None
    for number, (record, text) in enumerate(rows, 1):
        if not isinstance(text, str):
            raise bad(number, "the record has no data")
        try:
            data = _decode(text)
        except (ValueError, RecursionError) as exc:
            raise bad(number, f"invalid JSON in data ({exc})") from None
        yield number, {"record": record, "data": data}


__all__ = ["export_experiment", "load_experiment", "is_experiment_file", "FORMAT"]
