"""Seeded draws: uniform numbers that are a pure function of a key, by hashing.

A fault plan decides whether a rule fires on an attempt, and a retry policy picks its
jitter, from draws keyed by (run seed, rule or run, position, attempt), so a crash-and-replay
sees the same faults and delays it saw before, in any process and on any Python version.
`random.Random(key)` would give that too, but seeding a Mersenne Twister costs about 7 us
and a sweep of 10,000 runs makes hundreds of thousands of draws, each used once or twice;
a BLAKE2b hash of the key and the draw's index costs about 1 us.
"""

from __future__ import annotations

from hashlib import blake2b

_from_bytes = int.from_bytes
_ULP = 2.0 ** -53


class Draws:
    """The numbers drawn for one key, in order: ``random()`` and ``uniform(a, b)``, like
    the `random.Random` methods of the same names (53 random bits per float)."""

    __slots__ = ("_key", "_count")

    def __init__(self, key: str | bytes, drawn: int = 0):
        self._key = (key if type(key) is bytes else key.encode()) + b"#"
        self._count = drawn   # numbers already drawn for this key (see `first`)

    def random(self) -> float:
        """The next number in [0, 1): the top 53 bits of BLAKE2b("{key}#{n}") for the n-th."""
        self._count += 1
        bits = blake2b(self._key + b"%d" % self._count, digest_size=8).digest()
        return (_from_bytes(bits, "big") >> 11) * _ULP

    def uniform(self, a: float, b: float) -> float:
        """The next number between a and b."""
        return a + (b - a) * self.random()


def first(key: bytes) -> float:
    """``Draws(key).random()`` without making the object: most keys are drawn from once
    (whether a fault rule fires on an attempt); ``Draws(key, drawn=1)`` goes on from it."""
    return (_from_bytes(blake2b(key + b"#1", digest_size=8).digest(), "big") >> 11) * _ULP


__all__ = ["Draws", "first"]
