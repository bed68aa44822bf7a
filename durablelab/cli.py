"""The `durablelab` command (also `python -m durablelab`).

    durablelab lab [OPTIONS]    open JupyterLab on the lessons (options go to jupyter lab)
    durablelab demo             run the vendor onboarding example, crash it, recover it
    durablelab runs DB          list the runs in a DuckDB file or an export
    durablelab show RUN --db DB one run: status, result or error, history, attempts
    durablelab timeline RUN --db DB -o FILE.png
                                draw one run's timeline to an image
    durablelab export DB -o OUT write runs to OUT.jsonl or OUT.parquet (DB: a store or export)
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import pandas as pd

NOTEBOOKS = Path(__file__).resolve().parent.parent / "notebooks"


def _lab(args) -> int:
    """Open JupyterLab on the notebooks folder (the lessons)."""
    folder = Path(args.notebooks) if args.notebooks else NOTEBOOKS
    if not folder.is_dir():
        folder = Path.cwd()
    command = [sys.executable, "-m", "jupyterlab", f"--notebook-dir={folder}", *args.extra]
    os.execv(sys.executable, command)
    return 0  # not reached


def _demo(args) -> int:
    """Run the onboarding example to its approval wait, crash the worker, approve, finish."""
    import durablelab as dl
    from durablelab.examples import onboarding

    onboarding.world.reset()
    engine = dl.Engine()
    run_id = engine.start(onboarding.onboard_vendor, {"vendor_id": "v-42"}, run_id="demo",
                          seed=7)
    engine.advance(3600)
    print(f"after one hour: {engine.run(run_id).status} (waiting for approval)")
    engine.crash()
    print("the worker crashed; a fresh one reloaded the run from DuckDB")
    engine.signal(run_id, "approval", {"approved": True}, signal_id="click-1")
    engine.run_until_idle()
    run = engine.run(run_id)
    print(f"after approval: {run.status}: {run.result}")
    with pd.option_context("display.width", 120, "display.max_colwidth", 40):
        print(run.history[["position", "kind", "name", "value"]].to_string(index=False))
    print(f"ERP effects: {len(onboarding.world.erp.effects)}, duplicates: "
          f"{onboarding.world.erp.duplicate_effects}")
    engine.close()
    return 0


def _open(db: str):
    import durablelab as dl
    if not Path(db).exists():
        raise SystemExit(f"durablelab: no such file: {db}")
    return dl.Engine(db, workflows=())


def _is_export(path: str) -> bool:
    """Whether `path` is an export rather than a DuckDB store: Parquet by its magic bytes,
    JSON Lines by its extension (dl.load then checks the rest)."""
    with open(path, "rb") as f:
        head = f.read(4)
    return head == b"PAR1" or Path(path).suffix.lower() in (".jsonl", ".parquet")


def _all_runs(path: str) -> list:
    """Every run of a DuckDB store or an export, as `Run` views (no workflow code needed)."""
    if not Path(path).exists():
        raise SystemExit(f"durablelab: no such file: {path}")
    if _is_export(path):
        from durablelab.export import ExportFormatError, load
        try:
            return load(path)
        except ExportFormatError as exc:
            raise SystemExit(f"durablelab: {exc}") from None
    engine = _open(path)
    try:
        return [engine.run(run_id) for run_id in engine.runs()["run_id"]]
    finally:
        engine.close()


def _find_run(path: str, run_id: str):
    """One run of a DuckDB store or an export, or a SystemExit that names what is missing."""
    if Path(path).exists() and _is_export(path):
        for run in _all_runs(path):
            if run.run_id == run_id:
                return run
        raise SystemExit(f"durablelab: no run {run_id!r} in {path}")
    engine = _open(path)
    try:
        return engine.run(run_id)
    except KeyError as exc:
        raise SystemExit(f"durablelab: {exc}") from None
    finally:
        engine.close()


def _runs(args) -> int:
    """List the runs in a DuckDB file or an export."""
    if Path(args.db).exists() and _is_export(args.db):
        table = pd.DataFrame(
            [(r.run_id, r.workflow, r.status, r.started_at, r.ended_at, r.seed, r.parent_run_id)
             for r in _all_runs(args.db)],
            columns=["run_id", "workflow", "status", "started_at", "ended_at", "seed",
                     "parent_run_id"])
    else:
        engine = _open(args.db)
        table = engine.runs()
        engine.close()
    with pd.option_context("display.width", 160, "display.max_columns", 20):
        print(table.to_string(index=False))
    return 0


def _show(args) -> int:
    """Show one run: status, result or error, history and attempts."""
    run = _find_run(args.db, args.run)
    print(run)
    if run.error is not None:
        print(f"\n{run.error}")
    with pd.option_context("display.width", 160, "display.max_colwidth", 50):
        print("\nhistory:\n" + run.history.drop(columns=["digest"]).to_string(index=False))
        print("\nattempts:\n" + run.attempts.to_string(index=False))
    return 0


def _timeline(args) -> int:
    """Draw one run's timeline (attempts, waits, crashes, wake-ups) to an image file."""
    run = _find_run(args.db, args.run)
    run.timeline().savefig(args.output, dpi=args.dpi, bbox_inches="tight")
    print(f"wrote {args.output}")
    return 0


def _export(args) -> int:
    """Write the runs of a DuckDB file (or of an export) to JSON Lines or Parquet."""
    from durablelab.export import export
    runs = _all_runs(args.source)
    if args.run:
        missing = sorted(set(args.run) - {r.run_id for r in runs})
        if missing:
            raise SystemExit(f"durablelab: no run {missing[0]!r} in {args.source}")
        runs = [r for r in runs if r.run_id in set(args.run)]
    try:
        path = export(runs, args.output)
    except ValueError as exc:
        raise SystemExit(f"durablelab: {exc}") from None
    print(f"wrote {len(runs)} run(s) to {path}")
    return 0


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(prog="durablelab", description=__doc__.split("\n\n")[0])
    sub = top.add_subparsers(dest="command", required=True)
    lab = sub.add_parser("lab", help=_lab.__doc__)
    lab.add_argument("--notebooks", help="folder to open (default: the lessons)")
    lab.set_defaults(handler=_lab)
    sub.add_parser("demo", help=_demo.__doc__).set_defaults(handler=_demo)
    runs = sub.add_parser("runs", help=_runs.__doc__)
    runs.add_argument("db", help="a DuckDB file or an export (.jsonl, .parquet)")
    runs.set_defaults(handler=_runs)
    show = sub.add_parser("show", help=_show.__doc__)
    show.add_argument("run", help="the run id")
    show.add_argument("--db", required=True, help="a DuckDB file or an export (.jsonl, .parquet)")
    show.set_defaults(handler=_show)
    timeline = sub.add_parser("timeline", help=_timeline.__doc__)
    timeline.add_argument("run", help="the run id")
    timeline.add_argument("--db", required=True, help="a DuckDB file or an export (.jsonl, .parquet)")
    timeline.add_argument("-o", "--output", required=True, help="the image to write (.png, .svg)")
    timeline.add_argument("--dpi", type=int, default=110, help="resolution of a bitmap image")
    timeline.set_defaults(handler=_timeline)
    export = sub.add_parser("export", help=_export.__doc__)
    export.add_argument("source", help="a DuckDB file written by dl.Engine(path), or an export "
                                       "to convert")
    export.add_argument("-o", "--output", required=True,
                        help="the file to write: .jsonl (JSON Lines) or .parquet")
    export.add_argument("--run", action="append", metavar="RUN",
                        help="export only this run (repeat for more); default: all")
    export.set_defaults(handler=_export)
    return top


def main(argv=None) -> int:
    top = parser()
    args, extra = top.parse_known_args(argv)
    if extra and args.handler is not _lab:
        top.error(f"unrecognized arguments: {' '.join(extra)}")
    args.extra = extra    # `durablelab lab --port 8899` passes --port on to jupyter lab
    return args.handler(args)


if __name__ == "__main__":
    raise SystemExit(main())
