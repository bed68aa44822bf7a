"""Large payloads by reference: what ten activities returning the same document cost a store.

One run makes ten activities that each return the same document (a 2 MB transcript, say),
once with every value inline and once with `Engine(payload_threshold=65536)`. Printed for
each: the JSON bytes the store holds for the run (event bodies plus payloads), the file's
size after a clean close, and the time a fresh engine takes to open the file and recover
the run (reading its history back), each as a ratio of inline to by-reference, measured in
the same run.

    python bench/payloads.py            # a 2 MB document, 3 rounds
    python bench/payloads.py --quick    # 200 kB, 1 round (CI)
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import tempfile
import time

import duckdb

import durablelab as dl

DOC: dict = {}


def fetch(i):
    return {"transcript": DOC["text"]}


def ten_reads(ctx, n):
    sizes = [len(ctx.activity("fetch", fetch, i)["transcript"]) for i in range(n)]
    ctx.wait_signal("done")   # left waiting, so a fresh engine loads its history
    return sizes


def measure(folder: str, threshold, n: int) -> tuple[int, int, float]:
    path = os.path.join(folder, f"s-{threshold}.duckdb")
    with dl.Engine(path, payload_threshold=threshold) as engine:
        engine.start(ten_reads, n, run_id="r")
        engine.run_until_idle()
    con = duckdb.connect(path, read_only=True)
    held = con.execute("SELECT (SELECT coalesce(sum(length(body)), 0) FROM event_log) + "
                       "(SELECT coalesce(sum(length(body)), 0) FROM payloads)").fetchone()[0]
    con.close()
    started = time.perf_counter()
    with dl.Engine(path, workflows=[ten_reads]) as engine:   # opens, loads, replays
        engine.run_until_idle()
    return held, os.path.getsize(path), time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a small document, one round")
    args = parser.parse_args()
    size, rounds = (200_000, 1) if args.quick else (2_000_000, 3)
    rng = random.Random(1)
    DOC["text"] = "".join(rng.choice("abcdefghijklmnopqrstuvwxyz ,.") for _ in range(size))
    results = {None: [], 65536: []}
    with tempfile.TemporaryDirectory() as folder:
        for k in range(rounds):
            for threshold in results:
                results[threshold].append(measure(os.path.join(folder), threshold, 10))
                os.remove(os.path.join(folder, f"s-{threshold}.duckdb"))
    print(f"ten activities returning the same {size / 1e6:g} MB document, {rounds} round(s)")
    inline, ref = (results[None], results[65536])
    for label, i, unit in (("JSON held", 0, "MB"), ("file size", 1, "MB"),
                           ("open + recover", 2, "s")):
        a = statistics.median(row[i] for row in inline)
        b = statistics.median(row[i] for row in ref)
        scale = 1e6 if unit == "MB" else 1
        print(f"  {label:15s} inline {a / scale:8.3f} {unit}   by reference {b / scale:8.3f} "
              f"{unit}   inline / by reference: {a / b:5.1f}x")


if __name__ == "__main__":
    main()
