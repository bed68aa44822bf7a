"""The `durablelab` command (also `python -m durablelab`), for people without Jupyter.

    durablelab lab [OPTIONS]      open JupyterLab on the lessons (other options go to jupyter lab)
    durablelab lessons            list the lessons: number, title, minutes
    durablelab demo [--db PATH]   run the vendor onboarding example through a 429, a broken
                                  model answer and a worker crash; leave its store at PATH
    durablelab runs DB            list the runs in a DuckDB store or an export (an exported
                                  experiment: its rows)
    durablelab show RUN --db DB   one run: status, result or error, history, attempts
    durablelab timeline RUN --db DB -o FILE.png [--children]
                                  draw one run's timeline to an image (--children: each
                                  child run's lanes under its bar)
    durablelab export DB -o OUT   write runs to OUT.jsonl or OUT.parquet
    durablelab ops DB [--now T]   the operator's board: runs per workflow by status, retry
                                  and failure rates, spend per run, waiting and overdue runs
    durablelab sweep CONFIG --out DIR
                                  run the sweep a TOML/JSON config describes (resumable): it
                                  runs only a registered workflow (durablelab/experiments/
                                  config.py says what a config may do)
    durablelab replay-check --workflow module:function --from FILE
                                  replay recorded runs against today's code, running no
                                  activity: exit 1 if any diverges (a CI step before a deploy)

Looking never changes a file: the reading commands (runs, show, timeline, export, ops) open a
store with `Engine(path, read_only=True)`, so DuckDB itself refuses any write, and they run
no workflow code. What a path holds is told by its first bytes (`durablelab.export.file_kind`),
never by its name. Anything that goes wrong is one line on stderr that names the file and the
fix, with exit status 1, or 2 for a mistake in the command itself; never a traceback.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shlex
import sys
import warnings
from pathlib import Path

from .errors import READABLE, DurableLabError, StoreLockedError, command_error

#: Exit statuses: 1 when the command could not do its work, 2 for a usage mistake.
FAILED, USAGE = 1, 2
_READABLE = READABLE[0].upper() + READABLE[1:]
_REWRITE = ("An export is written whole by dl.export or `durablelab export`: write it, or copy "
            "it, again")


# --- reading runs -----------------------------------------------------------------------


def _kind(path: str) -> str:
    """What `path` holds ("duckdb", "parquet", "text", "pickle"), or a CommandError that says
    why there is nothing to read there."""
    from .export import file_kind
    kind = file_kind(path)
    if kind == "missing":
        parent = Path(path).parent
        problem = "no such file" if parent.is_dir() else f"no such file (no folder {parent})"
        raise command_error(path, problem, "Check the path; `durablelab demo` writes a store "
                                           "you can read")
    if kind == "directory":
        raise command_error(path, "this is a folder, not a file", _READABLE)
    if kind == "empty":
        raise command_error(path, "the file is empty", _READABLE)
    if kind == "special":
        raise command_error(path, "this is not a regular file (a pipe or a device)", _READABLE)
    if kind == "text":
        with open(path, "rb") as f:
            start = f.read(64).lstrip()
        if not start.startswith(b"{"):   # JSON Lines records are objects
            raise command_error(path, f"this is neither a DuckDB store nor a durablelab export "
                                f"(it starts with {start[:16]!r})", _READABLE)
    return kind


@contextlib.contextmanager
def _store(path: str):
    """A read-only engine on a DuckDB store, closed afterwards."""
    import duckdb

    from .engine import Engine
    try:
        with warnings.catch_warnings():
            # A store may name workflows this process does not know: the command never runs
            # workflows, so that is no news here.
            warnings.simplefilter("ignore")
            engine = Engine(path, read_only=True)
        try:
            yield engine
        finally:
            engine.close()
    except StoreLockedError as exc:
        holder = f"process {exc.pid}" if exc.pid else "another process"
        raise command_error(
            path, f"{holder} holds this store open, and DuckDB lets one process at a time "
            f"open a file, even to read it", "Close the engine there (engine.close()), or "
            "export its runs there with dl.export(engine, 'runs.jsonl') and read that "
            "file") from None
    except duckdb.Error as exc:   # opened, then a read hit damage (a file cut short, say)
        said = _one_line(exc)
        raise command_error(path, f"DuckDB cannot read this store, it is damaged ({said})",
                            "If it was copied, copy it again from where the engine wrote "
                            "it; `durablelab export` works on any copy that opens") from None


def _experiment(path: str):
    """The `Experiment` a file holds (`Experiment.export`, `durablelab sweep`), or None for
    a store or exported runs."""
    if _kind(path) == "duckdb":
        return None
    from .experiments.io import is_experiment_file
    return _load(path) if is_experiment_file(Path(path)) else None


_EXPERIMENT = ("this is an exported experiment (a sweep's table: a row of metrics per run, no "
               "run histories)")


def _no_histories(path: str, wanted: str) -> DurableLabError:
    """The one-line refusal of a command that needs run histories, given an experiment."""
    return command_error(
        path, f"{_EXPERIMENT}, so there is no {wanted} here",
        f"`durablelab runs {shlex.quote(path)}` lists its rows; to see one run, make it again "
        f"in Python: dl.load(path).runs(workflow=..., world=...)[run_id]")


def _all_runs(path: str) -> list:
    """Every run of a DuckDB store or an export of runs, as `Run` views."""
    if _kind(path) == "duckdb":
        with _store(path) as engine:
            return [engine.run(run_id) for run_id in engine.runs()["run_id"]]
    return _load(path)


def _load(path: str) -> list:
    """The runs of an export; a file that is not one is a CommandError with the fix."""
    from .export import ExportFormatError, load
    try:
        return load(path)
    except ExportFormatError as exc:
        raise command_error(None, exc.message.rstrip("."), _REWRITE, path=path) from None


def _no_run(path: str, run_id: str, known: list[str]) -> DurableLabError:
    if not known:
        return command_error(path, f"no run {run_id!r} here: the file holds no runs",
                             "Give a file that holds runs")
    shown = ", ".join(map(repr, known[:5])) + (", ..." if len(known) > 5 else "")
    return command_error(path, f"no run {run_id!r} here", f"It holds {len(known)} run(s): "
                         f"{shown}; `durablelab runs {shlex.quote(path)}` lists them")


def _find_run(path: str, run_id: str, wanted: str):
    """One run of a DuckDB store or an export (`wanted`: what the command shows of it)."""
    with _opened_run(path, run_id, wanted) as (run, _):
        return run


@contextlib.contextmanager
def _opened_run(path: str, run_id: str, wanted: str):
    """One run of a DuckDB store or an export, and where its child runs are: the read-only
    engine, open while the block runs, or the export's runs that descend from it."""
    if _experiment(path) is not None:
        raise _no_histories(path, wanted)
    if _kind(path) == "duckdb":
        with _store(path) as engine:
            known = list(engine.runs()["run_id"])
            if run_id not in known:
                raise _no_run(path, run_id, known)
            yield engine.run(run_id), engine
        return
    runs = _load(path)
    found = next((run for run in runs if run.run_id == run_id), None)
    if found is None:
        raise _no_run(path, run_id, [r.run_id for r in runs])
    family, parents, seen = [], {run_id}, {run_id}
    while parents:   # children, then theirs: the export's runs started under this one
        born = [r for r in runs if r.parent_run_id in parents and r.run_id not in seen]
        family += born
        parents = {r.run_id for r in born}
        seen |= parents
    yield found, family


def _output(path: str, what: str, suffixes: tuple[str, ...] = ()) -> Path:
    """The file a command is to write (with one of `suffixes`, if given), checked before
    any work is done."""
    out = Path(path)
    if out.is_dir():
        example = Path(path) / f"{what}{suffixes[0] if suffixes else ''}"
        raise command_error(path, "this is a folder", f"Give the {what} file to write, "
                                                      f"e.g. {example}")
    if not out.parent.is_dir():
        raise command_error(path, f"the folder {out.parent} does not exist",
                            "Create it first, or write somewhere else")
    if suffixes and out.suffix.lower() not in suffixes:
        raise _Usage(f"-o {path}: the extension picks the format; use "
                     f"{' or '.join(suffixes[:3])}")
    return out


# --- the commands -----------------------------------------------------------------------


def _runs(args) -> int:
    """List the runs in a DuckDB store or an export (of runs, or of a sweep's experiment)."""
    import pandas as pd
    experiment = _experiment(args.db)
    if experiment is not None:
        return _experiment_rows(args.db, experiment)
    columns = ["run_id", "workflow", "status", "started_at", "ended_at", "seed",
               "parent_run_id", "waiting_on", "waiting_until"]
    if _kind(args.db) == "duckdb":   # the engine's own list: a damaged run is listed too
        with _store(args.db) as engine:
            table = engine.runs()[columns]
    else:
        table = pd.DataFrame([(r.run_id, r.workflow, r.status, r.started_at, r.ended_at,
                               r.seed, r.parent_run_id, r.waiting_on, r.waiting_until)
                              for r in _load(args.db)], columns=columns)
    if table.empty:
        print(f"no runs in {args.db}")
        return 0
    with pd.option_context("display.width", 160, "display.max_columns", 20):
        print(table.to_string(index=False))
    return 0


def _experiment_rows(path: str, experiment) -> int:
    """An exported experiment's rows: one per run, with the cell and the metrics."""
    import pandas as pd
    frame = experiment.frame
    columns = ["run_id", "status", "policy", "fault_plan", "seed", "input",
               "virtual_duration", "attempts", "retries", "error"]
    with pd.option_context("display.width", 160, "display.max_columns", 20):
        print(frame[columns].to_string(index=False) if len(frame) else "no runs")
    print(f"\n{len(frame)} run(s) of {experiment.spec['workflow']} in an exported experiment "
          f"(a row of metrics per run, no histories); dl.load({str(path)!r}) gives it back")
    return 0


def _show(args) -> int:
    """Show one run: status, result or error, history and attempts."""
    import pandas as pd
    run = _find_run(args.db, args.run, "history to show")
    print(run)
    if run.error is not None:
        print(f"\n{run.error}")
    history = run.history.drop(columns=[c for c in ("digest",) if c in run.history.columns])
    with pd.option_context("display.width", 160, "display.max_colwidth", 50):
        print("\nhistory:\n" + history.to_string(index=False))
        print("\nattempts:\n" + run.attempts.to_string(index=False))
    return 0


def _timeline(args) -> int:
    """Draw one run's timeline (attempts, waits, crashes, wake-ups) to an image file."""
    from matplotlib.figure import Figure
    formats = {f".{f}" for f in Figure().canvas.get_supported_filetypes()}
    if not 10 <= args.dpi <= 1200:
        raise _Usage(f"--dpi {args.dpi}: give a resolution from 10 to 1200 dots per inch")
    out = _output(args.output, "image",
                  (".png", ".svg", ".pdf", *sorted(formats - {".png", ".svg", ".pdf"})))
    with _opened_run(args.db, args.run, "timeline to draw") as (run, family):
        figure = run.timeline(children=family if args.children else None)
    figure.savefig(out, dpi=args.dpi, bbox_inches="tight")
    print(f"wrote {out}")
    return 0


def _export(args) -> int:
    """Write the runs of a DuckDB store (or of an export) to JSON Lines or Parquet; an
    exported experiment is converted whole."""
    from .export import export
    out = _output(args.output, "export", (".jsonl", ".parquet"))
    experiment = _experiment(args.source)
    if experiment is not None and args.run:
        raise command_error(args.source, f"{_EXPERIMENT}: --run picks runs from a store or "
                            f"an export of runs", "Leave out --run to convert the experiment "
                            f"whole; `durablelab runs {shlex.quote(args.source)}` lists its rows")
    if experiment is not None:   # converted whole, as Experiment.export writes it
        path = experiment.export(out)
        print(f"wrote the experiment ({len(experiment.frame)} run(s)) to {path}")
        return 0
    runs = _all_runs(args.source)
    if args.run:
        known = [r.run_id for r in runs]
        for run_id in args.run:
            if run_id not in known:
                raise _no_run(args.source, run_id, known)
        runs = [r for r in runs if r.run_id in set(args.run)]
    path = export(runs, out)
    print(f"wrote {len(runs)} run(s) to {path}")
    return 0


def _ops(args) -> int:
    """The operator's board of a DuckDB store or an export: runs per workflow by status,
    retry and failure rates by error class, model calls, tokens and cost per run (broken
    answers included), replay per wake-up, history size; the waiting runs, and the ones
    past their deadline at --now (default: the store's clock)."""
    import pandas as pd

    from .errors import UsageError
    from .ops import ops
    if _experiment(args.db) is not None:
        raise _no_histories(args.db, "run to read a board from")
    try:
        if _kind(args.db) == "duckdb":
            with _store(args.db) as engine:
                board = ops(engine, now=args.now)
        else:
            board = ops(_load(args.db), now=args.now)
    except UsageError as exc:   # only --now can be wrong here: a mistake in the command
        raise _Usage(f"--now {args.now!r}: {exc.message.partition(': ')[2]}") from None
    board.source = args.db
    print(f"{len(board.frame) + len(board.damaged)} run(s) of {len(board.workflows)} "
          f"workflow(s) in {args.db} at t={board.now:g}s: {len(board.waiting)} waiting, "
          f"{len(board.overdue)} overdue, oldest waiting {board.oldest_waiting:g}s"
          + (f", {len(board.damaged)} damaged (set aside)" if len(board.damaged) else ""))
    if not len(board.workflows):
        return 0
    columns = ["runs", "completed", "failed", "waiting", "overdue", "retry_rate",
               "failure_rate", "model_calls_per_run", "tokens_per_run", "cost_per_run",
               "replayed_per_wakeup", "history_events_max", "history_bytes_max"]
    rates = [c for c in board.workflows.columns if c.startswith(("retry_rate_",
                                                                  "failure_rate_"))]
    with pd.option_context("display.width", 200, "display.max_columns", 40):
        print("\nworkflows:\n" + board.workflows[columns].to_string(
            float_format=lambda v: f"{v:.4g}"))
        if rates:
            print("\nby error class (share of attempts retried, of activities failed):\n"
                  + board.workflows[rates].to_string(float_format=lambda v: f"{v:.3g}"))
        if len(board.overdue):
            print("\noverdue:\n" + board.overdue[["run_id", "workflow", "on", "since",
                                                   "deadline", "overdue_by"]].to_string(
                index=False, float_format=lambda v: f"{v:g}"))
        if len(board.damaged):
            print("\ndamaged:\n" + board.damaged[["run_id", "workflow", "problem"]].to_string(
                index=False, max_colwidth=100))
    return 0


def _replay_check(args) -> int:
    """Replay the recorded runs of a workflow against today's code, running no activity;
    exit 1 if any run diverges (a CI step before a deploy)."""
    import importlib
    from .versioning import replay_check
    module, _, attr = args.workflow.partition(":")
    if not module or not attr:
        raise _Usage(f"--workflow {args.workflow!r} must be module:function, e.g. "
                     f"durablelab.examples.onboarding:onboard_vendor")
    if not Path(args.source).is_file():
        raise _Usage(f"no such file: {args.source} (give --from a DuckDB store or an export)")
    if _experiment(args.source) is not None:
        raise _no_histories(args.source, "history to replay")
    sys.path.insert(0, os.getcwd())   # as `python -m` would: the user's own modules import
    try:
        fn = importlib.import_module(module)
        for part in attr.split("."):
            fn = getattr(fn, part)
    except (ImportError, AttributeError) as exc:
        raise _Usage(f"cannot find {args.workflow}: {type(exc).__name__}: {exc} (run from "
                     f"the folder the module imports from, or set PYTHONPATH)") from None
    finally:
        sys.path.remove(os.getcwd())
    report = replay_check(fn, args.source)
    print(report)
    return 0 if report.ok else FAILED


def _demo(args) -> int:
    """Run the vendor onboarding example through a 429, a broken model answer and a worker
    crash, and leave its store for the other commands to read."""
    from .examples.demo import run_demo
    from .export import file_kind
    _output(args.db, "store")
    if file_kind(args.db) not in ("missing", "duckdb"):
        raise command_error(args.db, "this is not a DuckDB store, and the demo writes one",
                            "Pass --db a new file, e.g. --db demo.duckdb")
    return run_demo(args.db)


def _lessons(args) -> int:
    """List the lessons: number, title, minutes."""
    from .curriculum import lessons, lessons_root
    found = lessons()
    for lesson in found:
        minutes = f"{'~' if lesson.estimated else ''}{lesson.minutes} min"
        print(f"{lesson.number}  {minutes:>7}  {lesson.title}")
    print(f"\n{len(found)} lessons in {lessons_root() / 'notebooks'}; `durablelab lab` opens "
          f"them in JupyterLab")
    return 0


def _lab(args) -> int:
    """Open JupyterLab on the lessons (other options go on to `jupyter lab`)."""
    from .curriculum import open_lab
    return open_lab(args.notebooks, args.extra, args.into)


def _sweep(args) -> int:
    """Run the sweep a TOML or JSON config describes (workflow, inputs, policies, plans,
    seeds): DIR gets results.duckdb (the same command again resumes it) and an export,
    experiment.jsonl, that dl.load reads back. A config runs only a workflow its module
    registers (@dl.workflow) and reads plan files in its own folder only. See
    datasets/experiments/."""
    from .experiments.config import run
    experiment, exported = run(args.config, args.out)
    columns = ["policy", "fault_plan", "runs", "success_rate", "success_low", "success_high",
               "p50", "p95", "attempts", "retries"]
    print(experiment.cells[columns].to_string(index=False, float_format=lambda v: f"{v:.3g}"))
    print(f"\nresults: {Path(args.out) / 'results.duckdb'} (run again to resume)\n"
          f"export:  {exported} (dl.load reads it back)")
    if len(experiment.frame) and not (experiment.frame["status"] == "completed").any():
        print(f"durablelab: {_none_completed(experiment)}", file=sys.stderr)
        return 1
    return 0


def _none_completed(experiment) -> str:
    """Why a sweep in which not one run completed is almost surely a mistake in its config,
    in one line: how the runs ended, the first one's error, and what a missing `world` does."""
    import pandas as pd
    frame = experiment.frame
    ended = frame.groupby(["status", "error"], dropna=False).size().sort_values(ascending=False)
    how = ", ".join(f"{n} {status}" + ("" if pd.isna(error) else f" ({error})")
                    for (status, error), n in ended.items())
    first = frame.iloc[0]
    said = ""
    try:
        error = experiment.runs()[first["run_id"]].error
        said = (f"; run {first['run_id']!r}: {_one_line(error).split('. ')[0]}"
                if error is not None else "")
    except Exception:  # noqa: BLE001 - the summary stands without the example
        pass
    world = ("" if experiment.spec.get("world") else
             "; the config names no world, and a workflow that reads ctx.world gets None "
             "(add world = \"module:factory\")")
    return (f"not one of the {len(frame)} runs completed ({how}){said}{world}. A sweep that "
            f"measures nothing but failures usually has a mistake in its config")


def _add_sweep(command) -> None:
    sweep = command("sweep", _sweep)
    sweep.add_argument("config", metavar="CONFIG",
                       help="a .toml or .json sweep config (see datasets/experiments/)")
    sweep.add_argument("--out", required=True, metavar="DIR",
                       help="folder for results.duckdb and experiment.jsonl")


# --- parsing, and errors on one line ------------------------------------------------------


class _Usage(Exception):
    """A mistake in the command line itself (exit status 2)."""


class _Parser(argparse.ArgumentParser):
    """argparse, with its errors on one line that points at --help."""

    def error(self, message):
        raise _Usage(f"{message}; see `{self.prog} --help`")


COMMANDS = {}   # name -> the sub-parser: a test checks each has --help and a README line


def parser() -> argparse.ArgumentParser:
    top = _Parser(prog="durablelab", description=__doc__.split("\n\n")[0],
                  epilog="Each command has --help. Reading commands never change a file.")
    sub = top.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)

    def command(name, handler, **kwargs):
        p = sub.add_parser(name, help=handler.__doc__.split("\n\n")[0].replace("\n", " "),
                           description=handler.__doc__, **kwargs)
        p.set_defaults(handler=handler)
        COMMANDS[name] = p
        return p

    lab = command("lab", _lab)
    lab.add_argument("--into", metavar="DIR",
                     help="installed from a wheel: the folder the lessons are copied to "
                          "(default: ~/durablelab-lessons; files already there are kept)")
    lab.add_argument("--notebooks", metavar="DIR",
                     help="open this folder instead of the lessons")
    command("lessons", _lessons)
    demo = command("demo", _demo)
    demo.add_argument("--db", default="demo.duckdb", metavar="PATH",
                      help="the DuckDB store to write (default: demo.duckdb here; an existing "
                           "demo store gets one more run)")
    runs = command("runs", _runs)
    runs.add_argument("db", metavar="DB", help="a DuckDB store or an export (.jsonl, .parquet)")
    show = command("show", _show)
    show.add_argument("run", metavar="RUN", help="the run id (`durablelab runs DB` lists them)")
    show.add_argument("--db", required=True, help="a DuckDB store or an export")
    timeline = command("timeline", _timeline)
    timeline.add_argument("run", metavar="RUN", help="the run id")
    timeline.add_argument("--db", required=True, help="a DuckDB store or an export")
    timeline.add_argument("-o", "--output", required=True, metavar="FILE",
                          help="the image to write (.png, .svg, .pdf)")
    timeline.add_argument("--dpi", type=int, default=110, help="resolution of a bitmap image")
    timeline.add_argument("--children", action="store_true",
                          help="draw each child run's own lanes under its bar (sub-agents, "
                               "ctx.child), and theirs")
    export = command("export", _export)
    export.add_argument("source", metavar="DB", help="a DuckDB store, or an export to convert")
    export.add_argument("-o", "--output", required=True, metavar="FILE",
                        help="the file to write: .jsonl (JSON Lines) or .parquet")
    export.add_argument("--run", action="append", metavar="RUN",
                        help="export only this run (repeat for more); default: all")
    board = command("ops", _ops)
    board.add_argument("db", metavar="DB", help="a DuckDB store or an export (.jsonl, .parquet)")
    board.add_argument("--now", type=float, default=None, metavar="T",
                       help="the instant to read ages and deadlines at, in seconds on the "
                            "runs' clock (default: the store's clock)")
    _add_sweep(command)
    check = command("replay-check", _replay_check)
    check.add_argument("--workflow", required=True, metavar="MODULE:FUNCTION",
                       help="the workflow as it is now, e.g. "
                            "durablelab.examples.onboarding:onboard_vendor_v2")
    check.add_argument("--from", dest="source", required=True, metavar="FILE",
                       help="a DuckDB store written by dl.Engine(path), or an export "
                            "(.jsonl, .parquet)")
    return top


def _one_line(text: str) -> str:
    return " ".join(line.strip() for line in str(text).splitlines() if line.strip())


def main(argv=None) -> int:
    """Run one command; returns its exit status (0, 1 for a failure, 2 for usage)."""
    top = parser()
    try:
        args, extra = top.parse_known_args(argv)
        if args.command is None:
            raise _Usage(f"choose a command: {', '.join(COMMANDS)}; see `durablelab --help`")
        if extra and args.command != "lab":
            raise _Usage(f"unrecognized arguments: {' '.join(extra)}; see "
                         f"`durablelab {args.command} --help`")
        args.extra = extra    # `durablelab lab --port 8899` passes --port on to jupyter lab
        return args.handler(args)
    except _Usage as exc:
        print(f"durablelab: {_one_line(exc)}", file=sys.stderr)
        return USAGE
    except BrokenPipeError:
        # The reader went away (`durablelab show ... | head`): stop quietly, as `cat` would.
        # Point stdout at /dev/null so the interpreter's final flush does not complain.
        with contextlib.suppress(OSError):
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141
    except KeyboardInterrupt:
        print("durablelab: interrupted", file=sys.stderr)
        return 130
    except DurableLabError as exc:
        print(f"durablelab: {_one_line(exc)}", file=sys.stderr)
        return FAILED
    except OSError as exc:
        where = f"{exc.filename}: " if exc.filename else ""
        print(f"durablelab: {where}{exc.strerror or exc}", file=sys.stderr)
        return FAILED
    except Exception as exc:  # a bug: still one line, and the way to see more
        if os.environ.get("DURABLELAB_DEBUG"):
            raise
        print(f"durablelab: unexpected {type(exc).__name__}: {_one_line(exc)} (a bug in "
              f"durablelab; DURABLELAB_DEBUG=1 shows the traceback; please report it)",
              file=sys.stderr)
        return FAILED


if __name__ == "__main__":
    raise SystemExit(main())
