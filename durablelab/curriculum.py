"""The lessons as a whole: where they are, what they are called, and opening them in JupyterLab.

The lessons are notebooks (``notebooks/NN_name.ipynb``) beside the fault plans, histories and
model fixtures they read (``datasets/``) and the solutions to their exercises
(``solutions/``). In a source checkout they are the checkout's own folders. A wheel carries a
copy of all three inside the package (``durablelab/lessons/...``; ``setup.py`` copies them in
at build time, so the checkout holds them once). A lesson reads its datasets through
`datasets_dir`, `dataset` and `fault_plans`, which find them however durablelab was
installed and wherever the notebook runs. An installed package is
read-only and shared, so `open_lab` first copies the lessons into a folder the learner owns,
``~/durablelab-lessons`` by default, and only ever adds the files that are missing there: a
learner's edits are never overwritten, and the command says which files it kept. JupyterLab
then opens on the quickstart, with its "Jupyter news" question switched off.

A lesson's minutes come from its first cell, which says "About 20 minutes." (notebook
metadata would not survive `tools/refresh_notebooks.py`); without that sentence they are
estimated from its length (about 150 words of prose a minute and one minute a code cell)
and shown with a ``~``.
"""

from __future__ import annotations

import filecmp
import importlib.util
from importlib import resources
import json
import os
import re
import shutil
import sys
import urllib.parse
from dataclasses import dataclass
from pathlib import Path

from .errors import command_error, dataset_missing

PACKAGE = Path(__file__).resolve().parent
#: Where a wheel keeps its copy of the lessons (see the module docstring).
SHIPPED = PACKAGE / "lessons"
#: The folder `durablelab lab` copies the lessons into when durablelab is installed.
DEFAULT_COPY = Path("~") / "durablelab-lessons"
FOLDERS = ("notebooks", "datasets", "solutions")
_MINUTES = re.compile(r"\babout (\d+) minutes\b", re.I)


@dataclass(frozen=True)
class Lesson:
    """One lesson: `number` ("01"), `title`, `minutes` (an int), whether the minutes are
    `estimated`, and the notebook's `path`."""

    number: str
    title: str
    minutes: int
    estimated: bool
    path: Path


def checkout() -> Path | None:
    """The source checkout this durablelab is imported from, or None when it is installed."""
    root = PACKAGE.parent
    if (root / "notebooks").is_dir() and (root / "pyproject.toml").is_file():
        return root
    return None


def lessons_root() -> Path:
    """The folder that holds ``notebooks/`` and ``datasets/``: the checkout, or the copy
    shipped inside the installed package."""
    root = checkout()
    if root is not None:
        return root
    if (SHIPPED / "notebooks").is_dir():
        return SHIPPED
    raise command_error(PACKAGE, "this durablelab has no lessons (neither a checkout's "
                        "notebooks/ nor a wheel's durablelab/lessons/)",
                        "Install it from a wheel built by `python -m build`, or run it "
                        "from a source checkout")


def datasets_dir() -> Path:
    """The ``datasets/`` folder (fault plans, recorded histories, model fixtures): the
    checkout's, or the copy a wheel carries inside the package, found with
    `importlib.resources` so it is the same however durablelab was installed and wherever a
    notebook runs. Lessons and code that read a named dataset (``SimLLM(scenario=...)``)
    look here, never next to the notebook; `dataset` and `fault_plans` check it is there."""
    root = checkout()
    if root is not None:
        return root / "datasets"
    return Path(str(resources.files(__package__).joinpath("lessons", "datasets")))


def dataset(*parts: str) -> Path:
    """One file or folder of the datasets, ``dataset("histories", "onboarding_v1.jsonl")``;
    raises `DatasetError` (where it looked, and the fix) when it is not there."""
    path = datasets_dir().joinpath(*parts)
    if not path.exists():
        raise dataset_missing(path, f"the dataset {'/'.join(parts)!r}")
    return path


def fault_plans() -> dict[str, Path]:
    """The named fault plans shipped with durablelab (``datasets/faults/*.json``), in name
    order: ``{"rate_limit_storm": Path(...)}``. None found is a `DatasetError`: a lesson
    that promises a listing must not print an empty one."""
    folder = datasets_dir() / "faults"
    found = {path.stem: path for path in sorted(folder.glob("*.json"))}
    if not found:
        raise dataset_missing(folder, "the named fault plans (datasets/faults/*.json)")
    return found


def lessons(root: Path | None = None) -> list[Lesson]:
    """The lessons in ``root/notebooks`` (default: `lessons_root()`), in order."""
    folder = (root or lessons_root()) / "notebooks"
    return [_lesson(path) for path in sorted(folder.glob("[0-9][0-9]_*.ipynb"))]


def _lesson(path: Path) -> Lesson:
    try:
        nb = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise command_error(path, f"this lesson is not a readable notebook ({exc})",
                            "Restore it from the checkout or the package") from None
    cells = nb.get("cells", [])
    text = ["".join(c.get("source", "")) for c in cells]
    heading = next((line for t in text for line in t.splitlines() if line.startswith("# ")),
                   f"# {path.stem}")
    title = re.sub(r"^#\s*\d+\s*[·:.-]?\s*", "", heading).strip()
    stated = _MINUTES.search(text[0]) if text else None
    if stated:
        return Lesson(path.name[:2], title, int(stated.group(1)), False, path)
    words = sum(len(t.split()) for t, c in zip(text, cells) if c.get("cell_type") == "markdown")
    code = sum(1 for c in cells if c.get("cell_type") == "code")
    return Lesson(path.name[:2], title, max(1, round(words / 150 + code)), True, path)


# --- copying the lessons out of an installed package ------------------------------------


def _shipped_files(source: Path) -> list[Path]:
    """Every lesson file under `source`, relative to it (no caches, no checkpoints)."""
    found = []
    for folder in FOLDERS:
        for path in sorted((source / folder).rglob("*")):
            parts = path.relative_to(source).parts
            if path.is_file() and not any(p.startswith(".") or p == "__pycache__"
                                          for p in parts):
                found.append(path.relative_to(source))
    return found


def copy_lessons(source: Path, target: Path) -> tuple[list[Path], list[Path]]:
    """Copy the lesson files of `source` that `target` lacks; returns (copied, kept): kept
    are files that were already there and differ from the shipped ones (the learner's
    edits, or an older copy), which are left exactly as they are."""
    copied, kept = [], []
    for rel in _shipped_files(source):
        there = target / rel
        if there.exists():
            if not there.is_file() or not filecmp.cmp(source / rel, there, shallow=False):
                kept.append(rel)
            continue
        there.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source / rel, there)
        copied.append(rel)
    return copied, kept


def prepare(into: str | None = None) -> Path:
    """The folder JupyterLab should open: the checkout, or (installed) a folder the learner
    owns holding a copy of the lessons, made or completed now. Says what it did."""
    root = checkout()
    if root is not None and into is None:
        print(f"durablelab: opening the lessons of this checkout, {root / 'notebooks'}")
        return root
    source = lessons_root()
    target = Path(into).expanduser() if into else DEFAULT_COPY.expanduser()
    if target.exists() and not target.is_dir():
        raise command_error(target, "this is a file, and the lessons need a folder",
                            "Pass --into a folder (it is made if missing)")
    try:
        target.mkdir(parents=True, exist_ok=True)
        copied, kept = copy_lessons(source, target)
    except OSError as exc:
        raise command_error(target, f"cannot copy the lessons here ({exc.strerror or exc})",
                            "Pass --into a folder you can write to") from None
    print(f"durablelab: the lessons are in {target} (yours to edit; `durablelab lab` "
          f"never overwrites them)")
    if copied:
        print(f"  copied {len(copied)} file(s) that were missing")
    if kept:
        print(f"  kept your version of {len(kept)} file(s) that differ from this release's: "
              f"{', '.join(str(p) for p in kept[:8])}{', ...' if len(kept) > 8 else ''} "
              f"(delete one to get this release's copy)")
    return target


#: JupyterLab's "Jupyter news" question covers the notebook on a first launch; the same
#: settings binder/postBuild gives Binder, as defaults (a learner's own settings still win).
QUIET_NEWS = {"@jupyterlab/apputils-extension:notification":
              {"fetchNews": "false", "checkForUpdates": False}}


def first_lesson_url(root: Path) -> str | None:
    """The JupyterLab URL path that opens the first lesson (the quickstart) of `root`, with
    the file browser on ``notebooks/``: ``/lab/tree/notebooks/00_quickstart.ipynb``."""
    found = lessons(root) if (root / "notebooks").is_dir() else []
    if not found:
        return None
    rel = found[0].path.relative_to(root)
    return "/lab/tree/" + "/".join(urllib.parse.quote(part) for part in rel.parts)


def lab_command(root: Path, extra: list[str], open_notebooks: bool = True) -> list[str]:
    """The `jupyter lab` command line for `root`, with the learner's options `extra`.

    JupyterLab's own ``LabApp.default_url`` decides where ``/``, the printed URL and the
    browser land (``ServerApp.default_url`` is overwritten by it, so giving that one opens
    the root folder instead): it is set to the quickstart, unless the learner gave one."""
    command = [sys.executable, "-m", "jupyterlab", f"--ServerApp.root_dir={root}"]
    url = first_lesson_url(root) if open_notebooks else None
    if url and not any("default_url" in option for option in extra):
        command.append(f"--LabApp.default_url={url}")
    if is_root() and "--allow-root" not in extra:
        command.append("--allow-root")
    return command + list(extra)


def quiet_news() -> Path | None:
    """Switch off JupyterLab's "Jupyter news" question in this Python environment, as
    binder/postBuild does on Binder, so it does not cover the quickstart on a first launch.

    It writes `QUIET_NEWS` as ``overrides.d/durablelab.json`` in JupyterLab's application
    settings (``<JUPYTERLAB_DIR or sys.prefix/share/jupyter/lab>/settings``): a file of its
    own, so the environment's ``overrides.json`` is left alone, and defaults only, so a
    learner who turns news on in the Settings menu keeps it on. Returns the file, or None
    (and says so) when that folder cannot be written; JupyterLab then asks, as it would."""
    from jupyterlab.commands import get_app_dir
    path = Path(get_app_dir()) / "settings" / "overrides.d" / "durablelab.json"
    if path.is_file():
        return path
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(QUIET_NEWS, indent=1) + "\n", encoding="utf-8")
    except OSError as exc:
        print(f"durablelab: could not switch off the \"Jupyter news\" notice ({path.parent}: "
              f"{exc.strerror or exc}); answer it once in JupyterLab")
        return None
    return path


def is_root() -> bool:
    """Whether this process runs as root (a container, CI), where Jupyter refuses to start
    without --allow-root."""
    return hasattr(os, "geteuid") and os.geteuid() == 0


def open_lab(notebooks: str | None, extra: list[str], into: str | None = None) -> int:
    """`durablelab lab`: find or copy the lessons, then replace this process by JupyterLab."""
    if importlib.util.find_spec("jupyterlab") is None:
        raise command_error(None, f"JupyterLab is not installed in this Python "
                            f"({sys.executable})", "Install it with: pip install "
                            "'durablelab[lab]'")
    if notebooks is not None:
        root = Path(notebooks).expanduser()
        if not root.is_dir():
            raise command_error(root, "no such folder", "Pass --notebooks a folder of "
                                "notebooks, or leave it out to open the lessons")
        command = lab_command(root, extra, open_notebooks=False)
    else:
        command = lab_command(prepare(into), extra)
    quiet_news()
    if is_root() and "--allow-root" not in extra:
        print("durablelab: running as root (a container or CI?), so JupyterLab gets "
              "--allow-root")
    sys.stdout.flush()
    os.execv(sys.executable, command)
    return 0  # not reached
