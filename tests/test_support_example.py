"""The support fleet of lesson 16 (durablelab.examples.support): the same day on every run,
with what the lesson reads off it: a morning of 429s, a flaky order service, five huge
attachments, refunds whose approval deadline falls in the evening, and a three-day wait."""

from __future__ import annotations

import pandas as pd
import pytest

import durablelab as dl
from durablelab.examples import support
from durablelab.examples.support import DAY, HOUR


def play(until: float):
    engine = dl.Engine()
    engine.world = support.SupportWorld(engine.clock)
    day = support.Day(engine, n=200, seed=17)
    day.run_until(until)
    return engine, day


@pytest.fixture(scope="module")
def evening():
    """The day up to 18:00, when the lesson's workers stop."""
    return play(18 * HOUR)


def test_the_day_is_the_same_on_every_run(evening):
    first, _ = evening
    again, _ = play(18 * HOUR)
    pd.testing.assert_frame_equal(first.runs(), again.runs())
    assert first.world.llm.calls == again.world.llm.calls


def test_the_day_meets_a_rate_limit_a_flaky_tool_and_huge_attachments(evening):
    engine, day = evening
    runs = engine.runs()
    assert len(runs) == 200 and set(runs.status) == {"completed", "waiting"}
    assert engine.world.llm.usage["rate_limited"] > 100          # the 08:00 backlog
    assert sum(1 for t in day.tickets if t["at"] == support.OPEN_AT) == 50
    orders = engine.world.orders
    assert len(orders.effects) == 200 < len(orders.calls)          # 503s, then retried
    attached = [t for t in day.tickets if t["attachment"]]
    assert len(attached) == 5
    assert [len(support.document(name)) for name in support.DOCUMENTS] == [320_000, 180_000]


def test_with_no_worker_after_18_refund_deadlines_pass_in_the_evening(evening):
    engine, _ = evening
    waiting = engine.runs("waiting")
    late = waiting[waiting.waiting_until < 21.5 * HOUR]
    assert len(late) > 0 and set(late.waiting_on) == {"signal:approval"}
    assert (late.waiting_until > 18 * HOUR).all()    # each would have fired after 18:00


def test_customers_who_never_answer_wait_three_days():
    engine, day = play(4 * DAY)
    assert set(engine.runs().status) == {"completed"}
    closed = [t for t in day.tickets if t["kind"] == "damaged"
              and not any(p[2] == "customer_reply" and p[3] == t["id"] for p in day.plan)]
    run = engine.run(closed[0]["id"])
    assert run.result["outcome"] == "closed without reply"
    assert run.ended_at - run.started_at >= support.REPLY
