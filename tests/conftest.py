import importlib.util
import sys

import pytest

# A Python without the project's dependencies (the system python3, say) fails here with the
# fix, instead of with an ImportError deep inside the package.
_MISSING = [m for m in ("duckdb", "pandas", "pyarrow", "matplotlib", "pydantic", "hypothesis")
            if importlib.util.find_spec(m) is None]
if _MISSING:
    raise pytest.UsageError(
        f"{sys.executable} does not have durablelab's dependencies ({', '.join(_MISSING)} "
        f"missing). Run the tests as the README says, in the project's own environment: "
        f"python3 -m venv .venv && .venv/bin/pip install -e \".[test]\" && "
        f".venv/bin/python -m pytest")

import durablelab as dl  # noqa: E402


@pytest.fixture
def engine():
    """A fresh in-memory engine on a virtual clock starting at 0."""
    eng = dl.Engine()
    yield eng
    eng.close()


@pytest.fixture
def db_path(tmp_path):
    """A path for a private DuckDB file."""
    return str(tmp_path / "runs.duckdb")
