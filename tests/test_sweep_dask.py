"""dl.sweep on a Dask cluster: two worker processes on 127.0.0.1 give the serial table, and
a worker killed with SIGKILL mid-sweep costs only the job it had in flight."""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
import time
from pathlib import Path

import pytest

distributed = pytest.importorskip(
    "distributed", reason="Dask is not installed: pip install -e '.[dask]'")

import durablelab as dl  # noqa: E402

TESTS = Path(__file__).resolve().parent
if str(TESTS) not in sys.path:
    sys.path.insert(0, str(TESTS))

import dask_jobs  # noqa: E402
import sweep_worker as sw  # noqa: E402
from test_sweep import MIXED  # noqa: E402


@pytest.fixture(scope="module")
def client():
    # Workers are spawned processes: they import the workflow, the world and the job
    # wrapper by name, so they need this folder and the package on their path.
    # Set only while the workers start: a later test's pip would take the checkout on
    # PYTHONPATH for an installed durablelab.
    before = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = os.pathsep.join(
        [str(TESTS), str(TESTS.parent), before or ""])
    try:
        cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                           host="127.0.0.1", dashboard_address="127.0.0.1:0")
    finally:
        if before is None:
            del os.environ["PYTHONPATH"]
        else:
            os.environ["PYTHONPATH"] = before
    client = distributed.Client(cluster)
    yield client
    client.close()
    cluster.close()


def sweep(**options):
    args = dict(inputs=sw.INPUTS, policies=sw.POLICIES, fault_plans=MIXED, seeds=range(30),
                world=sw.Shop)
    args.update(options)
    return dl.sweep(sw.order_flow, **args)


@pytest.mark.parametrize("contention", [False, True])
def test_a_sweep_on_a_dask_cluster_gives_the_serial_table(client, contention):
    serial = sweep(contention=contention)
    on_dask = sweep(contention=contention, executor=client.get_executor(pure=False))
    assert len(on_dask.frame) == 2 * 2 * 30 * 2
    assert serial.frame.to_csv() == on_dask.frame.to_csv()
    assert serial.load.to_csv() == on_dask.load.to_csv()


def test_a_killed_worker_costs_only_its_job_in_flight(client, tmp_path):
    log = tmp_path / "jobs.log"
    log.touch()
    executor = dask_jobs.LoggingExecutor(client.get_executor(pure=False), str(log))
    pids = list(client.run(os.getpid).values())
    killed = {}

    def kill_one_worker_mid_sweep():
        give_up = time.monotonic() + 120
        while time.monotonic() < give_up:
            # Kill once a result has reached the driver and a later job is running:
            # a count of starts alone raced the results on a loaded machine.
            lines = log.read_text().splitlines()
            if executor.received and len(lines) > len(executor.received) + 1:
                killed["pid"] = json.loads(lines[-1])["pid"]
                killed["at"] = time.monotonic()
                os.kill(killed["pid"], signal.SIGKILL)
                return
            time.sleep(0.01)

    killer = threading.Thread(target=kill_one_worker_mid_sweep)
    killer.start()
    experiment = sweep(seeds=range(100), executor=executor)
    killer.join()
    assert killed["pid"] in pids
    serial = sweep(seeds=range(100))
    assert experiment.frame.to_csv() == serial.frame.to_csv()     # the sweep completed
    lines = [json.loads(line) for line in log.read_text().splitlines()]
    starts = [line["job"] for line in lines]
    finished = [k for k, at in executor.received.items() if at < killed["at"]]
    assert finished, "the worker was killed before any job had finished"
    assert all(starts.count(k) == 1 for k in finished)   # no finished job ran again
    # What ran again is what the killed worker held and the driver had not received: the
    # job in flight, and results it had finished that were not fetched yet (how many
    # depends on how far the driver lagged, so that is the bound, not a count).
    held = {line["job"] for line in lines if line["pid"] == killed["pid"]} - set(finished)
    again = {k for k in starts if starts.count(k) > 1}
    assert again <= held
