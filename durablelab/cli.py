"""The `durablelab` command (also `python -m durablelab`).

    durablelab lab              open JupyterLab on the lessons
    durablelab demo             run the vendor onboarding example, crash it, recover it
    durablelab runs DB          list the runs in a DuckDB file
    durablelab show RUN --db DB one run: status, result or error, history, attempts
    durablelab timeline RUN --db DB -o FILE.png
                                draw one run's timeline to an image
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


def _runs(args) -> int:
    """List the runs in a DuckDB file."""
    engine = _open(args.db)
    with pd.option_context("display.width", 160, "display.max_columns", 20):
        print(engine.runs().to_string(index=False))
    engine.close()
    return 0


def _show(args) -> int:
    """Show one run: status, result or error, history and attempts."""
    engine = _open(args.db)
    try:
        run = engine.run(args.run)
    except KeyError as exc:
        raise SystemExit(f"durablelab: {exc}") from None
    print(run)
    if run.error is not None:
        print(f"\n{run.error}")
    with pd.option_context("display.width", 160, "display.max_colwidth", 50):
        print("\nhistory:\n" + run.history.drop(columns=["digest"]).to_string(index=False))
        print("\nattempts:\n" + run.attempts.to_string(index=False))
    engine.close()
    return 0


def _timeline(args) -> int:
    """Draw one run's timeline (attempts, waits, crashes, wake-ups) to an image file."""
    engine = _open(args.db)
    try:
        run = engine.run(args.run)
    except KeyError as exc:
        raise SystemExit(f"durablelab: {exc}") from None
    finally:
        engine.close()
    run.timeline().savefig(args.output, dpi=args.dpi, bbox_inches="tight")
    print(f"wrote {args.output}")
    return 0


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(prog="durablelab", description=__doc__.split("\n\n")[0])
    sub = top.add_subparsers(dest="command", required=True)
    lab = sub.add_parser("lab", help=_lab.__doc__)
    lab.add_argument("--notebooks", help="folder to open (default: the lessons)")
    lab.add_argument("extra", nargs=argparse.REMAINDER, help="passed on to jupyter lab")
    lab.set_defaults(handler=_lab)
    sub.add_parser("demo", help=_demo.__doc__).set_defaults(handler=_demo)
    runs = sub.add_parser("runs", help=_runs.__doc__)
    runs.add_argument("db", help="a DuckDB file written by dl.Engine(path)")
    runs.set_defaults(handler=_runs)
    show = sub.add_parser("show", help=_show.__doc__)
    show.add_argument("run", help="the run id")
    show.add_argument("--db", required=True, help="a DuckDB file written by dl.Engine(path)")
    show.set_defaults(handler=_show)
    timeline = sub.add_parser("timeline", help=_timeline.__doc__)
    timeline.add_argument("run", help="the run id")
    timeline.add_argument("--db", required=True, help="a DuckDB file written by dl.Engine(path)")
    timeline.add_argument("-o", "--output", required=True, help="the image to write (.png, .svg)")
    timeline.add_argument("--dpi", type=int, default=110, help="resolution of a bitmap image")
    timeline.set_defaults(handler=_timeline)
    return top


def main(argv=None) -> int:
    args = parser().parse_args(argv)
    return args.handler(args)


if __name__ == "__main__":
    raise SystemExit(main())
