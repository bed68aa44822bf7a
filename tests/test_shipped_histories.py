"""The histories shipped in datasets/histories/ (recorded by version 1 of the onboarding
example, tools/record_histories.py) replayed against version 2 the way a CI job would:
with the change behind ctx.patched every run replays; without, exactly the runs that had
recorded a step past the change break, each at the position and for the reason expected."""

import sys
from pathlib import Path

import pytest

import durablelab as dl
from durablelab import cli
from durablelab.examples import onboarding as ob
from durablelab.versioning import deployed

ROOT = Path(__file__).resolve().parent.parent
SHIPPED = [ROOT / "datasets" / "histories" / f"onboarding_v1.{s}" for s in ("jsonl", "parquet")]
V2 = "durablelab.examples.onboarding:onboard_vendor_v2"


@pytest.fixture
def no_world_effects():
    ob.world.reset()
    yield
    assert ob.world.erp.calls == [] and ob.world.email.calls == []  # nothing was executed


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: p.suffix)
@pytest.mark.usefixtures("no_world_effects")
def test_version_2_with_patch_replays_every_shipped_run(path):
    report = dl.replay_check(ob.onboard_vendor_v2, path)
    assert report.ok, str(report)
    assert sorted(report.frame["run_id"]) == sorted(
        ["rejected", "approved", "declined", "timed-out", "waiting-approval", "mid-retry"])
    assert dl.replay_check(ob.onboard_vendor, path).ok          # and version 1, of course


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: p.suffix)
@pytest.mark.usefixtures("no_world_effects")
def test_version_2_without_patch_breaks_the_runs_past_the_change(path):
    report = dl.replay_check(ob.onboard_vendor_v2_unpatched, path)
    bad = report.diverged.set_index("run_id")
    # "approved" recorded create_vendor at 8; "mid-retry" has create_vendor's failed attempt
    # there with its retry due. The others end, or wait, before the change.
    assert sorted(bad.index) == ["approved", "mid-retry"]
    for run_id in bad.index:
        row = bad.loc[run_id]
        assert (row["position"], row["cause"]) == (8, "different_call")
        assert row["recorded"] == "ctx.activity('create_vendor')"
        assert row["requested"] == "ctx.activity('sanctions_recheck')"
    assert "different_call at position 8: 2 run(s) (approved, mid-retry)" in str(report)


@pytest.mark.usefixtures("no_world_effects")
def test_ci_step_exit_codes_on_the_shipped_files(capsys):
    for path in SHIPPED:
        assert cli.main(["replay-check", "--workflow", V2, "--from", str(path)]) == 0
        assert "6 replay, 0 diverged" in capsys.readouterr().out
        assert cli.main(["replay-check", "--workflow", V2 + "_unpatched",
                         "--from", str(path)]) == 1
        assert "2 diverged" in capsys.readouterr().out


def test_the_shipped_files_are_what_the_tool_records(capsys):
    sys.path.insert(0, str(ROOT / "tools"))
    try:
        import record_histories
    finally:
        sys.path.remove(str(ROOT / "tools"))
    assert record_histories.main(["--check"]) == 0, capsys.readouterr().out
    ob.world.reset()


def test_patched_deploy_while_a_run_waits(db_path):
    engine = dl.Engine(db_path, workflows=[ob.onboard_vendor])
    engine.start(ob.onboard_vendor, {"vendor_id": "v-42"}, run_id="old")
    engine.advance(3600)
    engine.close()
    with deployed(ob.onboard_vendor_v2):                  # the module now says version 2
        engine = dl.Engine(db_path, workflows=[ob.onboard_vendor_v2])
        engine.start(ob.onboard_vendor_v2, {"vendor_id": "v-42"}, run_id="new")
        engine.advance(3600)
        for run_id in ("old", "new"):
            engine.signal(run_id, "approval", {"approved": True})
        engine.run_until_idle()
        old, new = engine.run("old"), engine.run("new")
        engine.close()
    assert ob.onboard_vendor is not ob.onboard_vendor_v2      # and version 1 again after
    # The old run had not reached the change: it takes the new path too, and records it.
    for run in (old, new):
        assert run.status == "completed" and run.result["status"] == "active"
        assert list(run.history["name"])[7:9] == ["sanctions-recheck", "sanctions_recheck"]
    assert len(ob.world.erp.effects) == 2
    ob.world.reset()
