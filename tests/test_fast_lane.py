"""The fast lane: `pytest -m "not slow"` leaves out every notebook cell and every module and
test that tests/conftest.py names as slow, and nothing else; plain `pytest` still collects
them all. The names in conftest are checked against the files, so a renamed test cannot
slip back into the fast lane unnoticed, nor a renamed module out of it."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import conftest

ROOT = Path(__file__).resolve().parent.parent
TESTS = ROOT / "tests"
FIX = "update SLOW_MODULES / SLOW_TESTS in tests/conftest.py"

# A child pytest that collects the default test paths with -m "not slow" and says, item by
# item, what the fast lane keeps and what it leaves out (collected all the same).
CHILD = """
import sys, pytest
class Report:
    def pytest_deselected(self, items):
        print(*("SLOW " + item.nodeid for item in items), sep="\\n")
    def pytest_collection_finish(self, session):
        print(*("FAST " + item.nodeid for item in session.items), sep="\\n")
sys.exit(pytest.main(["--collect-only", "-q", "-m", "not slow"], plugins=[Report()]))
"""


def module_names(path: Path) -> set[str]:
    """The functions and classes a test module defines, and the names it assigns."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    names = {node.name for node in tree.body
             if isinstance(node, (ast.FunctionDef, ast.ClassDef))}
    return names | {target.id for node in tree.body if isinstance(node, ast.Assign)
                    for target in node.targets if isinstance(target, ast.Name)}


def test_every_slow_name_is_a_test_file_and_function():
    for pattern in conftest.SLOW_MODULES:
        assert list(TESTS.glob(pattern)), f"SLOW_MODULES: no tests/{pattern}; {FIX}"
    for name, functions in conftest.SLOW_TESTS.items():
        path = TESTS / name
        assert path.is_file(), f"SLOW_TESTS: no tests/{name}; {FIX}"
        missing = set(functions) - module_names(path)
        assert not missing, f"SLOW_TESTS: tests/{name} has no {sorted(missing)}; {FIX}"


def in_module(nodeids: list[str], module: str) -> list[str]:
    return [nodeid for nodeid in nodeids if nodeid.split("::")[0] == module]


def test_the_fast_lane_leaves_out_notebooks_and_slow_modules_and_tests():
    env = {**os.environ, "TQDM_DISABLE": "1",
           "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run([sys.executable, "-c", CHILD], cwd=ROOT, env=env, text=True,
                          capture_output=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    lines = done.stdout.splitlines()
    fast = [line[5:] for line in lines if line.startswith("FAST ")]
    slow = [line[5:] for line in lines if line.startswith("SLOW ")]

    assert "tests/test_fast_lane.py::test_every_slow_name_is_a_test_file_and_function" in fast
    assert len(fast) > 500, f"the fast lane kept only {len(fast)} tests"

    assert not [n for n in fast if ".ipynb" in n.split("::")[0]], "a notebook cell is fast"
    for notebook in sorted((ROOT / "notebooks").glob("*.ipynb")):
        assert in_module(slow, f"notebooks/{notebook.name}"), f"{notebook.name}: not collected"

    for pattern in conftest.SLOW_MODULES:
        for path in sorted(TESTS.glob(pattern)):
            module = f"tests/{path.name}"
            assert in_module(slow, module), f"{module}: nothing collected without -m"
            assert not in_module(fast, module), f"{module} is slow but kept: {FIX}"

    for name, functions in conftest.SLOW_TESTS.items():
        module = in_module(slow + fast, f"tests/{name}")
        for function in functions:
            ids = [n for n in module if n.split("::")[1].split("[")[0] == function]
            assert ids, f"tests/{name}::{function}: nothing collected without -m"
            assert not set(ids) & set(fast), f"tests/{name}::{function} is kept: {FIX}"
