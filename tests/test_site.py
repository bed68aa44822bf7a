"""The course's static site (tools/build_site.py) in a real browser, as a reader without
anything installed opens it: from disk, with no network.

Every lesson has a page, linked from the index (the README's curriculum table); every page
loads with no request leaving the machine; every figure is an image that loads
(naturalWidth > 0), as many as the executed lesson drew; no figure is `<Figure size ...>`
text and no widget a line of text (the replay explorer is written out step by step); and
every error the executed lesson shows (its deliberate ones) is on the page as a traceback.

It reads the site `.ci/run` builds into `_site/html/` (build it: `python tools/build_site.py`).
Without it, or without chromium and playwright, it is skipped, saying why; CI sets
DURABLELAB_SITE_TEST=required, which turns the skip into a failure.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from urllib.parse import unquote, urlparse

import chromium
import pytest

ROOT = Path(__file__).resolve().parent.parent
SITE = ROOT / "_site"
LESSONS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
REQUIRED = os.environ.get("DURABLELAB_SITE_TEST") == "required"
WIDGET_AS_TEXT = ("ReplayExplorer(", "VBox(children=", "HBox(children=", "IntSlider(value=")


@pytest.fixture(scope="module")
def browser():
    """One headless Chromium for every page; pages are opened from disk."""
    why = chromium.missing()
    if why is None and not (SITE / "html" / "index.html").exists():
        why = f"no site in {SITE / 'html'} (build it: python tools/build_site.py)"
    if why:
        if REQUIRED:
            pytest.fail(f"the site test is required here but {why}")
        pytest.skip(f"site test skipped: {why}")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        instance = pw.chromium.launch(executable_path=chromium.CHROMIUM, headless=True,
                                      args=chromium.FLAGS)
        try:
            yield instance
        finally:
            instance.close()


def _open(browser, page_file: Path):
    """The page loaded from disk, and every request it made that was not for a file."""
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    away: list[str] = []

    def route(request_route):
        url = request_route.request.url
        if url.startswith(("file:", "data:", "about:")):
            request_route.continue_()
        else:
            away.append(url)
            request_route.abort()

    page.route("**/*", route)
    assert page_file.exists(), (f"{page_file.relative_to(ROOT)} is missing: rebuild the site "
                                f"(python tools/build_site.py)")
    page.goto(page_file.as_uri())
    page.wait_for_load_state("load")
    return page, away


def _outputs(lesson: Path) -> dict:
    """What the executed copy of `lesson` shows: its pictures and its errors."""
    executed = SITE / "src" / lesson.name
    assert executed.exists(), f"{executed} is missing: rebuild the site"
    cells = json.loads(executed.read_text(encoding="utf-8"))["cells"]
    outputs = [o for c in cells if c["cell_type"] == "code" for o in c.get("outputs", [])]
    return {"pictures": sum(1 for o in outputs if "image/png" in o.get("data", {})),
            "errors": [o["ename"] for o in outputs if o["output_type"] == "error"]}


def test_the_index_is_the_curriculum_table_and_links_every_lesson(browser):
    page, away = _open(browser, SITE / "html" / "index.html")
    try:
        assert not away, f"the index asked the network for {away}"
        hrefs = page.eval_on_selector_all("table a", "links => links.map(a => a.href)")
        linked = {Path(unquote(urlparse(href).path)) for href in hrefs}
        wanted = {SITE / "html" / f"{lesson.stem}.html" for lesson in LESSONS}
        assert linked == wanted, (sorted(p.name for p in wanted - linked),
                                  sorted(p.name for p in linked - wanted))
        assert all(path.exists() for path in linked)
        headers = page.eval_on_selector_all("table th", "cells => cells.map(c => c.textContent)")
        assert headers[:2] == ["lesson", "what it teaches"]
    finally:
        page.close()


@pytest.mark.parametrize("lesson", LESSONS, ids=lambda path: path.stem)
def test_a_lesson_page_shows_every_figure_and_error_and_no_widget_as_text(browser, lesson):
    shown = _outputs(lesson)
    page, away = _open(browser, SITE / "html" / f"{lesson.stem}.html")
    try:
        assert not away, f"{lesson.stem} asked the network for {away}"
        page.wait_for_function("() => Array.from(document.images).every(i => i.complete)",
                               timeout=20_000)
        widths = page.eval_on_selector_all(".cell_output img",
                                           "imgs => imgs.map(i => i.naturalWidth)")
        assert len(widths) == shown["pictures"], (
            f"{lesson.stem}: the page shows {len(widths)} pictures, the executed lesson drew "
            f"{shown['pictures']}")
        assert all(width > 0 for width in widths), f"{lesson.stem}: an image does not load"
        outputs = "\n".join(page.locator(".cell_output").all_text_contents())
        assert "<Figure size" not in outputs, f"{lesson.stem}: a figure shown as text"
        as_text = [mark for mark in WIDGET_AS_TEXT if mark in outputs]
        assert not as_text, f"{lesson.stem}: a widget shown as text ({as_text})"
        tracebacks = page.locator(".cell_output .traceback")
        assert tracebacks.count() == len(shown["errors"]), (tracebacks.count(), shown)
        for ename in shown["errors"]:
            assert ename in outputs, f"{lesson.stem}: the {ename} is not on the page"
    finally:
        page.close()


def test_the_replay_explorer_is_written_out_step_by_step(browser):
    page, _ = _open(browser, SITE / "html" / "06_looking_at_runs.html")
    try:
        written = page.locator(".cell_output", has_text="Replay explorer, written out")
        assert written.count() >= 2
        first = written.first
        assert first.locator("details").count() >= 2
        assert first.locator("details[open]").count() == 1
        steps = first.locator("details[open]").first.text_content()
        assert "step 1 of" in steps and "step 2 of" in steps and "History at position" in steps
    finally:
        page.close()
