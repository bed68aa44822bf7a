"""The engine's parts meet through declared interfaces, so each reads on its own.

The attempt runner (`durablelab/activities.py`) touches the engine only through
`activities.Host`: these tests read its source and fail when it reaches for anything the
protocol does not declare, or when `Engine` stops providing what the protocol declares.
What differs between the durability modes lives in one journal (`durablelab/journal.py`):
the engine never branches on the mode itself.
"""

import ast
import inspect

import pytest

import durablelab as dl
from durablelab import activities
from durablelab.activities import AttemptRunner, Host


def host_members() -> set[str]:
    declared = set(Host.__annotations__)
    declared |= {name for name, value in vars(Host).items()
                 if inspect.isfunction(value) and not name.startswith("__")}
    return declared


def used_on_host() -> set[str]:
    """Every name the runner's source reads or calls as `self.host.<name>`."""
    tree = ast.parse(inspect.getsource(activities))
    used = set()
    for node in ast.walk(tree):
        if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Attribute)
                and node.value.attr == "host" and isinstance(node.value.value, ast.Name)
                and node.value.value.id == "self"):
            used.add(node.attr)
    return used


def test_attempt_runner_uses_only_what_host_declares():
    used = used_on_host()
    assert used, "the runner no longer reads its host as self.host.<name>: update this test"
    assert used <= host_members(), f"not declared in activities.Host: {used - host_members()}"


def test_attempt_runner_keeps_no_other_engine_state():
    """Besides its host, the runner's `self` holds its breakers, its retry limits (quotas
    and throttles, emptied with the breakers) and its own methods only."""
    tree = ast.parse(inspect.getsource(AttemptRunner))
    own = {"host", "breakers", "limits"} | {
        name for name, value in vars(AttemptRunner).items() if inspect.isfunction(value)}
    used = {node.attr for node in ast.walk(tree)
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
            and node.value.id == "self"}
    assert used <= own, f"AttemptRunner reads {used - own} off itself: declare it in Host"


def test_engine_provides_every_host_member():
    engine = dl.Engine()
    try:
        port = engine._port                 # what the engine hands its attempt runner
        missing = {name for name in host_members() if not hasattr(port, name)}
        assert not missing, f"the engine's port lacks activities.Host members {missing}"
        for name, value in vars(Host).items():
            if inspect.isfunction(value) and not name.startswith("__"):
                want = list(inspect.signature(value).parameters)
                have = ["self", *inspect.signature(getattr(port, name)).parameters]
                assert have == want, f"EnginePort.{name}{have} does not match Host.{name}{want}"
    finally:
        engine.close()


def test_engine_owns_one_attempt_runner_and_no_mixin():
    engine = dl.Engine()
    try:
        assert isinstance(engine._attempts, AttemptRunner)
        assert dl.Engine.__mro__ == (dl.Engine, object)
    finally:
        engine.close()


def test_an_engine_dropped_without_close_is_freed_at_once(tmp_path):
    import gc
    import weakref

    def flow(ctx, x):
        return ctx.activity("one", lambda: 1)

    gc.disable()
    try:
        engine = dl.Engine(tmp_path / "runs.duckdb")
        engine.start(flow, None)
        engine.run_until_idle()
        ref = weakref.ref(engine)
        del engine
        assert ref() is None, "something in the engine refers back to it (a cycle)"
    finally:
        gc.enable()


def test_the_engine_never_branches_on_the_durability_mode():
    """What differs between sync, batch and exit lives in durablelab/journal.py only."""
    import re

    from durablelab import engine as engine_module
    source = inspect.getsource(engine_module)
    assert not re.search(r"durability\s*(==|!=|\bin\b)\s*[\"'(]", source)
    mode = r"[\"'](sync|batch|exit)[\"']"
    assert not re.search(rf"{mode}\s*(==|!=)|(==|!=)\s*{mode}", source)


@pytest.mark.parametrize("mode", ["sync", "batch", "exit"])
def test_each_durability_mode_has_its_journal(mode):
    from durablelab.journal import JOURNALS
    engine = dl.Engine(durability=mode)
    try:
        assert engine.durability == mode
        assert type(engine._journal) is JOURNALS[mode]
    finally:
        engine.close()


@pytest.mark.parametrize("table", ["runs", "attempts", "signals", "faults", "crashes",
                                   "wakeups"])
def test_each_record_type_names_its_tables_columns_in_order(table):
    from durablelab import records
    record = {"runs": records.RunRecord, "attempts": records.AttemptRecord,
              "signals": records.SignalRecord, "faults": records.FaultRecord,
              "crashes": records.CrashRecord, "wakeups": records.WakeupRecord}[table]
    engine = dl.Engine()
    try:
        columns = [row[0] for row in engine.store.fetch(
            "SELECT column_name FROM information_schema.columns WHERE table_name = ? "
            "ORDER BY ordinal_position", [table])]
        assert list(record._fields) == columns
    finally:
        engine.close()


def test_rows_read_back_after_a_crash_are_records_with_names():
    from durablelab.records import AttemptRecord, FaultRecord, WakeupRecord

    def flaky(ctx, _):
        return ctx.activity("call", lambda: "ok", policy=dl.RetryPolicy(
            max_attempts=3, initial=1.0, jitter="none"))

    engine = dl.Engine()
    try:
        run_id = engine.start(flaky, None, faults=[dl.faults.ServerError("call", attempts=[1])])
        engine.advance(0.5)                  # attempt 1 failed; its retry is due at 1.0
        engine.crash()                       # a fresh worker reads every row back
        state = engine._runs[run_id]
        (row,) = state.attempts[1]
        assert type(row) is AttemptRecord
        assert (row.attempt, row.ended_at + row.delay, row.error_class) == (1, 1.0, "Transient")
        assert all(type(f) is FaultRecord for f in state.fault_rows)
        assert all(type(w) is WakeupRecord for w in state.wakeups)
        engine.run_until_idle()
        assert engine.run(run_id).status == "completed"
    finally:
        engine.close()
