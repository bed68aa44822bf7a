"""Seeded draws (durablelab.draws): a pure function of their key and index, uniform on
[0, 1), so fault plans and jitter fire the same way on every replay and in every process."""

import subprocess
import sys

from hypothesis import given
from hypothesis import strategies as st

import durablelab as dl
from durablelab.draws import Draws, first
from durablelab.faults import draw, draw_key


@given(st.text(), st.integers(1, 5))
def test_the_same_key_gives_the_same_numbers_in_range(key, count):
    a, b = Draws(key), Draws(key)
    xs = [a.random() for _ in range(count)]
    assert xs == [b.random() for _ in range(count)]
    assert xs[0] == Draws(key).random()
    assert all(0.0 <= x < 1.0 for x in xs)
    assert count == 1 or len(set(xs)) > 1


@given(st.integers(0, 2**63 - 1), st.integers(0, 50), st.integers(1, 10**6),
       st.integers(1, 100))
def test_a_first_draw_without_the_object_is_the_objects_first(seed, index, position, attempt):
    """The engine asks `first` whether a rule fires and goes on with `Draws(key, drawn=1)`
    only when it does: the same numbers as `faults.draw` gives."""
    key = draw_key(seed, index, position, attempt)
    rng = draw(seed, index, position, attempt)
    assert first(key) == rng.random()
    assert Draws(key, drawn=1).uniform(2, 5) == rng.uniform(2, 5)
    assert key == f"fault:{seed}:{index}:{position}:{attempt}".encode()


def test_the_numbers_are_the_same_in_another_process():
    """Python's hash() of a str is salted per process; these draws must not be."""
    code = ("from durablelab.draws import Draws; d = Draws('fault:7:0:3:1'); "
            "print(repr([d.random(), d.uniform(2, 5)]))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.strip()
    d = Draws("fault:7:0:3:1")
    assert out == repr([d.random(), d.uniform(2, 5)])


def test_draws_look_uniform_and_keys_independent():
    xs = [Draws(f"fault:{seed}:0:1:1").random() for seed in range(20_000)]
    assert abs(sum(xs) / len(xs) - 0.5) < 0.01
    deciles = [sum(1 for x in xs if k / 10 <= x < (k + 1) / 10) for k in range(10)]
    assert all(1_800 < n < 2_200 for n in deciles), deciles          # 2,000 expected each
    second = [Draws(f"fault:{seed}:0:1:1") for seed in range(2_000)]
    pairs = [(d.random(), d.random()) for d in second]
    both_low = sum(1 for x, y in pairs if x < 0.5 and y < 0.5) / len(pairs)
    assert abs(both_low - 0.25) < 0.04                              # successive draws independent


def test_uniform_stays_in_its_interval():
    d = Draws("retry:1:r:2:1")
    assert all(3.0 <= d.uniform(3.0, 4.5) <= 4.5 for _ in range(1_000))


def test_a_rule_fires_at_its_probability_and_the_same_way_on_replay():
    """p=0.3 fires on about 30 % of (seed, position, attempt) draws, and the engine's
    decision for a seed is the same in two engines."""
    fired = sum(draw(seed, 0, 1, 1).random() < 0.3 for seed in range(10_000))
    assert 2_800 < fired < 3_200

    def flaky(ctx, _):
        return [ctx.activity("call", lambda i: i, i) for i in range(20)]

    plan = dl.FaultPlan([dl.faults.ServerError("call", p=0.3)])
    attempts = []
    for _ in range(2):
        with dl.Engine() as engine:
            engine.start(flaky, None, run_id="r", faults=plan, seed=11)
            engine.run_until_idle()
            attempts.append(engine.run("r").attempts[["position", "attempt", "outcome",
                                                      "started_at"]].values.tolist())
    assert attempts[0] == attempts[1]
    assert any(row[2] == "transient" for row in attempts[0])
