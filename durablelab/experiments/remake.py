"""Making a sweep's runs again, on demand.

A sweep keeps a row of metrics per run, not its history: thousands of histories would cost
more to store than to make again, and a sweep is deterministic (same code, seed, plan,
policies and run id: the same history, byte for byte). So ``experiment.runs()`` re-runs
what it is asked for, in a fresh engine around a fresh world, exactly as the sweep ran it,
and checks the run against its row: a run that comes out different means the workflow or
the world changed since the sweep, and is an error rather than a quiet surprise.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from ..clock import VirtualClock
from ..engine import Engine
from ..registry import workflow_name
from ..errors import SweepError
from ..faults import FaultPlan
from ..retry import Overrides
from .runner import duplicate_effects, parts, run_metrics

_CHECKED = ("status", "virtual_duration", "attempts", "retries", "history_events")


class LazyRuns(Sequence):
    """The runs of an experiment, in `frame` order, each made when first asked for."""

    def __init__(self, experiment, workflow=None, world=None):
        self._experiment = experiment
        spec = experiment.spec
        source = experiment._source
        if source is not None:   # the sweep's own workflow and world, unless given
            workflow = source.workflow if workflow is None else workflow
            world = source.world if world is None else world
        if workflow is None:
            raise SweepError(
                f"experiment.runs(): this experiment was loaded from a file, which names its "
                f"workflow ({spec['workflow']}) but never carries code. Pass it: "
                f"experiment.runs(workflow=my_workflow, world=my_world_factory).",
                argument="workflow")
        if workflow_name(workflow) != spec["workflow"]:
            raise SweepError(
                f"experiment.runs(workflow={workflow_name(workflow)}): the sweep ran "
                f"{spec['workflow']}; pass that workflow.", argument="workflow")
        if world is None and spec.get("world") is not None:
            raise SweepError(
                f"experiment.runs(): the sweep ran with the world {spec['world']}, and a run "
                f"made again without it would not be the run measured. Pass it: "
                f"experiment.runs(workflow=..., world={spec['world'].rpartition(':')[2]}).",
                argument="world")
        self._workflow, self._world = workflow, world
        self._ids = list(experiment.frame["run_id"])
        self._index = {run_id: i for i, run_id in enumerate(self._ids)}
        self._made: dict = {}
        self._engines: dict = {}   # cell (contention) or run id -> (engine, world)

    def __len__(self) -> int:
        return len(self._ids)

    def __getitem__(self, key):
        if isinstance(key, slice):
            return [self[i] for i in range(*key.indices(len(self)))]
        if isinstance(key, str):
            if key not in self._index:
                raise KeyError(f"no run {key!r} in this experiment; run ids are "
                               f"'policy/fault_plan/seed/input', e.g. {self._ids[0]!r}")
            key = self._index[key]
        run_id = self._ids[key]
        if run_id not in self._made:
            self._make(run_id)
        return self._made[run_id]

    def _make(self, run_id: str) -> None:
        spec, frame = self._experiment.spec, self._experiment.frame
        row = frame.iloc[self._index[run_id]]
        policy, plan = row["policy"], row["fault_plan"]
        key = (policy, plan) if spec["contention"] else run_id
        if key not in self._engines:
            self._engines[key] = self._run(spec, frame, row, policy, plan)
        engine, world = self._engines[key]
        state = engine.working_state(run_id)
        self._check(row, state, world)
        self._made[run_id] = engine.run(run_id)
        if not spec["contention"]:
            del self._engines[key]
            engine.close()

    def _run(self, spec, frame, row, policy, plan):
        """A fresh engine that has run `row`'s run again (with contention: its whole cell,
        which shares one world). With contention the engine is kept for the cell's other
        runs; an isolated run's is closed once its `Run` is read."""
        overrides = spec["policies"][policy]
        plan_json = spec["fault_plans"][plan]
        faults = None if plan_json is None else FaultPlan.from_json(json.dumps(plan_json))
        policies = None if overrides is None else Overrides(overrides).to_dict()
        if spec["contention"]:   # one world for the whole cell: make the cell again
            members = frame[(frame["policy"] == policy) & (frame["fault_plan"] == plan)]
        else:
            members = frame.iloc[[self._index[row["run_id"]]]]
        clock = VirtualClock()
        world = self._world(clock) if self._world is not None else None
        engine = Engine(clock=clock, world=world)
        for input_index, member_id, seed in zip(members["input"], members["run_id"],
                                                members["seed"]):
            engine.start(self._workflow, spec["inputs"][int(input_index)], run_id=member_id,
                         faults=faults, seed=int(seed), timeout=spec["timeout"],
                         policies=policies)
        engine.run_until_idle()
        return engine, world

    @staticmethod
    def _check(row, state, world) -> None:
        crashes = 0   # not compared: it depends on other runs' timing with contention
        again = run_metrics(state, crashes, duplicate_effects(
            parts(world), {state.run_id}).get(state.run_id, 0))
        differs = [c for c in _CHECKED if again[c] != row[c]]
        if differs:
            raise SweepError(
                f"run {row['run_id']!r} came out differently when made again ("
                + ", ".join(f"{c}: {row[c]!r} in the sweep, {again[c]!r} now" for c in differs)
                + "). The workflow, the world or durablelab changed since the sweep; run the "
                  "sweep again to measure the code as it is now.", argument="workflow")


__all__ = ["LazyRuns"]
