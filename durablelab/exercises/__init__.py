"""Exercises that check themselves: ``dl.exercises.check("03.1", answer)``.

Every lesson ends in exercises. A checker takes whatever the exercise asks for (a number, a
`RetryPolicy`, a workflow function, a `Run`) and says, point by point, what is right and what
is still wrong, without printing the answer: where it can, it finds the truth by running the
engine on the learner's answer, so what it says is what the engine does, not a stored key.

    verdict = dl.exercises.check("03.1", 10.0)
    verdict            # in a notebook: a short list of what is right and what is not
    assert verdict     # true when everything is right

Checkers live one module per lesson (`lesson01`, `lesson03`, ...), each registering its
exercises with `@exercise("NN.k", "title")`; every `lessonNN` module in this package is
imported below, so a new lesson only adds its module. The solutions are kept out of this
package's code, in ``solutions/`` beside ``notebooks/`` (a wheel carries them as lesson
files, and ``durablelab lab`` copies them out with the lessons).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

from ..errors import BadValue


@dataclass(frozen=True)
class Exercise:
    """One exercise: its id ("03.1"), title, what kind of answer it takes, and the checker, a
    generator of (ok, message) pairs."""

    id: str
    title: str
    asks: str
    checker: Callable[[Any], Iterator[tuple[bool, str]]]


@dataclass
class Verdict:
    """What `check` found: `right` and `wrong` lists of sentences; true when nothing is wrong."""

    exercise: Exercise
    right: list[str] = field(default_factory=list)
    wrong: list[str] = field(default_factory=list)

    def __bool__(self) -> bool:
        return not self.wrong and bool(self.right)

    @property
    def passed(self) -> bool:
        return bool(self)

    def __str__(self) -> str:
        head = (f"Exercise {self.exercise.id} ({self.exercise.title}): "
                f"{'solved' if self else 'not yet'}")
        return "\n".join([head, *(f"  right: {m}" for m in self.right),
                          *(f"  still wrong: {m}" for m in self.wrong)])

    __repr__ = __str__


EXERCISES: dict[str, Exercise] = {}


def exercise(exercise_id: str, title: str, asks: str):
    """Register a checker: a generator yielding (ok, message) for each point it checks.
    Yielding a False point stops nothing; raising `Stop` ends the check early (the answer is
    of the wrong kind and nothing more can be said)."""
    def register(fn):
        EXERCISES[exercise_id] = Exercise(exercise_id, title, asks, fn)
        return fn
    return register


class Stop(Exception):
    """Raised by a checker when the answer cannot be checked further; its text is wrong."""


def check(exercise_id: str, answer: Any) -> Verdict:
    """Check `answer` to exercise `exercise_id` ("03.1"); returns a `Verdict`, which shows
    what is right and what is still wrong, and is true when the answer is right."""
    found = EXERCISES.get(exercise_id)
    if found is None:
        raise BadValue(f"dl.exercises.check({exercise_id!r}, ...): there is no exercise "
                       f"{exercise_id!r}; the ones that check themselves are "
                       f"{', '.join(sorted(EXERCISES))}.", call="dl.exercises.check",
                       argument="exercise_id")
    verdict = Verdict(found)
    if answer is None:              # the placeholder under each exercise in the lessons
        verdict.wrong.append(f"no answer yet: replace None with {found.asks}")
        return verdict
    try:
        for ok, message in found.checker(answer):
            (verdict.right if ok else verdict.wrong).append(message)
    except Stop as stop:
        verdict.wrong.append(str(stop))
    return verdict


def spelled(answer: str, names) -> tuple[str | None, str | None]:
    """Which of `names` a text answer means, so a slip of spelling is never called a wrong
    idea: ``(name, None)`` when it is one of them but for case, spaces, hyphens, quotes or a
    ``dl.`` / ``ctx.`` prefix ("Schedule-To-Close" is schedule_to_close); ``(name, slip)``
    for a near miss ("schedule_to_clsoe"), where `slip` says how to spell it; ``(None,
    None)`` for anything else."""
    import difflib

    def plain(text: str) -> str:
        text = text.strip().strip("'\"`").strip()
        for prefix in ("dl.", "ctx.", "durablelab."):
            if text.lower().startswith(prefix):
                text = text[len(prefix):]
        return "".join(c for c in text.lower() if c.isalnum())

    given = plain(answer)
    by_plain = {plain(name): name for name in names}
    if given in by_plain:
        return by_plain[given], None
    near = difflib.get_close_matches(given, list(by_plain), n=1, cutoff=0.8)
    if near:
        name = by_plain[near[0]]
        return name, f"{answer!r} is not spelled as a name: read it as {name!r}"
    return None, None


def listing() -> str:
    """Every exercise that checks itself, with what it asks for."""
    return "\n".join(f"{e.id}  {e.title}: give {e.asks}" for _, e in sorted(EXERCISES.items()))


def _register_lessons() -> None:
    import importlib
    import pkgutil
    for module in sorted(m.name for m in pkgutil.iter_modules(__path__)):
        if module.startswith("lesson"):
            importlib.import_module(f"{__name__}.{module}")     # registers its exercises


_register_lessons()

__all__ = ["check", "exercise", "listing", "spelled", "Verdict", "Exercise", "EXERCISES",
           "Stop"]
