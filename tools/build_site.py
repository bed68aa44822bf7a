"""Build the course as a static site: every lesson executed, a page per lesson, the
README's curriculum table as its index. Read it without installing anything.

    .venv/bin/pip install -e ".[site]"
    .venv/bin/python tools/build_site.py              # every lesson, about 3-4 minutes
    .venv/bin/python tools/build_site.py 00 06        # only these lessons (a quick look)
    python3 -m http.server -d _site/html 8000          # or open _site/html/index.html

The lessons are stored without outputs (right for review), so the repository page shows
no figure. This script runs each `notebooks/NN_*.ipynb` from the top in a kernel, in
`notebooks/` as JupyterLab does (nbclient; a cell that errors stops the build unless it
carries the `raises-exception` tag, as Run All would), writes the executed copies and an
index to `_site/src/`, and has Sphinx with MyST-NB render them into `_site/html/` (both
git-ignored). Sphinx + MyST-NB because they build offline from what pip installed (Jupyter
Book 2 asks a web service for its theme at build time, and fails without it) and MyST-NB
lets the site choose which form of a display a page shows: widgets need a kernel, so a
page shows the form a display offers for a page without one (the ReplayExplorer writes out
every step), and no script is loaded from the web. tests/test_site.py opens every page in
Chromium.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LESSONS = ROOT / "notebooks"
SITE = ROOT / "_site"
TABLE_HEADER = "| lesson | what it teaches |"

CONF = '''# Written by tools/build_site.py: edit it there.
project = "durablelab: the course"
author = "durablelab"
extensions = ["myst_nb"]
html_theme = "sphinx_book_theme"
html_title = "durablelab: the course"
html_theme_options = {"home_page_in_toc": True, "show_toc_level": 2}
html_show_sourcelink = False
html_copy_source = False
exclude_patterns = ["**.ipynb_checkpoints"]
# The lessons were executed by tools/build_site.py; render them as they are.
nb_execution_mode = "off"
nb_merge_streams = True
# A widget needs a kernel: never load the widget scripts from the web, and show what the
# display offers for a page without one (text/html, an image, text) in its place.
nb_ipywidgets_js = {}
nb_mime_priority_overrides = [("html", "application/vnd.jupyter.widget-view+json", None),
                              ("html", "application/javascript", None)]
# A lesson's "## Part" headings below its "# Title" are its sections.
myst_heading_anchors = 2
'''


class SiteError(Exception):
    """A lesson that failed to run or has no row in the README's table: what and the fix."""


def lessons(selected: list[str]) -> list[Path]:
    every = sorted(LESSONS.glob("[0-9][0-9]_*.ipynb"))
    if not selected:
        return every
    chosen = [p for p in every if any(p.name.startswith(s) for s in selected)]
    unknown = [s for s in selected if not any(p.name.startswith(s) for p in every)]
    if unknown:
        raise SiteError(f"no lesson starts with {', '.join(unknown)}: the lessons are "
                        f"{', '.join(p.stem for p in every)}")
    return chosen


def execute(lesson: Path, out: Path, timeout: int) -> float:
    """Run the lesson from the top in a fresh kernel in notebooks/, as JupyterLab does."""
    import nbformat
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError

    notebook = nbformat.read(lesson, as_version=4)
    client = NotebookClient(notebook, timeout=timeout, kernel_name="python3",
                            resources={"metadata": {"path": str(LESSONS)}})
    started = time.monotonic()
    try:
        client.execute()
    except CellExecutionError as error:
        raise SiteError(f"{lesson.name} stopped at an error in a cell without the "
                        f"raises-exception tag (run it in JupyterLab to see it; tag the "
                        f"cell if the error is deliberate):\n{error}") from None
    nbformat.write(notebook, out / lesson.name)
    return time.monotonic() - started


def curriculum(readme: str, pages: list[Path]) -> str:
    """The README's curriculum table, each lesson's name a link to its page."""
    lines = readme.splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith(TABLE_HEADER)), None)
    if start is None:
        raise SiteError(f"README.md has no curriculum table (a line starting "
                        f"{TABLE_HEADER!r}): the site's index is that table")
    table = []
    for line in lines[start:]:
        if not line.startswith("|"):
            break
        table.append(line)
    names = {p.stem for p in pages}
    rows, listed = table[:2], set()
    for row in table[2:]:
        cells = row.split("|")
        name = cells[1].strip().strip("`")
        if name in names:
            cells[1] = f" [`{name}`]({name}.ipynb) "
            listed.add(name)
            rows.append("|".join(cells))
    missing = sorted(names - listed)
    if missing:
        raise SiteError(f"README.md's curriculum table has no row for {', '.join(missing)}: "
                        f"add one (tests/test_curriculum_table.py says what it holds)")
    return "\n".join(rows)


def index(pages: list[Path], commit: str) -> str:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    toctree = "\n".join(p.stem for p in pages)
    return f"""# durablelab: the course

Every lesson of durablelab, run from the top as
a learner runs it, with every figure, table and error it shows. Nothing to install to read
it; to run the cells, change them and do the exercises, open the lessons in JupyterLab
(`durablelab lab`) or on Binder. Widgets need a running kernel: here the replay explorer is
written out step by step instead.

{curriculum(readme, pages)}

Built by `tools/build_site.py` from commit `{commit}`.

```{{toctree}}
:hidden:
:maxdepth: 1

{toctree}
```
"""


def commit() -> str:
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, check=True,
                              capture_output=True, text=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("lessons", nargs="*", help="lesson numbers (default: every lesson)")
    parser.add_argument("--out", type=Path, default=SITE, help="default: _site/")
    parser.add_argument("--timeout", type=int, default=600, help="seconds per cell")
    args = parser.parse_args(argv)
    # The kernels import this checkout's durablelab, draw no progress bars.
    os.environ["PYTHONPATH"] = os.pathsep.join(
        [str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])])
    os.environ.setdefault("TQDM_DISABLE", "1")
    try:
        pages = lessons(args.lessons)
        src, html = args.out / "src", args.out / "html"
        for stale in (src, html):      # no page of a lesson left from an earlier build
            shutil.rmtree(stale, ignore_errors=True)
        src.mkdir(parents=True)
        started = time.monotonic()
        for lesson in pages:
            seconds = execute(lesson, src, args.timeout)
            print(f"ran {lesson.name} in {seconds:.1f} s", flush=True)
        ran = time.monotonic() - started
        (src / "conf.py").write_text(CONF, encoding="utf-8")
        (src / "index.md").write_text(index(pages, commit()), encoding="utf-8")
    except SiteError as error:
        print(f"build_site: {error}", file=sys.stderr)
        return 1
    started = time.monotonic()
    # -W: a warning (a broken link, an output it cannot show) fails the build.
    sphinx = subprocess.run([sys.executable, "-m", "sphinx", "-b", "html", "-q", "-W",
                             "--keep-going", str(src), str(html)])
    if sphinx.returncode:
        print("build_site: Sphinx failed (above)", file=sys.stderr)
        return sphinx.returncode
    print(f"ran {len(pages)} lessons in {ran:.0f} s, rendered the site in "
          f"{time.monotonic() - started:.0f} s: open {html / 'index.html'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
