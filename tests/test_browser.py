"""Lesson 06 in a real browser: what a learner sees, not what nbval compares.

nbval checks text outputs; it never sees whether a figure shows as a picture, a Run as its
card, or the ReplayExplorer as working controls rather than a line of text. This test starts
`durablelab lab` on 127.0.0.1, opens lesson 06 in headless Chromium (Debian's `chromium`,
driven by pip's `playwright`; no browser download), runs every cell, and checks the page:
the timelines are images, the Run card is HTML, the explorer has its slider, dropdown and
buttons, and pressing ▶ moves it to the next step.

Without chromium or playwright it is skipped, saying which is missing. CI (`.ci/run`)
installs both and sets DURABLELAB_BROWSER_TEST=required, which turns the skip into a
failure: in CI this test always runs.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import labserver
import pytest

ROOT = Path(__file__).resolve().parent.parent
LESSON = "06_looking_at_runs.ipynb"
REQUIRED = os.environ.get("DURABLELAB_BROWSER_TEST") == "required"
CHROMIUM = next((p for p in (shutil.which("chromium"), shutil.which("chromium-browser"),
                             "/usr/bin/chromium") if p and Path(p).exists()), None)
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"]
# JupyterLab settings for the test's own settings folder: no news toast over the page, no
# autosave (the lesson file stays as committed), every cell in the page (no windowing).
SETTINGS = {
    "@jupyterlab/apputils-extension/notification.jupyterlab-settings":
        {"fetchNews": "false", "checkForUpdates": False},
    "@jupyterlab/docmanager-extension/plugin.jupyterlab-settings": {"autosave": False},
    "@jupyterlab/notebook-extension/tracker.jupyterlab-settings": {"windowingMode": "none"},
}


def _missing() -> str | None:
    if CHROMIUM is None:
        return "no chromium on PATH (Debian: apt-get install -y chromium)"
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "playwright is not installed (pip install playwright; no browser download)"
    return None


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    """A JupyterLab server on the lessons, started the way a learner starts it."""
    missing = _missing()
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


def _code_cells() -> int:
    cells = json.loads((ROOT / "notebooks" / LESSON).read_text())["cells"]
    return sum(1 for cell in cells if cell["cell_type"] == "code")


IDLE = """() => Array.from(document.querySelectorAll('.jp-StatusBar-TextItem'))
                   .some(e => /\\|\\s*Idle/.test(e.textContent))"""
ALL_RAN = """(n) => {
    const prompts = Array.from(document.querySelectorAll('.jp-CodeCell .jp-InputPrompt'));
    return prompts.length === n && prompts.every(p => /\\[\\d+\\]/.test(p.textContent));
}"""


def test_lesson_06_renders_pictures_card_and_working_explorer(lab):
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        context = pw.chromium.launch_persistent_context(
            str(lab["home"] / "profile"), executable_path=CHROMIUM, headless=True,
            args=FLAGS, viewport={"width": 1400, "height": 1000})
        try:
            page = context.new_page()
            # `durablelab lab` serves the checkout, the lessons in its notebooks/ folder
            page.goto(f"{lab['base']}/lab/tree/notebooks/{LESSON}?token={lab['token']}&reset")
            page.wait_for_function(IDLE, timeout=90_000)
            page.locator(".lm-MenuBar-itemLabel", has_text="Run").first.click()
            page.locator(".lm-Menu-itemLabel", has_text="Run All Cells").first.click()
            page.wait_for_function(ALL_RAN, arg=_code_cells(), timeout=120_000)
            page.wait_for_function(IDLE, timeout=60_000)

            outputs = page.locator(".jp-OutputArea-output")
            text = "\n".join(outputs.all_text_contents())
            assert "Traceback (most recent call last)" not in text, text[-3000:]

            # the timelines and the comparison chart are pictures, not "<Figure size ...>"
            images = page.locator(".jp-OutputArea-output img[src^='data:image/png']")
            widths = [images.nth(i).evaluate("img => img.naturalWidth")
                      for i in range(images.count())]
            assert len(widths) >= 5 and min(widths) > 300, widths
            assert "<Figure size" not in text

            # the Run card is HTML with the run's id and status, not the dataclass repr
            card = page.locator(".jp-RenderedHTMLCommon", has_text="onboard-faults").filter(
                has_text="completed")
            assert card.count() >= 1
            assert "Run(run_id=" not in text

            # both explorers render as widgets with their controls
            assert "ReplayExplorer(" not in text and "Loading widget" not in text
            assert page.locator(".widget-slider").count() >= 2
            assert page.locator(".widget-dropdown").count() >= 2
            forward = page.locator("button.jupyter-button", has_text="▶")
            assert forward.count() >= 2

            # ▶ moves the first explorer one step on: its readout and its panes change
            explorer = page.locator(".jp-OutputArea-output").filter(has=forward.first).first
            readout = explorer.locator(".widget-readout").first
            before, view = readout.text_content().strip(), explorer.text_content()
            forward.first.click()
            page.wait_for_function(
                "([el, old]) => el.textContent.trim() !== old",
                arg=[readout.element_handle(), before], timeout=10_000)
            assert int(readout.text_content()) == int(before) + 1
            assert explorer.text_content() != view
        finally:
            context.close()
