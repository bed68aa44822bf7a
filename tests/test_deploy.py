"""The deploy simulator: runs of onboarding v1 parked at three points, a new version
deployed, and what broke and why; replay_check's prediction next to what happened."""

import pytest

from durablelab.lab.deploy import POINTS, simulate_deploy
from durablelab.examples import onboarding as ob


def outcomes(report):
    return {point: dict(row[row > 0]) for point, row in report.summary.iterrows()}


def test_same_code_breaks_nothing():
    report = simulate_deploy(ob.onboard_vendor, runs_per_point=2)
    assert report.broken == 0 and set(report.frame["status"]) == {"completed"}
    assert list(report.summary.index) == list(POINTS)
    assert set(report.frame["vendors"]) == {1}


def test_unguarded_change_breaks_retries_and_doubles_vendors_in_flight():
    report = simulate_deploy(ob.onboard_vendor_v2_unpatched, runs_per_point=2)
    assert outcomes(report) == {"approval wait": {"ok": 2},
                                "retry backoff": {"diverged: different_call": 2},
                                "attempt in flight": {"duplicate effect": 2}}
    retry = report.frame[report.frame["parked"] == "retry backoff"]
    assert set(retry["position"]) == {8} and set(retry["predicted"]) == {"diverged"}
    assert report.broken == 4


def test_patched_change_with_a_graceful_stop_breaks_nothing():
    hurried = simulate_deploy(ob.onboard_vendor_v2, runs_per_point=2)
    assert outcomes(hurried)["attempt in flight"] == {"duplicate effect": 2}   # no drain
    safe = simulate_deploy(ob.onboard_vendor_v2, runs_per_point=2, drain=True)
    assert safe.broken == 0 and set(safe.frame["predicted"]) == {"ok"}
    assert set(safe.frame["vendors"]) == {1}


def test_the_report_draws_one_bar_per_parking_point():
    fig = simulate_deploy(ob.onboard_vendor_v2_unpatched, runs_per_point=1).plot()
    ax = fig.axes[0]
    assert [t.get_text() for t in ax.get_yticklabels()] == list(POINTS)
    assert ax.get_xlabel() == "runs" and ax.get_legend() is not None


def test_bad_arguments_are_refused_with_the_fix():
    def other(ctx, _):
        return None
    with pytest.raises(ValueError, match="version_of"):
        simulate_deploy(other)
    with pytest.raises(ValueError, match="runs_per_point"):
        simulate_deploy(ob.onboard_vendor, runs_per_point=0)
