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
         "rough": dl.FaultPlan([dl.faults.ServerError("quote", p=0.8),
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


def _typed_with_astype(frame: pd.DataFrame) -> pd.DataFrame:
    """How `view._typed` typed a frame before it was built column by column: the
    reference it must equal."""
    from durablelab.experiments.runner import METRICS
    ints = [c for c in frame.columns if c in ("input", "seed") or c.startswith("retries")
            or c in ("attempts", "activities", "crashes", "model_calls", "input_tokens",
                     "output_tokens", "tokens", "duplicate_effects", "wakeups",
                     "events_replayed", "history_events")]
    frame = frame.astype({c: "int64" for c in ints})
    frame = frame.astype({"virtual_duration": "float64", "cost": "float64"})
    for column in ("policy", "fault_plan", "run_id", "status", "error"):
        frame[column] = frame[column].astype(object).where(frame[column].notna(), None)
    return frame[["input", "policy", "fault_plan", "seed", "run_id", *METRICS]]


def _typed_load_with_astype(load: pd.DataFrame) -> pd.DataFrame:
    load = load.astype({"second": "int64", "requests": "int64"})
    for column in ("policy", "fault_plan", "source"):
        load[column] = load[column].astype(object)
    return load


def test_the_experiment_types_its_frames_as_astype_did(tmp_path):
    import duckdb
    from durablelab.experiments import view
    path = tmp_path / "results.duckdb"
    dl.sweep(sw.order_flow, sw.INPUTS, policies=sw.POLICIES, fault_plans=ROUGH,
             seeds=range(4), world=sw.Shop, path=path)
    with duckdb.connect(str(path), read_only=True) as con:
        runs = con.execute("SELECT * FROM sweep_runs").df().drop(columns=["cell"])
        load = con.execute("SELECT * FROM sweep_load").df()
    assert runs["error"].isna().any() and runs["error"].notna().any()
    load = load.assign(policy="p", fault_plan="f")[
        ["policy", "fault_plan", "source", "second", "requests"]]
    pd.testing.assert_frame_equal(view._typed(runs), _typed_with_astype(runs),
                                  check_exact=True)
    pd.testing.assert_frame_equal(view._typed_load(load), _typed_load_with_astype(load),
                                  check_exact=True)
