"""Child runs in their parent's timeline: what each child did, under its bar.

A child run (`ctx.child`, `ctx.start_child`) keeps a history of its own; the parent's
history holds only the child's start (whose value names the child's run id) and its end, so
a parent's timeline draws a child as one bar. Given the child runs, or an engine to read
them from, the timeline expands that bar: the child's own lanes (its activities, waits and
its own children, expanded in turn) come right under the bar's lane, on the parent's clock,
each labelled with the child's run id ("p/1 › search") and shaded together, so a reader
sees which child did what, and when, beside the parent's own work. Only runs the parent (or
an expanded child) really started are accepted: a run placed under the wrong parent would
draw a story that did not happen.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..errors import BadType, BadValue, RunNotFoundError

#: The longest lane label of an expanded child ("p/1 › search"); the id gives way first.
LABEL_LIMIT = 30


@dataclass
class Block:
    """One run's lanes in an axis: the drawn run (depth 0) or an expanded child."""

    run: object
    depth: int
    rows: dict = field(default_factory=dict)   # the run's lane name -> its row (y)
    parent: "Block | None" = None
    position: int | None = None   # of the `start_child` event in the parent's history
    bar_row: int | None = None    # the row of the child's bar in the parent's lanes


def child_ids(run) -> dict[int, str]:
    """{position of its `start_child` event: child run id} of the children `run` started."""
    history = run.history
    if "kind" not in history.columns:
        return {}
    found = {}
    for row in history[history.kind.eq("start_child")].itertuples(index=False):
        value = row.value if isinstance(row.value, dict) else {}
        if isinstance(value.get("run_id"), str):
            found[int(row.position)] = value["run_id"]
    return found


def resolve(runs: list, children) -> dict[str, object]:
    """{child run id: Run} of every child to expand under `runs`, their children included.

    `children`: None (expand nothing); an engine, or anything with `run(run_id)` such as a
    read-only `dl.Engine(path, read_only=True)` (every child the engine holds, at every
    depth); or a list of child Runs (exactly those, each under the run that started it).
    Raises BadType for an item that is not a Run, and BadValue for a run that no drawn run,
    nor any child given, started."""
    if children is None:
        return {}
    if hasattr(children, "attempts") or isinstance(children, (str, bytes)):
        raise BadType(f"timeline(children={_name(children)}): give a list of child Runs "
                      f"or the engine that holds them (children=engine), not a single "
                      f"{type(children).__name__}")
    if callable(getattr(children, "run", None)):
        return _from_engine(runs, children)
    try:
        given = list(children)
    except TypeError:
        raise BadType(f"timeline(children={children!r}): give a list of child Runs or the "
                      f"engine that holds them (children=engine)") from None
    by_id = {}
    for item in given:
        if not (hasattr(item, "attempts") and hasattr(item, "run_id")):
            raise BadType(f"timeline(children=[... {item!r} ...]): every child must be a "
                          f"Run (engine.run(run_id)), not {type(item).__name__}")
        if item.run_id in by_id:
            raise BadValue(f"timeline(children=...): run {item.run_id!r} is given twice; "
                           f"give each child run once")
        by_id[item.run_id] = item
    found, todo, drawn = {}, list(runs), {run.run_id for run in runs}
    while todo:
        parent = todo.pop()
        for child_id in child_ids(parent).values():
            child = by_id.get(child_id)
            if (child is not None and child_id not in found and child_id not in drawn
                    and _child_of(child, parent)):
                found[child_id] = child
                todo.append(child)
    stray = [run for run in given if run.run_id not in found]
    if stray:
        run = stray[0]
        started = [i for r in [*runs, *found.values()] for i in child_ids(r).values()]
        drawn = ", ".join(repr(r.run_id) for r in runs)
        raise BadValue(
            f"timeline(children=...): run {run.run_id!r} is not a child of the run drawn "
            f"({drawn}) nor of another child given: its parent_run_id is "
            f"{getattr(run, 'parent_run_id', None)!r}. The children started there are "
            f"{', '.join(map(repr, started)) or 'none'}. Give only runs started with "
            f"ctx.child / ctx.start_child (engine.runs() lists each with its "
            f"parent_run_id), or children=engine to take them all")
    return found


def _from_engine(runs, engine) -> dict[str, object]:
    found, todo, drawn = {}, list(runs), {run.run_id for run in runs}
    while todo:
        parent = todo.pop()
        for child_id in child_ids(parent).values():
            if child_id in found or child_id in drawn:
                continue
            try:
                child = engine.run(child_id)
            except RunNotFoundError:   # recorded as started, not (yet) stored: a plain bar
                continue
            if _child_of(child, parent):
                found[child_id] = child
                todo.append(child)
    return found


def _child_of(child, parent) -> bool:
    """Whether `child` says `parent` started it. A run has one parent, so expanding only
    such children draws a tree, even from a file whose runs name each other in a ring."""
    return getattr(child, "parent_run_id", None) == parent.run_id


def layout(run, found: dict, lanes, spans) -> tuple[list[str], list[Block]]:
    """The rows of one axis: the run's lanes with each expanded child's lanes right under
    its bar, children's children likewise. Returns each row's label, top to bottom, and
    the blocks (the run first) that say which run owns which rows. `lanes(run)` and
    `spans(run)` are the timeline's own (passed in, so the two modules do not import each
    other at load time)."""
    labels: list[str] = []
    blocks: list[Block] = []

    def place(block: Block) -> None:
        blocks.append(block)
        run = block.run
        ids = child_ids(run)
        bars = {}   # lane name -> [(position, child run)] of children drawn on that lane
        for row in spans(run).itertuples(index=False):
            child_id = ids.get(row.position) if row.kind == "child" else None
            if child_id in found and _child_of(found[child_id], run):
                bars.setdefault(row.lane, []).append((row.position, found[child_id]))
        for name in lanes(run):
            block.rows[name] = len(labels)
            labels.append(_label(run, name, block.depth))
            # A lane holds children that did not overlap: each expands in turn under it.
            for position, child in sorted(bars.get(name, ()), key=lambda item: item[0]):
                place(Block(child, block.depth + 1, parent=block, position=position,
                            bar_row=block.rows[name]))

    place(Block(run, 0))
    return labels, blocks


def members(run, found: dict) -> list:
    """The run and every expanded child under it, at any depth."""
    tree, todo = [], [run]
    while todo:
        member = todo.pop(0)
        tree.append(member)
        todo += [found[i] for i in child_ids(member).values()
                 if i in found and _child_of(found[i], member)]
    return tree


def short_id(run_id: str, budget: int) -> str:
    """`run_id`, cut from the left to `budget` characters: a child's id ends in what tells
    it from its siblings ("…/30/4")."""
    return run_id if len(run_id) <= budget else "…" + run_id[-(budget - 1):]


def _label(run, name: str, depth: int) -> str:
    from .plots import _lane_label
    if depth == 0:
        return _lane_label(name)
    name = _lane_label(name)
    return f"{short_id(run.run_id, max(LABEL_LIMIT - len(name) - 3, 6))} › {name}"


def _name(value) -> str:
    return getattr(value, "run_id", None) and f"Run({value.run_id!r})" or repr(value)
