"""Retry amplification: client retries inside an activity multiply the load the engine's
retries put on a service that is down, and buy nothing."""

from durablelab.lab.amplification import amplification_plot, retry_amplification


def test_client_retries_multiply_the_calls_and_buy_nothing():
    frame = retry_amplification(client_retries=(0, 2), engine_attempts=(3, 6), outage=10.0)
    rows = {(r.client_retries, r.engine_attempts): r for r in frame.itertuples()}
    # During the outage each engine attempt costs 1 + client retries requests.
    assert rows[0, 3].calls == 3 and rows[2, 3].calls == 9
    # The engine's backoff (1, 2, 4, 8 s) outlasts a 10 s outage on its fifth attempt;
    # client retries happen back to back inside an attempt and change nothing about that.
    for retries in (0, 2):
        assert (rows[retries, 3].status, rows[retries, 6].status) == ("failed", "completed")
        assert rows[retries, 6].attempts == 5 and rows[retries, 6].finished_at == 15.0
    assert rows[2, 6].calls == 4 * 3 + 1          # four failed attempts x 3, then success
    fig = amplification_plot(frame)
    assert fig.axes[0].get_ylabel() == "requests the service received"
