"""A world and a workflow for the sweep tests of arrivals, per-seed contention and series:
two clients on one optimistic-concurrency row, with answer delays given by the input, so
every schedule is known by hand (see tests/test_sim_after.py for the same pair in one
engine). Importable by name, so the sweep's data form can carry them."""

import durablelab as dl

ONCE = dl.RetryPolicy(max_attempts=1)
SCOPE = dl.RetryPolicy(max_attempts=5, initial=0.5, backoff=2, jitter="none")


class Row:
    def __init__(self, clock=None):
        self.row = dl.sim.OCCResource()

    def read(self, seconds):
        return dl.sim.after(seconds, value=self.row.read())

    def write(self, version, seconds):
        try:
            return dl.sim.after(seconds, value=self.row.write(version))
        except dl.sim.WriteConflict as conflict:
            return dl.sim.after(seconds, error=conflict)


def rmw(ctx, delays):
    read, write = delays
    version = ctx.activity("read", ctx.world.read, read, policy=ONCE)
    return ctx.activity("write", ctx.world.write, version, write, policy=ONCE)


def client(ctx, delays):
    return ctx.retry(SCOPE, rmw, delays)
