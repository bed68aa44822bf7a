"""dl.explore_crashes: every crash point of a workflow, one run each, the invariant checked
after every run. Without idempotency keys it finds exactly the crash window; with them,
nothing; with batch or exit durability, more."""

import functools
import re
from pathlib import Path

import pytest
from hypothesis import given, settings, strategies as st

import durablelab as dl
from durablelab.lab.crashes import CrashPoint, crash_points
from durablelab.examples import onboarding as ob
from durablelab.sim import Payments

APPROVE = {"approval": {"approved": True}}
WINDOW = {(4, "ask_approver"), (8, "create_vendor"), (9, "register_payee"),
          (10, "send_welcome")}     # the activities that change the world


def exactly_once(run, world):
    assert run.status == "completed", f"run {run.status}"
    assert run.result["status"] == "active", run.result
    for service in (world.erp, world.bank, world.email):
        assert service.duplicate_effects == 0, \
            f"{type(service).__name__}: {service.duplicate_effects} duplicate effect(s)"


def explore(honor_keys, durability="sync", **options):
    return dl.explore_crashes(ob.onboard_vendor, {"vendor_id": "v-42"}, exactly_once,
                              world=functools.partial(ob.fresh_world, honor_keys=honor_keys),
                              durability=durability, signals=APPROVE, **options)


def broken_points(report):
    return {(int(r.position), r.activity, r.point) for r in report.broken.itertuples()}


@pytest.fixture(scope="module")
def without_keys():
    return explore(honor_keys=False)


def test_explorer_finds_exactly_the_crash_window_without_keys(without_keys):
    report = without_keys
    assert report.frame.point.iloc[0] == "none" and report.frame.holds.iloc[0]
    assert broken_points(report) == {(p, a, "after_effect") for p, a in WINDOW}
    for row in report.broken.itertuples():
        assert row.fired and row.status == "completed"
        assert "1 duplicate effect(s)" in row.detail
        assert row.run.run_id == row.run_id and len(row.run.crashes) == 1
    # Every activity's three points, and the approval wait (which never waits: the signal
    # was already there, so that crash cannot fire, and the report says so).
    crashed = report.frame.iloc[1:]
    assert len(crashed) == 7 * 3 + 1
    assert list(crashed[~crashed.fired].point) == ["during_wait"]
    assert "did not fire (p6-during_wait)" in crashed[~crashed.fired].detail.iloc[0]


def test_explorer_finds_nothing_with_idempotency_keys():
    report = explore(honor_keys=True)
    assert report.ok and report.broken.empty
    assert report.frame.fired.sum() == 21
    assert (report.frame.status == "completed").all()
    assert "0 broken" in str(report)


@pytest.mark.parametrize("durability", ["batch", "exit"])
def test_batch_and_exit_durability_break_more_points(without_keys, durability):
    sync = broken_points(without_keys)
    faster = broken_points(explore(honor_keys=False, durability=durability))
    assert sync < faster, (durability, sorted(faster - sync))
    # A crash after an activity's record can lose that record in these modes: it runs again.
    assert any(point == "after_record" for _, _, point in faster)


def test_exit_durability_with_keys_still_sees_each_effect_once():
    assert explore(honor_keys=True, durability="exit").ok


def test_same_exploration_gives_the_same_report(without_keys):
    again = explore(honor_keys=False)
    columns = [c for c in without_keys.frame.columns if c != "run"]
    assert again.frame[columns].equals(without_keys.frame[columns])


def test_broken_rows_carry_their_timelines(without_keys):
    fig = without_keys.timeline()
    assert "p4-after_effect" in fig.texts[0].get_text()
    fig = without_keys.plot()
    assert "4 broken" in fig.axes[0].get_title()
    holding = without_keys.frame.index[without_keys.frame.holds][1]
    with pytest.raises(ValueError, match=f"row {holding} holds"):
        without_keys.timeline(holding)


# --- a small workflow, for pairs and for the property test ------------------------------

WORLD = {}


def payments_world(honor_keys):
    def make(clock):
        WORLD["payments"] = Payments(honor_keys=honor_keys)
        return WORLD["payments"]
    return make


def charge(customer, idempotency_key=None):
    return WORLD["payments"].charge(customer, 10.0, idempotency_key=idempotency_key)


def lookup(customer):
    return {"customer": customer}


def steps_workflow(ctx, steps):
    """Runs `steps`: "charge" changes the world, "lookup" only reads; a "sleep" waits."""
    out = []
    for i, step in enumerate(steps):
        if step == "sleep":
            ctx.sleep(60)
        else:
            out.append(ctx.activity(step, charge if step == "charge" else lookup, f"c-{i}"))
    return out


def charged_once(run, payments):
    assert run.status == "completed", run.status
    assert payments.duplicate_effects == 0, f"{payments.duplicate_effects} duplicate charge(s)"


def test_pairs_crash_twice_in_one_run():
    report = dl.explore_crashes(steps_workflow, ["lookup", "charge", "sleep"], charged_once,
                                world=payments_world(False), pairs=True)
    points = report.points
    assert points == [CrashPoint(1, "lookup", "before_activity"),
                      CrashPoint(1, "lookup", "after_effect"),
                      CrashPoint(1, "lookup", "after_record"),
                      CrashPoint(2, "charge", "before_activity"),
                      CrashPoint(2, "charge", "after_effect"),
                      CrashPoint(2, "charge", "after_record"),
                      CrashPoint(3, "sleep", "during_wait")]
    n = len(points)
    assert len(report.frame) == 1 + n + n * (n - 1) // 2
    pairs = report.frame[report.frame.point2.notna()]
    assert pairs.fired.all()
    for row in pairs[~pairs.holds].itertuples():
        assert len(row.run.crashes) == 2        # both crashes happened, in one run
    window = ((pairs.position == 2) & (pairs.point == "after_effect")) | (
        (pairs.position2 == 2) & (pairs.point2 == "after_effect"))
    assert list(~pairs.holds) == list(window)


def test_invariant_checked_on_the_baseline_too():
    def never(run, payments):
        return False
    report = dl.explore_crashes(steps_workflow, ["charge"], never, world=payments_world(True))
    assert not report.frame.holds.any()
    assert report.broken.detail.iloc[0] == "the invariant returned False"

    def typo(run, payments):
        return run.result["nope"]
    report = dl.explore_crashes(steps_workflow, ["charge"], typo, world=payments_world(True))
    assert report.broken.detail.iloc[0].startswith("the invariant raised TypeError")


def test_bad_arguments_are_named():
    with pytest.raises(TypeError, match=r"invariant=3\): the invariant is a function"):
        dl.explore_crashes(steps_workflow, [], 3)
    with pytest.raises(TypeError, match="world is a factory world"):
        dl.explore_crashes(steps_workflow, [], charged_once, world=Payments())


def test_crash_points_include_retry_backoffs():
    def flaky(ctx, _):
        return ctx.activity("flaky", lookup, "c", policy=dl.RetryPolicy(jitter="none"))
    with dl.Engine() as engine:
        run_id = engine.start(flaky, None, faults=[dl.faults.ServerError("flaky", attempts=1)])
        engine.run_until_idle()
        points = crash_points(engine.run(run_id))
    assert [p.point for p in points] == ["before_activity", "after_effect", "after_record",
                                        "during_wait"]


@settings(max_examples=6, deadline=None)
@given(steps=st.lists(st.sampled_from(["charge", "lookup", "sleep"]), min_size=1, max_size=3))
def test_without_keys_exactly_the_effects_after_effect_points_break(steps):
    """For any short workflow: with keys nothing breaks; without them, exactly the
    `after_effect` point of each call that changes the world."""
    with_keys = dl.explore_crashes(steps_workflow, steps, charged_once,
                                   world=payments_world(True))
    assert with_keys.ok
    without = dl.explore_crashes(steps_workflow, steps, charged_once,
                                 world=payments_world(False))
    history = without.baseline.history    # a sleep takes two positions: start, fired
    charges = set(history.position[history.name == "charge"].astype(int))
    assert len(charges) == steps.count("charge")
    assert broken_points(without) == {(p, "charge", "after_effect") for p in charges}


def test_readme_crash_example_runs_verbatim():
    text = (Path(__file__).resolve().parent.parent / "README.md").read_text()
    code = re.search(r"## Crash points, counterfactuals, the fault matrix\n.*?```python\n(.*?)```",
                     text, re.S).group(1)
    space = {}
    exec(compile(code, "README.md", "exec"), space)
    assert broken_points(space["report"]) == {(8, "create_vendor", "after_effect"),
                                              (9, "register_payee", "after_effect")}


def test_each_row_gets_its_own_world_through_ctx_world():
    worlds = []

    def make(clock):
        worlds.append(Payments(honor_keys=False))
        return worlds[-1]

    def pay(ctx, amount):
        return ctx.activity("charge", ctx.world.charge, "c-1", amount)["id"]

    def charged_at_most_once(run, payments):
        assert payments is worlds[-1]
        assert len(payments.effects) == 1, f"{len(payments.effects)} charges"

    report = dl.explore_crashes(pay, 5.0, charged_at_most_once, world=make)
    assert len(worlds) == len(report.frame) == 4         # the baseline and three points
    assert broken_points(report) == {(1, "charge", "after_effect")}
    assert [len(w.calls) for w in worlds] == [1, 1, 2, 1]


def test_each_recovery_reloads_only_its_own_rows_run(monkeypatch):
    """The rows share one engine, emptied after each: a crash recovery reads back the row's
    own run and no earlier row's, so a row costs the same however many came before it."""
    from durablelab.engine import Engine
    seen, load = [], Engine._load

    def counting_load(self, *args, **kwargs):
        load(self, *args, **kwargs)
        seen.append(sorted(self._runs))

    monkeypatch.setattr(Engine, "_load", counting_load)
    report = explore(honor_keys=True)
    recoveries = [runs for runs in seen if runs]
    assert len(recoveries) == int(report.frame.fired.sum()) > 20
    assert all(len(runs) == 1 for runs in recoveries), recoveries[:3]
    assert report.ok
