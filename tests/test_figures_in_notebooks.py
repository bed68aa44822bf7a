"""Every figure the package hands a learner shows itself as a picture in a notebook, whatever
the backend: IPython's display formatter, as a kernel uses it to show a cell's value, finds
a PNG in it, not only the text ``<Figure size 800x360 with 1 Axes>``.

A fresh `DisplayFormatter` is a kernel without ``%matplotlib inline``: a plain matplotlib
Figure shows there as text only (the first test proves the check can fail), which is what
lesson 12 met. Each public plotting call is made once on a small run, sweep or report.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from IPython.core.formatters import DisplayFormatter
from matplotlib.figure import Figure as PlainFigure

import durablelab as dl

PACKAGE = Path(dl.__file__).resolve().parent
POLICY = dl.RetryPolicy(max_attempts=4, initial=1.0, backoff=2.0, jitter="none")


def shown_as_picture(value) -> bool:
    data, _ = DisplayFormatter().format(value)
    return "image/png" in data and data["image/png"][:8] == b"\x89PNG\r\n\x1a\n"


def echo(value):
    return value


def hop(ctx, n):
    return ctx.activity("hop", echo, n, policy=POLICY)


def two_hops(ctx, n):
    ctx.activity("hop", echo, n, policy=POLICY)
    return ctx.activity("hop", echo, n + 1, policy=POLICY)


def test_a_plain_matplotlib_figure_is_text_only_to_the_formatter():
    assert not shown_as_picture(PlainFigure())


@pytest.fixture(scope="module")
def runs():
    with dl.Engine() as engine:
        plan = dl.FaultPlan([dl.faults.ServerError("hop", attempts=[1])])
        ids = [engine.start(hop, n, run_id=f"r{n}", faults=plan if n else None)
               for n in range(2)]
        engine.run_until_idle()
        return [engine.run(i) for i in ids]


@pytest.fixture(scope="module")
def experiment():
    return dl.sweep(hop, [1, 2], policies={"io": POLICY},
                    fault_plans={"calm": None,
                                 "flaky": dl.FaultPlan([dl.faults.ServerError("hop", p=0.5)])},
                    seeds=range(3))


def diverged_run():
    changed = {"flag": False}

    def flip(ctx, n):
        return ctx.activity("hop" if not changed["flag"] else "jump", echo, n)

    with dl.Engine() as engine:
        run_id = engine.start(flip, 1, run_id="flip", faults=dl.FaultPlan(
            [dl.faults.Crash("hop", point="after_record")]))
        changed["flag"] = True
        engine.run_until_idle()
        return engine.run(run_id)


def shop_frame():
    from durablelab.agents import shop
    return shop.naive_vs_durable(range(2), flaky=0.15, lose=0.1, crash=0.1,
                                 malformed_rate=0.2)


def crash_report(broken: bool):
    def once(run, world):
        assert not broken or run.status != "completed" or len(run.history) < 99

    return dl.explore_crashes(two_hops, 1, once)


CALLS = {
    "Run.timeline": lambda runs, ex: runs[1].timeline(),
    "dl.viz.timeline": lambda runs, ex: dl.viz.timeline(runs),
    "dl.viz.compare_plot": lambda runs, ex: dl.viz.compare_plot(dl.compare(runs)),
    "dl.viz.divergence_plot": lambda runs, ex: dl.viz.divergence_plot({"flip": diverged_run()}),
    "Experiment.heatmap": lambda runs, ex: ex.heatmap("success_rate"),
    "Experiment.load_plot": lambda runs, ex: ex.load_plot("hop"),
    "experiments.plots.load_plot": lambda runs, ex: __import__(
        "durablelab.experiments.plots", fromlist=["load_plot"]).load_plot(ex, "hop"),
    "CrashReport.plot": lambda runs, ex: crash_report(False).plot(),
    "FaultMatrix.plot": lambda runs, ex: dl.fault_matrix({"io": POLICY},
                                                         failures=["503"]).plot(),
    "amplification_plot": lambda runs, ex: __import__(
        "durablelab.lab.amplification", fromlist=["amplification_plot"]).amplification_plot(
        dl.retry_amplification(client_retries=(0, 1), engine_attempts=(1, 3))),
    "DeployReport.plot": lambda runs, ex: __import__(
        "durablelab.lab.deploy", fromlist=["simulate_deploy"]).simulate_deploy(
        __import__("durablelab.examples.onboarding", fromlist=["x"]).onboard_vendor_v2,
        runs_per_point=1).plot(),
    "viz.load.model_load_plot": lambda runs, ex: __import__(
        "durablelab.viz.load", fromlist=["model_load_plot"]).model_load_plot(
        {"one": [{"at": 0.5, "outcome": "ok"}, {"at": 0.7, "outcome": "rate_limited"}]},
        ended_at={"one": 2.0}),
    "agents.shop.plot": lambda runs, ex: __import__(
        "durablelab.agents.shop", fromlist=["plot"]).plot(shop_frame()),
    "examples.brooker.plot": lambda runs, ex: __import__(
        "durablelab.examples.brooker", fromlist=["plot"]).plot(__import__(
            "durablelab.examples.brooker", fromlist=["trials"]).trials(clients=(2, 3))),
    "examples.metastable.plot": lambda runs, ex: __import__(
        "durablelab.examples.metastable", fromlist=["plot"]).plot(__import__(
            "durablelab.examples.metastable", fromlist=["sweep"]).sweep(
            until=6.0, trigger=(2.0, 3.0)).series()),
}


@pytest.mark.parametrize("call", sorted(CALLS))
def test_every_public_plotting_call_shows_a_picture_in_a_notebook(call, runs, experiment):
    figure = CALLS[call](runs, experiment)
    assert isinstance(figure, PlainFigure), f"{call} returned {type(figure).__name__}"
    assert shown_as_picture(figure), f"{call}: a notebook would show its figure as text"


def test_a_crash_reports_broken_row_timeline_shows_a_picture():
    def never(run, world):
        assert False, "always broken"

    report = dl.explore_crashes(two_hops, 1, never)
    assert shown_as_picture(report.timeline())


def figure_constructors(path: Path) -> list[str]:
    """Where `path` imports matplotlib's Figure class or pyplot (by line)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module in ("matplotlib.figure",
                                                                 "matplotlib.pyplot"):
            found.append(f"{path.relative_to(PACKAGE.parent)}:{node.lineno}")
        elif isinstance(node, ast.Import) and any(a.name in ("matplotlib.figure",
                                                             "matplotlib.pyplot")
                                                  for a in node.names):
            found.append(f"{path.relative_to(PACKAGE.parent)}:{node.lineno}")
    return found


def test_no_module_builds_a_figure_that_would_show_as_text():
    """A figure made anywhere but `durablelab.viz.plots.Figure` would be text in a notebook
    without the inline backend; the only other import, the CLI's, never reaches a cell."""
    allowed = {"durablelab/viz/plots.py", "durablelab/cli.py"}
    found = [where for path in sorted(PACKAGE.rglob("*.py"))
             for where in figure_constructors(path)
             if where.split(":")[0] not in allowed]
    assert found == [], ("build figures with durablelab.viz.plots.Figure, which shows itself "
                         f"in a notebook: {found}")
