"""Every lesson in a real browser: what a learner sees, not what nbval compares.

nbval checks text outputs; it never sees whether a figure shows as a picture, a Run as its
card, or the ReplayExplorer as working controls rather than a line of text, and it runs a
lesson past a deliberate error that JupyterLab's Run All stops at unless the cell carries
the `raises-exception` tag. This test starts `durablelab lab` on 127.0.0.1 once, opens every
`notebooks/NN_*.ipynb` one after another in one headless Chromium (Debian's `chromium`,
driven by pip's `playwright`; no browser download), presses Run All, and fails on a code
cell Run All never reached, an error output in a cell not tagged `raises-exception`, a
figure shown as `<Figure size ...>` text or as an image that does not load, and a widget
that did not render. Lesson 06 is also clicked through: its explorer's ▶ moves a step.

Without chromium or playwright it is skipped, saying which is missing. CI (`.ci/run`)
installs both and sets DURABLELAB_BROWSER_TEST=required, which turns the skip into a
failure: in CI this test always runs.
"""

from __future__ import annotations

import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import chromium
import labserver
import pytest

ROOT = Path(__file__).resolve().parent.parent
# Every lesson, the ones added after this test was written too.
LESSONS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
REQUIRED = os.environ.get("DURABLELAB_BROWSER_TEST") == "required"
# JupyterLab settings for the test's own settings folder: no news toast over the page, no
# autosave (the lesson file stays as committed), every cell in the page (no windowing).
SETTINGS = {
    "@jupyterlab/apputils-extension/notification.jupyterlab-settings":
        {"fetchNews": "false", "checkForUpdates": False},
    "@jupyterlab/docmanager-extension/plugin.jupyterlab-settings": {"autosave": False},
    "@jupyterlab/notebook-extension/tracker.jupyterlab-settings": {"windowingMode": "none"},
}
RUN_SECONDS = 420       # the slowest lesson takes about a minute on a loaded machine


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    """A JupyterLab server on the lessons, started the way a learner starts it."""
    missing = chromium.missing()
    if missing:
        if REQUIRED:
            pytest.fail(f"the browser test is required here but {missing}")
        pytest.skip(f"browser test skipped: {missing}")
    home = tmp_path_factory.mktemp("lab")
    for name, value in SETTINGS.items():
        path = home / "settings" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(value))
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    token = secrets.token_hex(16)
    env = {**os.environ, "JUPYTERLAB_SETTINGS_DIR": str(home / "settings"),
           "JUPYTERLAB_WORKSPACES_DIR": str(home / "workspaces"),
           "JUPYTER_RUNTIME_DIR": str(home / "runtime"), "TQDM_DISABLE": "1",
           # `durablelab lab` writes its news default in the app's settings: the test's own
           "JUPYTERLAB_DIR": labserver.app_dir(home),
           "PYTHONPATH": os.pathsep.join([str(ROOT), *filter(None, [
               os.environ.get("PYTHONPATH")])])}
    command = [sys.executable, "-m", "durablelab", "lab", "--no-browser", f"--port={port}",
               "--ServerApp.ip=127.0.0.1", f"--IdentityProvider.token={token}"]
    # as root (CI, a container) `durablelab lab` itself passes --allow-root
    log = open(home / "lab.log", "w")
    server = subprocess.Popen(command, cwd=str(ROOT), env=env, stdout=log,
                              stderr=subprocess.STDOUT, start_new_session=True)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                urllib.request.urlopen(f"{base}/api/status?token={token}", timeout=2)
                break
            except OSError:
                if server.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("JupyterLab did not start:\n"
                                       + (home / "lab.log").read_text()[-3000:]) from None
                time.sleep(0.3)
        yield {"base": base, "token": token, "home": home}
    finally:
        if server.poll() is None:
            os.killpg(server.pid, signal.SIGTERM)     # the server and the kernels it started
            try:
                server.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(server.pid, signal.SIGKILL)
                server.wait()
        log.close()


@pytest.fixture(scope="module")
def browser(lab):
    """One Chromium for every lesson, a fresh profile of the test's own."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        context = pw.chromium.launch_persistent_context(
            str(lab["home"] / "profile"), executable_path=chromium.CHROMIUM, headless=True,
            args=chromium.FLAGS, viewport={"width": 1400, "height": 1000})
        try:
            yield context
        finally:
            context.close()


def _api(lab, method: str, path: str):
    request = urllib.request.Request(f"{lab['base']}{path}", method=method,
                                     headers={"Authorization": f"token {lab['token']}"})
    with urllib.request.urlopen(request, timeout=30) as answer:
        body = answer.read()
    return json.loads(body) if body else None


def _end_sessions(lab) -> None:
    """Shut the lesson's kernel down, or the next open of a lesson joins an old kernel."""
    for session in _api(lab, "GET", "/api/sessions"):
        _api(lab, "DELETE", f"/api/sessions/{session['id']}")


def _deliberate(lesson: Path) -> list[bool]:
    """Per code cell, in order: does it carry Jupyter's `raises-exception` tag?"""
    cells = json.loads(lesson.read_text(encoding="utf-8"))["cells"]
    return ["raises-exception" in cell.get("metadata", {}).get("tags", [])
            for cell in cells if cell["cell_type"] == "code"]


IDLE = """() => Array.from(document.querySelectorAll('.jp-StatusBar-TextItem'))
                   .some(e => /\\|\\s*Idle/.test(e.textContent))"""
# Run All has ended: every code cell ran (their prompts were cleared before it) and the
# kernel is idle, or nothing has moved for QUIET ms: idle, no cell queued or running ([*]).
# JupyterLab hands the kernel one cell after another, so between two cells the kernel can
# be idle with the next one not yet queued: only a quiet that lasts is the end.
QUIET = 10_000
RUN_ENDED = """(quiet) => {
    const idle = Array.from(document.querySelectorAll('.jp-StatusBar-TextItem'))
                   .some(e => /\\|\\s*Idle/.test(e.textContent));
    const prompts = Array.from(document.querySelectorAll('.jp-CodeCell .jp-InputPrompt'))
                   .map(p => p.textContent);
    if (idle && prompts.every(p => /\\[\\d+\\]/.test(p))) return true;
    const state = prompts.join('|');
    if (!idle || prompts.some(p => p.includes('*')) || state !== window.__lastState) {
        window.__lastState = state;
        window.__quietSince = Date.now();
        return false;
    }
    return Date.now() - window.__quietSince > quiet;
}"""
CLEARED = """() => Array.from(document.querySelectorAll('.jp-CodeCell .jp-InputPrompt'))
                   .every(p => !/\\d/.test(p.textContent))"""
# What each code cell shows: its prompt and, per output, the renderer's MIME type, its text,
# the natural width of its images, whether it is a widget's place (JupyterLab's widget
# renderer marks the output itself) and whether a widget view rendered inside it.
CELLS = """() => Array.from(document.querySelectorAll('.jp-Notebook .jp-CodeCell')).map(cell => ({
    prompt: (cell.querySelector('.jp-InputPrompt') || {}).textContent || '',
    outputs: Array.from(cell.querySelectorAll('.jp-OutputArea-output')).map(out => ({
        mime: out.getAttribute('data-mime-type') || '',
        text: out.textContent,
        images: Array.from(out.querySelectorAll('img'))
                     .map(img => img.complete ? img.naturalWidth : -1),
        place: out.classList.contains('jupyter-widgets'),
        widget: out.querySelector('.jupyter-widgets') !== null,
    })),
}))"""
TRACEBACK = ("Traceback (most recent call last)", "Cell In[")
WIDGET_FAILED = ("Loading widget...", "Error displaying widget", "Error rendering output")
WIDGET_AS_TEXT = ("ReplayExplorer(", "VBox(children=", "HBox(children=", "IntSlider(value=",
                  "Dropdown(", "IntProgress(value=", "FloatProgress(value=")


def _problems(cells: list[dict], deliberate: list[bool]) -> list[str]:
    """What a learner would see wrong, a line per problem, naming the code cell."""
    problems = []
    if len(cells) != len(deliberate):
        return [f"the page shows {len(cells)} code cells, the file holds {len(deliberate)}"]
    for number, (cell, tagged) in enumerate(zip(cells, deliberate)):
        where = f"code cell {number} (prompt {cell['prompt'].strip() or '[ ]'})"
        if "[" not in cell["prompt"] or not any(ch.isdigit() for ch in cell["prompt"]):
            before = cells[number - 1]["outputs"] if number else []
            shown = " | ".join(o["text"].strip()[-600:] for o in before) or "nothing"
            problems.append(f"{where}: Run All never ran it (it stopped after the cell "
                            f"before, which shows: {shown})")
            break
        for output in cell["outputs"]:
            text = output["text"]
            if (not tagged and output["mime"] == "application/vnd.jupyter.stderr"
                    and any(mark in text for mark in TRACEBACK)):
                problems.append(f"{where}: an error in a cell not tagged raises-exception: "
                                f"{text.strip()[-800:]}")
            if "<Figure size" in text:
                problems.append(f"{where}: a figure shown as text, not a picture: "
                                f"{text.strip()[:200]}")
            if any(width <= 0 for width in output["images"]):
                problems.append(f"{where}: an image that did not load "
                                f"(natural widths {output['images']})")
            if ((output["place"] and not output["widget"])
                    or any(mark in text for mark in WIDGET_FAILED)):
                problems.append(f"{where}: a widget that did not render: "
                                f"{text.strip()[:200] or 'nothing'}")
            elif any(text.lstrip().startswith(mark) for mark in WIDGET_AS_TEXT):
                problems.append(f"{where}: a widget shown as text: {text.strip()[:200]}")
    return problems


def _lesson_06(page) -> None:
    """The timelines are pictures, the Run card HTML, and the explorer steps with ▶."""
    outputs = page.locator(".jp-OutputArea-output")
    text = "\n".join(outputs.all_text_contents())
    images = page.locator(".jp-OutputArea-output img[src^='data:image/png']")
    widths = [images.nth(i).evaluate("img => img.naturalWidth") for i in range(images.count())]
    assert len(widths) >= 5 and min(widths) > 300, widths

    # the Run card is HTML with the run's id and status, not the dataclass repr
    card = page.locator(".jp-RenderedHTMLCommon", has_text="onboard-faults").filter(
        has_text="completed")
    assert card.count() >= 1
    assert "Run(run_id=" not in text

    # both explorers render as widgets with their controls
    assert page.locator(".widget-slider").count() >= 2
    assert page.locator(".widget-dropdown").count() >= 2
    forward = page.locator("button.jupyter-button", has_text="▶")
    assert forward.count() >= 2

    # ▶ moves the first explorer one step on: its readout and its panes change
    explorer = page.locator(".jp-OutputArea-output").filter(has=forward.first).first
    readout = explorer.locator(".widget-readout").first
    before, view = readout.text_content().strip(), explorer.text_content()
    forward.first.click()
    page.wait_for_function("([el, old]) => el.textContent.trim() !== old",
                           arg=[readout.element_handle(), before], timeout=10_000)
    assert int(readout.text_content()) == int(before) + 1
    assert explorer.text_content() != view


CLICK_THROUGH = {"06_looking_at_runs.ipynb": _lesson_06}


def test_there_are_lessons_to_open():
    assert len(LESSONS) >= 17, [p.name for p in LESSONS]


@pytest.mark.parametrize("lesson", LESSONS, ids=lambda path: path.stem)
def test_run_all_shows_every_output_as_a_learner_should_see_it(lab, browser, lesson):
    page = browser.new_page()
    try:
        # `durablelab lab` serves the checkout, the lessons in its notebooks/ folder
        page.goto(f"{lab['base']}/lab/tree/notebooks/{lesson.name}?token={lab['token']}&reset")
        page.wait_for_function(IDLE, timeout=90_000)
        # the outputs nbval compares are stored with their prompts: clear them, so a prompt
        # with a number is a cell this Run All ran
        page.locator(".lm-MenuBar-itemLabel", has_text="Edit").first.click()
        page.locator(".lm-Menu-itemLabel", has_text="Clear Outputs of All Cells").first.click()
        page.wait_for_function(CLEARED, timeout=10_000)
        page.locator(".lm-MenuBar-itemLabel", has_text="Run").first.click()
        page.locator(".lm-Menu-itemLabel", has_text="Run All Cells").first.click()
        page.wait_for_function(RUN_ENDED, arg=QUIET, timeout=RUN_SECONDS * 1000, polling=500)
        # widgets render and images decode after the kernel is idle: give them a moment
        try:
            page.wait_for_function(
                "() => !document.body.textContent.includes('Loading widget...')",
                timeout=10_000)
        except Exception:
            pass        # reported below as a widget that did not render
        page.wait_for_function(
            "() => Array.from(document.querySelectorAll('.jp-OutputArea-output img'))"
            ".every(img => img.complete)", timeout=10_000)
        problems = _problems(page.evaluate(CELLS), _deliberate(lesson))
        assert not problems, f"{lesson.name} after Run All:\n" + "\n".join(problems)
        if lesson.name in CLICK_THROUGH:
            CLICK_THROUGH[lesson.name](page)
    finally:
        page.close()
        _end_sessions(lab)
