"""`dl.sweep`: run one workflow under every (policy, fault plan, seed, input), and keep the
results in DuckDB.

A fault-injection experiment asks which retry policy survives which failures, at what cost.
A *cell* is one (policy, fault plan); it holds a run per (seed, input). Run ids are
``"{policy}/{fault_plan}/{seed}/{input index}"`` and every draw (faults, jitter,
``ctx.random()``) is a pure function of the seed, the run id and the position, so the same
sweep gives the same table, to the byte, in one process or in many.

Results go to DuckDB (a file at ``path``) one cell at a time, each in one transaction: a
sweep interrupted by Ctrl-C or a killed process keeps every finished cell, and the same
call with the same ``path`` redoes only the unfinished ones.
"""

from __future__ import annotations

import concurrent.futures as cf
import json
import math
import multiprocessing
import pickle
import sys
from pathlib import Path
from typing import Callable

import duckdb
import pyarrow as pa

from .. import history as h
from ..engine import workflow_name
from ..errors import SweepError
from ..faults import FaultPlan
from ..retry import Overrides, RetryPolicy
from .runner import METRICS, Isolated, run_contended

RESULTS_VERSION = 1
KEYS = ["input", "policy", "fault_plan", "seed", "run_id"]
_INT = {"input", "seed", "attempts", "activities", "retries", "crashes", "model_calls",
        "input_tokens", "output_tokens", "tokens", "duplicate_effects", "wakeups",
        "events_replayed", "history_events"}
_FLOAT = {"virtual_duration", "cost"}


def _arrow_type(column: str):
    if column in _INT or column.startswith("retries_"):
        return pa.int64()
    if column in _FLOAT:
        return pa.float64()
    return pa.string()


RUN_SCHEMA = pa.schema([("cell", pa.int64())] + [(c, _arrow_type(c)) for c in KEYS + METRICS])
LOAD_SCHEMA = pa.schema([("cell", pa.int64()), ("source", pa.string()),
                         ("second", pa.int64()), ("requests", pa.int64())])

DDL = f"""
CREATE TABLE IF NOT EXISTS sweep_meta (key VARCHAR PRIMARY KEY, value VARCHAR);
-- one row per run: its cell's index, its coordinates and its metrics (dl.compare's meaning)
CREATE TABLE IF NOT EXISTS sweep_runs ({', '.join(
    f'"{f.name}" ' + {pa.int64(): 'BIGINT', pa.float64(): 'DOUBLE'}.get(f.type, 'VARCHAR')
    for f in RUN_SCHEMA)});
-- requests per whole virtual second, per cell and per activity or stamping service
CREATE TABLE IF NOT EXISTS sweep_load (cell BIGINT, source VARCHAR, second BIGINT,
                                       requests BIGINT);
-- a cell's row lands in the same transaction as its runs: present means finished
CREATE TABLE IF NOT EXISTS sweep_cells (cell BIGINT PRIMARY KEY, policy VARCHAR,
                                        fault_plan VARCHAR);
"""


class Spec:
    """A sweep's arguments, checked and put in the form that travels to worker processes."""

    def __init__(self, workflow, inputs, policies, fault_plans, seeds, world, contention,
                 timeout):
        if not callable(workflow):
            raise SweepError(f"sweep(workflow={workflow!r}): a workflow is a function "
                             f"fn(ctx, input)", argument="workflow")
        self.workflow = workflow
        self.workflow_name = workflow_name(workflow)
        if isinstance(inputs, (str, bytes, dict)) or not hasattr(inputs, "__iter__"):
            raise SweepError(f"sweep(inputs={inputs!r}): give a list of workflow inputs (one "
                             f"run per input, seed and cell), e.g. [{{'order': 1}}]",
                             argument="inputs")
        self.inputs = list(inputs)
        if not self.inputs:
            raise SweepError("sweep(inputs=[]): give at least one input", argument="inputs")
        self.inputs_json = [h.to_json(v, f"input {i}", "dl.sweep(inputs=...)")
                            for i, v in enumerate(self.inputs)]
        self.policies = _named(policies, "policies", {"code": None}, _policy)
        self.plans = _named(fault_plans, "fault_plans", {"none": None}, _plan)
        self.seeds = _seeds(seeds)
        if world is not None and not callable(world):
            raise SweepError(f"sweep(world={world!r}): give a factory world(clock) that returns "
                             f"the simulated world (a class or a module-level function)",
                             argument="world")
        self.world = world
        self.contention = bool(contention)
        if timeout is not None and (isinstance(timeout, bool) or not isinstance(
                timeout, (int, float)) or not math.isfinite(timeout) or timeout <= 0):
            raise SweepError(f"sweep(timeout={timeout!r}): virtual seconds per run, > 0 (or "
                             f"None for none: a policy retrying forever then never ends)",
                             argument="timeout")
        self.timeout = None if timeout is None else float(timeout)
        self.cells = [(p, f) for p in self.policies for f in self.plans]

    def run_id(self, cell: int, seed: int, index: int) -> str:
        policy, plan = self.cells[cell]
        return f"{policy}/{plan}/{seed}/{index}"

    def runs_of(self, cell: int) -> list[tuple[int, int]]:
        """(input index, seed) of every run of a cell, in table order."""
        return [(i, seed) for seed in self.seeds for i in range(len(self.inputs))]

    def describe(self) -> dict:
        """The sweep as JSON data: what a results file and an export keep of it."""
        world = self.world
        return {"workflow": self.workflow_name, "inputs": [_loads(t) for t in self.inputs_json],
                "policies": {n: (None if o is None else o.to_dict())
                             for n, o in self.policies.items()},
                "fault_plans": {n: (None if p is None else _loads(p.to_json()))
                                for n, p in self.plans.items()},
                "seeds": self.seeds, "contention": self.contention, "timeout": self.timeout,
                "world": None if world is None else
                f"{getattr(world, '__module__', '?')}:{getattr(world, '__qualname__', repr(world))}"}


_loads = json.loads


def _named(values, argument: str, default: dict, convert) -> dict:
    if values is None:
        return default
    if not isinstance(values, dict) or not values:
        raise SweepError(f"sweep({argument}={values!r}): give a non-empty dict of names to "
                         f"values, e.g. {argument}={{'jitter': ...}}", argument=argument)
    out = {}
    for name, value in values.items():
        if not isinstance(name, str) or not name or "/" in name:
            raise SweepError(f"sweep({argument}): name {name!r} must be a non-empty string "
                             f"without '/' (run ids are 'policy/fault_plan/seed/input')",
                             argument=argument)
        out[name] = convert(value, f"sweep({argument}[{name!r}])")
    return out


def _policy(value, where: str) -> Overrides | None:
    if value is None:
        return None           # the policies the code passes
    if not isinstance(value, (RetryPolicy, dict)):
        raise SweepError(f"{where}: {value!r} is not a dl.RetryPolicy or a {{activity glob: "
                         f"RetryPolicy}} (None keeps the code's own policies)",
                         argument="policies")
    overrides = Overrides(value, where)
    for glob, policy in overrides.rules:
        if policy.max_attempts is None and policy.cap(1) == 0 and policy.max_interval == 0:
            raise SweepError(
                f"{where}: the policy for {glob!r} retries without limit and without waiting "
                f"(like tenacity's bare @retry). Under a virtual clock an attempt takes no "
                f"time, so a failing activity would retry at one instant forever and the "
                f"sweep's timeout would never come. Give it a wait, e.g. "
                f"dataclasses.replace(policy, initial=0.1, max_interval=0.1), or a limit "
                f"(max_attempts=...).", argument="policies")
    return overrides


def _plan(value, where: str) -> FaultPlan | None:
    if value is None or isinstance(value, FaultPlan):
        return value
    try:
        if isinstance(value, (list, tuple)):
            return FaultPlan(list(value))
        if isinstance(value, (str, Path)):
            return FaultPlan.from_json(value)
    except (TypeError, ValueError) as exc:
        raise SweepError(f"{where}: {exc}", argument="fault_plans") from None
    raise SweepError(f"{where}: {value!r} is not a dl.FaultPlan, a list of rules or a plan's "
                     f"JSON (None means no faults)", argument="fault_plans")


def _seeds(seeds) -> list[int]:
    if isinstance(seeds, int) and not isinstance(seeds, bool):
        raise SweepError(f"sweep(seeds={seeds!r}): give the seeds themselves, e.g. "
                         f"seeds=range({seeds})", argument="seeds")
    try:
        out = list(seeds)
    except TypeError:
        out = None
    if not out or any(isinstance(s, bool) or not isinstance(s, int) for s in out):
        raise SweepError(f"sweep(seeds={seeds!r}): give a non-empty range or list of ints",
                         argument="seeds")
    if len(set(out)) != len(out):
        raise SweepError(f"sweep(seeds=...): seed {_first_repeat(out)} appears twice; each "
                         f"seed makes one run per input and cell", argument="seeds")
    return out


def _first_repeat(values):
    seen = set()
    for v in values:
        if v in seen:
            return v
        seen.add(v)


# --- doing a job: some runs of one cell --------------------------------------------------
_WORKER: dict = {}


def _init_worker(spec_bytes: bytes) -> None:
    _WORKER["spec"] = pickle.loads(spec_bytes)
    _WORKER["runner"] = Isolated()


def _job_in_worker(job):
    return do_job(_WORKER["spec"], _WORKER["runner"], job)


def do_job(spec: Spec, runner: Isolated, job: tuple) -> tuple:
    """Run `job` = (cell, [(input index, seed), ...]); returns (cell, rows, load)."""
    cell, runs = job
    policy_name, plan_name = spec.cells[cell]
    overrides, plan = spec.policies[policy_name], spec.plans[plan_name]
    # {glob: RetryPolicy}: the policies themselves, not their JSON form, which every run's
    # start() would parse again (the run stores the same JSON either way).
    policies = None if overrides is None else dict(overrides.rules)
    load: dict = {}
    rows = []
    if spec.contention:
        listed = [(_loads(spec.inputs_json[i]), spec.run_id(cell, seed, i), seed)
                  for i, seed in runs]
        metrics = run_contended(spec.workflow, listed, policies, plan, spec.world,
                                spec.timeout, load)
    else:
        metrics = [runner.run(spec.workflow, _loads(spec.inputs_json[i]),
                              spec.run_id(cell, seed, i), policies, plan, seed, spec.world,
                              spec.timeout, load) for i, seed in runs]
    for (i, seed), m in zip(runs, metrics):
        rows.append({"cell": cell, "input": i, "policy": policy_name, "fault_plan": plan_name,
                     "seed": seed, "run_id": spec.run_id(cell, seed, i), **m})
    return cell, rows, load


# --- the results file ------------------------------------------------------------------------
class Results:
    """The sweep's DuckDB database (a file at `path`, or in memory)."""

    def __init__(self, path, spec: Spec):
        self.path = None if path is None else str(path)
        self.con = duckdb.connect(self.path or ":memory:")
        self.con.execute(DDL)
        described = json.dumps(spec.describe(), sort_keys=True)
        found = self.con.execute("SELECT value FROM sweep_meta WHERE key = 'spec'").fetchall()
        if found and found[0][0] != described:
            self.con.close()
            raise SweepError(
                f"sweep(path={self.path!r}): that file holds the results of another sweep "
                f"({_difference(json.loads(found[0][0]), spec.describe())}). Resuming only "
                f"continues the same sweep: give another path, or delete the file to start "
                f"over.", argument="path")
        if not found:
            self.con.execute("INSERT INTO sweep_meta VALUES ('spec', ?), ('version', ?)",
                             [described, str(RESULTS_VERSION)])

    def finished(self) -> set[int]:
        return {row[0] for row in self.con.execute("SELECT cell FROM sweep_cells").fetchall()}

    def write_cell(self, cell: int, spec: Spec, rows: list[dict], load: dict) -> None:
        runs = pa.Table.from_pylist(rows, schema=RUN_SCHEMA)
        loads = pa.Table.from_pylist(
            [{"cell": cell, "source": s, "second": sec, "requests": n}
             for (s, sec), n in sorted(load.items())], schema=LOAD_SCHEMA)
        self.con.execute("BEGIN")
        try:
            self.con.register("_runs", runs)
            self.con.register("_load", loads)
            self.con.execute("INSERT INTO sweep_runs SELECT * FROM _runs")
            self.con.execute("INSERT INTO sweep_load SELECT * FROM _load")
            self.con.execute("INSERT INTO sweep_cells VALUES (?, ?, ?)", [cell, *spec.cells[cell]])
            self.con.execute("COMMIT")
        except BaseException:
            self.con.execute("ROLLBACK")
            raise
        finally:
            for name in ("_runs", "_load"):
                try:
                    self.con.unregister(name)
                except duckdb.Error:
                    pass

    def frames(self):
        runs = self.con.execute("SELECT * FROM sweep_runs").df()
        load = self.con.execute("SELECT * FROM sweep_load").df()
        return runs, load

    def close(self) -> None:
        self.con.close()


def _difference(old: dict, new: dict) -> str:
    keys = [k for k in sorted(set(old) | set(new)) if old.get(k) != new.get(k)]
    return "it differs in " + ", ".join(keys) if keys else "it differs"


# --- dl.sweep ----------------------------------------------------------------------------------
def sweep(workflow: Callable, inputs, policies: dict | None = None,
          fault_plans: dict | None = None, seeds=range(10), world: Callable | None = None,
          contention: bool = False, processes: int | None = None,
          timeout: float | None = 7 * 86400, path=None, executor: cf.Executor | None = None):
    """Run `workflow` once per (input, policy, fault plan, seed); returns an `Experiment`.

    Use it to ask, before production, which retry policy survives which failures and at
    what cost: put the candidates in `policies`, the failures in `fault_plans`, and read
    ``experiment.cells`` (a row per policy and plan) or ``experiment.heatmap(...)``.

    Args:
        workflow: the workflow function ``fn(ctx, input)``.
        inputs: a list of workflow inputs (JSON values); the frame's ``input`` column is
            the index into this list.
        policies: ``{name: RetryPolicy | {activity glob: RetryPolicy} | None}``: each
            replaces the policies the code passes, as ``Engine.start(policies=)`` does;
            None keeps the code's own. Default ``{"code": None}``.
        fault_plans: ``{name: FaultPlan}`` (or rule lists, or plan JSON; None means no
            faults). Default ``{"none": None}``.
        seeds: the run seeds, e.g. ``range(100)``. Fault draws and jitter depend on the
            seed, the rule and the position, not on the input: runs of one seed with
            different inputs meet the same faults.
        world: a picklable factory ``world(clock)`` returning the simulated world
            (services, models, limiters) that workflow code reaches as ``ctx.world``.
        contention: True puts every run of a cell in one engine around one world, so they
            share its rate limits and collide (storms happen for real); False (default)
            gives each run its own world on its own clock, independent of the others.
        processes: worker processes for the cells (None: this process). Results are the
            same as in one process. Needs a picklable workflow and world.
        timeout: virtual seconds a run may take before it stops as `RunTimedOut` (so a
            policy that retries forever still ends); None for no limit.
        path: a DuckDB file for the results. The same call with the same path resumes an
            interrupted sweep: finished cells are kept, only the others run.
        executor: any `concurrent.futures.Executor` to run the jobs on instead of this
            process or `processes`: a Dask cluster's ``Client(...).get_executor(pure=False)``
            spreads a sweep over many machines. Jobs travel as data (the workflow's and the
            world's import paths, the policies, plans and seeds), run in an in-memory engine
            on a worker and come back as rows; each result is taken as it arrives and its
            future dropped, so a killed worker costs only the job it had in flight, which
            the executor runs again. The table is the serial one.

    Raises `SweepError` (a ValueError) for bad arguments, an unpicklable workflow or world
    with ``processes``, a workflow or world an ``executor``'s workers cannot import, or a
    `path` holding another sweep's results.
    """
    from .view import Experiment
    spec = Spec(workflow, inputs, policies, fault_plans, seeds, world, contention, timeout)
    if processes is not None and (isinstance(processes, bool) or not isinstance(processes, int)
                                  or processes < 1):
        raise SweepError(f"sweep(processes={processes!r}): give a number of worker processes "
                         f">= 1, or None to run in this process", argument="processes")
    if executor is not None:
        if processes is not None:
            raise SweepError("sweep(processes=..., executor=...): give one of them; an "
                             "executor brings its own workers", argument="executor")
        if not isinstance(executor, cf.Executor):
            raise SweepError(f"sweep(executor={executor!r}): give a concurrent.futures."
                             f"Executor, e.g. dask.distributed.Client(...).get_executor("
                             f"pure=False)", argument="executor")
        _importable(spec.workflow, "workflow")
        if spec.world is not None:
            _importable(spec.world, "world")
    spec_bytes = _pickled(spec) if executor is not None or (processes and processes > 1) \
        else None
    results = Results(path, spec)
    try:
        done = results.finished()
        todo = [c for c in range(len(spec.cells)) if c not in done]
        per_cell = len(spec.inputs) * len(spec.seeds)
        total = per_cell * len(spec.cells)
        from tqdm.auto import tqdm
        with tqdm(total=total, initial=per_cell * len(done), unit="run", desc="sweep",
                  disable=None) as bar:
            if executor is not None:
                _distributed(spec, spec_bytes, todo, results, bar, executor)
            elif spec_bytes is None:
                _serial(spec, todo, results, bar)
            else:
                _parallel(spec, spec_bytes, todo, results, bar, processes)
        runs, load = results.frames()
    finally:
        results.close()
    return Experiment._from_sweep(spec, runs, load, path)


def _pickled(spec: Spec) -> bytes:
    for what, obj in (("workflow", spec.workflow), ("world", spec.world)):
        try:
            pickle.dumps(obj)
        except Exception as exc:   # pickling raises many kinds (PicklingError, TypeError...)
            raise SweepError(
                f"sweep(processes=...): the {what} {obj!r} cannot be sent to a worker process "
                f"({type(exc).__name__}: {exc}). Define it at the top level of a module or "
                f"notebook cell (not a lambda or a nested function), or run without "
                f"processes.", argument=what) from None
    return pickle.dumps(spec)


def _importable(obj, what: str) -> None:
    """An executor's workers are other processes, often spawned on other machines: they
    find the workflow and the world by import path, so both must be importable there."""
    module = getattr(obj, "__module__", None)
    qualname = getattr(obj, "__qualname__", "")
    found = sys.modules.get(module) if module and module != "__main__" else None
    for part in qualname.split(".") if found is not None and "<" not in qualname else ():
        found = getattr(found, part, None)
    if found is not obj:
        raise SweepError(
            f"sweep(executor=...): the {what} {obj!r} cannot be imported by the executor's "
            f"workers (they find it as {module}:{qualname}). Define it at the top level of "
            f"a module the workers can import (a file next to the notebook, or a package), "
            f"not in a notebook cell or inside a function.", argument=what)


def _chunks(spec: Spec, cell: int, size: int) -> list[tuple]:
    runs = spec.runs_of(cell)
    if spec.contention:
        return [(cell, runs)]                # one world, one engine: the cell is one job
    return [(cell, runs[i:i + size]) for i in range(0, len(runs), size)]


def _serial(spec: Spec, todo: list[int], results: Results, bar) -> None:
    runner = Isolated()
    try:
        for cell in todo:
            rows, load = [], {}
            for job in _chunks(spec, cell, 100):
                _, more, more_load = do_job(spec, runner, job)
                rows += more
                for key, n in more_load.items():
                    load[key] = load.get(key, 0) + n
                bar.update(len(more))
            results.write_cell(cell, spec, rows, load)
    finally:
        runner.close()


class _Gathered:
    """Jobs' rows collected per cell as they come back, in any order; a cell is written to
    the results (one transaction) once its last job is in."""

    def __init__(self, spec: Spec, jobs: list[tuple], results: Results, bar):
        self.spec, self.results, self.bar = spec, results, bar
        self.waiting: dict[int, int] = {}
        for cell, _ in jobs:
            self.waiting[cell] = self.waiting.get(cell, 0) + 1
        self.rows: dict[int, tuple[list, dict]] = {cell: ([], {}) for cell in self.waiting}

    def add(self, cell: int, rows: list, load: dict) -> None:
        mine = self.rows[cell]
        mine[0].extend(rows)
        for key, n in load.items():
            mine[1][key] = mine[1].get(key, 0) + n
        self.bar.update(len(rows))
        self.waiting[cell] -= 1
        if self.waiting[cell] == 0:
            self.results.write_cell(cell, self.spec, *self.rows.pop(cell))


def _parallel(spec: Spec, spec_bytes: bytes, todo: list[int], results: Results, bar,
              processes: int) -> None:
    per_cell = len(spec.inputs) * len(spec.seeds)
    size = max(1, min(500, math.ceil(per_cell * len(todo) / (processes * 8))))
    jobs = [job for cell in todo for job in _chunks(spec, cell, size)]
    cells = _Gathered(spec, jobs, results, bar)
    context = multiprocessing.get_context("fork" if "fork" in
                                          multiprocessing.get_all_start_methods() else "spawn")
    pool = cf.ProcessPoolExecutor(processes, mp_context=context, initializer=_init_worker,
                                  initargs=(spec_bytes,))
    try:
        futures = [pool.submit(_job_in_worker, job) for job in jobs]
        for future in cf.as_completed(futures):
            cells.add(*future.result())
    except BaseException:
        pool.shutdown(wait=False, cancel_futures=True)
        raise
    pool.shutdown()


#: runs per job on an executor: a Dask task costs about 1.5 ms to schedule, a run well
#: under that, so a job of this many runs is mostly work.
EXECUTOR_JOB_RUNS = 50


def job_on_executor(spec_bytes: bytes, job: tuple) -> tuple:
    """What a worker of an executor runs: some runs of one cell, in its own in-memory
    engine. The spec is unpickled once per worker process and kept."""
    if _WORKER.get("spec_bytes") != spec_bytes:
        _WORKER.update(spec_bytes=spec_bytes, spec=pickle.loads(spec_bytes), runner=Isolated())
    return do_job(_WORKER["spec"], _WORKER["runner"], job)


def _distributed(spec: Spec, spec_bytes: bytes, todo: list[int], results: Results, bar,
                 executor: cf.Executor) -> None:
    jobs = [job for cell in todo for job in _chunks(spec, cell, EXECUTOR_JOB_RUNS)]
    cells = _Gathered(spec, jobs, results, bar)
    pending = {executor.submit(job_on_executor, spec_bytes, job) for job in jobs}
    try:
        while pending:
            done, pending = cf.wait(pending, return_when=cf.FIRST_COMPLETED)
            for future in done:
                cells.add(*future.result())
            # Drop finished futures: a Dask future stays alive (and its result in a
            # worker's memory, to be recomputed if that worker dies) while one refers to it.
            del done, future
    except BaseException:
        for future in pending:
            future.cancel()
        raise


__all__ = ["sweep", "Spec", "Results", "do_job", "job_on_executor"]
