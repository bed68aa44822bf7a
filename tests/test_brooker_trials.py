"""brooker.trials, which lesson 18's charts are drawn from: each trial's work and time are
what `reproduce` averages, read per seed from the sweep's table."""

import pytest

from durablelab.examples import brooker


def test_trials_give_reproduces_means_per_seed():
    frame = brooker.trials(clients=(4,), strategies=("full", "exponential"), seeds=range(3))
    assert list(frame.columns) == ["clients", "strategy", "seed", "writes", "time_ms"]
    assert len(frame) == 6 and (frame.writes >= 4).all()
    for strategy in ("full", "exponential"):
        writes, makespan, _ = brooker.reproduce(4, strategy, 3)
        rows = frame[frame.strategy == strategy]
        assert rows.writes.mean() == pytest.approx(writes)
        assert rows.time_ms.mean() == pytest.approx(makespan)


def test_one_client_writes_once_in_four_messages():
    row = brooker.trials(clients=(1,), strategies=("none",)).iloc[0]
    assert row.writes == 1 and 30 < row.time_ms < 50
