"""Brooker's backoff-and-jitter experiment as a plain-Python discrete-event simulation.

    .venv/bin/python bench/brooker.py               # 100 trials at 10, 50 and 100 clients
    .venv/bin/python bench/brooker.py --quick       # CI: 10 trials; seconds
    .venv/bin/python bench/brooker.py --clients 150 190 --trials 100
    .venv/bin/python bench/brooker.py --durablelab --trials 5   # beside the reproduction
    .venv/bin/python bench/brooker.py --durablelab --quick      # 1 trial each
    .venv/bin/python bench/brooker.py --durablelab --no-sticky    # replayed on every wake-up

The peer a durablelab reproduction of Marc Brooker's "Exponential Backoff And Jitter" (AWS
Architecture Blog, 2015) is measured against (issue 24): the same model, written here from
the facts in the post (../shared/research/retry-literature.md), with none of the engine's
work. N clients each want one successful write to a single row under optimistic
concurrency. A client sends a read; the server answers with the row's version as it stands
when the read arrives; the client then sends a write carrying that version, which the server
accepts only if no other write was accepted in between (the version is unchanged) and
answers either way. Every one-way message takes |N(10, 2)| ms. After its n-th refused write
(n from 1) a client waits its backoff, then reads again; it stops at its first accepted
write. Base 5 ms, cap 2,000 ms. Five strategies:

  none          no wait;
  exponential   min(cap, base * 2**n): 10, 20, 40 ... ms;
  full          U(0, that);
  equal         that / 2 + U(0, that / 2);
  decorrelated  min(cap, U(base, 3 * previous)), the previous wait starting at base.

Work is the number of writes sent; time is when the last client learned that its write was
accepted (the makespan). Each figure is the mean over trials (trial t uses seed t), printed
beside the mean over 100 trials that the post's own simulator gives (the research file's
table) and the difference from it in per cent. Nothing here is timed against a target: the
run's own wall time is printed, as the yardstick a durablelab reproduction of the same
trials will be divided by.

With ``--durablelab`` the same trials run again as a durablelab reproduction with the
public API (`durablelab.examples.brooker`: one `dl.sweep` per strategy, a run per client,
``contention="per_seed"``, `ctx.retry` around a read and a write of one
`dl.sim.OCCResource`, the network through `dl.sim.after`), every attempt recorded; its
work and time are printed beside this simulation's, with the wall-time ratio per client
count (the issue's targets: at most 3x at 100 clients, at most 10x at 10). The simulation's
time there is the fastest of three runs of it; the reproduction runs once. Its runs stay
kept in memory between wake-ups, as `dl.sweep` keeps them by default (`durablelab/sticky.py`);
``--no-sticky`` replays each from the top on every wake-up instead (the same tables, slower).
bench/brooker_cpu.py counts CPU seconds of both in one run.
"""

from __future__ import annotations

import argparse
import heapq
import math
import random
import statistics
import sys
import time

BASE, CAP = 5.0, 2000.0                     # ms
NETWORK_MEAN, NETWORK_SD = 10.0, 2.0        # ms, each one-way message
STRATEGIES = ("none", "exponential", "full", "equal", "decorrelated")

#: (writes, time in ms): the mean over 100 trials of the post's simulator, by clients and
#: strategy (the research file's table).
PUBLISHED = {
    10: {"none": (51, 382), "exponential": (51, 3590), "full": (39, 465),
         "equal": (42, 733), "decorrelated": (38, 435)},
    50: {"none": (687, 1133), "exponential": (625, 36238), "full": (332, 2922),
         "equal": (347, 4303), "decorrelated": (376, 2165)},
    100: {"none": (2422, 2027), "exponential": (1854, 62863), "full": (797, 4879),
          "equal": (812, 6658), "decorrelated": (1003, 4531)},
    150: {"none": (5143, 2873), "exponential": (3549, 86037), "full": (1317, 6285),
          "equal": (1324, 8246), "decorrelated": (1759, 6603)},
    190: {"none": (7998, 3538), "exponential": (5187, 101357), "full": (1771, 7428),
          "equal": (1759, 9487), "decorrelated": (2441, 7888)},
}


def backoff(strategy: str, failures: int, previous: float, rng: random.Random) -> float:
    """Milliseconds to wait after a client's `failures`-th refused write (from 1);
    `previous` is its last wait (BASE before the first), which only decorrelated reads."""
    if strategy == "none":
        return 0.0
    if strategy == "decorrelated":
        return min(CAP, rng.uniform(BASE, 3 * previous))
    exponential = min(CAP, BASE * 2 ** failures)
    if strategy == "exponential":
        return exponential
    if strategy == "full":
        return rng.uniform(0, exponential)
    if strategy == "equal":
        return exponential / 2 + rng.uniform(0, exponential / 2)
    raise ValueError(f"unknown strategy {strategy!r}; one of {', '.join(STRATEGIES)}")


# event kinds, in the order a client goes through them
READ_ARRIVES, READ_ANSWERED, WRITE_ARRIVES, WRITE_ANSWERED = range(4)


def trial(clients: int, strategy: str, seed: int) -> tuple[int, float]:
    """One trial: (writes sent, ms until the last client learned of its success)."""
    rng = random.Random(seed)
    def network() -> float:
        return abs(rng.gauss(NETWORK_MEAN, NETWORK_SD))
    version = 0
    read_version = [0] * clients      # the version each client's latest read saw
    failures = [0] * clients
    waited = [BASE] * clients         # decorrelated jitter's "previous" wait
    writes, makespan = 0, 0.0
    events = []                       # (instant ms, sequence, kind, client, accepted)
    sequence = 0
    for client in range(clients):     # everyone sends a read at t=0
        events.append((network(), sequence, READ_ARRIVES, client, False))
        sequence += 1
    heapq.heapify(events)
    while events:
        now, _, kind, client, accepted = heapq.heappop(events)
        if kind == READ_ARRIVES:
            read_version[client] = version
            event = (now + network(), sequence, READ_ANSWERED, client, False)
        elif kind == READ_ANSWERED:
            writes += 1
            event = (now + network(), sequence, WRITE_ARRIVES, client, False)
        elif kind == WRITE_ARRIVES:
            accepted = read_version[client] == version
            if accepted:
                version += 1
            event = (now + network(), sequence, WRITE_ANSWERED, client, accepted)
        elif accepted:                # WRITE_ANSWERED: done
            makespan = max(makespan, now)
            continue
        else:
            failures[client] += 1
            wait = backoff(strategy, failures[client], waited[client], rng)
            waited[client] = wait
            event = (now + wait + network(), sequence, READ_ARRIVES, client, False)
        heapq.heappush(events, event)
        sequence += 1
    return writes, makespan


def experiment(clients: int, strategy: str, trials: int) -> tuple[float, float]:
    """(mean writes, mean makespan in ms) over trials with seeds 0 .. trials - 1."""
    results = [trial(clients, strategy, seed) for seed in range(trials)]
    return (statistics.fmean(w for w, _ in results), statistics.fmean(t for _, t in results))


def table(clients_list, trials: int) -> list[dict]:
    rows = []
    for clients in clients_list:
        for strategy in STRATEGIES:
            started = time.perf_counter()
            writes, makespan = experiment(clients, strategy, trials)
            wall = time.perf_counter() - started
            published = PUBLISHED.get(clients, {}).get(strategy)
            rows.append({"clients": clients, "strategy": strategy, "writes": writes,
                         "time_ms": makespan, "published": published, "wall_s": wall})
    return rows


def _off(ours: float, theirs: float | None) -> str:
    return "" if theirs is None else f"{100 * (ours - theirs) / theirs:+.1f}%"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="10 trials (CI)")
    parser.add_argument("--trials", type=int, default=None, help="trials per figure (100)")
    parser.add_argument("--clients", type=int, nargs="+", default=[10, 50, 100])
    parser.add_argument("--durablelab", action="store_true",
                        help="also run the durablelab reproduction on the same trials "
                             "(5 trials; 1 with --quick) and print the wall-time ratio")
    parser.add_argument("--no-sticky", action="store_true",
                        help="with --durablelab: replay runs from the top on every wake-up "
                             "(dl.sweep(sticky=False)) instead of resuming their kept code")
    args = parser.parse_args(argv)
    trials = args.trials or (10 if args.quick else 100)
    started = time.perf_counter()
    rows = table(args.clients, trials)
    print(f"Brooker (2015), plain-Python discrete-event simulation, {trials} trials per "
          f"figure; published: his simulator's mean over 100 trials")
    print(f"{'clients':>7} {'strategy':<13} {'writes':>9} {'published':>9} {'diff':>7} "
          f"{'time ms':>9} {'published':>9} {'diff':>7} {'wall s':>7}")
    for row in rows:
        pw, pt = row["published"] or (None, None)
        print(f"{row['clients']:>7} {row['strategy']:<13} {row['writes']:>9.1f} "
              f"{'' if pw is None else pw:>9} {_off(row['writes'], pw):>7} "
              f"{row['time_ms']:>9.0f} {'' if pt is None else pt:>9} "
              f"{_off(row['time_ms'], pt):>7} {row['wall_s']:>7.3f}")
    by = {(r["clients"], r["strategy"]): r for r in rows}
    if 100 in args.clients:
        full, expo, equal = by[100, "full"], by[100, "exponential"], by[100, "equal"]
        print(f"\nAt 100 clients: exponential does {expo['writes'] / full['writes']:.2f}x the "
              f"work of full jitter (published 2.33x) and takes "
              f"{expo['time_ms'] / full['time_ms']:.1f}x the time (12.9x); equal jitter "
              f"{equal['writes'] / full['writes']:.2f}x the work (1.02x), "
              f"{equal['time_ms'] / full['time_ms']:.2f}x the time (1.36x).")
    print(f"wall time: {time.perf_counter() - started:.2f} s in all")
    if args.durablelab:
        compare(args.clients, args.trials or (1 if args.quick else 5), not args.no_sticky)
    return 0


def compare(clients_list, trials: int, sticky: bool = True) -> None:
    """The durablelab reproduction beside this simulation, on the same trials (its runs
    kept between wake-ups, or, `sticky` False, replayed from the top on each)."""
    sys.path.insert(0, str(__import__("pathlib").Path(__file__).resolve().parent.parent))
    import os
    os.environ.setdefault("TQDM_DISABLE", "1")
    from durablelab.examples import brooker as reproduction
    reproduction.reproduce(5, "full", 1, sticky=sticky)   # imports and first calls, not measured
    print(f"\ndurablelab reproduction (durablelab.examples.brooker, runs "
          f"{'sticky' if sticky else 'replayed'}) beside this simulation, {trials} trials each")
    print(f"{'clients':>7} {'strategy':<13} {'writes':>8} {'dl':>8} {'diff':>7} "
          f"{'time ms':>8} {'dl':>8} {'diff':>7} {'wall s':>7} {'dl s':>7} {'ratio':>7}")
    for clients in clients_list:
        ours_total = theirs_total = 0.0
        for strategy in STRATEGIES:
            # The simulation takes milliseconds, so a busy machine's hiccup can double its
            # time: the fastest of three is its time.
            theirs = math.inf
            for _ in range(3):
                began = time.perf_counter()
                writes, makespan = experiment(clients, strategy, trials)
                theirs = min(theirs, time.perf_counter() - began)
            began = time.perf_counter()
            dl_writes, dl_makespan, _ = reproduction.reproduce(clients, strategy, trials,
                                                               sticky=sticky)
            ours = time.perf_counter() - began
            ours_total += ours
            theirs_total += theirs
            print(f"{clients:>7} {strategy:<13} {writes:>8.1f} {dl_writes:>8.1f} "
                  f"{_off(dl_writes, writes):>7} {makespan:>8.0f} {dl_makespan:>8.0f} "
                  f"{_off(dl_makespan, makespan):>7} {theirs:>7.3f} {ours:>7.2f} "
                  f"{ours / theirs:>6.0f}x", flush=True)
        target = {10: 10, 100: 3}.get(clients)
        print(f"{clients:>7} all five: durablelab {ours_total:.2f} s, this simulation "
              f"{theirs_total:.3f} s: {ours_total / theirs_total:.0f}x"
              f"{f' (target: at most {target}x)' if target else ''}", flush=True)


if __name__ == "__main__":
    sys.exit(main())
