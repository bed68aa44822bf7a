"""The curriculum as a whole: one lesson per number, in order, and a README table that says
what each lesson teaches and how long it takes, kept equal to the lessons themselves."""

from __future__ import annotations

import re
from pathlib import Path

from durablelab.curriculum import lessons

ROOT = Path(__file__).resolve().parent.parent


def test_each_number_names_one_lesson_and_none_is_skipped():
    numbers = [lesson.number for lesson in lessons(ROOT)]
    assert len(numbers) == len(set(numbers)), (
        f"two lessons share a number: {sorted(n for n in numbers if numbers.count(n) > 1)}")
    assert numbers == [f"{i:02d}" for i in range(len(numbers))], numbers


def readme_table() -> list[dict[str, str]]:
    """The README's table of lessons, one dict per row keyed by the header's words."""
    lines = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("| lesson |"))
    header = [cell.strip() for cell in lines[start].strip("|").split("|")]
    rows = []
    for line in lines[start + 2:]:
        if not line.startswith("|"):
            break
        rows.append(dict(zip(header, (cell.strip() for cell in line.strip("|").split("|")))))
    return rows


def test_readme_table_lists_every_lesson_in_order():
    assert [row["lesson"] for row in readme_table()] == [
        f"`{lesson.path.stem}`" for lesson in lessons(ROOT)]


def test_readme_minutes_are_what_each_lesson_says_in_its_first_cell():
    table = {row["lesson"].strip("`"): row for row in readme_table()}
    for lesson in lessons(ROOT):
        assert not lesson.estimated, (
            f"{lesson.path.name}: its first cell does not say 'About N minutes'")
        assert table[lesson.path.stem]["minutes"] == str(lesson.minutes), (
            f"README says {table[lesson.path.stem]['minutes']} minutes for "
            f"{lesson.path.stem}, its first cell says about {lesson.minutes}")


def test_readme_table_says_what_each_lesson_teaches_needs_and_breaks():
    for row in readme_table():
        number = int(row["lesson"].strip("`")[:2])
        for column in ("what it teaches", "needs", "what it breaks on purpose"):
            assert row[column], f"{row['lesson']}: '{column}' is empty"
        needs = [] if row["needs"] == "nothing" else re.split(r",\s*", row["needs"])
        for need in needs:
            assert re.fullmatch(r"\d\d(-\d\d)?", need), f"{row['lesson']} needs {need!r}"
            assert int(need.split("-")[-1]) < number, (
                f"{row['lesson']} needs {need}, which is not an earlier lesson")
