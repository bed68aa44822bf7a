"""Checkers for the exercises of lesson 18 (the literature, reproduced).

18.1 asks where Brooker's "decorrelated jitter finishes slightly sooner than full jitter"
stops holding as clients are added. Near that point the two differ by a few per cent, far
less than one trial's completion time varies from seed to seed, so the truth needs hundreds
of trials a point: more than a sweep gives in a checker's few seconds today. The checker
runs the same published model as a bare event loop (`_trial`, which draws exactly as
bench/brooker.py's reference simulation does; tests/test_exercises_18.py holds the two
equal, trial by trial, and bench/brooker.py --durablelab holds the lesson's sweep to it),
`TRIALS` trials at `MARGIN` clients either side of the learner's answer.
"""

from __future__ import annotations

import heapq
import numbers
import random
import statistics

from . import Stop, exercise

#: trials a point, and how far either side of the answer the checker looks (clients).
TRIALS, MARGIN = 200, 20
BASE, CAP = 5.0, 2000.0                     # ms
NETWORK_MEAN, NETWORK_SD = 10.0, 2.0        # ms, each one-way message


def _wait(strategy: str, failures: int, previous: float, rng: random.Random) -> float:
    """Brooker's backoff (ms) after a client's `failures`-th refused write."""
    if strategy == "decorrelated":
        return min(CAP, rng.uniform(BASE, 3 * previous))
    return rng.uniform(0, min(CAP, BASE * 2 ** failures))          # full jitter


def _trial(clients: int, strategy: str, seed: int) -> tuple[int, float]:
    """One trial of the post's model: (writes sent, ms until the last client was done).
    Every client reads the row's version, writes with it, and after a refused write waits,
    then reads again; each one-way message takes |N(10, 2)| ms."""
    rng = random.Random(seed)
    version, writes, makespan, sequence = 0, 0, 0.0, 0
    seen = [0] * clients                     # the version each client's last read saw
    failures = [0] * clients
    waited = [BASE] * clients
    # (instant, sequence, step, client, accepted); steps: 0 read arrives, 1 its answer
    # arrives, 2 the write arrives, 3 the write's answer arrives
    events = []
    for client in range(clients):
        events.append((abs(rng.gauss(NETWORK_MEAN, NETWORK_SD)), sequence, 0, client, False))
        sequence += 1
    heapq.heapify(events)
    while events:
        now, _, step, client, accepted = heapq.heappop(events)
        if step == 0:
            seen[client] = version
        elif step == 1:
            writes += 1
        elif step == 2:
            accepted = seen[client] == version
            version += accepted
        elif accepted:
            makespan = max(makespan, now)
            continue
        else:
            failures[client] += 1
            waited[client] = _wait(strategy, failures[client], waited[client], rng)
            now += waited[client]
            step = -1
        heapq.heappush(events, (now + abs(rng.gauss(NETWORK_MEAN, NETWORK_SD)), sequence,
                                step + 1, client, accepted if step == 2 else False))
        sequence += 1
    return writes, makespan


def decorrelated_over_full(clients: int, trials: int = TRIALS) -> float:
    """Mean completion time of decorrelated jitter over full jitter's, at `clients`
    clients, over trials with seeds 0 .. trials - 1 (below 1: decorrelated is faster)."""
    def mean_time(strategy):
        return statistics.fmean(_trial(clients, strategy, seed)[1] for seed in range(trials))
    return mean_time("decorrelated") / mean_time("full")


@exercise("18.1", "Where decorrelated jitter stops being faster",
          "a number of clients: below it decorrelated jitter finishes sooner than full "
          "jitter, above it later")
def where_it_reverses(clients):
    if isinstance(clients, bool) or not isinstance(clients, numbers.Real):
        raise Stop(f"give a number of clients, not {type(clients).__name__}")
    if not MARGIN + 10 <= clients <= 400:
        raise Stop(f"{clients!r} clients is outside the range this exercise is about "
                   f"(the published figures go up to 190 clients; give a number from "
                   f"{MARGIN + 10} to 400)")
    below, above = int(round(clients)) - MARGIN, int(round(clients)) + MARGIN
    lower = decorrelated_over_full(below)
    if lower < 1:
        yield True, (f"below it, at {below} clients, decorrelated jitter still finishes "
                     f"sooner than full jitter (mean over {TRIALS} trials)")
    else:
        yield False, (f"at {below} clients decorrelated jitter already finishes later than "
                      f"full jitter (mean over {TRIALS} trials): the reversal comes at fewer "
                      f"clients")
    upper = decorrelated_over_full(above)
    if upper > 1:
        yield True, (f"above it, at {above} clients, full jitter finishes sooner (mean over "
                     f"{TRIALS} trials)")
    else:
        yield False, (f"at {above} clients decorrelated jitter still finishes sooner than "
                      f"full jitter (mean over {TRIALS} trials): the reversal comes at more "
                      f"clients")
