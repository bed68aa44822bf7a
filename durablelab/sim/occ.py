"""`OCCResource`: one row under optimistic concurrency control, as in Brooker's experiment.

A client reads the row's version, computes, and writes back carrying the version it read;
the write is accepted only if no other write landed since that read. Nothing is locked, so
under contention most writes conflict and the clients must retry the whole read-modify-write
(`ctx.retry`), not the write alone: writing again with the same stale version can never
succeed. That is the workload Marc Brooker's "Exponential Backoff And Jitter" (AWS, 2015)
measures.

The resource lives in the world, outside the worker: a crash does not roll it back. It has
no clock of its own: it answers at once, and activity code wraps the answer in
`dl.sim.after` to say how long the network took.
"""

from __future__ import annotations

from ..errors import bad_type


class WriteConflict(Exception):
    """Another write landed since this writer's read: read again and retry. `dl.classify`
    calls it `Transient` (retryable)."""


class OCCResource:
    """One row with a version number, written under optimistic concurrency.

    ``read()`` returns the current version; ``write(version)`` accepts the write (and
    returns the new version) only if `version` is still current, else raises
    `WriteConflict`. ``reads``, ``writes`` (attempted) and ``conflicts`` count the calls.

        row = dl.sim.OCCResource()
        v = row.read()          # 0
        row.write(v)            # 1: accepted
        row.write(v)            # WriteConflict: version 0 was overtaken by version 1
    """

    def __init__(self):
        #: the version now: how many writes were accepted.
        self.version = 0
        self.reads = 0
        #: writes attempted, accepted or not (Brooker's "work").
        self.writes = 0
        self.conflicts = 0

    def read(self) -> int:
        """The current version."""
        self.reads += 1
        return self.version

    def write(self, version: int) -> int:
        """Accept a write made from a read of `version`; the new version. Raises
        `WriteConflict` if another write landed since that read."""
        if isinstance(version, bool) or not isinstance(version, int):
            raise bad_type("OCCResource.write(version)", "version",
                           f"version={version!r} must be the int that read() returned")
        self.writes += 1
        if version != self.version:
            self.conflicts += 1
            raise WriteConflict(f"write from version {version} conflicts: version "
                                f"{self.version} landed since that read; read again")
        self.version += 1
        return self.version

    def __repr__(self) -> str:
        return (f"OCCResource(version={self.version}, reads={self.reads}, "
                f"writes={self.writes}, conflicts={self.conflicts})")


__all__ = ["OCCResource", "WriteConflict"]
