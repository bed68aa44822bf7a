import pytest

import durablelab as dl


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
