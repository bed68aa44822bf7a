"""A metastable failure: Marc Brooker's minimal model of congestive collapse (2023), with the
public API, and the three ways out that lesson 18 compares.

A *metastable failure* (Bronson et al., HotOS 2021; Huang et al., OSDI 2022) is a state a
system enters after a *trigger* (a load spike, a slow dependency) and stays in after the
trigger is gone, held there by its own reaction to it, here its clients' retries.

The world is one `dl.sim.Server`: a request that arrives with ``n`` others in flight is
served in ``1.0 + 0.01 * n`` seconds, fixed at arrival, and a request whose client gave up
is still served. Requests arrive as a Poisson process at 40 a second, 80 a second during
the trigger (20 s to 25 s by default). Each request is a run of `client`: one activity,
``call``, whose attempt times out 3 s after it was sent and is tried at most 3 times in
all. The network adds an exponential delay of mean 0.2 s to each answer (`LATENCY`: the
model's two ways of 0.1 s, put on the way back, so a request reaches the server the instant
its attempt starts). At 40 a second the server holds about 67 requests and answers in
about 1.7 s; retried at once, three tries of every request arrive, and the server, at 120
a second, has no resting point: latency keeps growing, every try times out, and goodput
(answers that came back in time) stays at 0 long after the spike.

`POLICIES` are the clients' retry policies: retries at once (``"no backoff"``), full
jitter over 20 s then 40 s, and retries at once limited by a `dl.RetryQuota` or a
`dl.AdaptiveThrottle`. `sweep` runs one `dl.sweep` of all of them on one trigger, one
world per policy and seed; `goodput` and `collapsed` read the paper's criterion (fewer
than 10 answers a second over 60 s to 80 s); `plot` draws `Experiment.series` per policy.
"""

from __future__ import annotations

import math
import random

import durablelab as dl
from durablelab.errors import bad_value, limit_error
from durablelab.faults import Latency

#: requests a second outside and during the trigger; the trigger's window (virtual s).
RATE, SPIKE, TRIGGER = 40.0, 80.0, (20.0, 25.0)
#: arrivals stop here; the paper measures goodput over WINDOW.
UNTIL, WINDOW = 80.0, (60.0, 80.0)
#: goodput (answers a second) below which a trial counts as collapsed.
COLLAPSED_BELOW = 10.0
#: seconds a client waits for an answer, and tries in all.
TIMEOUT, TRIES = 3.0, 3

#: the network: an exponential delay of mean 0.2 s added to every answer.
LATENCY = dl.FaultPlan([Latency("call", seconds=0.2, distribution="exponential")])

_AT_ONCE = dict(max_attempts=TRIES, initial=0.0, max_interval=0.0, jitter="none")
#: the clients' retry policies, by the name the figures use.
POLICIES = {
    "no backoff": dl.RetryPolicy(**_AT_ONCE),
    "backoff + jitter": dl.RetryPolicy(max_attempts=TRIES, initial=20.0, backoff=2.0,
                                       max_interval=40.0, jitter="full"),
    "retry quota": dl.RetryPolicy(**_AT_ONCE, budget=dl.RetryQuota()),
    "throttle": dl.RetryPolicy(**_AT_ONCE, throttle=dl.AdaptiveThrottle(k=2.0, window=120.0)),
}


def _positive(value) -> bool:
    return (not isinstance(value, bool) and isinstance(value, (int, float))
            and math.isfinite(value) and value > 0)


class World:
    """The world of one trial: one server whose latency grows with its load."""

    def __init__(self, clock=None):
        self.server = dl.sim.Server(base=1.0, per_request=0.01)


def client(ctx: dl.Context, request: int):
    """One request: a call to the server, timed out after `TIMEOUT` seconds (the policy
    says how often it is tried, and when)."""
    return ctx.activity("call", ctx.world.server.call, request, start_to_close=TIMEOUT,
                        policy=POLICIES["no backoff"])


def arrivals(seed: int = 0, rate: float = RATE, spike: float = SPIKE,
             trigger: tuple[float, float] | None = TRIGGER, until: float = UNTIL) -> list:
    """Instants (virtual seconds) of a Poisson process at `rate` a second, `spike` a second
    inside `trigger` (None: no trigger), up to `until`; the same list for the same seed.
    Raises `BadValue` for a rate that is not above 0, a trigger that ends before it starts
    or a horizon that is not above 0."""
    call = "metastable.arrivals(seed, rate, spike, trigger, until)"
    for name, value in (("rate", rate), ("spike", spike), ("until", until)):
        if not _positive(value):
            raise limit_error(call, name, value, "a finite number > 0 (requests a second, or "
                                                 "seconds for until)")
    if trigger is not None:
        if (not isinstance(trigger, (tuple, list)) or len(trigger) != 2
                or not all(_positive(t) or t == 0 for t in trigger) or trigger[1] < trigger[0]):
            raise bad_value(call, "trigger", f"trigger={trigger!r} must be (start, end) in "
                                             f"virtual seconds, 0 <= start <= end, e.g. (20, 25); "
                                             f"None for no trigger")
    rng = random.Random(f"arrivals:{seed}")
    start, end = trigger if trigger is not None else (until, until)
    instants, now = [], 0.0
    while True:
        inside = start <= now < end
        boundary = end if inside else (start if now < start else until)
        gap = rng.expovariate(spike if inside else rate)
        if now + gap >= boundary:          # memoryless: start afresh at the rate's change
            now = boundary
            if now >= until:
                return instants
            continue
        now += gap
        instants.append(now)


def sweep(policies=None, seeds=range(1), arrivals_seed: int = 0, **arrival_options):
    """One `dl.sweep`: a run per request of ``arrivals(arrivals_seed, ...)``, under each
    of `policies` (``{name: RetryPolicy}``; default `POLICIES`), one world per policy and
    seed. Returns the
    `Experiment` (``.series(every=1.0)`` gives goodput over time)."""
    at = arrivals(arrivals_seed, **arrival_options)
    return dl.sweep(client, list(range(len(at))),
                    policies=POLICIES if policies is None else policies,
                    fault_plans={"network": LATENCY}, seeds=seeds, world=World,
                    contention="per_seed", arrivals=at)


def goodput(experiment, window: tuple[float, float] = WINDOW):
    """Answers a second that came back in time during `window`, per policy and seed."""
    requests = experiment.requests
    start, end = window
    ok = requests[(requests.outcome == "ok") & (requests.ended_at >= start)
                  & (requests.ended_at < end)]
    counts = ok.groupby(["policy", "seed"]).size()
    index = requests.groupby(["policy", "seed"]).size().index
    return (counts.reindex(index, fill_value=0) / (end - start)).rename("goodput")


def collapsed(experiment, window: tuple[float, float] = WINDOW):
    """Per policy and seed: whether goodput over `window` stayed below `COLLAPSED_BELOW`."""
    return (goodput(experiment, window) < COLLAPSED_BELOW).rename("collapsed")


def plot(series, trigger: tuple[float, float] | None = TRIGGER,
         window: tuple[float, float] | None = WINDOW, trials: int = 1):
    """Requests the server saw, answers that came back in time (goodput) and requests the
    client refused itself, per second, one panel per policy, with the trigger shaded and
    the measured window marked. `series` is ``Experiment.series(every)``; its counts are
    divided by the bin's width and by `trials` (series sums a cell's trials). A Figure
    that shows itself in a notebook."""
    from ..viz.plots import Figure

    policies = list(dict.fromkeys(series.policy))
    every = float(series.start.iloc[1] - series.start.iloc[0]) if len(series) > 1 else 1.0
    fig = Figure(figsize=(10, 1.9 * len(policies) + 0.6), layout="constrained")
    axes = fig.subplots(len(policies), 1, sharex=True, sharey=True, squeeze=False)[:, 0]
    top = (max(series.seen.max(), series.refusals.max()) / every / trials) * 1.1
    for ax, policy in zip(axes, policies):
        rows = series[series.policy == policy]
        middle = rows.start + every / 2
        ax.plot(middle, rows.seen / every / trials, color="#E69F00",
                label="requests the server saw")
        ax.plot(middle, rows.goodput / every / trials, color="#0072B2", linewidth=2,
                label="goodput: answers in time")
        ax.plot(middle, rows.refusals / every / trials, color="#555555", linestyle=":",
                label="refused by the client (quota, throttle)")
        if trigger is not None:
            ax.axvspan(*trigger, color="#999999", alpha=0.3, linewidth=0,
                       label=f"trigger ({trigger[0]:g}-{trigger[1]:g} s)")
        if window is not None:
            ax.axvspan(*window, facecolor="none", edgecolor="#009E73", hatch="//",
                       linewidth=0, alpha=0.4, label=f"measured ({window[0]:g}-{window[1]:g} s)")
        ax.set_ylim(0, top)
        ax.set_ylabel("per second")
        ax.set_title(policy, loc="left", fontsize=10)
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside upper center", ncols=5, fontsize=8,
               frameon=False)
    axes[-1].set_xlabel("virtual time (s)")
    return fig


__all__ = ["POLICIES", "LATENCY", "World", "client", "arrivals", "sweep", "goodput",
           "collapsed", "plot", "RATE", "SPIKE", "TRIGGER", "UNTIL", "WINDOW",
           "COLLAPSED_BELOW", "TIMEOUT", "TRIES"]
