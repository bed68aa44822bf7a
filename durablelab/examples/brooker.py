"""Marc Brooker's "Exponential Backoff And Jitter" (AWS Architecture Blog, 2015), with the
public API: N clients, one row, five retry strategies.

Each client is a run. It reads the row's version and writes back with it; under optimistic
concurrency the write is refused if another write landed since the read, and the client
retries the whole read-modify-write (`ctx.retry`, since writing the stale version again can
never succeed) after its strategy's backoff, until its write is accepted. Every one-way
message takes |N(10 ms, 2 ms)|. The five strategies, with base 5 ms and cap 2 s, are
`RetryPolicy` values (`POLICIES`): none, exponential (10, 20, 40 ... ms), full jitter, equal
jitter and decorrelated jitter (which grows from the base, so its ``initial`` is 5 ms).

`reproduce(clients, strategy, trials)` runs one `dl.sweep` with ``contention="per_seed"``:
each seed is one trial in which all the clients (the inputs) contend for one row. Work is
the writes sent (every attempt of the ``write`` activity); time is the makespan (when the
last client learned its write was accepted). `bench/brooker.py` runs this beside a
plain-Python simulation of the same model, and prints both. `trials` gives the work and
time of every trial at several client counts, and `plot` draws the post's two charts from
it (lesson 18).

The network through `dl.sim.after`. A service acts when a request *arrives*, but an
activity's function runs when its attempt *starts*. So each activity here starts at the
instant its request reaches the row, and the delay it answers with carries the reply's
way back plus the client's next message on its way out (the client sends it the moment the
reply lands, or, after a refused write, once its backoff is over: the backoff and the way
out add up either way). The first read's way out is folded into the first answer: no
write can land before the first read arrives (that takes three messages), so the version
it reads at its start is the one it would read on arrival. An accepted write answers with
the reply alone: that instant is when the client learns it is done. Each message's delay
is drawn from a hash of the attempt's idempotency key, so a trial depends only on its seed
(the run ids carry it), and the same sweep gives the same table.
"""

from __future__ import annotations

import hashlib
import math

import durablelab as dl

MS = 0.001
BASE, CAP = 5 * MS, 2000 * MS
NETWORK_MEAN, NETWORK_SD = 10 * MS, 2 * MS

#: the post's five strategies as the policies of the client's retry scope.
POLICIES = {
    "none": dl.RetryPolicy(max_attempts=None, initial=0.0, max_interval=0.0, jitter="none"),
    "exponential": dl.RetryPolicy(max_attempts=None, initial=2 * BASE, backoff=2.0,
                                  max_interval=CAP, jitter="none"),
    "full": dl.RetryPolicy(max_attempts=None, initial=2 * BASE, backoff=2.0,
                           max_interval=CAP, jitter="full"),
    "equal": dl.RetryPolicy(max_attempts=None, initial=2 * BASE, backoff=2.0,
                            max_interval=CAP, jitter="equal"),
    "decorrelated": dl.RetryPolicy(max_attempts=None, initial=BASE, max_interval=CAP,
                                   jitter="decorrelated"),
}
STRATEGIES = tuple(POLICIES)
#: each activity runs once: the scope, not the activity, retries.
ONCE = dl.RetryPolicy(max_attempts=1)


def _uniforms(key: str) -> tuple[float, float]:
    digest = hashlib.blake2b(key.encode(), digest_size=16).digest()
    return ((int.from_bytes(digest[:8], "big") >> 11) + 0.5) * 2.0 ** -53, \
        (int.from_bytes(digest[8:], "big") >> 11) * 2.0 ** -53


def network(key: str) -> float:
    """One message's delay in seconds, |N(10 ms, 2 ms)|, a pure function of `key`
    (Box-Muller on two hashed uniforms)."""
    u, v = _uniforms(key)
    return abs(NETWORK_MEAN + NETWORK_SD * math.sqrt(-2.0 * math.log(u))
               * math.cos(2.0 * math.pi * v))


class Row:
    """The world of one trial: one `dl.sim.OCCResource`, reached over the network."""

    def __init__(self, clock=None):
        self.row = dl.sim.OCCResource()

    def read(self, first: bool):
        """The version, as the read arrives; answered after the way back and the write's
        way out (and, the first time, the read's own way out)."""
        key = dl.idempotency_key()
        legs = network(key + "/0") + network(key + "/1")
        if first:
            legs += network(key + "/2")
        return dl.sim.after(legs, value=self.row.read())

    def write(self, version: int):
        """The write, as it arrives: accepted (answered after the way back), or refused
        (answered after the way back and the next read's way out)."""
        key = dl.idempotency_key()
        try:
            return dl.sim.after(network(key + "/0"), value=self.row.write(version))
        except dl.sim.WriteConflict as conflict:
            return dl.sim.after(network(key + "/0") + network(key + "/1"), error=conflict)


def read_modify_write(ctx: dl.Context, first: list) -> int:
    """One try: read the version, write with it."""
    version = ctx.activity("read", ctx.world.read, first[0], policy=ONCE)
    first[0] = False
    return ctx.activity("write", ctx.world.write, version, policy=ONCE)


def client(ctx: dl.Context, strategy: str) -> int:
    """A client: one accepted write, retried whole under its strategy."""
    return ctx.retry(POLICIES[strategy], read_modify_write, [True])


def reproduce(clients: int, strategy: str, trials: int, **sweep_options):
    """One `dl.sweep` of `clients` clients for `trials` trials (seeds 0 .. trials - 1) under
    one strategy; returns (mean writes, mean makespan in ms, the Experiment)."""
    experiment = dl.sweep(client, [strategy] * clients, seeds=range(trials), world=Row,
                          contention="per_seed", **sweep_options)
    load = experiment.load
    writes = int(load.loc[load.source == "write", "requests"].sum()) / trials
    return writes, experiment.cells["makespan"].iloc[0] / MS, experiment


def trials(clients=(10, 25, 50, 100), strategies=STRATEGIES, seeds=range(1)):
    """Work and time of every trial: a row per (clients, strategy, seed) with ``writes``
    and ``time_ms``, from one `dl.sweep` per client count and strategy (`reproduce`)."""
    import pandas as pd
    seeds = list(seeds)
    rows = []
    for n in clients:
        for strategy in strategies:
            experiment = dl.sweep(client, [strategy] * n, seeds=seeds, world=Row,
                                  contention="per_seed")
            per_seed = experiment.frame.groupby("seed").agg(
                attempts=("attempts", "sum"), time=("virtual_duration", "max"))
            for seed, row in per_seed.iterrows():
                # a try is one read and one write, each made once: half the attempts write
                rows.append({"clients": n, "strategy": strategy, "seed": int(seed),
                             "writes": int(row.attempts) // 2, "time_ms": row.time / MS})
    return pd.DataFrame(rows)


def plot(frame, title: str | None = None):
    """The post's two charts from `trials`: work (writes sent) and completion time (ms, on
    a log scale: exponential backoff without jitter takes ten times longer than the rest)
    against the number of clients, a line per strategy, each point the mean over the
    frame's trials. A Figure that shows itself in a notebook."""
    from ..viz.plots import Figure

    means = frame.groupby(["strategy", "clients"], sort=False)[["writes", "time_ms"]].mean()
    runs = frame.groupby(["strategy", "clients"]).size()
    fig = Figure(figsize=(10, 3.8), layout="constrained")
    work, time = fig.subplots(1, 2)
    # Okabe-Ito colours and a marker each: told apart without colour vision too
    style = {"none": ("#000000", "o"), "exponential": ("#D55E00", "s"),
             "full": ("#0072B2", "^"), "equal": ("#009E73", "v"),
             "decorrelated": ("#CC79A7", "D")}
    names = {"none": "no backoff", "exponential": "exponential, no jitter",
             "full": "full jitter", "equal": "equal jitter",
             "decorrelated": "decorrelated jitter"}
    for strategy in dict.fromkeys(frame.strategy):
        rows = means.loc[strategy]
        color, marker = style.get(strategy, ("#999999", "."))
        for ax, column in ((work, "writes"), (time, "time_ms")):
            ax.plot(rows.index, rows[column], color=color, marker=marker,
                    label=names.get(strategy, strategy))
    work.set_ylabel("work: writes sent (all clients)")
    time.set_ylabel("completion time (ms, log scale)")
    time.set_yscale("log")
    for ax in (work, time):
        ax.set_xlabel("clients")
        ax.set_ylim(bottom=0 if ax is work else None)
        ax.grid(alpha=0.3)
    trials_per_point = int(runs.min())
    work.legend(title="one trial a point" if trials_per_point == 1 else
                f"mean of {trials_per_point} trials a point", fontsize=8, title_fontsize=8)
    fig.suptitle(title or "Brooker (2015): N clients, one row, optimistic concurrency")
    return fig


__all__ = ["POLICIES", "STRATEGIES", "Row", "client", "reproduce", "network", "trials",
           "plot"]
