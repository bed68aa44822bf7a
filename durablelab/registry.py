"""The worker's registry: which workflow functions this process may run.

A store names each run's workflow as 'module:qualname', but a name in a file is data:
an engine runs only functions registered here (by `start()`, ``Engine(workflows=[...])`` or
`@dl.workflow`), never whatever a module happens to hold under a name a store gives. A
registered name still follows its module: re-running the notebook cell that defines a
workflow replaces it for the runs in flight, with a warning (DESIGN.md section 2).
"""

from __future__ import annotations

import sys
import types
import warnings
import weakref
from typing import TYPE_CHECKING, Callable

from .errors import not_a_workflow, workflow_redefined

if TYPE_CHECKING:
    from .engine import Engine

#: The worker's registry: the workflows this process may run, by 'module:qualname'. Only a
#: registered name ever runs (by `start()`, `Engine(workflows=...)` or `@dl.workflow`): a
#: store is data, and a name a store row holds is never looked up anywhere else.
REGISTRY: dict[str, Callable] = {}
#: What each registered name's module held under it at registration: a later change there
#: is a notebook cell redefining the workflow (see `redefined`).
SEEN: dict[str, Callable | None] = {}
#: Open engines, so a new registration reaches runs they hold.
LIVE: "weakref.WeakSet[Engine]" = weakref.WeakSet()


def workflow_name(fn: Callable) -> str:
    """The name history records for a workflow function: 'module:qualname'."""
    if not isinstance(fn, types.FunctionType):
        raise not_a_workflow(fn)
    return f"{fn.__module__}:{fn.__qualname__}"


def workflow(fn: Callable) -> Callable:
    """Register `fn` as a workflow this process may run, and return it unchanged.

    Use it as a decorator (``@dl.workflow``) on workflow functions whose runs an engine
    opened later should resume: an engine never runs a workflow because a store names it,
    only the ones registered here (`start()` and ``Engine(workflows=[...])`` register too).
    Redefining a registered workflow (re-running its notebook cell) replaces it; if runs of
    it are in flight a `WorkflowRedefinedWarning` says they will replay against the new code.
    """
    register(fn, stacklevel=2)
    return fn


def register(fn: Callable, stacklevel: int) -> str:
    """Put `fn` in the registry under its name; open engines adopt it for their runs of
    that name (runs nobody could run start; runs of an older definition switch, loudly)."""
    name = workflow_name(fn)
    old = REGISTRY.get(name)
    REGISTRY[name] = fn
    SEEN[name] = current_definition(name)
    if old is not fn:
        switched = [run_id for engine in list(LIVE) for run_id in engine._adopt(name, fn)]
        if switched:
            warnings.warn(workflow_redefined(name, switched), stacklevel=stacklevel + 1)
    return name


def current_definition(name: str) -> Callable | None:
    """The function a registered name finds in its module now (a notebook cell redefined
    since counts), or None for a closure or a name the module no longer has."""
    module, _, qualname = name.partition(":")
    if "<locals>" in qualname:
        return None
    fn = sys.modules.get(module)
    for part in qualname.split("."):
        fn = getattr(fn, part, None)
    if isinstance(fn, types.FunctionType) and workflow_name(fn) == name:
        return fn
    return None


def redefined(name: str) -> Callable | None:
    """The function `name`'s module holds now if a cell put it there since the name was
    last registered (so runs in flight should switch to it), else None."""
    fn = current_definition(name)
    return None if fn is None or fn is SEEN.get(name) else fn


class Definitions:
    """Which function runs each of one engine's runs: the name's current definition in its
    module, one given to the engine (``Engine(workflows=[...])``), or, for a closure no
    module holds, the very function its run was started with (`pin`). Never imports or
    looks up a name nobody registered."""

    def __init__(self, workflows=()):
        self.given = {workflow_name(fn): fn for fn in workflows}
        #: run id -> the function that run must keep (a closure, a fork's own code).
        self.pinned: dict[str, Callable] = {}
        self._seen: dict[str, Callable | None] = {}   # name -> `redefined`, this pass

    def resolve(self, name: str, run_id: str | None = None) -> Callable | None:
        """The function for a recorded workflow name, or None if nobody registered it. A
        registered name finds its module's current definition (a notebook cell redefined
        since counts); a closure is the one its run was started with, else the one
        registered last."""
        if name not in REGISTRY and name not in self.given:
            return None
        fn = self.pinned.get(run_id) or current_definition(name)
        return fn or self.given.get(name) or REGISTRY[name]

    def pin(self, run_id: str, fn: Callable) -> None:
        """Run `run_id` runs `fn` whatever its module holds, also after a crash."""
        self.pinned[run_id] = fn

    def new_pass(self) -> None:
        """The engine's loop starts again: look for redefinitions afresh."""
        self._seen = {}

    def redefinition(self, state) -> Callable | None:
        """The definition a run should switch to before it wakes (a notebook cell redefined
        its workflow since), or None. Looked up once per workflow per pass of the loop, so
        a wake-up pays a dict lookup."""
        name = state.workflow
        if name not in self._seen:
            self._seen[name] = redefined(name)
        fn = self._seen[name]
        if fn is None or fn is state.fn or state.run_id in self.pinned:
            return None
        return fn


__all__ = ["workflow", "workflow_name", "register", "current_definition", "redefined",
           "REGISTRY", "Definitions"]
