"""The README's lab command installs what every lesson imports, and so does Binder.

Lesson 14 stopped at its first cell with the README's command (no `dbos`, then no `dask`).
This reads each lesson's imports, and the module-level imports of every durablelab module a
lesson imports (what `import durablelab.backends.dbos` really loads), and checks each
third-party module comes from a distribution that ``pip install -e ".[lab]"`` installs:
the package's dependencies, its ``lab`` extra, and what they require. No kernel is started.
tests/test_binder.py checks that binder/requirements.txt pins the same names.
"""

from __future__ import annotations

import ast
import json
import re
import sys
import tomllib
from functools import cache
from importlib import metadata
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from test_binder import closure

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))


def _imports(tree: ast.Module, package: str | None, module_level: bool) -> set[str]:
    """Absolute names of the modules `tree` imports (only its top-level statements, and
    those inside top-level if/try blocks, when `module_level`)."""
    nodes = list(ast.walk(tree)) if not module_level else []
    pending = list(tree.body) if module_level else []
    while pending:
        node = pending.pop()
        nodes.append(node)
        if isinstance(node, (ast.If, ast.Try)):
            pending.extend([*node.body, *node.orelse, *getattr(node, "finalbody", []),
                            *[s for h in getattr(node, "handlers", []) for s in h.body]])
    found = set()
    for node in nodes:
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[:len(package.split(".")) - node.level + 1]
                stem = ".".join(base + ([node.module] if node.module else []))
            else:
                stem = node.module
            found.add(stem)
            found.update(f"{stem}.{alias.name}" for alias in node.names)
    return found


@cache
def _module_imports(path: Path, package: str) -> frozenset[str]:
    return frozenset(_imports(ast.parse(path.read_text(encoding="utf-8")), package,
                              module_level=True))


@cache
def _durablelab_file(name: str) -> Path | None:
    path = ROOT.joinpath(*name.split("."))
    if (path / "__init__.py").is_file():
        return path / "__init__.py"
    return path.with_suffix(".py") if path.with_suffix(".py").is_file() else None


def third_party_imports(notebook: Path) -> set[str]:
    """Top-level names of the non-stdlib modules importing `notebook`'s cells would load."""
    cells = json.loads(notebook.read_text(encoding="utf-8"))["cells"]
    found: set[str] = set()
    for cell in cells:
        if cell["cell_type"] == "code":
            code = "\n".join(line for line in "".join(cell["source"]).splitlines()
                             if not line.lstrip().startswith(("%", "!")))
            found |= _imports(ast.parse(code), None, module_level=False)
    seen, pending, outside = set(), sorted(found), set()
    while pending:
        name = pending.pop()
        if name in seen:
            continue
        seen.add(name)
        top = name.split(".")[0]
        if top != "durablelab":
            outside.add(top)
            continue
        parts = name.split(".")
        for depth in range(1, len(parts) + 1):      # a package's __init__ runs first
            path = _durablelab_file(".".join(parts[:depth]))
            if path is None:
                continue
            package = ".".join(parts[:depth]) if path.name == "__init__.py" else \
                ".".join(parts[:depth - 1])
            pending.extend(_module_imports(path, package) - seen)
    return {m for m in outside if m not in sys.stdlib_module_names and m != "__future__"}


@cache
def lab_distributions() -> set[str]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    return closure(Requirement(r).name for r in
                   project["dependencies"] + project["optional-dependencies"]["lab"])


@cache
def module_providers() -> dict[str, list[str]]:
    """Top-level module -> the installed distributions that provide it (one scan)."""
    return metadata.packages_distributions()


def test_the_readme_lab_command_installs_the_lab_extra():
    readme = (ROOT / "README.md").read_text()
    assert re.search(r'pip install -e "\.\[lab\]" && \.venv/bin/durablelab lab', readme)


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=lambda p: p.name)
def test_every_module_a_lesson_imports_comes_with_the_lab_extra(notebook):
    installed = lab_distributions()
    providers = module_providers()
    missing = {}
    for module in sorted(third_party_imports(notebook)):
        names = {n.lower().replace("_", "-") for n in providers.get(module, [])}
        if not names & installed:
            missing[module] = sorted(names) or ["(not installed here)"]
    assert not missing, (f"{notebook.name} imports modules that `pip install -e \".[lab]\"` "
                         f"does not install (module: distributions): {missing}; add them to "
                         f"the lab extra in pyproject.toml and pin them in "
                         f"binder/requirements.txt")


def test_the_scan_sees_through_durablelab_to_what_it_loads():
    lesson14 = ROOT / "notebooks" / "14_graduating.ipynb"
    assert {"dbos", "dask"} <= third_party_imports(lesson14)
