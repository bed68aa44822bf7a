"""dl.fault_matrix: failure kinds by policies, one metered model call per cell."""

import pytest

import durablelab as dl

POLICIES = {"no retries": dl.RetryPolicy(max_attempts=1),
            "3 attempts": dl.RetryPolicy(max_attempts=3, jitter="none")}


@pytest.fixture(scope="module")
def matrix():
    return dl.fault_matrix(POLICIES)


def cell(matrix, failure, policy):
    frame = matrix.frame
    (row,) = frame[(frame.failure == failure) & (frame.policy == policy)].itertuples()
    return row


def test_every_failure_kind_meets_every_policy(matrix):
    assert list(matrix.frame.failure.unique()) == list(dl.matrix.FAILURES)
    assert len(matrix.frame) == len(dl.matrix.FAILURES) * len(POLICIES)
    table = matrix.table()
    assert list(table.columns) == list(POLICIES) and list(table.index) == list(dl.matrix.FAILURES)


@pytest.mark.parametrize("failure", ["429 with Retry-After", "429 without Retry-After", "500",
                                     "503", "timeout", "connection reset", "hang"])
def test_transient_failures_are_ridden_out_by_retries_only(matrix, failure):
    blip = cell(matrix, failure, "3 attempts")
    assert (blip.retried, blip.attempts, blip.status) == (True, 3, "completed")
    alone = cell(matrix, failure, "no retries")
    assert (alone.retried, alone.attempts, alone.status) == (False, 1, "failed")


@pytest.mark.parametrize("failure", ["400", "401"])
def test_client_errors_are_never_retried(matrix, failure):
    for policy in POLICIES:
        row = cell(matrix, failure, policy)
        assert (row.retried, row.attempts, row.status, row.error_class, row.cost) == (
            False, 1, "failed", "NonRetryable", 0.0)


def test_costs_count_every_call_that_reached_the_provider(matrix):
    # A 429 never reaches the model: only the third attempt is billed.
    assert cell(matrix, "429 without Retry-After", "3 attempts").cost == pytest.approx(0.01)
    # A time-out's call ran and its answer was lost; a malformed answer was thrown away:
    # both are billed.
    assert cell(matrix, "timeout", "3 attempts").calls == 3
    assert cell(matrix, "schema violation", "no retries").calls == 3   # own budget of 2
    # Retry-After=30 s, twice: the call completes a minute later.
    assert cell(matrix, "429 with Retry-After", "3 attempts").virtual_duration == 60.0


def test_an_endless_failure_is_stopped_by_the_run_time_out():
    forever = dl.fault_matrix({"unlimited": dl.RetryPolicy(max_attempts=None, jitter="none",
                                                          max_interval=100)},
                              failures=["503"], times=None, timeout=3600)
    row = forever.frame.iloc[0]
    assert row.status == "failed" and row.error_class == "RunTimedOut"
    assert row.attempts > 30


def test_matrix_is_the_same_every_time(matrix):
    assert dl.fault_matrix(POLICIES).frame.equals(matrix.frame)


def test_matrix_plot_and_bad_arguments(matrix):
    fig = matrix.plot()
    assert [t.get_text().replace("\n", " ") for t in fig.axes[0].get_xticklabels()] == list(POLICIES)
    with pytest.raises(ValueError, match="unknown failure kind '418'"):
        dl.fault_matrix(POLICIES, failures=["418"])
    with pytest.raises(TypeError, match="'x' is 3, not a dl.RetryPolicy"):
        dl.fault_matrix({"x": 3})
    with pytest.raises(TypeError, match=r"a list of failure kinds, e.g. failures=\['500'\]"):
        dl.fault_matrix(POLICIES, failures="500")
    with pytest.raises(ValueError, match="'500' is given twice"):
        dl.fault_matrix(POLICIES, failures=["500", "500"])
    for times in (0, True, 1.5):
        with pytest.raises(ValueError, match="an int >= 1, or None"):
            dl.fault_matrix(POLICIES, times=times)
    with pytest.raises(ValueError, match="use 'summary' or one of"):
        matrix.table("colour")
    bare = dl.RetryPolicy(max_attempts=None, initial=0.0, backoff=1.0, max_interval=0.0)
    with pytest.raises(ValueError, match="'bare' retries without limit and without waiting"):
        dl.fault_matrix({"bare": bare}, times=None)


def test_a_retry_without_wait_rides_out_a_blip_at_one_instant():
    bare = dl.RetryPolicy(max_attempts=None, initial=0.0, backoff=1.0, max_interval=0.0)
    row = dl.fault_matrix({"bare": bare}, failures=["503"], times=5).frame.iloc[0]
    assert (row.status, row.attempts, row.virtual_duration) == ("completed", 6, 0.0)
