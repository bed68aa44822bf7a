"""A sweep's results kept in memory, when nobody asked for a file.

`Results` (in `durablelab.experiments.sweep`) keeps a sweep's rows in DuckDB so that a
sweep given a ``path`` survives an interruption and resumes. Without a path nothing
outlives the call, and the DuckDB database would only be a detour: opening one, making its
tables, writing each cell and reading the rows back costs tens of milliseconds a sweep,
more than a small trial's runs. `MemoryResults` keeps the same rows as Arrow tables and
hands back the same DataFrames, column for column and dtype for dtype, as reading them
back from DuckDB does (`tests/test_sweep_memory.py` compares the two on the same sweeps).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa


def duckdb_like(table: pa.Table) -> pd.DataFrame:
    """`table` as DuckDB's ``.df()`` would give it back after a round trip: an integer
    column with a null is a nullable ``Int64`` (otherwise ``int64``), and a string column
    that is empty or all null holds ``None`` in an ``object`` column (otherwise pandas'
    string dtype). Without this, a sweep without a path would give a table that differs
    from the same sweep with one."""
    columns = {}
    for name, column in zip(table.column_names, table.columns):
        kind = column.type
        if pa.types.is_integer(kind):
            columns[name] = (column.to_pandas().astype("Int64") if column.null_count
                             else column.to_numpy())
        elif pa.types.is_string(kind) and column.null_count == len(column):
            columns[name] = np.full(len(column), None, dtype=object)
        else:
            columns[name] = column.to_pandas()
    return pd.DataFrame(columns, columns=table.column_names)


class MemoryResults:
    """What `Results` offers a sweep (`finished`, `write_cell`, `frames`, `close`), with
    the rows in memory. Nothing is finished before the call: there is nothing to resume."""

    path = None

    def __init__(self):
        self.tables: dict[str, list[pa.Table]] = {"runs": [], "load": [], "requests": []}

    def finished(self) -> set[int]:
        return set()

    def write_cell(self, cell: int, spec, rows: list[dict], load: dict,
                   requests: list = ()) -> None:
        from .sweep import cell_tables
        runs, loads, attempts = cell_tables(cell, rows, load, requests)
        self.tables["runs"].append(runs)
        self.tables["load"].append(loads)
        self.tables["requests"].append(attempts)

    def frames(self):
        from .sweep import LOAD_SCHEMA, REQUEST_SCHEMA, RUN_SCHEMA
        out = []
        for name, schema in (("runs", RUN_SCHEMA), ("load", LOAD_SCHEMA),
                             ("requests", REQUEST_SCHEMA)):
            out.append(duckdb_like(pa.concat_tables(self.tables[name] or [schema.empty_table()])))
        return tuple(out)

    def close(self) -> None:
        self.tables = {"runs": [], "load": [], "requests": []}


__all__ = ["MemoryResults", "duckdb_like"]
