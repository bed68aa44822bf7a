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
