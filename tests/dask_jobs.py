"""What the Dask tests run on the cluster's workers: a job wrapper that logs each job it
starts to a file before doing it, so a test can count which jobs ran twice."""

from __future__ import annotations

import concurrent.futures as cf
import json
import os
import time


def logged(log_path: str, fn, *args):
    with open(log_path, "a") as log:
        log.write(json.dumps({"pid": os.getpid(), "job": key(args[1])}) + "\n")
    return fn(*args)


def key(job) -> str:
    cell, runs = job
    return json.dumps([cell, list(runs[0])])


class LoggingExecutor(cf.Executor):
    """Wraps an executor so every job logs itself on the worker that starts it, and the
    driver notes when each job's result reached it (`received`: key -> monotonic time)."""

    def __init__(self, inner: cf.Executor, log_path: str):
        self.inner, self.log_path, self.received = inner, log_path, {}

    def submit(self, fn, *args, **kwargs):
        future = self.inner.submit(logged, self.log_path, fn, *args, **kwargs)
        job_key = key(args[1])
        future.add_done_callback(lambda _: self.received.setdefault(job_key, time.monotonic()))
        return future
