"""The lessons find their datasets through the package (`durablelab.curriculum`), the same
however durablelab was installed and wherever a notebook runs; a dataset that is not there
is an error that says where durablelab looked, never an empty listing.

tests/test_wheel.py checks the same from an installed wheel."""

import json
import re
from pathlib import Path

import pytest

import durablelab as dl
from durablelab import curriculum
from durablelab.errors import DatasetError

ROOT = Path(__file__).resolve().parent.parent


def test_fault_plans_lists_every_named_plan_and_each_loads():
    plans = curriculum.fault_plans()
    assert list(plans) == sorted(p.stem for p in (ROOT / "datasets" / "faults").glob("*.json"))
    for path in plans.values():
        assert dl.FaultPlan.from_json(path).rules


def test_no_fault_plans_is_an_error_naming_where_it_looked(monkeypatch, tmp_path):
    (tmp_path / "faults").mkdir()
    monkeypatch.setattr(curriculum, "datasets_dir", lambda: tmp_path)
    with pytest.raises(DatasetError, match="named fault plans") as caught:
        curriculum.fault_plans()
    assert caught.value.path == str(tmp_path / "faults")
    assert "reinstall durablelab" in str(caught.value)
    assert isinstance(caught.value, FileNotFoundError)


def test_a_missing_dataset_is_an_error_naming_it_and_the_folder():
    with pytest.raises(DatasetError, match="'histories/no_such.jsonl'") as caught:
        curriculum.dataset("histories", "no_such.jsonl")
    assert caught.value.path.endswith("no_such.jsonl")
    assert curriculum.dataset("histories", "onboarding_v1.jsonl").is_file()


def test_a_checkout_reads_its_own_datasets_folder():
    assert curriculum.datasets_dir() == ROOT / "datasets"


# A lesson that looks next to itself ("../datasets") or next to the package file finds
# nothing when it runs elsewhere or from a wheel (lesson 11 printed an empty listing).
_LOOKS_BESIDE = re.compile(r"""Path\(\s*["']\.\.["']\s*\)|__file__""")


@pytest.mark.parametrize("notebook", sorted((ROOT / "notebooks").glob("*.ipynb")),
                         ids=lambda p: p.name)
def test_lessons_find_datasets_through_the_package(notebook):
    cells = json.loads(notebook.read_text(encoding="utf-8"))["cells"]
    found = [index for index, cell in enumerate(cells) if cell["cell_type"] == "code"
             and _LOOKS_BESIDE.search("".join(cell["source"]))]
    assert found == [], (f"{notebook.name}, cells {found}: find datasets with "
                         f"durablelab.curriculum's datasets_dir(), dataset() or fault_plans()")
