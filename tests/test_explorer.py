"""dl.viz.ReplayExplorer: its state moves with its controls, each step says whether it was
replayed or executed, and the code pane shows the workflow line that made the ctx call."""

import base64
import dataclasses
import html
import inspect
import linecache
import os
import re
from pathlib import Path

import pandas as pd
import pytest

import durablelab as dl
from durablelab.faults import Crash, FaultPlan
from durablelab.viz.explorer import display_path, human

CHANGED = {"insert_step": False}
# Real Temporal histories, outside the project (see their README).
SHARED_HISTORIES = (Path(__file__).resolve().parents[2] / "shared" / "external"
                    / "temporal-histories")


def fetch(vendor_id):
    return {"vendor_id": vendor_id, "documents": ["w9", "bank-letter"]}


def score(documents):
    return {"risk": len(documents["documents"])}


def activate(decision):
    return "active" if decision and decision["approved"] else "rejected"


def audit():
    return "audited"


def onboard(ctx, req):
    documents = ctx.activity("fetch", fetch, req["vendor_id"])
    if CHANGED["insert_step"]:
        ctx.activity("audit", audit)
    risk = ctx.activity("score", score, documents)
    ctx.sleep(3600)
    decision = ctx.wait_signal("approval", timeout=3 * 86400)
    return {"risk": risk, "status": ctx.activity("activate", activate, decision)}


def line_of(text):
    """(file, line number, source line) of the line of `onboard` that contains `text`."""
    lines, first = inspect.getsourcelines(onboard)
    for offset, line in enumerate(lines):
        if text in line:
            path = inspect.getsourcefile(onboard)
            assert linecache.getline(path, first + offset) == line
            return path, first + offset, line.strip()
    raise LookupError(text)


@pytest.fixture(autouse=True)
def old_code():
    CHANGED["insert_step"] = False


@pytest.fixture
def run(engine):
    """Three wake-ups: start (records fetch, score, sleep), the timer (replays 3, records
    the timer and the wait's start), the signal a day later (replays 5, records 2)."""
    run_id = engine.start(onboard, {"vendor_id": "v-42"}, run_id="onboard-v42", seed=7)
    engine.advance(3600)
    engine.advance(86400)
    engine.signal(run_id, "approval", {"approved": True, "by": "maria"}, signal_id="click-1")
    engine.run_until_idle()
    run = engine.run(run_id)
    assert run.status == "completed"
    assert list(run.wakeups.reason) == ["start", "timer", "signal"]
    assert list(run.wakeups.replayed) == [0, 3, 5]
    assert list(run.wakeups.recorded) == [3, 2, 2]
    return run


def without_engine(run, **changes):
    """The same frames in a Run built by hand, as dl.load or an importer would build it."""
    fields = {f.name: getattr(run, f.name) for f in dataclasses.fields(run)}
    fields.update({name: getattr(run, name).copy() for name in
                   ("history", "attempts", "wakeups", "crashes")}, **changes)
    return dl.Run(**fields)


def test_default_wakeup_is_the_last_with_one_step_per_event_replayed_or_recorded(run):
    explorer = dl.viz.ReplayExplorer(run)
    assert explorer.wakeup_index == 2
    assert explorer.dropdown.value == 2
    assert explorer.steps == 5 + 2
    assert (explorer.slider.min, explorer.slider.max) == (1, 7)
    assert (explorer.step, explorer.position, explorer.mode) == (1, 1, "replayed")
    assert explorer.summary == "woke at 1.0 d for signal: replayed 5 events, recorded 2"
    assert html.escape(explorer.summary) in explorer.summary_pane.value


def test_dropdown_labels_each_wakeup_with_time_reason_and_counts(run):
    labels = [label for label, _ in dl.viz.ReplayExplorer(run).dropdown.options]
    assert labels == ["0: woke at 0 s for start · replayed 0, recorded 3",
                      "1: woke at 1.0 h for timer · replayed 3, recorded 2",
                      "2: woke at 1.0 d for signal · replayed 5, recorded 2"]


def test_slider_and_buttons_move_the_step_and_clamp_at_both_ends(run):
    explorer = dl.viz.ReplayExplorer(run)
    explorer.slider.value = 4
    assert (explorer.step, explorer.position) == (4, 4)
    explorer.forward.click()
    assert (explorer.step, explorer.position) == (5, 5)
    explorer.back.click()
    explorer.back.click()
    assert explorer.step == 3
    explorer.next()
    explorer.previous()
    assert explorer.step == 3

    for _ in range(10):
        explorer.forward.click()
    assert explorer.step == 7 and explorer.forward.disabled and not explorer.back.disabled
    for _ in range(10):
        explorer.back.click()
    assert explorer.step == 1 and explorer.back.disabled and not explorer.forward.disabled


def test_each_step_moves_the_event_pane_to_its_position(run):
    explorer = dl.viz.ReplayExplorer(run)
    seen = []
    for position in range(1, 8):
        assert f"History at position {position}<" in explorer.event_html
        seen.append(explorer.event_html)
        explorer.next()
    assert len(set(seen)) == 7


def test_steps_up_to_replayed_are_replayed_and_the_rest_executed(run):
    explorer = dl.viz.ReplayExplorer(run)
    for index, row in run.wakeups.iterrows():
        explorer.select_wakeup(index)
        modes = []
        for _ in range(explorer.steps):
            modes.append(explorer.mode)
            badge = "REPLAYED from history" if explorer.mode == "replayed" else "EXECUTED"
            assert badge in explorer.code_html
            explorer.next()
        assert modes == ["replayed"] * row.replayed + ["executed"] * row.recorded


def test_replayed_activity_says_the_function_did_not_run(run):
    explorer = dl.viz.ReplayExplorer(run)             # wake-up 2 replays fetch at position 1
    assert "the activity function did not run" in explorer.code_html
    explorer.slider.value = 7                         # activate, executed in wake-up 2
    assert explorer.mode == "executed"
    assert "the activity function ran" in explorer.code_html


def test_the_end_of_a_wait_says_whether_the_code_waited_again(run):
    explorer = dl.viz.ReplayExplorer(run)
    explorer.slider.value = 4                         # the timer, replayed in wake-up 2
    assert ("The code reached <code>ctx.sleep()</code>; history says the wait already ended "
            "(the timer fired), so it did not wait again.") in explorer.code_html
    explorer.slider.value = 6                         # the signal, recorded in wake-up 2
    assert ("The wait in <code>ctx.wait_signal(&#x27;approval&#x27;)</code> ended in this "
            "wake-up (signal &#x27;approval&#x27; arrived), and that was recorded."
            ) in explorer.code_html


def test_code_pane_shows_the_workflow_line_of_the_ctx_call(run):
    explorer = dl.viz.ReplayExplorer(run)
    cases = {1: 'ctx.activity("fetch"', 2: 'ctx.activity("score"', 3: "ctx.sleep(3600)",
             4: "ctx.sleep(3600)", 5: 'ctx.wait_signal("approval"',
             6: 'ctx.wait_signal("approval"', 7: 'ctx.activity("activate"'}
    for position, text in cases.items():
        explorer.slider.value = position
        path, number, line = line_of(text)
        assert html.escape(f"tests/test_explorer.py:{number}") in explorer.code_html
        assert html.escape(f"{path}:{number}") not in explorer.code_html  # no absolute path
        assert html.escape(line) in explorer.code_html
    # two lines of context on each side of the call
    explorer.slider.value = 2
    assert html.escape(line_of('if CHANGED["insert_step"]:')[2]) in explorer.code_html
    assert html.escape(line_of("ctx.wait_signal(")[2]) in explorer.code_html
    assert html.escape(line_of('ctx.activity("fetch"')[2]) not in explorer.code_html


def test_event_pane_shows_kind_name_decoded_value_and_outcome(run):
    explorer = dl.viz.ReplayExplorer(run)
    event = explorer.event_html
    for text in ("ctx.activity(&#x27;fetch&#x27;)", "fetch", "activity", "ok",
                 html.escape('{"vendor_id": "v-42", "documents": ["w9", "bank-letter"]}'),
                 "recorded by", "wake-up 0 (woke at 0 s for start)"):
        assert text in event
    explorer.slider.value = 6                         # the signal, recorded a day in
    assert html.escape('"by": "maria"') in explorer.event_html
    assert "1.0 d (t=90000 s)" in explorer.event_html


def test_dropdown_selects_another_wakeup_and_resets_the_step(run):
    explorer = dl.viz.ReplayExplorer(run)
    explorer.slider.value = 6
    explorer.dropdown.value = 1
    assert (explorer.wakeup_index, explorer.step, explorer.steps) == (1, 1, 5)
    assert explorer.slider.max == 5
    assert explorer.summary == "woke at 1.0 h for timer: replayed 3 events, recorded 2"
    explorer.slider.value = 4
    assert explorer.mode == "executed"
    explorer.select_wakeup(0)
    assert (explorer.wakeup_index, explorer.step, explorer.dropdown.value) == (0, 1, 0)
    assert explorer.mode == "executed"


def test_wakeup_argument_chooses_the_wakeup_and_rejects_unknown_rows(run):
    assert dl.viz.ReplayExplorer(run, wakeup=0).wakeup_index == 0
    assert dl.viz.ReplayExplorer(run, wakeup=-2).wakeup_index == 1
    assert dl.viz.ReplayExplorer(run, wakeup=run.wakeups.index[1]).wakeup_index == 1  # numpy
    with pytest.raises(IndexError, match=r"wake-up 3 is not a row of run.wakeups: run "
                                         r"'onboard-v42' has 3 wake-up\(s\), 0 to 2"):
        dl.viz.ReplayExplorer(run, wakeup=3)


def test_positions_after_the_wakeup_are_not_reached(run):
    explorer = dl.viz.ReplayExplorer(run, wakeup=0)
    assert explorer.slider.max == 3 and not explorer.show_rest.disabled
    explorer.show_rest.value = True
    assert explorer.slider.max == 7 and explorer.steps == 3
    explorer.slider.value = 4
    assert explorer.mode == "not reached"
    assert "NOT REACHED in this wake-up" in explorer.code_html
    assert ("The code did not reach position 4 in this wake-up: it stopped after position 3; "
            "the next wake-up came at 1.0 h for timer.") in explorer.code_html
    assert "wake-up 1 (woke at 1.0 h for timer)" in explorer.event_html
    explorer.show_rest.value = False
    assert (explorer.slider.max, explorer.step) == (3, 3)
    # the last wake-up reached every position: nothing more to show
    assert dl.viz.ReplayExplorer(run).show_rest.disabled


def test_run_built_without_an_engine_works(engine, run):
    engine.close()
    rebuilt = without_engine(run)
    explorer = dl.viz.ReplayExplorer(rebuilt)
    assert (explorer.wakeup_index, explorer.steps, explorer.mode) == (2, 7, "replayed")
    path, number, line = line_of('ctx.activity("fetch"')
    assert html.escape(line) in explorer.code_html
    assert explorer.event_html == dl.viz.ReplayExplorer(run).event_html


def test_imported_run_shows_its_notes_and_missing_call_sites(run):
    history = run.history.copy()
    history["call_site"] = None
    imported = without_engine(run, history=history, source="temporal",
                              notes=("Temporal records only the last attempt of an activity.",))
    explorer = dl.viz.ReplayExplorer(imported)
    assert "Notes on this history (source: temporal)" in explorer.notes_pane.value
    assert "Temporal records only the last attempt of an activity." in explorer.notes_pane.value
    assert explorer.notes_pane in explorer.widget.children
    assert ("No call site was recorded for this event (temporal histories do not record the "
            "code line)") in explorer.code_html
    assert dl.viz.ReplayExplorer(run).notes_pane.value == ""


def test_imported_history_without_wakeup_links_says_the_split_is_assumed(run):
    explorer = dl.viz.ReplayExplorer(without_engine(run, source="temporal"))
    assert "does not say which events each wake-up replayed or recorded" in (
        explorer.summary_pane.value)
    assert "not said by this temporal history" in explorer.event_html
    assert "does not say" not in dl.viz.ReplayExplorer(run).summary_pane.value


def test_history_that_links_events_to_wakeups_is_followed(run):
    # As Temporal records it: a sticky worker resumes from its cache (replays nothing) and
    # its task records only its own commands; timers and signals come from the server.
    history = run.history.copy()
    history["wakeup"] = pd.array([0, 0, 0, None, 1, None, 2], dtype="Int64")
    wakeups = run.wakeups.assign(replayed=[0, 0, 0], recorded=[3, 1, 1])
    explorer = dl.viz.ReplayExplorer(without_engine(run, history=history, wakeups=wakeups,
                                                    source="temporal"))
    assert (explorer.steps, explorer.step, explorer.position, explorer.mode) == (
        1, 1, 7, "executed")
    assert "ctx.activity(&#x27;activate&#x27;)" in explorer.event_html
    assert explorer.show_rest.disabled                 # nothing after position 7
    assert "does not say" not in explorer.summary_pane.value
    explorer.select_wakeup(1)
    assert (explorer.steps, explorer.position, explorer.mode) == (1, 5, "executed")
    explorer.show_rest.value = True
    explorer.next()
    assert (explorer.step, explorer.position, explorer.mode) == (2, 6, "not reached")
    assert "recorded by</td><td style=\"padding:1px 0;word-break:break-word\">no wake-up" in (
        explorer.event_html)                           # the signal: the server wrote it


def test_every_shared_temporal_history_can_be_walked():
    temporal = pytest.importorskip("durablelab.importers.temporal")
    files = sorted(SHARED_HISTORIES.glob("*/*.json"))
    if not files:
        pytest.skip(f"no Temporal histories in {SHARED_HISTORIES}")
    walked = 0
    for path in files:
        try:
            run = temporal.load_temporal(path)
        except dl.DurableLabError:
            continue                                   # a deliberately broken file
        explorer = dl.viz.ReplayExplorer(run)
        for index in range(len(run.wakeups)):
            explorer.select_wakeup(index)
            explorer.show_rest.value = True
            for _ in range(min(explorer.slider.max, 40)):
                assert explorer.mode in ("replayed", "executed", "not reached")
                explorer.next()
            explorer.slider.value = explorer.slider.max
            assert explorer.mode in ("replayed", "executed", "not reached")
            explorer.show_rest.value = False
        walked += 1
    assert walked >= len(files) - 2


def test_imported_payloads_are_decoded_for_display(run):
    pytest.importorskip("durablelab.importers.temporal_json")
    payload = {"metadata": {"encoding": base64.b64encode(b"json/plain").decode()},
               "data": base64.b64encode(b'{"approved": true}').decode()}
    history = run.history.copy()
    history["value"] = [{"payloads": [payload]}] * len(history)
    explorer = dl.viz.ReplayExplorer(without_engine(run, history=history, source="temporal"))
    assert html.escape('{"approved": true}') in explorer.event_html
    assert "json/plain" not in explorer.event_html
    native = dl.viz.ReplayExplorer(without_engine(run, history=history))
    assert "metadata" in native.event_html          # durablelab values are shown as they are


def test_long_history_draws_one_bar_per_mode(engine):
    def ticks(ctx, _):
        for _ in range(150):
            ctx.now()
        ctx.sleep(1)
        return None
    run_id = engine.start(ticks, None, run_id="r-long")
    engine.run_until_idle()
    explorer = dl.viz.ReplayExplorer(engine.run(run_id))
    assert explorer.steps == 152 and explorer.mode == "replayed"
    assert 'title="positions 1–151: replayed"' in explorer.tape.value
    assert 'title="positions 152–152: executed"' in explorer.tape.value
    assert explorer.tape.value.count("<div") == 5     # tape, two bars, marker, legend
    explorer.slider.value = 152
    assert "step 152 of 152 · position 152" in explorer.tape.value


@dl.workflow
def _searcher(ctx, topic):
    return ctx.activity("search", str.upper, topic)


def _fan_out(ctx, docs):
    found = ctx.gather(*[ctx.start_activity("fetch", str.upper, d) for d in docs])
    return found + [ctx.child(_searcher, "owls")]


def test_the_end_of_started_work_is_named_as_the_end_of_its_start(engine):
    run_id = engine.start(_fan_out, ["a", "b"], run_id="fan",
                          faults=[dl.faults.Latency("fetch", seconds=5.0)])
    engine.run_until_idle()
    run = engine.run(run_id)
    ends = run.history[run.history.handle.notna()]
    assert [(p, k, int(h)) for p, k, h in zip(ends.position, ends.kind, ends.handle)] == [
        (3, "activity", 1), (4, "activity", 2), (6, "child", 5)]
    explorer = dl.viz.ReplayExplorer(run)             # the last wake-up replays all six
    explorer.slider.value = 4
    assert ("the end of ctx.start_activity(&#x27;fetch&#x27;) at position 2"
            in explorer.event_html)
    assert ("History holds <code>the end of ctx.start_activity(&#x27;fetch&#x27;) at "
            "position 2</code>: the code waiting for it got the recorded answer back, and "
            "the activity function did not run.") in explorer.code_html
    explorer.slider.value = 6
    child = html.escape(repr(run.history.name.iloc[5]))
    assert (f"the end of ctx.start_child({child}) at position 5" in explorer.event_html
            and "the child run was not started again" in explorer.code_html)
    explorer.slider.value = 1                         # a start is a call of its own
    assert "The code asked for <code>ctx.start_activity(&#x27;fetch&#x27;)</code>" in \
        explorer.code_html


def test_source_that_is_not_available_is_said_so(run):
    history = run.history.copy()
    history["call_site"] = "/nowhere/workflows.py:12"
    explorer = dl.viz.ReplayExplorer(without_engine(run, history=history))
    assert "/nowhere/workflows.py:12" in explorer.code_html
    assert "The source of this line is not available here" in explorer.code_html


def site_everywhere(run, call_site):
    history = run.history.copy()
    history["call_site"] = call_site
    return dl.viz.ReplayExplorer(without_engine(run, history=history))


@pytest.mark.parametrize("name", ["id_rsa", "settings.cfg", ".env"])
def test_a_call_site_naming_a_file_that_is_not_python_source_is_not_read(run, tmp_path, name):
    """A stranger's export names the call site: a private file must not reach the explorer,
    nor the HTML static_html writes for sharing."""
    secret = tmp_path / name
    secret.write_text("first\nAWS_SECRET=hunter2\nthird\n")
    explorer = site_everywhere(run, f"{secret}:2")
    assert "hunter2" not in explorer.code_html and "hunter2" not in explorer.static_html()
    assert "The source of this line is not available here" in explorer.code_html


@pytest.mark.parametrize("target", ["/dev/zero", "fifo.py", "zero.py"])
def test_a_call_site_naming_a_device_or_a_fifo_does_not_hang(run, tmp_path, target):
    """linecache reads a whole file: /dev/zero never ends and a FIFO blocks for ever."""
    if target == "fifo.py":
        target = tmp_path / target
        os.mkfifo(target)
    elif target == "zero.py":
        target = tmp_path / target
        target.symlink_to("/dev/zero")
    explorer = site_everywhere(run, f"{target}:1")
    assert "The source of this line is not available here" in explorer.code_html


def test_a_call_site_in_python_source_still_shows_its_lines(run, tmp_path):
    source = tmp_path / "workflows.py"
    source.write_text("def flow(ctx, _):\n    return ctx.activity('step', step)\n")
    explorer = site_everywhere(run, f"{source}:2")
    assert "ctx.activity(&#x27;step&#x27;, step)" in explorer.code_html


def test_a_notebook_cell_registered_in_linecache_still_shows_its_lines(run):
    name = "/tmp/ipykernel_0/cell-explorer-test.py"     # as IPython registers a cell
    linecache.cache[name] = (40, None, ["x = 1\n", "y = ctx.activity('cell_step', f)\n"], name)
    try:
        explorer = site_everywhere(run, f"{name}:2")
        assert "cell_step" in explorer.code_html and "(a notebook cell)" in explorer.code_html
    finally:
        linecache.cache.pop(name, None)


def test_a_wake_up_claiming_millions_of_positions_stays_small(run):
    """A crafted export's wake-up row says it replayed 10**9 positions: the explorer made a
    list of every one (23 GB before the kernel killed it). It walks history, then at most
    LOST_POSITIONS more (records a crash lost). 3 * 10**6 here keeps an old build's failure
    affordable."""
    from durablelab.viz.explorer import LOST_POSITIONS
    wakeups = run.wakeups.copy()
    wakeups["replayed"] = 3_000_000
    wakeups["recorded"] = 3_000_000
    explorer = dl.viz.ReplayExplorer(without_engine(run, wakeups=wakeups))
    assert explorer.steps <= len(run.history) + LOST_POSITIONS
    assert "step 1 of" in explorer.static_html()


def test_run_without_wakeups_shows_a_message_instead_of_raising(run):
    empty = without_engine(run, wakeups=run.wakeups.iloc[0:0])
    explorer = dl.viz.ReplayExplorer(empty)
    assert (explorer.wakeup_index, explorer.step, explorer.position, explorer.mode) == (
        None, 0, None, None)
    assert "has no wake-ups" in explorer.widget.children[0].value
    explorer.next()
    explorer.previous()
    assert repr(explorer) == "ReplayExplorer(run 'onboard-v42': no wake-ups)"
    with pytest.raises(IndexError, match="run 'onboard-v42' has no wake-ups"):
        explorer.select_wakeup(0)


def test_started_run_with_no_wakeup_yet(engine):
    run_id = engine.start(onboard, {"vendor_id": "v-1"}, run_id="not-yet")
    explorer = dl.viz.ReplayExplorer(engine.run(run_id))
    assert explorer.wakeup_index is None
    assert "its code has not run yet" in explorer.widget.children[0].value


def test_wakeup_that_recorded_nothing_shows_a_message(engine):
    def broken(ctx, _):
        raise RuntimeError("the code raised before its first ctx call")
    run_id = engine.start(broken, None, run_id="r-broken")
    engine.run_until_idle()
    run = engine.run(run_id)
    assert run.status == "failed" and len(run.history) == 0
    explorer = dl.viz.ReplayExplorer(run)
    assert (explorer.wakeup_index, explorer.steps, explorer.step, explorer.position) == (
        0, 0, 1, None)
    assert "This wake-up recorded nothing, and history holds no events." in explorer.code_html
    assert "History holds no events." in explorer.event_html
    assert "no steps" in explorer.tape.value


def test_diverged_wakeup_says_where_replay_stopped(engine):
    run_id = engine.start(onboard, {"vendor_id": "v-42"}, run_id="r-div")
    engine.advance(0)                 # fetch, score, sleep recorded; the run sleeps
    CHANGED["insert_step"] = True     # a deploy inserts a step before 'score'
    engine.crash()                    # the fresh worker replays with the new code
    engine.advance(0)
    run = engine.run(run_id)
    assert run.status == "diverged" and run.error.position == 2
    explorer = dl.viz.ReplayExplorer(run)
    assert explorer.steps == 1
    assert explorer.summary_pane.value.endswith(
        "replay stopped at position 2: non-determinism (different_call)</div>")
    explorer.show_rest.value = True
    explorer.slider.value = 2
    assert explorer.mode == "not reached"
    assert "Replay stopped here: non-determinism." in explorer.code_html
    assert "the code asked for ctx.activity(&#x27;audit&#x27;) instead" in explorer.code_html
    assert html.escape(line_of('ctx.activity("audit"')[2]) in explorer.code_html


def test_records_lost_in_a_crash_are_flagged():
    engine = dl.Engine(durability="batch")
    try:
        run_id = engine.start(onboard, {"vendor_id": "v-42"}, run_id="r-crash",
                              faults=FaultPlan([Crash("score", point="after_record")]))
        engine.advance(0)
        run = engine.run(run_id)
    finally:
        engine.close()
    # batch mode: the crash lost what the start wake-up recorded; recovery recorded it again
    assert list(run.wakeups.reason[:2]) == ["start", "recovery"]
    assert list(run.wakeups.replayed[:2]) == [0, 0]
    explorer = dl.viz.ReplayExplorer(run, wakeup=0)
    assert explorer.mode == "executed"
    assert "was lost before it was committed" in explorer.code_html
    assert "recorded again by wake-up 1" in explorer.code_html
    explorer.select_wakeup(1)
    assert "was lost" not in explorer.code_html
    explorer.slider.value = 2
    assert "worker crash" in explorer.event_html and "after_record" in explorer.event_html


def test_everything_shown_is_escaped_and_cut(engine):
    def shout(ctx, _):
        ctx.activity("<b>name</b>", lambda: "<script>alert(1)</script>" + "x" * 1000)
        return None
    run_id = engine.start(shout, None, run_id="r-esc")
    engine.run_until_idle()
    explorer = dl.viz.ReplayExplorer(engine.run(run_id))
    for pane in (explorer.event_html, explorer.code_html, explorer.tape.value):
        assert "<script>" not in pane and "<b>name</b>" not in pane
    assert "&lt;script&gt;" in explorer.event_html
    shown = len('"<script>alert(1)</script>' + "x" * 1000 + '"')
    assert f"… ({shown:,} characters)" in explorer.event_html
    assert "x" * 300 not in explorer.event_html


def test_html_is_deterministic(run):
    first, second = dl.viz.ReplayExplorer(run), dl.viz.ReplayExplorer(run)
    for _ in range(7):
        assert (first.event_html, first.code_html, first.tape.value) == (
            second.event_html, second.code_html, second.tape.value)
        first.next()
        second.next()


def test_display_is_the_widget_with_a_short_text_form(run):
    explorer = dl.viz.ReplayExplorer(run)
    bundle = explorer._repr_mimebundle_()
    assert "application/vnd.jupyter.widget-view+json" in bundle
    assert bundle["text/plain"] == (
        "ReplayExplorer(run 'onboard-v42', wake-up 2 of 0..2, step 1 of 7: position 1 "
        "replayed; woke at 1.0 d for signal: replayed 5 events, recorded 2)")


def test_rejects_what_is_not_a_run():
    with pytest.raises(TypeError, match="ReplayExplorer needs a durablelab Run"):
        dl.viz.ReplayExplorer(pd.DataFrame())


@pytest.mark.parametrize("seconds, text", [(0, "0 s"), (12.5, "12.5 s"), (90, "1.5 min"),
                                           (3600, "1.0 h"), (90000, "1.0 d")])
def test_human_units(seconds, text):
    assert human(seconds) == text


def test_code_pane_keeps_each_lines_indentation(run):
    explorer = dl.viz.ReplayExplorer(run)
    explorer.slider.value = 2          # ctx.activity("score", ...), with the if above it
    assert "│     if CHANGED[&quot;insert_step&quot;]:" in explorer.code_html
    assert "│         ctx.activity(&quot;audit&quot;, audit)" in explorer.code_html


def test_paths_are_shown_relative_to_the_folder_or_the_package(tmp_path, monkeypatch):
    from durablelab.examples import onboarding

    monkeypatch.chdir(tmp_path)        # a notebook folder that does not hold the package
    assert display_path(onboarding.__file__) == "durablelab/examples/onboarding.py"
    (tmp_path / "flows.py").write_text("x = 1\n")
    assert display_path(str(tmp_path / "flows.py")) == "flows.py"
    assert display_path("<ipython-input-3-abc>") == "<ipython-input-3-abc>"


def test_a_page_without_a_kernel_gets_every_step_written_out(run):
    """The course's static site shows text/html where the widget cannot run: each wake-up's
    steps in order, the shown one open, and writing it changes nothing in the widget."""
    explorer = dl.viz.ReplayExplorer(run)
    explorer.next()
    state = (explorer.wakeup_index, explorer.step, explorer.event_html, explorer.tape.value)
    page = explorer._repr_mimebundle_()["text/html"]
    assert (explorer.wakeup_index, explorer.step, explorer.event_html,
            explorer.tape.value) == state
    walks = [len(explorer._static_walk(i)) for i in range(len(run.wakeups))]
    written = re.findall(r"step (\d+) of (\d+) · position", page)
    assert written == [(str(step), str(last)) for last in walks
                       for step in range(1, last + 1)]
    assert page.count("<details") == len(run.wakeups) == 3
    assert page.count("<details open") == 1
    assert explorer._wakeup_label(2) in page.split("<details open")[1]
    # the same panes the widget shows at that step
    explorer.select_wakeup(0)
    assert explorer.event_html in page and explorer.code_html in page


def test_a_long_run_writes_out_only_the_wake_up_on_show(run, monkeypatch):
    monkeypatch.setattr("durablelab.viz.explorer.STATIC_STEPS", 8)
    explorer = dl.viz.ReplayExplorer(run, wakeup=1)
    page = explorer.static_html()
    assert page.count("<details") == 1
    assert "2 other wake-up(s)" in page and "are left out here" in page
    assert explorer._wakeup_label(1) in page
