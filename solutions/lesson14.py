"""Lesson 14 (graduating to DBOS Transact): solutions."""

#: 14.1: both engines retry the two 503s as Transient and give up after the second attempt:
#: run.error.error_class is "Transient" on each.
ERROR_CLASS = "Transient"

#: What `dl.exercises.check` takes for each exercise (tests/test_exercises.py checks them all).
ANSWERS = {"14.1": lambda: ERROR_CLASS}
