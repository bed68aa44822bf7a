"""Timeline, comparison plot and the notebook card of a Run.

The figures are checked through their artists, never their pixels: which lanes exist, one
bar per attempt in its outcome's colour, a backoff line per retry wait, a vertical line per
crash, a legend that lists only what is drawn, and an axis unit that follows the span."""

import dataclasses
import io

import pandas as pd
import pytest
from matplotlib import _pylab_helpers
from matplotlib.colors import to_rgba
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Rectangle
from matplotlib.text import Text

import durablelab as dl
from durablelab.run import ATTEMPT_COLUMNS, CRASH_COLUMNS, HISTORY_COLUMNS, WAKEUP_COLUMNS, Run
from durablelab.viz.plots import OUTCOME_LABELS, PALETTE, WAIT_LANE, time_unit

DAY = 86400.0
POLICY = dl.RetryPolicy(max_attempts=5, initial=2.0, backoff=2.0, jitter="none")


def echo(value):
    return value


def story(ctx, vendor):
    """Two retried activities, a timer, a signal wait, and an activity the worker dies in."""
    ctx.activity("fetch", echo, vendor, policy=POLICY)
    ctx.activity("charge", echo, vendor, policy=POLICY)
    ctx.sleep(3600)
    decision = ctx.wait_signal("approval", timeout=DAY)
    ctx.activity("notify", echo, decision, policy=POLICY)
    return {"vendor": vendor, "decision": decision}


STORY_FAULTS = [dl.faults.ServerError("fetch", attempts=[1, 2]),
                dl.faults.RateLimit("charge", attempts=[1], retry_after=30),
                dl.faults.Crash("notify", point="after_effect")]


@pytest.fixture(scope="module")
def story_run():
    engine = dl.Engine()
    run_id = engine.start(story, "v-42", run_id="story", faults=STORY_FAULTS, seed=3)
    engine.advance(5400)                      # the approval comes after 1.5 h
    engine.signal(run_id, "approval", {"approved": True}, signal_id="click-1")
    engine.run_until_idle()
    run = engine.run(run_id)
    engine.close()
    assert run.status == "completed"
    return run


def one_run(workflow, input=None, faults=None, run_id="run", signal=None):
    engine = dl.Engine()
    engine.start(workflow, input, run_id=run_id, faults=faults)
    if signal is not None:
        engine.advance(signal[0])
        engine.signal(run_id, signal[1], signal[2])
    engine.run_until_idle()
    run = engine.run(run_id)
    engine.close()
    return run


def empty_run(**changes):
    frame = lambda columns: pd.DataFrame(columns=columns)  # noqa: E731
    run = Run(run_id="empty", workflow="tests:nothing", status="running", input=None,
              result=None, error=None, seed=0, started_at=0.0, ended_at=None,
              parent_run_id=None, history=frame(HISTORY_COLUMNS),
              attempts=frame(ATTEMPT_COLUMNS), wakeups=frame(WAKEUP_COLUMNS),
              crashes=frame(CRASH_COLUMNS))
    return dataclasses.replace(run, **changes)


def artists(fig, kind, prefix):
    """The artists of type `kind` whose gid starts with `prefix`, in drawing order."""
    return [a for a in fig.findobj(kind) if (a.get_gid() or "").startswith(prefix)]


def legend_labels(fig):
    return [t.get_text() for legend in fig.findobj(lambda a: hasattr(a, "get_texts")
                                                   and hasattr(a, "legend_handles"))
            for t in legend.get_texts()]


def unit_of(fig):
    return fig.axes[-1].get_xlabel().rsplit("(", 1)[1].rstrip(")")


def render(fig):
    """Draw the figure for real (layout included) so a broken artist fails here."""
    fig.savefig(io.BytesIO(), format="png", dpi=50)


# --- timeline -------------------------------------------------------------------------------

def test_timeline_is_a_figure_made_without_pyplot(story_run):
    managers = _pylab_helpers.Gcf.get_num_fig_managers()
    fig = dl.viz.timeline([story_run])
    assert isinstance(fig, Figure)
    assert _pylab_helpers.Gcf.get_num_fig_managers() == managers
    render(fig)


def test_timeline_shows_itself_in_a_notebook_without_the_inline_backend(story_run):
    png = dl.viz.timeline([story_run])._repr_png_()
    assert png.startswith(b"\x89PNG")


def test_run_timeline_works_on_every_call(story_run):
    # The entry point and the drawing module must not shadow each other:
    # both entry points must keep working after the first call.
    for _ in range(2):
        assert isinstance(story_run.timeline(), Figure)
        assert isinstance(dl.viz.timeline(story_run), Figure)


def test_one_lane_per_activity_in_order_of_position_plus_one_for_waits(story_run):
    fig = dl.viz.timeline(story_run)
    (ax,) = fig.axes
    lanes = [label.get_text() for label in ax.get_yticklabels()]
    assert lanes == ["fetch", "charge", "notify", WAIT_LANE]


def test_each_attempt_is_one_bar_in_its_outcome_colour(story_run):
    fig = dl.viz.timeline(story_run)
    bars = artists(fig, Rectangle, "attempt:")
    attempts = story_run.attempts
    assert list(attempts.outcome) == ["transient", "transient", "ok", "rate_limited", "ok",
                                      "crashed", "ok"]
    assert len(bars) == len(attempts)
    drawn = sorted((b.get_gid(), b.get_facecolor()) for b in bars)
    expected = sorted((f"attempt:{r.position}:{r.attempt}:{r.outcome}", to_rgba(PALETTE[r.outcome]))
                      for r in attempts.itertuples())
    assert drawn == expected


def test_zero_length_attempts_are_still_visible(story_run):
    assert (story_run.attempts.started_at == story_run.attempts.ended_at).all()  # virtual time
    fig = dl.viz.timeline(story_run)
    ax = fig.axes[0]
    span = ax.get_xlim()[1] - ax.get_xlim()[0]
    assert all(bar.get_width() >= 0.005 * span for bar in artists(fig, Rectangle, "attempt:"))


def test_backoffs_are_lines_from_the_failed_attempt_to_the_retry(story_run):
    fig = dl.viz.timeline(story_run)
    backoffs = {line.get_gid(): list(line.get_xdata()) for line in artists(fig, Line2D, "backoff:")}
    # the axis is in minutes (the run spans 1.5 h); fetch waits 2 s then 4 s, charge 30 s.
    assert unit_of(fig) == "min"
    assert backoffs == {"backoff:1:1": [0.0, 2 / 60], "backoff:1:2": [2 / 60, 6 / 60],
                        "backoff:2:1": [6 / 60, 36 / 60]}


def test_timer_and_signal_wait_are_hatched_spans_in_the_waits_lane(story_run):
    fig = dl.viz.timeline(story_run)
    (timer,) = artists(fig, Rectangle, "wait:timer:")
    (signal,) = artists(fig, Rectangle, "wait:signal:approval")
    assert timer.get_hatch() and signal.get_hatch() and timer.get_hatch() != signal.get_hatch()
    assert timer.get_x() == pytest.approx(36 / 60) and timer.get_width() == pytest.approx(60)
    assert signal.get_x() + signal.get_width() == pytest.approx(90)
    assert {"durable timer", "signal wait"} <= set(legend_labels(fig))


def test_a_crash_is_a_vertical_line_at_the_end_of_the_attempt_it_cut_off(story_run):
    fig = dl.viz.timeline(story_run)
    (crash,) = story_run.crashes.itertuples()
    (line,) = artists(fig, Line2D, "crash:")
    assert line.get_gid() == "crash:after_effect"
    # The attempt took 0 s and is drawn as a narrow bar from crashed_at: the line is at its
    # end, between it and the recovered worker's attempt, not on top of its start.
    cut, again = artists(fig, Rectangle, "attempt:7:1:")
    assert cut.get_gid() == "attempt:7:1:crashed" and cut.get_x() == crash.crashed_at / 60
    assert list(line.get_xdata()) == [cut.get_x() + cut.get_width()] * 2
    assert again.get_gid() == "attempt:7:1:ok" and again.get_x() >= line.get_xdata()[0]
    assert tuple(line.get_ydata()) == (0, 1)      # axes fraction: across every lane
    assert "worker crash" in legend_labels(fig)


def test_a_crash_during_a_backoff_is_a_line_not_an_attempt():
    def wf(ctx, _):
        return ctx.activity("pay", echo, 1, policy=dl.RetryPolicy(initial=60.0, jitter="none"))
    run = one_run(wf, faults=[dl.faults.ServerError("pay", attempts=[1]),
                              dl.faults.Crash("pay", point="during_wait")])
    assert list(run.attempts.outcome) == ["transient", "ok"]      # a wait is no attempt
    fig = dl.viz.timeline(run)
    bars = [bar.get_gid() for bar in artists(fig, Rectangle, "attempt:")]
    assert bars == ["attempt:1:1:transient", "attempt:1:2:ok"]
    (line,) = artists(fig, Line2D, "crash:during_wait")
    assert list(line.get_xdata()) == [30.0, 30.0]        # halfway through the 60 s backoff
    assert "crashed" not in legend_labels(fig)


def test_each_wake_up_is_a_mark_on_the_top_strip_with_replay_counts(story_run):
    fig = dl.viz.timeline(story_run)
    marks = artists(fig, Line2D, "wakeup:")
    assert [m.get_gid() for m in marks] == [f"wakeup:{r}" for r in story_run.wakeups.reason]
    labels = [t.get_text() for t in fig.findobj(Text) if t.get_gid() == "wakeup-label"]
    # the two wake-ups at 5400 s (the signal, then the recovery after the crash) share one
    # label, each with its counts; the four in the first minute share one with their sums
    wakeups = story_run.wakeups
    last = wakeups[wakeups.woke_at == wakeups.woke_at.iloc[-1]]
    assert labels[-1] == " · ".join(f"↻{r.replayed} +{r.recorded}" for r in last.itertuples())
    assert labels[0] == "4× ↻1 +3"
    counts = [int(text.split("×")[0]) if "×" in text else text.count("↻") for text in labels]
    assert sum(counts) == len(wakeups)       # every wake-up counted once, none thinned


def label_boxes(fig):
    """The drawn boxes of a figure's wake-up labels and the centres of its wake-up marks."""
    fig.draw_without_rendering()
    boxes = [t.get_window_extent() for t in fig.findobj(Text) if t.get_gid() == "wakeup-label"]
    marks = [line.get_transform().transform((line.get_xdata()[0], line.get_ydata()[0]))
             for line in fig.findobj(Line2D) if str(line.get_gid()).startswith("wakeup:")]
    return boxes, marks


def assert_labels_clear(fig):
    boxes, marks = label_boxes(fig)
    for i, box in enumerate(boxes):
        assert not any(box.overlaps(other) for other in boxes[i + 1:]), "labels overlap"
        assert not any(box.contains(x, y) for x, y in marks), "a label covers a mark"


@pytest.mark.parametrize("gaps", [[0.0] * 5, [1.0, 2.0, 3.0, 50.0, 51.0, 52.0, 400.0],
                                  [30.0 * i for i in range(40)], [0.0, 1e-3, 9000.0]])
def test_wake_up_labels_never_overlap_each_other_or_a_mark(gaps):
    wakeups = pd.DataFrame({"woke_at": [float(sum(gaps[:i + 1])) for i in range(len(gaps))],
                            "reason": "timer", "replayed": range(len(gaps)), "recorded": 1})
    run = empty_run(wakeups=wakeups, ended_at=float(wakeups.woke_at.max()))
    for width in (5, 9):
        fig = dl.viz.timeline(run, width=width)
        assert_labels_clear(fig)
        for box in label_boxes(fig)[0]:     # always right of their mark
            assert box.x0 > fig.axes[0].transData.transform((0, 0))[0]


def test_legend_lists_exactly_the_outcomes_present(story_run):
    labels = legend_labels(dl.viz.timeline(story_run))
    outcomes = [label for label in labels if label in OUTCOME_LABELS.values()]
    assert outcomes == ["ok", "transient", "rate limited", "crashed"]

    def clean(ctx, _):
        return ctx.activity("only", echo, 1)
    labels = legend_labels(dl.viz.timeline(one_run(clean)))
    assert [label for label in labels if label in OUTCOME_LABELS.values()] == ["ok"]
    assert "worker crash" not in labels and "durable timer" not in labels


def test_non_retryable_failure_is_drawn_in_its_colour():
    def fails(_):
        raise PermissionError("no access to <ledger>")

    def wf(ctx, _):
        return ctx.activity("post", fails, None, policy=POLICY)
    run = one_run(wf, faults=[dl.faults.ServerError("post", attempts=[1])])
    fig = dl.viz.timeline(run)
    colours = [bar.get_facecolor() for bar in artists(fig, Rectangle, "attempt:")]
    assert colours == [to_rgba(PALETTE["transient"]), to_rgba(PALETTE["non_retryable"])]


@pytest.mark.parametrize("seconds, unit", [(30, "s"), (20 * 60, "min"), (5 * 3600, "h"),
                                           (3 * DAY, "days")])
def test_x_axis_unit_follows_the_span(seconds, unit):
    def wf(ctx, _):
        ctx.sleep(seconds)
        return ctx.activity("after", echo, 1)
    fig = dl.viz.timeline(one_run(wf))
    assert fig.axes[0].get_xlabel() == f"virtual time ({unit})"


def test_three_day_signal_wait_is_in_days():
    def wf(ctx, _):
        return ctx.wait_signal("approval", deadline=ctx.now() + 3 * DAY)
    run = one_run(wf)
    assert run.result is None                     # timed out after three days
    fig = dl.viz.timeline(run)
    assert unit_of(fig) == "days"
    (wait,) = artists(fig, Rectangle, "wait:signal:approval")
    assert wait.get_width() == pytest.approx(3)


def test_two_runs_are_two_axes_sharing_x_titled_with_id_and_status(story_run):
    again = dataclasses.replace(story_run, run_id="story-again")
    fig = dl.viz.timeline([story_run, again], title="two runs")
    top, bottom = fig.axes
    assert top.get_shared_x_axes().joined(top, bottom)
    assert top.get_title(loc="left") == "story · completed"
    assert bottom.get_title(loc="left") == "story-again · completed"
    render(fig)


def retried_run(failures, run_id):
    """A run of one activity that fails `failures` times, 2 s, 4 s ... apart (lesson 05)."""
    def wf(ctx, _):
        return ctx.activity("extract", echo, 1, policy=POLICY)
    faults = [dl.faults.ServerError("extract", attempts=list(range(1, failures + 1)))]
    return one_run(wf, faults=faults if failures else None, run_id=run_id)


def test_runs_for_comparison_share_one_time_axis_even_one_done_at_t0():
    # Lesson 05's three runs: 0, 1 and 3 retries. Each used to get an x axis of its own
    # (0-1 s, 0-2 s, 0-14 s) because the first was a sliver: now one scale for all three.
    runs = [retried_run(n, f"vendor-{n}") for n in (0, 1, 3)]
    assert [r.latest_at for r in runs] == [0.0, 2.0, 14.0]
    fig = dl.viz.timeline(runs)
    axes = fig.axes
    assert all(axes[0].get_shared_x_axes().joined(axes[0], ax) for ax in axes[1:])
    assert {ax.get_xlim() for ax in axes} == {axes[0].get_xlim()}
    assert 14 < axes[0].get_xlim()[1] < 16       # the longest run, and room for its label
    assert [ax.get_xlabel() for ax in axes] == ["", "", "virtual time (s)"]
    (done_at_once,) = artists(axes[0], Rectangle, "attempt:")
    assert done_at_once.get_x() == 0.0
    render(fig)


def test_runs_at_one_instant_with_an_order_to_show_share_an_axis_of_their_own(story_run):
    def two_steps(ctx, _):
        return [ctx.activity("a", echo, 1), ctx.activity("b", echo, 2)]
    crashed = one_run(two_steps, run_id="crashed", faults=[dl.faults.Crash("a", point="after_effect")])
    plain = one_run(two_steps, run_id="plain")
    fig = dl.viz.timeline([crashed, plain, story_run])
    first, second, timed = fig.axes
    assert first.get_shared_x_axes().joined(first, second)
    assert not first.get_shared_x_axes().joined(first, timed)
    assert first.get_xlabel() == ""       # the axis under it shares its ticks and label
    assert second.get_xlabel().startswith("virtual time: every event at t = 0 s")
    assert timed.get_xlabel() == "virtual time (min)"
    render(fig)


def test_run_without_attempts_renders_its_waits():
    def wf(ctx, _):
        ctx.sleep(30)
    fig = dl.viz.timeline(one_run(wf))
    assert [t.get_text() for t in fig.axes[0].get_yticklabels()] == [WAIT_LANE]
    assert artists(fig, Rectangle, "attempt:") == []
    render(fig)


def test_run_with_empty_frames_renders():
    fig = dl.viz.timeline(empty_run())
    (ax,) = fig.axes
    assert list(ax.get_yticklabels()) == []
    assert ax.get_title(loc="left") == "empty · running"
    render(fig)


def test_open_signal_wait_without_deadline_runs_to_the_edge():
    def wf(ctx, _):
        return ctx.wait_signal("go")
    engine = dl.Engine()
    engine.start(wf, None, run_id="open")
    engine.advance(60)
    fig = dl.viz.timeline(engine.run("open"))
    (wait,) = artists(fig, Rectangle, "wait:signal:go")
    assert wait.get_x() + wait.get_width() == pytest.approx(fig.axes[0].get_xlim()[1])
    render(fig)


def test_imported_run_shows_its_notes_as_a_caption(story_run):
    note = "Temporal records only the last attempt of each activity"
    imported = dataclasses.replace(story_run, source="temporal", notes=(note,))
    fig = dl.viz.timeline(imported)
    assert f"Note: {note}" in {t.get_text() for t in fig.findobj(Text)}
    assert fig.axes[0].get_xlabel() == "time (min)"   # not the engine's virtual clock
    render(fig)


def test_timeline_without_runs_says_what_to_pass():
    with pytest.raises(ValueError, match="no runs to draw"):
        dl.viz.timeline([])


def test_time_unit_boundaries():
    assert [time_unit(s)[0] for s in (30, 119, 120, 7199, 7200, 2 * DAY)] == \
        ["s", "s", "min", "min", "h", "days"]


# --- compare_plot ---------------------------------------------------------------------------

METRICS = pd.DataFrame({"run_id": ["jitter", "no-jitter"], "status": ["completed", "failed"],
                        "attempts": [7, 12], "retries": [3, 8], "virtual_duration": [95.5, 41.0],
                        "ok": [True, False]})


def test_compare_plot_draws_one_chart_per_numeric_metric_with_runs_on_x():
    fig = dl.viz.compare_plot(METRICS)
    visible = [ax for ax in fig.axes if ax.get_visible()]
    assert [ax.get_title() for ax in visible] == ["attempts", "retries", "virtual duration"]
    for ax, metric in zip(visible, ["attempts", "retries", "virtual_duration"]):
        assert [t.get_text() for t in ax.get_xticklabels()] == ["jitter", "no-jitter"]
        assert [bar.get_height() for bar in ax.patches] == list(METRICS[metric])
    render(fig)


def test_compare_plot_takes_chosen_metrics_and_an_index_of_run_ids():
    fig = dl.viz.compare_plot(METRICS.set_index("run_id"), metrics=["retries"])
    (ax,) = fig.axes
    assert ax.get_title() == "retries"
    with pytest.raises(KeyError, match="no column 'tokens'"):
        dl.viz.compare_plot(METRICS, metrics=["tokens"])
    with pytest.raises(ValueError, match="no numeric column"):
        dl.viz.compare_plot(METRICS[["run_id", "status"]])


def test_compare_plot_legend_keeps_names_the_ticks_cut_short():
    """Two runs whose names agree for 16 characters get the same cut tick label; the legend
    names each whole, so its colours still tell them apart."""
    frame = pd.DataFrame({"retries": [1, 3]},
                         index=["langgraph graph, sync", "langgraph graph, exit"])
    fig = dl.viz.compare_plot(frame)
    (ax,) = [ax for ax in fig.axes if ax.get_visible()]
    ticks = [t.get_text() for t in ax.get_xticklabels()]
    assert ticks[0] == ticks[1]                       # cut to the same 16 characters
    assert [t.get_text() for t in fig.legends[0].get_texts()] == list(frame.index)
    render(fig)


# --- run_html -------------------------------------------------------------------------------

def test_html_card_shows_status_counts_and_result(story_run):
    html = story_run._repr_html_()
    assert "story" in html and "completed" in html and "test_viz:story" in html
    assert "7 attempts: 3 ok · 2 transient · 1 rate limited · 1 crashed" in html
    assert ">retries</td><td" in html and ">3</td>" in html
    assert "7 events" in html                       # a wait records its start and end
    assert html == dl.viz.run_html(story_run)       # deterministic


def test_html_escapes_a_result_containing_script():
    def wf(ctx, _):
        return {"note": "<script>alert('x')</script>" + "y" * 500}
    html = one_run(wf)._repr_html_()
    assert "<script>" not in html
    assert "&lt;script&gt;" in html
    assert "…" in html                              # a long result is cut short


def test_html_shows_error_class_and_folds_the_rest_of_the_message():
    def fails(_):
        raise ValueError("bad <vendor>\nline two")

    def wf(ctx, _):
        return ctx.activity("check", fails, None)
    run = one_run(wf)
    assert run.status == "failed"
    html = run._repr_html_()
    assert "ActivityFailed</span>" in html
    assert "failed</span>" in html
    assert "bad &lt;vendor&gt;" in html and "<vendor>" not in html
    first, _, rest = html.partition("<details")
    assert "line two" not in first and "line two" in rest


def test_html_of_an_empty_imported_run_shows_its_notes():
    html = empty_run(source="temporal", notes=("only <last> attempts",))._repr_html_()
    assert "from temporal" in html and "Note: only &lt;last&gt; attempts" in html
    assert "0 attempts" in html and "0 events" in html


def test_outcomes_that_share_warm_colours_differ_by_hatch_too():
    from durablelab.viz.plots import HATCHES

    warm = ["transient", "rate_limited", "non_retryable"]
    styles = {(PALETTE[o], HATCHES.get(o)) for o in warm}
    assert len(styles) == 3 and len({HATCHES.get(o) for o in warm}) == 3
    run = one_run(lambda ctx, _: ctx.activity("pay", echo, 1, policy=POLICY), faults=[
        dl.faults.RateLimit("pay", attempts=[1]), dl.faults.ServerError("pay", attempts=[2])])
    fig = dl.viz.timeline(run)
    hatches = [p.get_hatch() for p in fig.findobj(Rectangle)
               if str(p.get_gid()).startswith("attempt:")]
    assert hatches == [HATCHES["rate_limited"], None, None]
    legend = {t.get_text(): h for t, h in zip(fig.legends[0].get_texts(),
                                              fig.legends[0].get_patches())}
    assert legend["rate limited"].get_hatch() == HATCHES["rate_limited"]


def test_a_run_whose_events_all_happen_at_t0_is_drawn_in_order_not_as_slivers():
    run = one_run(lambda ctx, _: [ctx.activity("a", echo, 1), ctx.activity("b", echo, 2)])
    fig = dl.viz.timeline(run)
    ax = fig.axes[0]
    bars = [p for p in fig.findobj(Rectangle) if str(p.get_gid()).startswith("attempt:")]
    span = ax.get_xlim()[1] - ax.get_xlim()[0]
    assert all(bar.get_width() >= 0.03 * span for bar in bars)
    assert bars[1].get_x() >= bars[0].get_x() + bars[0].get_width()   # side by side, in order
    assert "every event at t = 0 s" in ax.get_xlabel()


def test_compare_plot_labels_units_and_gives_each_run_its_colour():
    fig = dl.viz.compare_plot(METRICS)
    visible = [ax for ax in fig.axes if ax.get_visible()]
    assert [ax.get_ylabel() for ax in visible] == ["count", "count", "seconds"]
    for ax in visible:
        colours = [bar.get_facecolor() for bar in ax.patches]
        assert colours[0] != colours[1]
    assert [t.get_text() for t in fig.legends[0].get_texts()] == ["jitter", "no-jitter"]
    fig.draw_without_rendering()      # every title clear of the charts of the row above
    for ax in visible[3:]:
        title = ax.title.get_window_extent()
        above = [a for a in visible if a.get_position().y0 > ax.get_position().y1]
        assert all(title.y1 < a.get_tightbbox().y0 for a in above)


def test_the_axis_unit_can_be_the_one_the_text_uses(story_run):
    fig = dl.viz.timeline(story_run, unit="s")
    assert fig.axes[0].get_xlabel() == "virtual time (s)"
    assert fig.axes[0].get_xlim()[1] > 5400            # 1.5 h, in seconds
    with pytest.raises(ValueError, match=r"timeline\(unit='minutes'\): use one of s, min, h, days"):
        dl.viz.timeline(story_run, unit="minutes")


# --- runs at one instant, axes that fit, figures that fit a screen ------------------------

def two_steps(ctx, _):
    return [ctx.activity("a", echo, 1), ctx.activity("b", echo, 2)]


@pytest.mark.parametrize("point, order", [
    ("before_activity", ["attempt:1:1:crashed", "attempt:1:1:ok", "attempt:2:1:ok"]),
    ("after_effect", ["attempt:1:1:crashed", "attempt:1:1:ok", "attempt:2:1:ok"]),
    ("after_record", ["attempt:1:1:ok", "attempt:1:1:crashed", "attempt:2:1:ok"])])
def test_a_crash_at_t0_is_drawn_where_it_happened_between_the_steps(point, order):
    # Lessons 02 and 13: everything at t = 0, and the crash line used to sit at the far
    # left, before the attempt it cut off.
    run = one_run(two_steps, faults=[dl.faults.Crash("a", point=point)])
    assert set(run.attempts.started_at) == {0.0} and list(run.crashes.crashed_at) == [0.0]
    fig = dl.viz.timeline(run)
    bars = sorted(artists(fig, Rectangle, "attempt:"), key=lambda bar: bar.get_x())
    assert [bar.get_gid() for bar in bars] == order
    (line,) = artists(fig, Line2D, "crash:")
    cut = next(bar for bar in bars if bar.get_gid().endswith("crashed"))
    after = bars[bars.index(cut) + 1]
    assert line.get_xdata()[0] == cut.get_x() + cut.get_width() == after.get_x() > 0
    # the fresh worker's wake-up is on the crash's line, the first one at the start
    marks = {m.get_gid(): m.get_xdata()[0] for m in artists(fig, Line2D, "wakeup:")}
    assert marks == {"wakeup:start": 0.0, "wakeup:recovery": line.get_xdata()[0]}
    render(fig)


def test_a_wait_at_t0_takes_its_place_in_the_order():
    def wf(ctx, _):
        first = ctx.activity("a", echo, 1)
        approval = ctx.wait_signal("approval")
        return [first, approval, ctx.activity("b", echo, 2)]
    engine = dl.Engine()
    engine.start(wf, None, run_id="run")
    engine.signal("run", "approval", True)     # arrives before the wait: no time passes
    engine.run_until_idle()
    run = engine.run("run")
    engine.close()
    assert run.status == "completed" and run.latest_at == 0.0
    fig = dl.viz.timeline(run)
    a, b = artists(fig, Rectangle, "attempt:")
    (wait,) = artists(fig, Rectangle, "wait:signal:approval")
    assert a.get_x() + a.get_width() == wait.get_x()
    assert wait.get_x() + wait.get_width() == b.get_x()


def test_crash_places_without_an_attempt_cut_off_go_between_slots():
    from durablelab.viz.order import Slots, crash_places
    attempts = pd.DataFrame({"position": [1, 3], "attempt": [1, 1]})
    waits = [dataclasses.make_dataclass("W", ["position"])(2)]
    slots = Slots(attempts, waits, 0.5)
    assert (slots.attempt, slots.wait) == ({0: 0.0, 1: 1.0}, {0: 0.5})
    crashes = pd.DataFrame({"crashed_at": [0.0] * 4, "run_id": ["r", "r", "r", "other"],
                            "position": [2, 2, 3, 1],
                            "point": ["before_activity", "during_wait", "after_record",
                                      "after_effect"]})
    assert crash_places(crashes, "r", {}, slots, lambda t: -1.0) == [0.5, 0.75, 1.5, -1.0]


def test_the_time_axis_fits_a_run_shorter_than_a_second():
    # Lesson 14: a run of 0.3 s was drawn on an axis to 1 s.
    quick = dl.RetryPolicy(max_attempts=5, initial=0.1, backoff=2.0, jitter="none")
    run = one_run(lambda ctx, _: ctx.activity("a", echo, 1, policy=quick),
                  faults=[dl.faults.ServerError("a", attempts=[1, 2])])
    assert run.latest_at == pytest.approx(0.3)
    fig = dl.viz.timeline(run)
    assert fig.axes[0].get_xlabel() == "virtual time (s)"
    assert 0.3 < fig.axes[0].get_xlim()[1] <= 0.36


def pixels(fig):
    """The height of the figure as a notebook shows it (its PNG), in pixels."""
    from PIL import Image
    return Image.open(io.BytesIO(fig._repr_png_())).size[1]


@pytest.mark.parametrize("count, lanes", [(6, 1), (4, 2)])
def test_a_stack_of_runs_fits_a_screen(count, lanes):
    # Lesson 03 cell 28 (six runs of one lane) and lesson 02 cell 26 (four of two) were
    # about 960 px tall.
    def wf(ctx, _):
        return [ctx.activity(f"step{k}", echo, k) for k in range(lanes)]
    runs = [one_run(wf, run_id=f"run-{k}") for k in range(count)]
    fig = dl.viz.timeline(runs)
    assert fig.get_size_inches()[1] <= 6.5
    assert pixels(fig) <= 680
    fig.draw_without_rendering()                 # every run's lanes still have room
    for ax in fig.axes:
        row = ax.get_window_extent().height / (lanes + 1.6)
        assert row >= 0.2 * fig.dpi
        labels = [t.get_window_extent() for t in ax.get_yticklabels()]
        assert not any(a.overlaps(b) for a, b in zip(labels, labels[1:]))


def test_many_runs_grow_past_the_cap_rather_than_squeeze_lanes_unreadably():
    runs = [one_run(two_steps, run_id=f"run-{k}") for k in range(12)]
    assert dl.viz.timeline(runs).get_size_inches()[1] > 6.5


def test_the_caller_chooses_the_height():
    run = one_run(two_steps)
    assert tuple(dl.viz.timeline(run, height=3).get_size_inches()) == (9.0, 3.0)
    assert tuple(run.timeline(height=4.5).get_size_inches()) == (9.0, 4.5)


@pytest.mark.parametrize("height, error", [(0, dl.errors.BadValue), (-2.0, dl.errors.BadValue),
                                           (float("nan"), dl.errors.BadValue),
                                           ("6", dl.errors.BadType),
                                           (True, dl.errors.BadType)])
def test_a_height_that_is_not_inches_says_what_to_give(height, error):
    with pytest.raises(error, match=r"timeline\(height=.*\): give the figure height in "
                                    r"inches, a number above 0 \(or None: as tall as the "
                                    r"lanes need, at most 6.5 in\)"):
        dl.viz.timeline(one_run(two_steps), height=height)


def test_a_cancelled_run_marks_where_the_cancel_reached_its_code():
    def waits(ctx, _):
        ctx.activity("fetch", lambda: 1)
        return ctx.wait_signal("approve", timeout=3600)

    engine = dl.Engine()
    run_id = engine.start(waits, None, run_id="c")
    engine.advance(10)
    engine.cancel(run_id, "the customer gave up")
    engine.run_until_idle()
    run = engine.run(run_id)
    fig = run.timeline()
    (ax,) = [ax for ax in fig.axes if ax.get_visible()]
    marks = [a for a in ax.get_children() if a.get_gid() == "message:cancelled:cancelled"]
    assert len(marks) == 1 and list(marks[0].get_xdata()) == [10.0]
    assert "cancel told to the code" in [t.get_text() for t in fig.legends[0].get_texts()]
    engine.close()


@dl.workflow
def _timed_child(ctx, topic):
    ctx.sleep(2)
    return topic


def test_children_running_at_once_get_a_lane_each():
    def parent(ctx, topics):
        return ctx.gather(*[ctx.start_child(_timed_child, t) for t in topics])

    engine = dl.Engine()
    run_id = engine.start(parent, ["ducks", "geese", "swans"], run_id="p")
    engine.run_until_idle()
    fig = engine.run(run_id).timeline()
    (ax,) = [ax for ax in fig.axes if ax.get_visible()]
    assert [t.get_text() for t in ax.get_yticklabels()] == [
        "child _timed_child", "child _timed_child ·2", "child _timed_child ·3"]
    engine.close()


# Expanding child runs: each child's lanes under its bar, on the parent's clock.

@dl.workflow
def _searcher(ctx, topic):
    ctx.sleep(1)
    return ctx.activity("search", echo, topic, policy=POLICY)


@dl.workflow
def _team(ctx, topic):
    ctx.activity("plan", echo, topic)
    return ctx.child(_searcher, topic)        # a child of a child


def _boss(ctx, topics):
    found = ctx.gather(*[ctx.start_child(_searcher, t) for t in topics])
    return found + [ctx.child(_team, "owls")]


FIRST_SEARCH_FAILS = [dl.faults.ServerError("search", attempts=[1])]
EXPANDED = ["child _searcher", "boss/1 › search", "boss/1 › waits",
            "child _searcher ·2", "boss/2 › search", "boss/2 › waits",
            "child _team", "boss/5 › plan", "boss/5 › child _searcher",
            "boss/5/2 › search", "boss/5/2 › waits"]


def _boss_engine(path=None):
    engine = dl.Engine(path)
    engine.start(_boss, ["ducks", "geese"], run_id="boss", faults=FIRST_SEARCH_FAILS)
    engine.run_until_idle()
    assert engine.run("boss").status == "completed"
    return engine


def _lane_labels(fig):
    (ax,) = [ax for ax in fig.axes if ax.get_visible()]
    return ax, [t.get_text() for t in ax.get_yticklabels()]


def _bars_on(ax, row):
    """(x, outcome) of the attempt bars on lane `row`, left to right."""
    bars = [p for p in ax.patches if str(p.get_gid()).startswith("attempt:")
            and abs(p.get_y() + p.get_height() / 2 - row) < 1e-9]
    return sorted((round(p.get_x(), 6), p.get_gid().rpartition(":")[2]) for p in bars)


def test_expanded_children_show_their_attempts_under_their_bars_on_the_parents_clock():
    engine = _boss_engine()
    ax, labels = _lane_labels(engine.run("boss").timeline(children=engine))
    assert labels == EXPANDED
    # Each child sleeps 1 s, its search fails at 1 s and is retried after 2 s of backoff;
    # the team child starts when both have ended (3 s), its own child 1 s later.
    for lane, times in [("boss/1 › search", [1.0, 3.0]), ("boss/2 › search", [1.0, 3.0]),
                        ("boss/5/2 › search", [4.0, 6.0])]:
        assert _bars_on(ax, labels.index(lane)) == [(times[0], "transient"),
                                                     (times[1], "ok")]
    assert _bars_on(ax, labels.index("boss/5 › plan")) == [(3.0, "ok")]
    shaded = {p.get_gid(): p for p in ax.patches
              if str(p.get_gid()).startswith("child-lanes:")}
    assert set(shaded) == {"child-lanes:boss/1", "child-lanes:boss/2", "child-lanes:boss/5",
                           "child-lanes:boss/5/2"}
    # the team's shade covers its bar, its lanes and its own child's
    team = shaded["child-lanes:boss/5"]
    assert (team.get_y(), team.get_y() + team.get_height()) == (
        labels.index("child _team") - 0.5, len(labels) - 0.5)
    legend = [t.get_text() for t in ax.figure.legends[0].get_texts()]
    assert "a child run's lanes" in legend and "virtual time (s)" == ax.get_xlabel()
    engine.close()


def test_a_list_of_children_expands_only_those():
    engine = _boss_engine()
    fig = dl.viz.timeline(engine.run("boss"), children=[engine.run("boss/2")])
    assert _lane_labels(fig)[1] == ["child _searcher", "child _searcher ·2",
                                    "boss/2 › search", "boss/2 › waits", "child _team"]
    engine.close()


def test_a_run_without_children_or_without_children_given_is_drawn_as_before():
    engine = _boss_engine()
    lonely = engine.run("boss/1")            # a child run has no children of its own

    def drawn(fig):
        ax, labels = _lane_labels(fig)
        return labels, sorted((str(p.get_gid()), p.get_x(), p.get_y(), p.get_width())
                              for p in ax.patches)

    assert drawn(lonely.timeline(children=engine)) == drawn(lonely.timeline())
    boss = engine.run("boss")
    assert drawn(boss.timeline(children=[])) == drawn(boss.timeline())
    assert _lane_labels(boss.timeline())[1] == ["child _searcher", "child _searcher ·2",
                                                "child _team"]
    engine.close()


def test_children_expand_from_a_read_only_engine(tmp_path):
    path = str(tmp_path / "runs.duckdb")
    _boss_engine(path).close()
    with dl.Engine(path, read_only=True) as reader:
        ax, labels = _lane_labels(reader.run("boss").timeline(children=reader))
        assert labels == EXPANDED
        assert _bars_on(ax, labels.index("boss/5/2 › search")) == [(4.0, "transient"),
                                                                    (6.0, "ok")]


def test_a_run_that_is_not_a_child_of_the_drawn_run_is_refused():
    engine = _boss_engine()
    engine.start(_searcher, "crows", run_id="stranger")
    engine.run_until_idle()
    boss = engine.run("boss")
    with pytest.raises(dl.errors.BadValue, match=r"run 'stranger' is not a child of the run "
                       r"drawn \('boss'\).*parent_run_id is None. The children started "
                       r"there are 'boss/1', 'boss/2', 'boss/5'"):
        boss.timeline(children=[engine.run("stranger")])
    # a grandchild without the child that started it has no parent in the picture
    with pytest.raises(dl.errors.BadValue, match=r"run 'boss/5/2' is not a child"):
        boss.timeline(children=[engine.run("boss/5/2")])
    with pytest.raises(dl.errors.BadValue, match=r"run 'boss/1' is given twice"):
        boss.timeline(children=[engine.run("boss/1"), engine.run("boss/1")])
    with pytest.raises(dl.errors.BadType, match=r"every child must be a Run"):
        boss.timeline(children=["boss/1"])
    with pytest.raises(dl.errors.BadType, match=r"not a single Run"):
        boss.timeline(children=engine.run("boss/1"))
    engine.close()


@dl.workflow
def _store_twice(ctx, value):
    return ctx.activity("store", echo, ctx.activity("fetch", echo, value))


def test_an_expanded_childs_crash_is_drawn_on_its_cut_bar_and_names_the_child():
    def parent(ctx, value):
        ctx.activity("plan", echo, value)
        return ctx.child(_store_twice, value)

    engine = dl.Engine()
    engine.start(parent, 1, run_id="o", faults=[dl.faults.Crash("store", point="after_effect")])
    engine.run_until_idle()
    ax, labels = _lane_labels(engine.run("o").timeline(children=engine))
    assert labels == ["plan", "child _store_twice", "o/2 › fetch", "o/2 › store"]
    # everything happened at t = 0: drawn in order, the child's slots after the parent's
    # `plan`, its crashed attempt then the recovered worker's
    bars = _bars_on(ax, labels.index("o/2 › store"))
    assert [outcome for _, outcome in bars] == ["crashed", "ok"]
    assert _bars_on(ax, labels.index("o/2 › fetch"))[0][0] > _bars_on(ax, 0)[0][0]
    (line,) = [a for a in ax.lines if a.get_gid() == "crash:after_effect"]
    cut = [p for p in ax.patches if str(p.get_gid()).endswith(":crashed")]
    assert line.get_xdata()[0] == pytest.approx(cut[0].get_x() + cut[0].get_width())
    assert "crash in o/2: after_effect" in [t.get_text() for t in ax.texts]
    engine.close()


def test_children_expand_from_an_export_read_back(tmp_path):
    engine = _boss_engine()
    dl.export([engine.run(r) for r in engine.runs().run_id], tmp_path / "runs.jsonl")
    engine.close()
    loaded = dl.load(tmp_path / "runs.jsonl")
    (boss,) = [run for run in loaded if run.run_id == "boss"]
    ax, labels = _lane_labels(boss.timeline(children=[r for r in loaded if r is not boss]))
    assert labels == EXPANDED
    assert _bars_on(ax, labels.index("boss/1 › search")) == [(1.0, "transient"), (3.0, "ok")]


@pytest.mark.parametrize("source", ["runs.duckdb", "runs.jsonl"])
def test_the_timeline_command_expands_children_from_a_store_or_an_export(
        tmp_path, monkeypatch, source):
    from matplotlib.figure import Figure

    from durablelab import cli
    engine = _boss_engine(str(tmp_path / "runs.duckdb"))
    if source == "runs.jsonl":
        dl.export([engine.run(r) for r in engine.runs().run_id], tmp_path / source)
    engine.close()
    drawn = []
    monkeypatch.setattr(Figure, "savefig", lambda fig, *a, **k: drawn.append(fig))
    db, out = str(tmp_path / source), str(tmp_path / "t.png")
    assert cli.main(["timeline", "boss", "--db", db, "-o", out, "--children"]) == 0
    assert cli.main(["timeline", "boss", "--db", db, "-o", out]) == 0
    # a child drawn with its own children: the grandchild only
    assert cli.main(["timeline", "boss/5", "--db", db, "-o", out, "--children"]) == 0
    expanded, plain, team = (_lane_labels(fig)[1] for fig in drawn)
    assert expanded == EXPANDED
    assert plain == ["child _searcher", "child _searcher ·2", "child _team"]
    assert team == ["plan", "child _searcher", "boss/5/2 › search", "boss/5/2 › waits"]


def test_runs_that_name_each_other_in_a_ring_are_drawn_as_a_tree(tmp_path):
    """A stranger's store or export may say that a child started its own parent: expanding
    follows each run's one parent_run_id, so the drawing ends (it used to loop for ever)."""
    import duckdb
    path = str(tmp_path / "ring.duckdb")
    _boss_engine(path).close()
    con = duckdb.connect(path)
    last = con.execute("SELECT max(position) FROM event_log WHERE run_id = 'boss/1'").fetchone()[0]
    body = ('["start_child","test_viz:_boss","66024f1d4ae1bdeb",true,"{\\"run_id\\": '
            '\\"boss\\"}",0.0,null,null,null,null,null,"x.py:1","[[\\"ducks\\"],{}]"]')
    con.execute("INSERT INTO event_log VALUES ('boss/1', ?, ?)", [last + 1, body])
    con.execute("UPDATE runs SET parent_run_id = 'boss/1' WHERE run_id = 'boss'")
    con.close()
    with dl.Engine(path, read_only=True) as reader:
        boss, child = reader.run("boss"), reader.run("boss/1")
        # boss/1's own record of starting boss stays a plain bar: boss is drawn already
        assert _lane_labels(boss.timeline(children=reader))[1] == [
            *EXPANDED[:2], "boss/1 › child _boss", *EXPANDED[2:]]
        # the child drawn with the ring: its "child" boss expands once, and stops there
        labels = _lane_labels(child.timeline(children=reader))[1]
        assert labels.count("boss › child _searcher") == 1
        # a list that gives the drawn run as a child of its child is refused, not looped
        with pytest.raises(dl.errors.BadValue, match="not a child of the run drawn"):
            dl.viz.timeline(boss, children=[child, boss])
