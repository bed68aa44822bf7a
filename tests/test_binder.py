"""Binder: an environment built from binder/ alone runs the quickstart and lesson 14, with the "Jupyter news"
toast switched off, and the README's badge opens the quickstart in JupyterLab.

repo2docker would pip-install binder/requirements.txt into a fresh Python 3.11 and then run
binder/postBuild from the repository root. Downloading and unpacking JupyterLab, pandas and
DuckDB again takes minutes on a shared machine, so this test builds the same environment
from what is already installed: it works out which distributions binder/requirements.txt
pulls in (the pins and everything they require, by their installed metadata), checks each
pin is the version installed here (the one the lessons are tested with), and links exactly
those distributions, and nothing else, into a fresh virtual environment. A package the
lessons import but binder/requirements.txt does not pull in is then missing there, as it
would be on Binder. Then postBuild runs in a copy of the repository and the quickstart runs
in that environment.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import sysconfig
import tomllib
from importlib import metadata
from pathlib import Path

from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parent.parent
BINDER = ROOT / "binder"
QUICKSTART = "notebooks/00_quickstart.ipynb"
# The lesson with the most dependencies beyond the package's own (DBOS Transact, Dask).
GRADUATING = "notebooks/14_graduating.ipynb"


def pins() -> dict[str, str]:
    found = {}
    for line in (BINDER / "requirements.txt").read_text().splitlines():
        line = line.split("#")[0].strip()
        if line:
            name, _, version = line.partition("==")
            assert version, f"binder/requirements.txt: {line!r} is not pinned with =="
            found[name.strip()] = version.strip()
    return found


def closure(names) -> set[str]:
    """The installed distributions `names` need, with everything they require (markers
    evaluated here, extras followed where a requirement asks for them)."""
    seen: set[str] = set()
    visited: set[tuple] = set()
    pending = [(name, ()) for name in names]
    while pending:
        name, extras = pending.pop()
        dist = metadata.distribution(name)
        key = dist.metadata["Name"].lower().replace("_", "-")
        if (key, extras) in visited:
            continue
        visited.add((key, extras))
        seen.add(key)
        for text in dist.requires or []:
            req = Requirement(text)
            if req.marker is None or any(req.marker.evaluate({"extra": e})
                                         for e in (*extras, "")):
                pending.append((req.name, tuple(sorted(req.extras))))
    return seen


def test_binder_pins_what_the_package_and_the_lab_need_at_the_tested_versions():
    assert (BINDER / "runtime.txt").read_text().strip() == "python-3.11"
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    needed = [Requirement(r).name for r in
              project["dependencies"] + project["optional-dependencies"]["lab"]]
    pinned = {name.lower() for name in pins()}
    assert [n for n in needed if n.lower() not in pinned] == []
    for name, version in pins().items():
        assert metadata.version(name) == version, (
            f"binder/requirements.txt pins {name}=={version}, the lessons are tested with "
            f"{metadata.version(name)}")


def test_readme_badge_opens_the_quickstart_in_jupyterlab_on_binder():
    readme = (ROOT / "README.md").read_text()
    repo = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["urls"]["Repository"]
    owner_name = re.fullmatch(r"https://github\.com/([^/]+/[^/]+)", repo).group(1)
    badge = (f"[![Launch on Binder](https://mybinder.org/badge_logo.svg)](https://mybinder.org/"
             f"v2/gh/{owner_name}/main?urlpath=lab/tree/{QUICKSTART})")
    assert badge in readme
    assert (ROOT / QUICKSTART).is_file()


def link_distributions(names: set[str], site: Path) -> None:
    """Make each distribution's files (top-level packages, modules, its .dist-info) visible
    in `site` through symbolic links."""
    purelib = Path(sysconfig.get_paths()["purelib"])
    for name in names:
        dist = metadata.distribution(name)
        tops = {Path(str(f)).parts[0] for f in dist.files or []}
        for top in tops:
            source = Path(dist.locate_file(top))
            if top in ("..", "__pycache__") or not source.exists() or \
                    purelib not in source.parents:
                continue
            target = site / top
            if not target.exists():
                target.symlink_to(source)


def test_environment_from_binder_alone_runs_the_quickstart_and_lesson_14(tmp_path):
    needed = closure(pins())
    env_dir = tmp_path / "binder-env"
    subprocess.run([sys.executable, "-m", "venv", str(env_dir)], check=True, timeout=300)
    python = env_dir / "bin" / "python"
    site = Path(subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig."
                                "get_paths()['purelib'])"], check=True, capture_output=True,
                               text=True).stdout.strip())
    link_distributions(needed, site)
    repo = tmp_path / "repo"
    repo.mkdir()
    for name in ("pyproject.toml", "setup.py", "MANIFEST.in", "README.md", "binder",
                 "durablelab", "notebooks", "datasets"):
        if (ROOT / name).is_dir():
            shutil.copytree(ROOT / name, repo / name,
                            ignore=shutil.ignore_patterns("__pycache__", "*.duckdb*"))
        else:
            shutil.copy(ROOT / name, repo / name)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env.update(PATH=f"{env_dir / 'bin'}:{env['PATH']}", HOME=str(tmp_path), TQDM_DISABLE="1",
               JUPYTER_RUNTIME_DIR=str(tmp_path / "runtime"))
    built = subprocess.run(["bash", "binder/postBuild"], cwd=repo, env=env,
                           capture_output=True, text=True, timeout=600)
    assert built.returncode == 0, built.stderr[-3000:]
    overrides = env_dir / "share" / "jupyter" / "lab" / "settings" / "overrides.json"
    assert '"fetchNews": "false"' in overrides.read_text()
    ran = subprocess.run([str(python), "-m", "nbconvert", "--to", "notebook",
                          "--execute", QUICKSTART, "--output-dir", str(tmp_path / "out")],
                         cwd=repo, env=env, capture_output=True, text=True, timeout=600)
    assert ran.returncode == 0, ran.stderr[-3000:]
    executed = (tmp_path / "out" / "00_quickstart.ipynb").read_text()
    assert "duplicate vendors without keys: 1" in executed
    ran = subprocess.run([str(python), "-m", "nbconvert", "--to", "notebook", "--execute",
                          GRADUATING, "--output-dir", str(tmp_path / "out")],
                         cwd=repo, env=env, capture_output=True, text=True, timeout=600)
    assert ran.returncode == 0, ran.stderr[-3000:]
    where = subprocess.run([str(python), "-c", "import durablelab; print(durablelab.__file__)"],
                           cwd=tmp_path, env=env, capture_output=True, text=True)
    assert where.stdout.startswith(str(repo))          # postBuild's install, not ours
