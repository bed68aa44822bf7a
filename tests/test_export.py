"""Export and load: runs leave the lab as JSON Lines or Parquet and come back exactly (the
same frames, dtypes, results, errors and metrics), and a crafted or damaged file fails
with an ExportFormatError that names the file, the line or row, and what is wrong,
without ever running code from it."""

import base64
import dataclasses
import json
import pickle

import duckdb
import pytest
from pandas.testing import assert_frame_equal

import durablelab as dl
from durablelab.compare import compare
from durablelab.errors import ActivityFailed, NonDeterminismError, SerializationError
from durablelab.export import ExportFormatError, export, load
from durablelab.faults import Crash, Latency, RateLimit, ServerError

FRAMES = ("history", "attempts", "wakeups", "crashes")
SCALARS = ("run_id", "workflow", "status", "input", "result", "seed", "started_at", "ended_at",
           "parent_run_id", "source", "notes")
NONE = dl.RetryPolicy(max_attempts=4, jitter="none")
DRIFT = {"changed": False}


def fetch(vendor_id):
    return {"vendor_id": vendor_id, "docs": ["w9", "iban"]}


def model(prompt):
    return {"text": prompt.upper(), "usage": {"input_tokens": 120, "output_tokens": 30,
                                              "cost": 0.000036}}


def charge(amount, idempotency_key=None):
    return {"charged": amount, "key": idempotency_key}


def reject(_):
    raise ValueError("vendor is on the sanctions list")


def shop(ctx, req):
    """Retries (5xx, 429, a time-out), a crash after the effect, a timer and a signal."""
    docs = ctx.activity("fetch", fetch, req["vendor_id"], policy=NONE)
    summary = ctx.activity("model", model, "summarise the documents", policy=NONE)
    ctx.activity("charge", charge, 10, policy=NONE)
    ctx.activity("ship", lambda: "shipped", policy=NONE, start_to_close=5)
    ctx.sleep(60)
    approval = ctx.wait_signal("approval", timeout=3600)
    return {"docs": docs, "summary": summary["text"], "approval": approval,
            "stamp": [ctx.now(), ctx.random(), ctx.uuid()]}


def screen(ctx, vendor_id):
    """Fails for good: a non-retryable error."""
    return ctx.activity("screen", reject, vendor_id, policy=NONE)


def late(ctx, _):
    """A signal that never comes: the wait times out."""
    return {"answer": ctx.wait_signal("answer", timeout=10), "unicode": "é\u2028😀"}


def drift(ctx, _):
    """Code that changes under a waiting run: replay diverges."""
    ctx.activity("step", lambda: 1)
    if DRIFT["changed"]:
        ctx.activity("extra", lambda: 2)
    return ctx.wait_signal("go")


def pending(ctx, _):
    """Still waiting when exported."""
    ctx.activity("prepare", lambda: [1, 2.5, None, True])
    return ctx.wait_signal("go")


def clock(ctx, _):
    """Only numbers in history: the value column still holds them as objects (pandas
    alone would infer float64), and an export must give them back so."""
    return ctx.now() + ctx.random()


@pytest.fixture(scope="module")
def runs():
    """One engine's runs: completed with retries and a crash, failed, timed-out wait,
    diverged, still waiting, only numbers in history, and not started yet."""
    DRIFT["changed"] = False
    engine = dl.Engine()
    plan = [ServerError("fetch", attempts=[1, 2]), RateLimit("model", attempts=[1], retry_after=30),
            Crash("charge", point="after_effect", times=1),
            Latency("ship", attempts=[1], seconds=10)]
    engine.start(shop, {"vendor_id": "v-42"}, run_id="shop", faults=plan, seed=7)
    engine.start(screen, "v-13", run_id="screen")
    engine.start(late, None, run_id="late")
    engine.start(drift, None, run_id="drift")
    engine.start(pending, {"n": 1}, run_id="pending")
    engine.advance(500)
    engine.signal("shop", "approval", {"approved": True, "by": "ana"}, signal_id="click-1")
    DRIFT["changed"] = True
    engine.crash()
    engine.start(clock, None, run_id="clock")
    engine.run_until_idle()
    engine.start(clock, None, run_id="fresh")      # started, not yet run: empty frames
    result = {run_id: engine.run(run_id) for run_id in
              ("shop", "screen", "late", "drift", "pending", "clock", "fresh")}
    yield result
    engine.close()
    DRIFT["changed"] = False


def assert_same_runs(loaded, original):
    assert [r.run_id for r in loaded] == [r.run_id for r in original]
    for back, run in zip(loaded, original):
        for name in SCALARS:
            assert getattr(back, name) == getattr(run, name), (run.run_id, name)
        assert type(back.error) is type(run.error)
        if run.error is not None:
            assert back.error.to_json() == run.error.to_json()
            assert str(back.error) == str(run.error)
        for name in FRAMES:
            assert_frame_equal(getattr(back, name), getattr(run, name), obj=f"{run.run_id}.{name}")
    assert_frame_equal(compare(loaded), compare(original))


# --- round trips -------------------------------------------------------------------------


def test_scenario_covers_retries_crash_failure_divergence_signals_and_timers(runs):
    assert {r.status for r in runs.values()} == {"completed", "failed", "diverged", "waiting",
                                                 "running"}
    assert str(runs["clock"].history["value"].dtype) == "object"
    assert runs["fresh"].history.empty and runs["fresh"].attempts.empty
    shop_run = runs["shop"]
    assert set(shop_run.attempts["outcome"]) >= {"transient", "rate_limited", "timeout",
                                                 "crashed", "ok"}
    assert {"sleep", "timer_fired", "signal_received"} <= set(shop_run.history["kind"])
    assert "signal_timeout" in set(runs["late"].history["kind"])
    assert isinstance(runs["screen"].error, ActivityFailed)
    assert isinstance(runs["drift"].error, NonDeterminismError)
    assert len(shop_run.crashes) == 2   # the Crash fault and engine.crash()


@pytest.mark.parametrize("suffix", [".jsonl", ".parquet"])
def test_export_then_load_round_trips_every_frame_metric_and_error(runs, tmp_path, suffix):
    original = list(runs.values())
    path = export(original, tmp_path / f"runs{suffix}")
    assert path == tmp_path / f"runs{suffix}" and path.exists()
    assert_same_runs(load(path), original)


@pytest.mark.parametrize("suffix", [".jsonl", ".parquet"])
def test_export_of_an_engine_writes_all_its_runs(tmp_path, suffix):
    engine = dl.Engine()
    engine.start(screen, "v-1", run_id="one")
    engine.start(late, None, run_id="two")
    engine.run_until_idle()
    path = export(engine, tmp_path / f"engine{suffix}")
    assert_same_runs(load(path), [engine.run("one"), engine.run("two")])
    engine.close()


def test_parquet_and_json_lines_agree(runs, tmp_path):
    original = list(runs.values())
    from_jsonl = load(export(original, tmp_path / "runs.jsonl"))
    from_parquet = load(export(original, tmp_path / "runs.parquet"))
    assert_same_runs(from_parquet, from_jsonl)


def test_a_loaded_run_exports_again_to_the_same_bytes(runs, tmp_path):
    first = export(list(runs.values()), tmp_path / "first.jsonl")
    second = export(load(first), tmp_path / "second.jsonl")
    assert first.read_bytes() == second.read_bytes()


def test_json_lines_export_is_documented_records(runs, tmp_path):
    path = export([runs["screen"]], tmp_path / "one.jsonl")
    records = [json.loads(line) for line in path.read_text(encoding="utf-8").split("\n") if line]
    assert records[0] == {"record": "header", "run_id": None, "data": {
        "format": "durablelab-runs", "version": 1, "created_by": f"durablelab {dl.__version__}",
        "runs": 1}}
    assert [r["record"] for r in records[1:]] == ["run", "event", "attempt", "wakeup"]
    assert records[1]["data"]["error"]["class"] == "ActivityFailed"
    assert records[2]["data"]["kind"] == "activity" and records[2]["data"]["ok"] is False


def test_parquet_export_is_queryable_with_duckdb(runs, tmp_path):
    path = export(list(runs.values()), tmp_path / "runs.parquet")
    con = duckdb.connect()
    events = con.execute("SELECT count(*) FROM read_parquet(?) WHERE record = 'event'",
                         [str(path)]).fetchone()[0]
    assert events == sum(len(r.history) for r in runs.values())
    statuses = dict(con.execute("SELECT run_id, data->>'status' FROM read_parquet(?) "
                                "WHERE record = 'run'", [str(path)]).fetchall())
    assert statuses == {r.run_id: r.status for r in runs.values()}
    kv = dict(con.execute("SELECT key, value FROM parquet_kv_metadata(?)", [str(path)]).fetchall())
    assert kv[b"format"] == b"durablelab-runs" and kv[b"version"] == b"1"


def test_a_hand_built_run_with_notes_and_source_round_trips(runs, tmp_path):
    run = dataclasses.replace(runs["late"], source="temporal", notes=("no attempt history",))
    assert_same_runs(load(export([run], tmp_path / "t.parquet")), [run])


# --- what export refuses -----------------------------------------------------------------


def test_export_needs_a_known_extension(runs, tmp_path):
    with pytest.raises(ValueError, match=r"'\.jsonl' \(JSON Lines\) or '\.parquet'"):
        export([runs["late"]], tmp_path / "runs.csv")


def test_export_refuses_a_value_that_is_not_json_and_leaves_no_file(runs, tmp_path):
    history = runs["late"].history.copy()
    history.at[0, "value"] = object()
    run = dataclasses.replace(runs["late"], history=history)
    target = tmp_path / "runs.jsonl"
    with pytest.raises(SerializationError, match=r"run 'late', event row 0, column 'value'"):
        export([run], target)
    assert not target.exists() and list(tmp_path.iterdir()) == []


def test_export_refuses_nan(runs, tmp_path):
    run = dataclasses.replace(runs["late"], result=float("nan"))
    with pytest.raises(SerializationError, match=r"run 'late', field 'result'"):
        export([run], tmp_path / "runs.parquet")


def test_export_refuses_a_run_twice_and_a_frame_without_its_columns(runs, tmp_path):
    with pytest.raises(ValueError, match=r"run 'late' appears twice"):
        export([runs["late"], runs["late"]], tmp_path / "runs.jsonl")
    run = dataclasses.replace(runs["late"], history=runs["late"].history.drop(columns="kind"))
    with pytest.raises(ValueError, match=r"frame 'history' of run 'late' lacks the column 'kind'"):
        export([run], tmp_path / "runs.jsonl")


# --- crafted and damaged files -----------------------------------------------------------


@pytest.fixture
def jsonl(runs, tmp_path):
    """A good export of two runs: line 1 header, line 2 run 'screen', then its rows."""
    return export([runs["screen"], runs["late"]], tmp_path / "good.jsonl")


def rewrite(src, dst, change):
    lines = src.read_text(encoding="utf-8").split("\n")[:-1]
    records = [json.loads(line) for line in lines]
    out = change(records)
    dst.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in out),
                   encoding="utf-8")
    return dst


def edit(fn):
    def change(records):
        fn(records)
        return records
    return change


B64_PICKLE = base64.b64encode(pickle.dumps({"a": 1}, protocol=4)).decode()


def set_error(records, value):
    run = next(r for r in records if r["record"] == "run" and r["data"]["error"])
    run["data"]["error"] = value


CRAFTED = [
    ("wrong format", edit(lambda r: r[0]["data"].update(format="other-runs")), 1,
     r"format 'other-runs' is not 'durablelab-runs'"),
    ("newer version", edit(lambda r: r[0]["data"].update(version=2)), 1,
     r"version 2 is not supported \(this durablelab reads version 1"),
    ("header missing a field", edit(lambda r: r[0]["data"].pop("runs")), 1,
     r"the header has no field 'runs'"),
    ("run missing a field", edit(lambda r: r[1]["data"].pop("status")), 2,
     r"the run record has no field 'status'"),
    ("event missing a column", edit(lambda r: r[2]["data"].pop("kind")), 3,
     r"the event of run 'screen' has no field 'kind'"),
    ("unknown record type", edit(lambda r: r[2].update(record="evnt")), 3,
     r"unknown record type 'evnt' \(known: header, run, event, attempt, wakeup, crash\)"),
    ("unknown field", edit(lambda r: r[2].update(extra=1)), 3,
     r"the record has an unknown field 'extra'"),
    ("a field of the wrong type", edit(lambda r: r[2]["data"].update(position="one")), 3,
     r"field 'position' is a string, where an integer was expected"),
    ("header not first", lambda r: [r[1], r[0], *r[2:]], 1,
     r"the first record must be the header .* not a 'run' record"),
    ("row of an unknown run", edit(lambda r: r[2].update(run_id="ghost")), 3,
     r"'event' record for run 'ghost', whose run record does not come before it"),
    ("invalid JSON",
     lambda r: [*r[:2], '{"record": "event", "run_id": "screen", "data": {', *r[3:]], 3,
     r"invalid JSON"),
    ("NaN is not JSON",
     lambda r: [*r[:2], json.dumps(r[2]).replace('"position": 1', '"position": NaN'), *r[3:]],
     3, r"invalid JSON \(NaN is not JSON\)"),
    ("1e999 is JSON's infinity",
     lambda r: [r[0], json.dumps(r[1]).replace('"started_at": 0.0', '"started_at": 1e999'),
                *r[2:]], 2, r"invalid JSON \(the number 1e999 is beyond a float's range"),
    ("an infinite number inside a value",
     lambda r: [*r[:2], json.dumps(r[2]).replace('"recorded_at": 0.0', '"recorded_at": '
                                                 '-1E+999'), *r[3:]], 3,
     r"the number -1E\+999 is beyond a float's range"),
    ("an integer past int64", edit(lambda r: r[2]["data"].update(position=10**30)), 2,
     r"column 'position' of frame 'history' \(run 'screen'\) does not fit its dtype int64"),
    ("a base64 pickle line", lambda r: [*r[:2], B64_PICKLE, *r[2:]], 3,
     r"invalid JSON .*looks like a base64-encoded Python pickle.*never unpickles"),
    ("a base64 pickle as the error", edit(lambda r: set_error(r, B64_PICKLE)), 2,
     r"field 'error' is a string \(it looks like a base64-encoded Python pickle"),
    ("the error is not an error", edit(lambda r: set_error(r, {"class": "X"})), 2,
     r"the error of run 'screen' has no field 'message'"),
    ("rows dropped at a line boundary", lambda r: r[:-1], 6,
     r"run 'late' announces 2 wakeup row\(s\) and the file holds 1: it was cut short"),
    ("a whole run dropped", lambda r: r[:5], None,
     r"the header announces 2 run\(s\) and the file holds 1"),
    ("two headers", lambda r: [*r, r[0]], len, r"a second header record"),
]


@pytest.mark.parametrize("case, change, line, problem", CRAFTED, ids=[c[0] for c in CRAFTED])
def test_crafted_json_lines_fail_naming_file_line_and_problem(jsonl, tmp_path, case, change,
                                                              line, problem):
    bad = rewrite(jsonl, tmp_path / "bad.jsonl", change)
    if line is len:
        line = len(bad.read_text().split("\n")) - 1
    with pytest.raises(ExportFormatError, match=problem) as info:
        load(bad)
    err = info.value
    assert err.path == str(bad) and err.line == line
    assert str(bad) in str(err) and err.problem in str(err)
    if line is not None:
        assert f"(line {line})" in str(err)


@pytest.mark.parametrize("instant", [1e30, -1e30, 1.7e308])
def test_times_past_any_calendar_still_show_in_every_view(jsonl, tmp_path, instant):
    """A finite time can be past what datetime holds (a store may hold one too): the views
    say the number rather than raise OverflowError."""
    def times(records):
        for record in records:
            if record["record"] == "run":
                record["data"]["started_at"] = instant
                record["data"]["ended_at"] = instant if record["data"]["ended_at"] else None
        return records
    loaded = load(rewrite(jsonl, tmp_path / "far.jsonl", times))
    for run in loaded:
        assert f"t = {instant:.6g} s" in run._repr_html_()
        dl.diagnose(run)._repr_html_()
    assert "waiting" in dl.ops(loaded)._repr_html_()


def test_a_truncated_json_lines_file_says_it_was_cut_short(jsonl, tmp_path):
    raw = jsonl.read_bytes()
    cut = raw.rindex(b"\n", 0, len(raw) - 1) + 20   # mid-way through the last line
    bad = tmp_path / "cut.jsonl"
    bad.write_bytes(raw[:cut])
    with pytest.raises(ExportFormatError, match=r"truncated: its last line is incomplete") as info:
        load(bad)
    assert info.value.line == raw[:cut].count(b"\n") + 1


def test_an_empty_file_and_a_file_that_is_not_utf8(tmp_path):
    empty = tmp_path / "empty.jsonl"
    empty.write_bytes(b"")
    with pytest.raises(ExportFormatError, match=r"empty\.jsonl: the file is empty"):
        load(empty)
    binary = tmp_path / "binary.jsonl"
    binary.write_bytes(b'{"record": "\xff"}\n')
    with pytest.raises(ExportFormatError, match=r"\(line 1\): the line is not UTF-8"):
        load(binary)


class Boom:
    """Unpickling this creates a file: proof that something ran."""

    def __init__(self, marker):
        self.marker = str(marker)

    def __reduce__(self):
        return (open, (self.marker, "w"))


@pytest.mark.parametrize("suffix", [".jsonl", ".parquet", ".pkl"])
def test_a_pickle_file_is_refused_and_never_unpickled(tmp_path, suffix):
    marker = tmp_path / "pwned"
    bad = tmp_path / f"runs{suffix}"
    bad.write_bytes(pickle.dumps([Boom(marker)], protocol=4))
    assert bad.read_bytes()[:2] == b"\x80\x04"
    with pytest.raises(ExportFormatError,
                       match=r"this is a Python pickle.*never unpickles") as info:
        load(bad)
    assert info.value.path == str(bad) and str(bad) in str(info.value)
    assert not marker.exists()


def test_a_base64_pickle_inside_a_value_stays_a_string(jsonl, tmp_path):
    marker = tmp_path / "pwned"
    payload = base64.b64encode(pickle.dumps(Boom(marker))).decode()
    bad = rewrite(jsonl, tmp_path / "payload.jsonl",
                  edit(lambda r: r[2]["data"].update(value=payload)))
    run = load(bad)[0]
    assert run.history.at[0, "value"] == payload
    assert not marker.exists()


def test_an_error_class_is_never_imported_by_name(jsonl, tmp_path):
    bad = rewrite(jsonl, tmp_path / "class.jsonl", edit(lambda r: set_error(
        r, {"class": "subprocess.Popen", "message": "hello", "fields": {"args": "rm -rf /"}})))
    error = load(bad)[0].error
    assert type(error) is dl.DurableLabError and error.message == "hello"


@pytest.fixture
def parquet(runs, tmp_path):
    return export([runs["screen"], runs["late"]], tmp_path / "good.parquet")


def copy_parquet(src, dst, select):
    with duckdb.connect() as con:
        con.execute(f"COPY (SELECT {select} FROM read_parquet('{src}', file_row_number=true) "
                    f"ORDER BY file_row_number) TO '{dst}' (FORMAT parquet)")
    return dst


def test_parquet_missing_a_column(parquet, tmp_path):
    bad = copy_parquet(parquet, tmp_path / "bad.parquet", "format_version, record, run_id, seq")
    with pytest.raises(ExportFormatError, match=r"has no column 'data'") as info:
        load(bad)
    assert info.value.path == str(bad) and info.value.line is None


def test_parquet_with_a_newer_format_version(parquet, tmp_path):
    bad = copy_parquet(parquet, tmp_path / "bad.parquet", "CASE WHEN record = 'run' THEN 2 "
                       "ELSE format_version END AS format_version, record, run_id, seq, data")
    with pytest.raises(ExportFormatError, match=r"\(row 2\): format_version 2 is not supported"):
        load(bad)


def test_parquet_with_a_pickle_in_data(parquet, tmp_path):
    bad = copy_parquet(parquet, tmp_path / "bad.parquet", f"format_version, record, run_id, seq, "
                       f"CASE WHEN file_row_number = 2 THEN '{B64_PICKLE}' ELSE data::VARCHAR "
                       f"END AS data")
    with pytest.raises(ExportFormatError, match=r"\(row 3\): column 'data' is not valid JSON.*"
                                                r"base64-encoded Python pickle"):
        load(bad)


def test_parquet_with_a_row_missing(parquet, tmp_path):
    bad = tmp_path / "bad.parquet"
    with duckdb.connect() as con:
        con.execute(f"COPY (SELECT * EXCLUDE (file_row_number) FROM read_parquet('{parquet}', "
                    f"file_row_number=true) WHERE NOT (record = 'event' AND run_id = 'late' AND "
                    f"seq = 0) ORDER BY file_row_number) TO '{bad}' (FORMAT parquet)")
    with pytest.raises(ExportFormatError, match=r"seq 1 where 0 was expected: rows of run 'late' "
                                                r"\(event\) are missing or out of order"):
        load(bad)


def test_parquet_rows_checked_like_json_lines(parquet, tmp_path):
    bad = copy_parquet(parquet, tmp_path / "bad.parquet",
                       "format_version, CASE WHEN file_row_number = 2 THEN 'evnt' ELSE record "
                       "END AS record, run_id, seq, data")
    with pytest.raises(ExportFormatError, match=r"\(row 3\): unknown record type 'evnt'"):
        load(bad)


def test_a_truncated_parquet_file(parquet, tmp_path):
    bad = tmp_path / "cut.parquet"
    bad.write_bytes(parquet.read_bytes()[: parquet.stat().st_size // 2])
    with pytest.raises(ExportFormatError, match=r"cut\.parquet: not a readable Parquet file "
                                                r"\(truncated or damaged\)"):
        load(bad)


def test_a_parquet_name_on_another_kind_of_file(jsonl, tmp_path):
    bad = tmp_path / "runs.parquet"
    bad.write_bytes(jsonl.read_bytes())
    with pytest.raises(ExportFormatError, match=r"not a Parquet file \(it does not start with"):
        load(bad)


def test_export_format_error_round_trips_through_json():
    err = ExportFormatError("Cannot load x", path="x.jsonl", line=3, problem="bad")
    back = dl.errors.error_from_json(json.loads(json.dumps(err.to_json())))
    assert type(back) is ExportFormatError and (back.path, back.line, back.problem) == (
        "x.jsonl", 3, "bad")
    assert isinstance(err, dl.DurableLabError)
