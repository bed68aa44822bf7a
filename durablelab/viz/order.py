"""Where a timeline puts things that happened at the same instant.

Virtual time does not move while activities run, so a run without timers or backoffs
happens at t = 0 from start to end, crash and recovery included. A time axis would stack
all of it on one point. The timeline then draws the run in the order it happened instead:
each attempt and each wait gets a slot of its own, in the order of history positions, and
a crash or a wake-up goes on the boundary between the slots where it happened.

A crash that cut an attempt off (`Run.attempts` holds it as outcome "crashed") is drawn at
the end of that attempt's bar, whatever the axis: the worker died there, and the attempt
after it is the recovered worker's. A recovery wake-up is drawn on its crash's line.
"""

from __future__ import annotations

import math

import pandas as pd

#: Crash points that happen before the step at their position runs (else: after or during).
BEFORE_POINTS = ("before_activity",)


class Slots:
    """The slots of a run drawn in order: one per attempt and one per wait, sorted by
    history position (a wait by the position of its start), each `width` wide from x =
    `offset` (0 for the run drawn; an expanded child's start where its parent started it).

    `attempt[index]` is the x of the attempt with that index in the attempts frame;
    `wait[k]` the x of the k-th wait (in the order `plots.waits` returns them)."""

    def __init__(self, attempts: pd.DataFrame, waits: list, width: float, offset: float = 0.0):
        items = [(float(row.position), 0, order, ("attempt", index))
                 for order, (index, row) in enumerate(
                     attempts.sort_values(["position", "attempt"], kind="stable").iterrows())]
        items += [(_position(wait), 1, k, ("wait", k)) for k, wait in enumerate(waits)]
        items.sort(key=lambda item: item[:3])
        self.width, self.offset = width, offset
        self.positions = [item[0] for item in items]
        self.attempt = {key[1]: offset + k * width for k, (*_, key) in enumerate(items)
                        if key[0] == "attempt"}
        self.wait = {key[1]: offset + k * width for k, (*_, key) in enumerate(items)
                     if key[0] == "wait"}
        self.wait_position = {k: _position(wait) for k, wait in enumerate(waits)}

    def __len__(self) -> int:
        return len(self.positions)

    def before(self, position: float) -> float:
        """The boundary left of the first slot at or after `position`."""
        return self.offset + self.width * sum(p < position for p in self.positions)

    def after(self, position: float) -> float:
        """The boundary right of the last slot at or before `position`."""
        return self.offset + self.width * sum(p <= position for p in self.positions)


def crash_places(crashes: pd.DataFrame, run_id: str, cut: dict, slots: Slots | None,
                 x) -> list[float]:
    """The x of each row of `crashes` (in its order).

    `cut`: position -> the x where each "crashed" attempt at that position ends, in attempt
    order; the k-th crash of this run at a position is drawn at the end of the k-th of them.
    Other crashes: by position between `slots` when the run is drawn in order (a crash
    during a wait in the middle of the wait's slot), else at `crashed_at` on the time axis
    (`x`). Crashes of other runs sharing the engine have no position in this run: they stay
    at their instant."""
    used: dict = {}
    places = []
    for crash in crashes.itertuples(index=False):
        position = crash.position
        mine = crash.run_id == run_id and position is not None and not pd.isna(position)
        k = used.get(position, 0) if mine else 0
        if mine and k < len(cut.get(position, ())):
            used[position] = k + 1
            places.append(cut[position][k])
        elif mine and slots is not None:
            places.append(_between(slots, float(position), crash.point))
        else:
            places.append(x(crash.crashed_at))
    return places


def _between(slots: Slots, position: float, point) -> float:
    if point in BEFORE_POINTS:
        return slots.before(position)
    if point == "during_wait":
        for k, at in slots.wait.items():
            if slots.wait_position[k] == position:
                return at + slots.width / 2
    return slots.after(position)


def wakeup_places(wakeups: pd.DataFrame, crashes: pd.DataFrame, crash_x: list[float],
                  run_id: str, slots: Slots | None, x) -> list[float]:
    """The x of each row of `wakeups` (in its order). The k-th recovery goes on the line of
    the k-th crash of this run when it woke at that crash's instant (a fresh worker picks
    the run up where the old one died). Drawn in order, any other wake-up goes before the
    first slot it had not replayed (its `replayed` events are the run's positions up to
    there); on a time axis, at `woke_at`."""
    mine = [at for at, crash in zip(crash_x, crashes.itertuples(index=False))
            if crash.run_id == run_id]
    instants = [crash.crashed_at for crash in crashes.itertuples(index=False)
                if crash.run_id == run_id]
    recovery = 0
    places = []
    for row in wakeups.itertuples(index=False):
        if row.reason == "recovery" and recovery < len(mine) and _same(
                row.woke_at, instants[recovery]):
            places.append(mine[recovery])
            recovery += 1
            continue
        recovery += row.reason == "recovery"
        if slots is not None:
            places.append(slots.after(float(row.replayed)))
        else:
            places.append(x(row.woke_at))
    return places


def _position(wait) -> float:
    position = getattr(wait, "position", None)
    return math.inf if position is None or pd.isna(position) else float(position)


def _same(a, b) -> bool:
    try:
        return math.isclose(float(a), float(b), rel_tol=0, abs_tol=1e-9)
    except (TypeError, ValueError):
        return False
