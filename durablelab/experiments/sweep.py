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

Runs can leave this process, and durablelab sends them as data, never as Python objects it
would have to turn back into code. A *job* is some runs of one cell: ``(cell, [(input
index, seed), ...])``, plain ints. What every job needs, the sweep's arguments, is a `Spec`
(`durablelab.experiments.spec`):

- ``processes=N`` on Linux forks its workers, which inherit the `Spec` as it is in memory:
  nothing is serialized, so a workflow or world defined in a notebook cell works too.
  Where workers are spawned (macOS, Windows) each rebuilds the `Spec` from its data form,
  JSON text with the workflow's and the world's import paths.
- ``executor=`` (Dask, or any `concurrent.futures.Executor`) sends the data form with each
  job; a worker rebuilds the `Spec` once and keeps it while the same text comes.

Either way the pool or the executor carries the jobs there and the result rows (dicts of
numbers and strings) back with its own transport.
"""

from __future__ import annotations

import concurrent.futures as cf
import functools
import json
import math
import multiprocessing
import os
import sys
import threading
from typing import Callable

import duckdb
import pyarrow as pa

from ..errors import SweepError, UnmatchedFaultRuleWarning
from ..sealed import SEALED, catalog
from .memory import MemoryResults
from .runner import METRICS, Isolated, borrowed_runner, roomy_collector, run_contended
from .spec import Spec

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
REQUEST_SCHEMA = pa.schema([("cell", pa.int64()), ("seed", pa.int64()),
                            ("started_at", pa.float64()), ("ended_at", pa.float64()),
                            ("attempt", pa.int64()), ("outcome", pa.string())])

DDL = f"""
CREATE TABLE IF NOT EXISTS sweep_meta (key VARCHAR PRIMARY KEY, value VARCHAR);
-- one row per run: its cell's index, its coordinates and its metrics (dl.compare's meaning)
CREATE TABLE IF NOT EXISTS sweep_runs ({', '.join(
    f'"{f.name}" ' + {pa.int64(): 'BIGINT', pa.float64(): 'DOUBLE'}.get(f.type, 'VARCHAR')
    for f in RUN_SCHEMA)});
-- requests per whole virtual second, per cell and per activity or stamping service
CREATE TABLE IF NOT EXISTS sweep_load (cell BIGINT, source VARCHAR, second BIGINT,
                                       requests BIGINT);
-- every attempt (Experiment.series bins them): its cell, seed, start, end, number, outcome
CREATE TABLE IF NOT EXISTS sweep_requests (cell BIGINT, seed BIGINT, started_at DOUBLE,
                                           ended_at DOUBLE, attempt BIGINT, outcome VARCHAR);
-- a cell's row lands in the same transaction as its runs: present means finished
CREATE TABLE IF NOT EXISTS sweep_cells (cell BIGINT PRIMARY KEY, policy VARCHAR,
                                        fault_plan VARCHAR);
"""


# --- doing a job: some runs of one cell --------------------------------------------------
#: How `processes=` starts its workers. Forked on Linux: a forked worker inherits this
#: process's memory, the `Spec` handed to the pool's initializer included, so nothing is
#: serialized and a workflow or world defined in a notebook cell (or a factory instance)
#: works. Spawned elsewhere (fork is unsafe on macOS and missing on Windows): a spawned
#: worker starts empty and rebuilds the `Spec` from its data form (`Spec.to_data`).
START_METHOD = "fork" if sys.platform.startswith("linux") else "spawn"

_WORKER: dict = {}


def _init_worker(spec: Spec | str) -> None:
    """A `processes=` worker's start: the Spec itself (forked) or its data form (spawned)."""
    _WORKER["spec"] = spec if isinstance(spec, Spec) else Spec.from_data(spec)
    _WORKER["runner"] = Isolated(_WORKER["spec"].sticky)


def _job_in_worker(job):
    return do_job(_WORKER["spec"], _WORKER["runner"], job)


def do_job(spec: Spec, runner: Isolated, job: tuple) -> tuple:
    """Run `job` = (cell, [(input index, seed), ...]); returns (cell, rows, load,
    requests): `requests` the attempts' (seed, started_at, ended_at, attempt, outcome)."""
    cell, runs = job
    policy_name, plan_name = spec.cells[cell]
    # The cell's `Overrides` itself, checked once: start() takes it as it is, and every run
    # stores its JSON, encoded once.
    policies, plan = spec.policies[policy_name], spec.plans[plan_name]
    load: dict = {}
    requests: list = []
    rows = []
    with roomy_collector():
        if spec.contention:
            worlds: dict = {}   # one world per cell, or per cell and seed ("per_seed")
            for i, seed in runs:
                worlds.setdefault(seed if spec.contention == "per_seed" else None, []).append(
                    (json.loads(spec.inputs_json[i]), spec.run_id(cell, seed, i), seed,
                     spec.start_at(i)))
            metrics = []
            for listed in worlds.values():
                metrics += run_contended(spec.workflow, listed, policies, plan, spec.world,
                                         spec.timeout, load, requests, runner)
        else:   # an input is decoded once per job: start() records its JSON at once
            inputs = {i: json.loads(spec.inputs_json[i]) for i in {i for i, _ in runs}}
            metrics = [runner.run(spec.workflow, inputs[i], spec.run_id(cell, seed, i),
                                  policies, plan, seed, spec.world, spec.timeout, load,
                                  requests, spec.start_at(i))
                       for i, seed in runs]
    for (i, seed), m in zip(runs, metrics):
        rows.append({"cell": cell, "input": i, "policy": policy_name, "fault_plan": plan_name,
                     "seed": seed, "run_id": spec.run_id(cell, seed, i), **m})
    return cell, rows, load, requests


# --- the results file ------------------------------------------------------------------------
class Results:
    """The sweep's DuckDB database (a file at `path`, or in memory)."""

    def __init__(self, path, spec: Spec):
        self.path = None if path is None else str(path)
        # Sealed as a store is (sealed.SEALED), and read only once its tables are the ones
        # DDL makes: a file from elsewhere could hold `sweep_meta` as a view over a file.
        self.con = duckdb.connect(self.path or ":memory:", config=SEALED)
        found = catalog(self.con)
        for name, shape in _shapes().items():
            if name in found and found[name] != shape:
                self.con.close()
                what = "a view" if found[name] == "view" else "a table of other columns"
                raise SweepError(
                    f"sweep(path={self.path!r}): that file's {name!r} is {what}, not the "
                    f"table a sweep writes, and a sweep reads only its own tables: nothing "
                    f"was read or written. Give another path.", argument="path")
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
        # The comparison above sorts keys, so the same policies or plans in another order
        # pass it; but cells are numbered in the call's order, and a finished cell filed
        # under another number would be skipped or written twice.
        for cell, policy, plan in self.con.execute("SELECT * FROM sweep_cells").fetchall():
            if spec.cells[cell] != (policy, plan):
                self.con.close()
                raise SweepError(
                    f"sweep(path={self.path!r}): that file holds this sweep with its policies "
                    f"or fault plans in another order (cell {cell} is {policy}/{plan} there, "
                    f"{'/'.join(spec.cells[cell])} here). Give policies= and fault_plans= in "
                    f"the order of the call that made the file, or another path.",
                    argument="path")

    def finished(self) -> set[int]:
        return {row[0] for row in self.con.execute("SELECT cell FROM sweep_cells").fetchall()}

    def write_cell(self, cell: int, spec: Spec, rows: list[dict], load: dict,
                   requests: list = ()) -> None:
        runs, loads, attempts = cell_tables(cell, rows, load, requests)
        self.con.execute("BEGIN")
        try:
            self.con.register("_runs", runs)
            self.con.register("_load", loads)
            self.con.register("_requests", attempts)
            self.con.execute("INSERT INTO sweep_runs SELECT * FROM _runs")
            self.con.execute("INSERT INTO sweep_load SELECT * FROM _load")
            self.con.execute("INSERT INTO sweep_requests SELECT * FROM _requests")
            self.con.execute("INSERT INTO sweep_cells VALUES (?, ?, ?)", [cell, *spec.cells[cell]])
            self.con.execute("COMMIT")
        except BaseException:
            self.con.execute("ROLLBACK")
            raise
        finally:
            for name in ("_runs", "_load", "_requests"):
                try:
                    self.con.unregister(name)
                except duckdb.Error:
                    pass

    def frames(self):
        runs = self.con.execute("SELECT * FROM sweep_runs").df()
        load = self.con.execute("SELECT * FROM sweep_load").df()
        requests = self.con.execute("SELECT * FROM sweep_requests").df()
        return runs, load, requests

    def close(self) -> None:
        self.con.close()


def cell_tables(cell: int, rows: list[dict], load: dict, requests) -> tuple:
    """A finished cell's runs, load and attempts as Arrow tables of the results' schemas."""
    runs = pa.Table.from_pylist(rows, schema=RUN_SCHEMA)
    loads = pa.Table.from_pylist(
        [{"cell": cell, "source": s, "second": sec, "requests": n}
         for (s, sec), n in sorted(load.items())], schema=LOAD_SCHEMA)
    columns = list(zip(*requests)) if requests else [[]] * 5
    attempts = pa.Table.from_arrays(
        [pa.array([cell] * len(requests), pa.int64())] + [
            pa.array(values, field.type) for values, field in
            zip(columns, list(REQUEST_SCHEMA)[1:])], schema=REQUEST_SCHEMA)
    return runs, loads, attempts


@functools.cache
def _shapes() -> dict:
    """Each results table as DDL makes it (`sealed.catalog`), read from a scratch database."""
    with duckdb.connect(":memory:", config=SEALED) as con:
        con.execute(DDL)
        return catalog(con)


def _difference(old: dict, new: dict) -> str:
    keys = [k for k in sorted(set(old) | set(new)) if old.get(k) != new.get(k)]
    return "it differs in " + ", ".join(keys) if keys else "it differs"


# --- dl.sweep ----------------------------------------------------------------------------------
def sweep(workflow: Callable, inputs, policies: dict | None = None,
          fault_plans: dict | None = None, seeds=range(10), world: Callable | None = None,
          contention: bool = False, processes: int | None = None,
          timeout: float | None = 7 * 86400, path=None, executor: cf.Executor | None = None,
          arrivals=None, sticky: bool = True):
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
        world: a factory ``world(clock)`` returning the simulated world (services,
            models, limiters) that workflow code reaches as ``ctx.world``: a class or a
            function, or any callable when the runs stay in this process or in forked
            workers (see `processes` and `executor` for what travels to other processes).
        contention: True puts every run of a cell in one engine around one world, so they
            share its rate limits and collide (storms happen for real); False (default)
            gives each run its own world on its own clock, independent of the others;
            ``"per_seed"`` gives one world per cell and seed, so each seed is an
            independent trial of all the inputs contending (N clients = N inputs).
        processes: worker processes for the cells (None: this process). Results are the
            same as in one process. On Linux the workers are forked and inherit the sweep
            as it is, so a workflow or a world defined in a notebook cell, a lambda or a
            factory instance works; on macOS and Windows they are spawned and rebuild the
            sweep from its data form (`Spec.to_data`), so the workflow and the world must
            be a function or class at the top level of an importable module, which is
            checked before any worker starts.
        timeout: virtual seconds a run may take before it stops as `RunTimedOut` (so a
            policy that retries forever still ends); None for no limit.
        path: a DuckDB file for the results. The same call with the same path resumes an
            interrupted sweep: finished cells are kept, only the others run.
        executor: any `concurrent.futures.Executor` to run the jobs on instead of this
            process or `processes`: a Dask cluster's ``Client(...).get_executor(pure=False)``
            spreads a sweep over many machines. Jobs travel as data: the sweep's data form
            (`Spec.to_data`: JSON with the inputs, policies, plans, seeds and the workflow's
            and the world's import paths, so both must be a function or class at the top
            level of a module the workers import; a factory instance is refused up front)
            and the job's (cell, [(input index, seed)]). A job runs in an in-memory engine
            on a worker and comes back as rows; each result is taken as it arrives and its
            future dropped, so a killed worker costs only the job it had in flight, which
            the executor runs again. The table is the serial one.

        arrivals: when each input's runs start (open-loop load), on each world's clock:
            a rate (runs per virtual second: input i starts at i / rate), a function
            ``index -> virtual start``, or a list of instants; None starts all at 0.
            Starts that go back in time (input i before input i - 1) are refused.
            ``virtual_duration`` still counts from the run's own start.
        sticky: True (default): a run waiting between wake-ups keeps its code in memory where it waits
            and resumes there (`Engine(sticky=True)`, `durablelab/sticky.py`), instead of
            running its code again from the top to get back there; False replays on every
            wake-up, as a plain `Engine()` does. The table is the same either way, byte
            for byte, ``events_replayed`` included (it counts what replay would hand back):
            sticky runs change how long a sweep takes, never what it finds.

    Raises `SweepError` (a ValueError) for bad arguments, a workflow or world that spawned
    ``processes`` or an ``executor``'s workers could not import, or a `path` holding
    another sweep's results (or this sweep's with its cells in another order).
    """
    from .view import Experiment
    spec = Spec(workflow, inputs, policies, fault_plans, seeds, world, contention, timeout,
                arrivals, sticky)
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
        sent = spec.to_data("sweep(executor=...)")   # a SweepError now, not on a worker
    elif processes is not None and processes > 1:
        sent = spec if START_METHOD == "fork" else spec.to_data(
            f"sweep(processes={processes}) (worker processes are spawned on {sys.platform}, "
            f"not forked)")
    else:
        sent = None
    # Without a path nothing outlives the call: the rows stay in memory (`memory.py`).
    results = Results(path, spec) if path is not None else MemoryResults()
    try:
        done = results.finished()
        todo = [c for c in range(len(spec.cells)) if c not in done]
        per_cell = len(spec.inputs) * len(spec.seeds)
        total = per_cell * len(spec.cells)
        from tqdm.auto import tqdm
        # disable=None hides the bar where output is no terminal; given explicitly, it would
        # also outvote tqdm's own TQDM_DISABLE, which CI and the notebook refresh set.
        with tqdm(total=total, initial=per_cell * len(done), unit="run", desc="sweep",
                  disable=True if os.environ.get("TQDM_DISABLE") else None) as bar:
            if executor is not None:
                _distributed(spec, sent, todo, results, bar, executor)
            elif sent is None:
                _serial(spec, todo, results, bar)
            else:
                _parallel(spec, sent, todo, results, bar, processes)
        runs, load, requests = results.frames()
    finally:
        results.close()
    experiment = Experiment._from_sweep(spec, runs, load, path, requests)
    _warn_unmatched(experiment)
    return experiment


def _warn_unmatched(experiment) -> None:
    """Say which fault rules matched no activity of their runs: the sweep would otherwise
    report the cells under that plan as if the faults had been met."""
    rules = experiment.unmatched_rules
    if rules.empty:
        return
    import warnings
    lines = [f"fault plan {r.fault_plan!r}: rule {r.rule} {r.type}({r.activity!r}) matched "
             f"no activity its runs reached ({r.met or 'none'})"
             for r in rules.itertuples(index=False)]
    warnings.warn(UnmatchedFaultRuleWarning(
        "; ".join(lines) + ". Those rules injected nothing, so the cells under their plans "
        "measured a world without them: check the names (experiment.unmatched_rules "
        "lists them)."), stacklevel=3)


def _chunks(spec: Spec, cell: int, size: int) -> list[tuple]:
    runs = spec.runs_of(cell)
    if spec.contention == "per_seed":        # a world per seed: a job per seed
        by_seed: dict = {}
        for i, seed in runs:
            by_seed.setdefault(seed, []).append((i, seed))
        return [(cell, listed) for listed in by_seed.values()]
    if spec.contention:
        return [(cell, runs)]                # one world, one engine: the cell is one job
    return [(cell, runs[i:i + size]) for i in range(0, len(runs), size)]


def _serial(spec: Spec, todo: list[int], results: Results, bar) -> None:
    with borrowed_runner(spec.sticky) as runner:
        for cell in todo:
            rows, load, requests = [], {}, []
            for job in _chunks(spec, cell, 100):
                _, more, more_load, more_requests = do_job(spec, runner, job)
                rows += more
                requests += more_requests
                for key, n in more_load.items():
                    load[key] = load.get(key, 0) + n
                bar.update(len(more))
            results.write_cell(cell, spec, rows, load, requests)


class _Gathered:
    """Jobs' rows collected per cell as they come back, in any order; a cell is written to
    the results (one transaction) once its last job is in."""

    def __init__(self, spec: Spec, jobs: list[tuple], results: Results, bar):
        self.spec, self.results, self.bar = spec, results, bar
        self.waiting: dict[int, int] = {}
        for cell, _ in jobs:
            self.waiting[cell] = self.waiting.get(cell, 0) + 1
        self.rows: dict[int, tuple[list, dict, list]] = {cell: ([], {}, [])
                                                         for cell in self.waiting}

    def add(self, cell: int, rows: list, load: dict, requests: list) -> None:
        mine = self.rows[cell]
        mine[0].extend(rows)
        mine[2].extend(requests)
        for key, n in load.items():
            mine[1][key] = mine[1].get(key, 0) + n
        self.bar.update(len(rows))
        self.waiting[cell] -= 1
        if self.waiting[cell] == 0:
            self.results.write_cell(cell, self.spec, *self.rows.pop(cell))


def _parallel(spec: Spec, sent: Spec | str, todo: list[int], results: Results, bar,
              processes: int) -> None:
    per_cell = len(spec.inputs) * len(spec.seeds)
    size = max(1, min(500, math.ceil(per_cell * len(todo) / (processes * 8))))
    jobs = [job for cell in todo for job in _chunks(spec, cell, size)]
    cells = _Gathered(spec, jobs, results, bar)
    # Forked, the initializer's argument (the Spec) is inherited, not sent; spawned, it is
    # the data form, a str.
    pool = cf.ProcessPoolExecutor(processes, mp_context=multiprocessing.get_context(
        START_METHOD), initializer=_init_worker, initargs=(sent,))
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


#: An executor worker's Spec and runner, kept per thread (a Dask worker runs tasks in
#: several threads, and an engine serves one at a time) and keyed by the data form.
_EXECUTOR_WORKER = threading.local()


def job_on_executor(data: str, job: tuple) -> tuple:
    """What a worker of an executor runs: some runs of one cell, in its own in-memory
    engine. `data` is the sweep's data form (`Spec.to_data`), rebuilt once per worker
    thread and kept while the same text comes; a text that is not one raises `SweepError`
    before anything runs."""
    mine = _EXECUTOR_WORKER
    if getattr(mine, "data", None) != data:
        spec = Spec.from_data(data)        # first: a bad text leaves the cache as it was
        if getattr(mine, "runner", None) is not None:
            mine.runner.close()
        mine.data, mine.spec, mine.runner = data, spec, Isolated(spec.sticky)
    return do_job(mine.spec, mine.runner, job)


def _distributed(spec: Spec, data: str, todo: list[int], results: Results, bar,
                 executor: cf.Executor) -> None:
    jobs = [job for cell in todo for job in _chunks(spec, cell, EXECUTOR_JOB_RUNS)]
    cells = _Gathered(spec, jobs, results, bar)
    pending = {executor.submit(job_on_executor, data, job) for job in jobs}
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
