"""A sweep without a path keeps its rows in memory (`durablelab.experiments.memory`) instead
of a DuckDB database: its tables must be exactly those of the same sweep written to a file
and read back, dtypes, nulls and row order included."""

from __future__ import annotations

import sys
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pytest

import durablelab as dl
from durablelab.examples import brooker
from durablelab.experiments.memory import duckdb_like

TESTS = Path(__file__).resolve().parent
if str(TESTS) not in sys.path:
    sys.path.insert(0, str(TESTS))

import sweep_worker as sw  # noqa: E402

ROUGH = {"calm": None,
         "rough": dl.FaultPlan([dl.faults.ServerError("quote", p=0.5),
                                dl.faults.Crash("charge", point="after_effect", p=0.3)])}


def _same(in_memory, on_file) -> None:
    for name in ("frame", "load", "requests", "cells"):
        pd.testing.assert_frame_equal(getattr(in_memory, name), getattr(on_file, name),
                                      check_exact=True, obj=name)
    assert in_memory.frame.to_csv() == on_file.frame.to_csv()
    assert in_memory.requests.to_csv() == on_file.requests.to_csv()


@pytest.mark.parametrize("case", ["brooker", "faults", "contended"])
def test_a_sweep_in_memory_gives_the_table_of_the_same_sweep_on_a_file(case, tmp_path):
    if case == "brooker":
        def go(**path):
            return brooker.reproduce(4, "decorrelated", 3, **path)[2]
    elif case == "faults":    # failed runs (an error column with nulls and names) and crashes
        def go(**path):
            return dl.sweep(sw.order_flow, sw.INPUTS, policies=sw.POLICIES,
                            fault_plans=ROUGH, seeds=range(4), world=sw.Shop, **path)
    else:
        def go(**path):
            return dl.sweep(sw.order_flow, sw.INPUTS, policies=sw.POLICIES, seeds=range(3),
                            world=sw.Shop, contention=True, **path)
    in_memory, on_file = go(), go(path=tmp_path / "results.duckdb")
    assert in_memory.path is None and on_file.path is not None
    _same(in_memory, on_file)


def test_columns_come_back_as_duckdb_gives_them():
    import duckdb
    tables = [
        pa.table({"n": pa.array([1, None], pa.int64()), "m": pa.array([1, 2], pa.int64()),
                  "s": pa.array(["x", None]), "none": pa.array([None, None], pa.string()),
                  "f": pa.array([1.5, None])}),
        pa.table({"n": pa.array([], pa.int64()), "s": pa.array([], pa.string()),
                  "f": pa.array([], pa.float64())}),
    ]
    with duckdb.connect() as con:
        for table in tables:
            con.register("t", table)
            pd.testing.assert_frame_equal(duckdb_like(table),
                                          con.execute("SELECT * FROM t").df())
            con.unregister("t")
