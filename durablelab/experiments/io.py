"""Exporting an experiment, and loading it back on any machine.

Format ``durablelab-experiment``, version 1: a sequence of records, as JSON Lines (one
``{"record", "data"}`` object a line) or Parquet (one row a record: ``format_version``,
``record``, ``seq``, ``data`` as JSON), like the runs format of `durablelab.export`:

``header`` (first, once): ``format``, ``version``, ``created_by``, ``runs`` and ``load``
    (how many of each record follow, so a file cut short is noticed).
``experiment`` (once): the sweep as `Experiment.spec` describes it: ``workflow``
    ('module:qualname'), ``inputs``, ``policies`` ({name: {glob: RetryPolicy JSON} or
    null}), ``fault_plans`` ({name: plan JSON or null}), ``seeds``, ``contention``,
    ``timeout``, ``world`` (the factory's name; informative only).
``run`` (one per row of `Experiment.frame`): every column of the frame.
``load`` (one per row of `Experiment.load`): policy, fault_plan, source, second, requests.

JSON only: loading a file never imports, evaluates or unpickles anything, and an unknown
record, a missing field or a wrong count is an `ExportFormatError` naming the file and the
line (or row).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pandas as pd

from ..export import ExportFormatError
from .runner import METRICS

FORMAT = "durablelab-experiment"
VERSION = 1
RUN_COLUMNS = ["input", "policy", "fault_plan", "seed", "run_id", *METRICS]
LOAD_COLUMNS = ["policy", "fault_plan", "source", "second", "requests"]
SPEC_KEYS = {"workflow", "inputs", "policies", "fault_plans", "seeds", "contention",
             "timeout", "world"}
_ENCODER = json.JSONEncoder(ensure_ascii=False, allow_nan=False, separators=(",", ":"),
                            sort_keys=False)


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
        raise ValueError(f"export(path={str(path)!r}): the extension picks the format; use "
                         f"'.jsonl' (JSON Lines) or '.parquet'")
    records = _records(experiment)
    texts = [_ENCODER.encode(data) for _, data in records]
    partial = path.with_name(path.name + ".partial")
    try:
        if suffix == ".jsonl":
            with open(partial, "w", encoding="utf-8", newline="\n") as out:
                for (kind, _), text in zip(records, texts):
                    out.write(f'{{"record":{_ENCODER.encode(kind)},"data":{text}}}\n')
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
        con.execute(f"COPY (SELECT format_version, record, seq, data::JSON AS data FROM records "
                    f"ORDER BY i) TO '{target}' (FORMAT parquet, "
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
    return b'"record":"header"' in first and FORMAT.encode() in first


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
        where = f" ({unit} {number})" if number is not None else ""
        return ExportFormatError(f"Cannot load the experiment from {path}{where}: {problem}.",
                                 path=str(path), line=number, problem=problem)

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
            if data["format"] != FORMAT or data["version"] != VERSION:
                raise fail(number, f"format {data['format']!r} version {data['version']!r} "
                                   f"is not {FORMAT!r} version {VERSION}")
            header = data
        elif kind == "experiment":
            if spec is not None or set(data) != SPEC_KEYS:
                raise fail(number, f"the experiment record must come once with fields "
                                   f"{sorted(SPEC_KEYS)}")
            spec = data
        elif kind == "run":
            if list(data) != RUN_COLUMNS:
                missing = sorted(set(RUN_COLUMNS) - set(data))
                extra = sorted(set(data) - set(RUN_COLUMNS))
                raise fail(number, f"a run row with missing {missing} or unknown {extra} "
                                   f"fields")
            runs.append(data)
        elif kind == "load":
            if list(data) != LOAD_COLUMNS:
                raise fail(number, f"a load row needs exactly the fields {LOAD_COLUMNS}")
            load.append(data)
        else:
            raise fail(number, f"unknown record type {kind!r} (known: header, experiment, "
                               f"run, load)")
    if header is None or spec is None:
        raise fail(None, "the file has no header or no experiment record (empty or cut short)")
    if len(runs) != header["runs"] or len(load) != header["load"]:
        raise fail(None, f"the header promises {header['runs']} runs and {header['load']} load "
                         f"rows, the file holds {len(runs)} and {len(load)}: it was cut short")
    try:
        frame = _typed(pd.DataFrame(runs, columns=RUN_COLUMNS))
        load_frame = _typed_load(pd.DataFrame(load, columns=LOAD_COLUMNS))
    except (TypeError, ValueError) as exc:
        raise fail(None, f"a value has the wrong type ({exc})") from None
    return Experiment(spec, frame, load_frame, None, name=path.stem)


def _jsonl(path: Path):
    for number, line in enumerate(path.read_bytes().split(b"\n"), 1):
        if not line.strip():
            continue
        try:
            yield number, json.loads(line.decode("utf-8"),
                                     parse_constant=_no_constant)
        except (ValueError, UnicodeDecodeError) as exc:
            raise ExportFormatError(f"Cannot load the experiment from {path} (line {number}): "
                                    f"invalid JSON ({exc}).", path=str(path), line=number,
                                    problem="invalid JSON") from None


def _no_constant(name):
    raise ValueError(f"{name} is not JSON")


def _parquet(path: Path):
    import duckdb
    with duckdb.connect() as con:
        rows = con.execute("SELECT record, CAST(data AS VARCHAR) FROM read_parquet(?, "
                           "file_row_number=true) ORDER BY file_row_number",
                           [str(path)]).fetchall()
    for number, (record, text) in enumerate(rows, 1):
        yield number, {"record": record, "data": json.loads(text, parse_constant=_no_constant)}


__all__ = ["export_experiment", "load_experiment", "is_experiment_file", "FORMAT"]
