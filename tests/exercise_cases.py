"""What every test of a wrong answer to an exercise checks (tests/test_exercises*.py)."""

from __future__ import annotations

import durablelab as dl


def refuses(exercise_id: str, answer, words: str, secret: str | None = None) -> None:
    """The checker of `exercise_id` refuses `answer`, says `words` among what is still wrong,
    and does not give away `secret` (the right answer, where a wrong one could print it)."""
    verdict = dl.exercises.check(exercise_id, answer)
    assert not verdict and not verdict.passed
    assert any(words in message for message in verdict.wrong), str(verdict)
    assert "not yet" in str(verdict)
    if secret is not None:
        assert secret not in " ".join(verdict.wrong)
