"""Debian's chromium driven by pip's playwright (no browser download), for the tests that
look at a page as a learner does: tests/test_browser.py (the lessons in JupyterLab) and
tests/test_site.py (the course's static site)."""

from __future__ import annotations

import shutil
from pathlib import Path

CHROMIUM = next((p for p in (shutil.which("chromium"), shutil.which("chromium-browser"),
                             "/usr/bin/chromium") if p and Path(p).exists()), None)
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"]


def missing() -> str | None:
    """Why the browser tests cannot run here, or None."""
    if CHROMIUM is None:
        return "no chromium on PATH (Debian: apt-get install -y chromium)"
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "playwright is not installed (pip install playwright; no browser download)"
    return None
