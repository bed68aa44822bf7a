"""The lessons travel with the package: a wheel built from this checkout carries the notebooks
and datasets, `durablelab lessons` lists them, and `durablelab lab` copies them into a folder
the learner owns (never overwriting an edit) and serves them from JupyterLab on 127.0.0.1.

The wheel is built from a copy of the sources (so the checkout gets no build/ folder) and
installed with --no-deps into a fresh virtual environment. Installing pandas, DuckDB and
JupyterLab again would take minutes on a shared machine, so that environment reaches the
running test environment's packages through a .pth file. Only directories are added that way:
the test environment's own (editable) durablelab is not, so `import durablelab` in the fresh
environment is the wheel's, which the first test checks.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import urllib.request
import zipfile
from pathlib import Path

import labserver
import pytest

ROOT = Path(__file__).resolve().parent.parent
SOURCES = ("pyproject.toml", "setup.py", "MANIFEST.in", "README.md", "durablelab", "notebooks",
           "datasets", "solutions")


def lesson_names() -> list[str]:
    return sorted(p.name for p in (ROOT / "notebooks").glob("*.ipynb"))


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    source = tmp_path_factory.mktemp("source")
    for name in SOURCES:
        if (ROOT / name).is_dir():
            shutil.copytree(ROOT / name, source / name,
                            ignore=shutil.ignore_patterns("__pycache__", "*.duckdb*",
                                                          ".ipynb_checkpoints"))
        else:
            shutil.copy(ROOT / name, source / name)
    out = tmp_path_factory.mktemp("dist")
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(out),
                    str(source)], check=True, capture_output=True, timeout=600)
    (found,) = out.glob("durablelab-*.whl")
    return found


@pytest.fixture(scope="module")
def venv(tmp_path_factory, wheel) -> Path:
    """A fresh virtual environment with the wheel installed (see the module docstring)."""
    home = tmp_path_factory.mktemp("venv")
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(home / "env")],
                   check=True, timeout=120)
    python = home / "env" / "bin" / "python"
    site = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()"
                           "['purelib'])"], check=True, capture_output=True, text=True).stdout
    paths = {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}
    Path(site.strip(), "test-environment.pth").write_text("\n".join(sorted(paths)) + "\n")
    subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install",
                    "--no-deps", "--no-index", "-q", str(wheel)], check=True,
                   capture_output=True, timeout=300)
    return home / "env"


def run_in(venv: Path, *args, home: Path, **kwargs) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env.update(HOME=str(home), TQDM_DISABLE="1")
    return subprocess.run([str(venv / "bin" / args[0]), *args[1:]], env=env, cwd=home,
                          capture_output=True, text=True, timeout=120, **kwargs)


def test_wheel_carries_every_lesson_and_dataset(wheel):
    names = set(zipfile.ZipFile(wheel).namelist())
    for lesson in lesson_names():
        assert f"durablelab/lessons/notebooks/{lesson}" in names
    for dataset in (ROOT / "datasets").rglob("*.json"):
        assert f"durablelab/lessons/{dataset.relative_to(ROOT).as_posix()}" in names
    for solution in (ROOT / "solutions").glob("lesson*.py"):
        assert f"durablelab/lessons/solutions/{solution.name}" in names
    assert not [n for n in names if n.endswith((".duckdb", ".pyc")) or "checkpoint" in n]


def test_installed_wheel_lists_its_lessons_and_finds_its_datasets(venv, tmp_path):
    where = run_in(venv, "python", "-c", "import durablelab, durablelab.sim.llm as llm; "
                   "print(durablelab.__file__); print(llm.SCENARIO_DIR.is_dir())", home=tmp_path)
    file, scenarios = where.stdout.split()
    assert file.startswith(str(venv)) and scenarios == "True"
    listed = run_in(venv, "durablelab", "lessons", home=tmp_path)
    assert listed.returncode == 0, listed.stderr
    numbers = re.findall(r"^(\d\d)\s+~?\d+ min\s", listed.stdout, re.M)
    assert numbers == [name[:2] for name in lesson_names() if name[:2].isdigit()]
    assert str(venv) in listed.stdout


def lesson_code(lesson: str, *needles: str) -> str:
    """The code cells of `lesson` that contain any of `needles` (and its first code cell,
    the one that imports), in order, without IPython magics: what Run All would run."""
    cells = json.loads((ROOT / "notebooks" / lesson).read_text(encoding="utf-8"))["cells"]
    code = ["".join(c["source"]) for c in cells if c["cell_type"] == "code"]
    chosen = [code[0]] + [text for text in code[1:] if any(n in text for n in needles)]
    return "\n\n".join("\n".join(line for line in text.splitlines()
                                  if not line.lstrip().startswith("%")) for text in chosen)


def test_installed_wheel_finds_every_dataset_from_any_folder(venv, tmp_path):
    """Lesson 11's "named fault plans" cell looked next to the package and, from a wheel,
    listed nothing; every dataset lookup goes through the package now."""
    found = run_in(venv, "python", "-c", "import json; from durablelab import curriculum as c; "
                   "print(json.dumps([str(c.datasets_dir()), sorted(c.fault_plans()), "
                   "str(c.dataset('histories', 'onboarding_v1.jsonl'))]))", home=tmp_path)
    assert found.returncode == 0, found.stderr
    folder, plans, history = json.loads(found.stdout)
    assert folder.startswith(str(venv)) and history.startswith(folder)
    assert plans == sorted(p.stem for p in (ROOT / "datasets" / "faults").glob("*.json"))
    cell = lesson_code("11_durable_agent.ipynb", "fault_plans(")
    listed = run_in(venv, "python", "-c", cell, home=tmp_path)
    assert listed.returncode == 0, listed.stderr[-2000:]
    shown = [line.split()[0] for line in listed.stdout.splitlines()[1:] if line.strip()]
    assert shown[-len(plans):] == plans and "fault_plans" in cell


def test_lab_from_the_wheel_copies_the_lessons_keeps_edits_and_serves_them(venv, tmp_path):
    pytest.importorskip("jupyterlab")
    copy = tmp_path / "durablelab-lessons"
    copy.mkdir()
    # A learner's edited lesson from an earlier release, which must survive.
    first = lesson_names()[0]
    (copy / "notebooks").mkdir()
    (copy / "notebooks" / first).write_text('{"cells": [], "mine": true}')
    port = labserver.free_port()
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    prefix = Path(sysconfig.get_paths()["data"])
    env.update(HOME=str(tmp_path), JUPYTER_RUNTIME_DIR=str(tmp_path / "runtime"),
               JUPYTER_CONFIG_DIR=str(tmp_path / "config"),
               JUPYTERLAB_DIR=labserver.app_dir(tmp_path),
               JUPYTER_PATH=str(prefix / "share" / "jupyter"))
    lab = subprocess.Popen([str(venv / "bin" / "durablelab"), "lab", *labserver.options(port)],
                           env=env, cwd=tmp_path, stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True)
    try:
        base = f"http://127.0.0.1:{port}"
        listing = labserver.contents(port, "notebooks", lab)
        assert {item["name"] for item in listing["content"]} >= set(lesson_names())
        with urllib.request.urlopen(f"{base}/lab/tree/notebooks/{first}?token={labserver.TOKEN}",
                                    timeout=10) as page:
            assert page.status == 200 and "JupyterLab" in page.read().decode()
        assert labserver.landing(port).startswith(f"/lab/tree/notebooks/{first}")
        assert labserver.news_setting(port) == "false"
    finally:
        lab.terminate()
        lab.wait(timeout=30)
    out = lab.stdout.read()
    assert f"the lessons are in {copy}" in out
    assert f"kept your version of 1 file(s) that differ from this release's: notebooks/{first}" \
        in out
    assert json.loads((copy / "notebooks" / first).read_text())["mine"] is True
    assert (copy / "datasets" / "faults").is_dir()
    assert sorted(p.name for p in (copy / "solutions").glob("lesson*.py")) == \
        sorted(p.name for p in (ROOT / "solutions").glob("lesson*.py"))
    for name in lesson_names()[1:]:
        assert (copy / "notebooks" / name).read_bytes() == (ROOT / "notebooks" / name).read_bytes()
    assert "running as root" in out or os.geteuid() != 0
    assert "Traceback" not in out
