"""A sweep's arguments, checked once, and the data form in which they travel to workers.

`Spec` holds what `dl.sweep` was asked: the workflow, the inputs (as JSON text), the
policies, the fault plans, the seeds, the world factory, contention and the timeout. Every
argument is checked here, so a bad sweep is refused before anything runs.

A worker in another process needs the same `Spec`. Python objects do not cross processes
as data, and durablelab never turns bytes back into objects, so a `Spec` has a *data form*:
JSON text (`Spec.to_data()`) with what `Spec.describe()` holds (the inputs, the policies
as `RetryPolicy.to_dict()`, the plans as `FaultPlan.to_json()`, seeds, contention,
timeout) and the import paths (``"module:qualname"``) of the workflow and of the world
factory. `Spec.from_data(text)` rebuilds the `Spec` on the worker. Reading the text runs
nothing but the import of the two named modules (as loading a function by reference
always does): the workflow is then found the way the engine finds a registered name
(`durablelab.registry.current_definition`: the function the module holds under that
qualname), the world must be a class or function written in Python and found under its
own name, and every value is checked as `dl.sweep` checks it. A module of the standard
library or a ``__main__`` module is never imported (`module_refused`). Text that is not this
form, a module that does not import or a name that is not there raises `SweepError` naming
what and the fix.

The data form names code, as a reference to a function always does: it is the sweep's
message to its own workers, not a file to accept from strangers (a results file or an
export keeps `describe()`, which no code reads back to run anything).

So whatever must travel by data must have an import path: a workflow or a world defined
at the top level of a module (not in a notebook cell, not inside a function, not a
lambda), and a world that is a class or a function, not an instance. `Spec.to_data()`
checks that up front, in the process that calls the sweep, with the words of the caller.
"""

from __future__ import annotations

import importlib
import importlib.machinery
import json
import math
import numbers
import sys
import types
from pathlib import Path

from .. import history as h
from ..registry import current_definition, workflow_name
from ..errors import SweepError, check_json_keys
from ..faults import FaultPlan
from ..retry import Overrides, RetryPolicy

#: The data form's marker and version: a text without them is not a sweep's data form.
FORMAT, VERSION = "durablelab.sweep.spec", 1
_KEYS = ("format", "version", "workflow", "inputs", "policies", "fault_plans", "seeds",
         "contention", "timeout", "world")
#: keys a data form has only when set (a sweep without them describes itself as before, so
#: its results files still resume)
_OPTIONAL = ("arrivals", "sticky")
#: what `contention=` takes: False, True, or one world per cell and seed.
CONTENTION = (False, True, "per_seed")


class Spec:
    """A sweep's arguments, checked, with a data form that travels to worker processes."""

    def __init__(self, workflow, inputs, policies, fault_plans, seeds, world, contention,
                 timeout, arrivals=None, sticky=True):
        if not callable(workflow):
            raise SweepError(f"sweep(workflow={workflow!r}): a workflow is a function "
                             f"fn(ctx, input)", argument="workflow")
        self.workflow = workflow
        self.workflow_name = workflow_name(workflow)
        if isinstance(inputs, (str, bytes, dict)) or not hasattr(inputs, "__iter__"):
            raise SweepError(f"sweep(inputs={inputs!r}): give a list of workflow inputs (one "
                             f"run per input, seed and cell), e.g. [{{'order': 1}}]",
                             argument="inputs")
        self.inputs = list(inputs)
        if not self.inputs:
            raise SweepError("sweep(inputs=[]): give at least one input", argument="inputs")
        for i, value in enumerate(self.inputs):      # an int key would come back a string
            check_json_keys(value, f"input {i}", "dl.sweep(inputs=...)", f"inputs[{i}]")
        self.inputs_json = [h.to_json(v, f"input {i}", "dl.sweep(inputs=...)")
                            for i, v in enumerate(self.inputs)]
        self.policies = _named(policies, "policies", {"code": None}, _policy)
        self.plans = _named(fault_plans, "fault_plans", {"none": None}, _plan)
        self.seeds = _seeds(seeds)
        if world is not None and not callable(world):
            raise SweepError(f"sweep(world={world!r}): give a factory world(clock) that returns "
                             f"the simulated world (a class or a module-level function)",
                             argument="world")
        self.world = world
        if isinstance(contention, str) and contention != "per_seed":
            raise SweepError(f"sweep(contention={contention!r}): give False (each run its own "
                             f"world), True (one world per cell) or \"per_seed\" (one world "
                             f"per cell and seed: each seed an independent trial of all inputs "
                             f"contending)", argument="contention")
        self.contention = contention if isinstance(contention, str) else bool(contention)
        #: virtual start instant of each input's runs, or None (all at 0)
        self.arrivals = _arrivals(arrivals, len(self.inputs))
        if timeout is not None and (isinstance(timeout, bool) or not isinstance(
                timeout, (int, float)) or not math.isfinite(timeout) or timeout <= 0):
            raise SweepError(f"sweep(timeout={timeout!r}): virtual seconds per run, > 0 (or "
                             f"None for none: a policy retrying forever then never ends)",
                             argument="timeout")
        self.timeout = None if timeout is None else float(timeout)
        self.cells = [(p, f) for p in self.policies for f in self.plans]
        if not isinstance(sticky, bool):
            raise SweepError(f"sweep(sticky={sticky!r}): give True (a run waiting between "
                             f"wake-ups keeps its code in memory and resumes there: the default) or "
                             f"False (its code runs again from the top on every wake-up); "
                             f"the results are the same", argument="sticky")
        #: whether the sweep's engines sticky runs (`Engine(sticky=)`): how fast, never what
        #: comes out, so `describe()` leaves it out and a results file resumes either way.
        self.sticky = sticky

    def run_id(self, cell: int, seed: int, index: int) -> str:
        policy, plan = self.cells[cell]
        return f"{policy}/{plan}/{seed}/{index}"

    def start_at(self, index: int) -> float | None:
        """When input `index`'s runs start (None: at once)."""
        return None if self.arrivals is None else self.arrivals[index]

    def runs_of(self, cell: int) -> list[tuple[int, int]]:
        """(input index, seed) of every run of a cell, in table order."""
        indexes = range(len(self.inputs))
        return [(i, seed) for seed in self.seeds for i in indexes]

    def describe(self) -> dict:
        """The sweep as JSON data: what a results file and an export keep of it."""
        world = self.world
        world_name = None if world is None else (
            f"{getattr(world, '__module__', '?')}:{getattr(world, '__qualname__', repr(world))}")
        return {"workflow": self.workflow_name,
                "inputs": [json.loads(t) for t in self.inputs_json],
                "policies": {n: (None if o is None else o.to_dict())
                             for n, o in self.policies.items()},
                "fault_plans": {n: (None if p is None else json.loads(p.to_json()))
                                for n, p in self.plans.items()},
                "seeds": self.seeds, "contention": self.contention, "timeout": self.timeout,
                "world": world_name,
                **({} if self.arrivals is None else {"arrivals": self.arrivals})}

    # --- the data form ---------------------------------------------------------------------
    def to_data(self, caller: str = "Spec.to_data()") -> str:
        """The sweep as JSON text another process turns back into this `Spec` with
        `Spec.from_data`: `describe()` plus a format marker, with the workflow and the world
        as import paths. Raises `SweepError` (worded for `caller`, e.g.
        ``"sweep(executor=...)"``) when the workflow or the world has no import path that
        finds it again: a lambda, a nested function, a notebook cell's definition, or a
        world that is an instance rather than a class or function."""
        data = {"format": FORMAT, "version": VERSION, **self.describe()}
        data["workflow"] = _path_of(self.workflow, "workflow", caller)
        if self.world is not None:
            data["world"] = _path_of(self.world, "world", caller)
        if not self.sticky:
            data["sticky"] = False
        return json.dumps(data, allow_nan=False)   # insertion order: cell numbers follow it

    @classmethod
    def from_data(cls, text: str) -> "Spec":
        """The `Spec` that `to_data()` wrote, rebuilt in this process. It imports the
        modules of the workflow and the world, finds them by name, and checks every value
        as `dl.sweep` does; it runs nothing else. Raises `SweepError` naming what is wrong."""
        if not isinstance(text, str):
            raise _bad_data(f"it is a {type(text).__name__}, not JSON text")
        try:
            data = json.loads(text)
        except (ValueError, RecursionError) as exc:
            raise _bad_data(f"it is not JSON ({exc})") from None
        if not isinstance(data, dict) or data.get("format") != FORMAT:
            raise _bad_data(f"it is not a sweep's data form (no \"format\": {FORMAT!r})")
        if data.get("version") != VERSION:
            raise _bad_data(f"version {data.get('version')!r}; this durablelab reads version "
                            f"{VERSION}: run the same durablelab on the driver and the workers")
        wrong = sorted((set(data) - set(_OPTIONAL)) ^ set(_KEYS))
        if wrong:
            raise _bad_data(f"key {wrong[0]!r} is {'unknown' if wrong[0] in data else 'missing'}"
                            f" (a data form has exactly {', '.join(_KEYS)})")
        for key, kinds in (("workflow", (str,)), ("world", (str, type(None))),
                           ("inputs", (list,)), ("seeds", (list,)),
                           ("contention", (bool, str)),
                           ("timeout", (int, float, type(None))), ("policies", (dict,)),
                           ("fault_plans", (dict,))):
            _expect(data, key, kinds)
        for key in ("policies", "fault_plans"):
            for name, value in data[key].items():
                if value is not None and not isinstance(value, dict):
                    raise _bad_data(f"{key}[{name!r}] is a {type(value).__name__}, not an "
                                    f"object or null")
        workflow = _find(data["workflow"], "workflow")
        world = None if data["world"] is None else _find(data["world"], "world")
        try:
            # A plan's JSON object, never a string: FaultPlan.from_json reads a string that
            # is not an object as a file path.
            plans = {name: None if plan is None else FaultPlan.from_json(json.dumps(plan))
                     for name, plan in data["fault_plans"].items()}
            arrivals = data.get("arrivals")
            if arrivals is not None and not isinstance(arrivals, list):
                raise _bad_data(f"'arrivals' is a {type(arrivals).__name__}, not a list")
            return cls(workflow, data["inputs"], data["policies"], plans, data["seeds"],
                       world, data["contention"], data["timeout"], arrivals,
                       data.get("sticky", True))
        except (TypeError, ValueError) as exc:   # SweepError, PolicyError, a plan's BadValue
            raise _bad_data(getattr(exc, "message", None) or str(exc)) from None


def _bad_data(problem: str, fix: str = "a sweep's data form is what Spec.to_data() writes "
                                       "on the driver: give that text unchanged, to the "
                                       "same durablelab version") -> SweepError:
    return SweepError(f"Spec.from_data: the text is not a sweep this worker can run: "
                      f"{problem.rstrip('.')}. Fix: {fix}.", argument="data")


def _expect(data: dict, key: str, kinds: tuple) -> None:
    value = data[key]
    if not isinstance(value, kinds) or (isinstance(value, bool) and bool not in kinds):
        raise _bad_data(f"{key!r} is a {type(value).__name__}, not "
                        f"{' or '.join(k.__name__ for k in kinds)}")


def _dotted(text: str) -> bool:
    return all(part.isidentifier() for part in text.split("."))


def _locate(path: str, what: str):
    """(the workflow or world factory at `path` 'module:qualname', None) or (None, what is
    wrong). Imports the module and reads attributes; calls nothing."""
    module, colon, qualname = path.partition(":")
    if not colon or not _dotted(module) or not _dotted(qualname) or any(
            part.startswith("__") for part in qualname.split(".")):
        return None, (f"is not an import path 'module:qualname' of a top-level function or "
                      f"class (a lambda, a nested function or a dunder has none)")
    if module in ("__main__", "__mp_main__"):
        return None, ("is defined in __main__ (a notebook cell or the script being run), "
                      "which no other process can import")
    refused = module_refused(module)
    if refused:
        return None, refused
    try:
        found = importlib.import_module(module)
    except Exception as exc:   # ImportError, or whatever the module itself raised
        return None, f"cannot be imported: module {module!r} ({type(exc).__name__}: {exc})"
    if what == "workflow":
        found = current_definition(path)   # as the engine resolves a registered name
        if found is None:
            return None, f"is not a workflow function: module {module!r} has no def {qualname}"
        return found, None
    for part in qualname.split("."):
        found = getattr(found, part, None)
    if not isinstance(found, (type, types.FunctionType)) or (
            f"{found.__module__}:{found.__qualname__}" != path):
        return None, (f"is not a world factory: module {module!r} has no class or function "
                      f"{qualname} (found {type(found).__name__})")
    if not _written_in_python(found):
        return None, (f"is not a world factory: {qualname} is a class built into Python or "
                      f"compiled from C, not a class or function written in Python")
    return found, None


def module_refused(module: str) -> str | None:
    """Why a module named by data (a sweep config, a data form) is never imported, or None.

    Importing runs a module's top level, so data may name only a module where a workflow
    or a world can live: not the standard library (no durablelab workflow is there, and
    some of its modules act when imported: `antigravity` opens a browser, `idlelib.idle`
    starts IDLE) and not a ``__main__`` module (``pip.__main__`` runs pip)."""
    parts = module.split(".")
    if parts[0] in sys.stdlib_module_names or parts[0] in sys.builtin_module_names:
        return (f"names the standard library module {module!r}, where no durablelab "
                f"workflow or world lives")
    if "__main__" in parts:
        return f"names {module!r}, a program's entry point, which runs it when imported"
    return None


def _written_in_python(found) -> bool:
    """Whether a world factory is Python code (a `def`, or a `class` statement in a module
    of Python source): not a type built into the interpreter or an extension, whose call
    could do anything C does."""
    if isinstance(found, types.FunctionType):
        return True
    heap_type = bool(found.__flags__ & (1 << 9))     # Py_TPFLAGS_HEAPTYPE: made at run time
    source = getattr(sys.modules.get(found.__module__), "__file__", None) or ""
    compiled = source.endswith(tuple(importlib.machinery.EXTENSION_SUFFIXES))
    return heap_type and bool(source) and not compiled


def _find(path: str, what: str):
    found, problem = _locate(path, what)
    if problem:
        raise _bad_data(f"the {what} {path!r} {problem}",
                        f"the worker imports the {what} by that path, so define it at the top "
                        f"level of a module this worker can import (on its PYTHONPATH or "
                        f"installed)")
    return found


def _path_of(obj, what: str, caller: str) -> str:
    """`obj`'s import path, checked to find `obj` itself, or a SweepError saying why not."""
    if what == "world" and not isinstance(obj, (type, types.FunctionType)):
        raise SweepError(
            f"{caller}: the world {obj!r} is a {type(obj).__name__} instance; the workers "
            f"find the world by import path, and only a top-level class or function has "
            f"one. Give a class (a subclass can fix its arguments) or a function at the top "
            f"level of a module, e.g. def busy_shop(clock): return Shop(clock, rate=5).",
            argument=what)
    path = f"{obj.__module__}:{obj.__qualname__}"
    found, problem = _locate(path, what)
    if found is not obj:
        problem = problem or "finds another object (the name was defined again since)"
        raise SweepError(
            f"{caller}: the {what} {obj!r} cannot be found by the workers, which import it "
            f"as {path}, and {path} {problem}. Define it at the top level of a module the workers "
            f"can import (a file next to the notebook, or a package), not in a notebook cell "
            f"or inside a function.", argument=what)
    return path


def _named(values, argument: str, default: dict, convert) -> dict:
    if values is None:
        return default
    if not isinstance(values, dict) or not values:
        raise SweepError(f"sweep({argument}={values!r}): give a non-empty dict of names to "
                         f"values, e.g. {argument}={{'jitter': ...}}", argument=argument)
    out = {}
    for name, value in values.items():
        if not isinstance(name, str) or not name or "/" in name:
            raise SweepError(f"sweep({argument}): name {name!r} must be a non-empty string "
                             f"without '/' (run ids are 'policy/fault_plan/seed/input')",
                             argument=argument)
        out[name] = convert(value, f"sweep({argument}[{name!r}])")
    return out


def _policy(value, where: str) -> Overrides | None:
    if value is None:
        return None           # the policies the code passes
    if not isinstance(value, (RetryPolicy, dict)):
        raise SweepError(f"{where}: {value!r} is not a dl.RetryPolicy or a {{activity glob: "
                         f"RetryPolicy}} (None keeps the code's own policies)",
                         argument="policies")
    overrides = Overrides(value, where)
    for glob, policy in overrides.rules:
        if policy.max_attempts is None and policy.cap(1) == 0 and policy.max_interval == 0:
            raise SweepError(
                f"{where}: the policy for {glob!r} retries without limit and without waiting "
                f"(like tenacity's bare @retry). Under a virtual clock an attempt takes no "
                f"time, so a failing activity would retry at one instant forever and the "
                f"sweep's timeout would never come. Give it a wait, e.g. "
                f"dataclasses.replace(policy, initial=0.1, max_interval=0.1), or a limit "
                f"(max_attempts=...).", argument="policies")
    return overrides


def _plan(value, where: str) -> FaultPlan | None:
    if value is None or isinstance(value, FaultPlan):
        return value
    try:
        if isinstance(value, (list, tuple)):
            return FaultPlan(list(value))
        if isinstance(value, (str, Path, dict)):
            return FaultPlan.from_json(value)
    except (TypeError, ValueError) as exc:
        raise SweepError(f"{where}: {exc}", argument="fault_plans") from None
    raise SweepError(f"{where}: {value!r} is not a dl.FaultPlan, a list of rules, a plan's "
                     f"JSON or its dict form (None means no faults)", argument="fault_plans")


def _arrivals(arrivals, n: int) -> list[float] | None:
    """Each input's start instant, from a rate (runs per virtual second: input i starts at
    i / rate), a function ``index -> instant``, or a list of instants; checked to be finite,
    >= 0 and never earlier than the input before (arrivals do not go back in time)."""
    if arrivals is None:
        return None
    how = "arrivals"
    if isinstance(arrivals, bool) or isinstance(arrivals, str):
        instants = None
    elif isinstance(arrivals, numbers.Real):
        rate = float(arrivals)
        if not math.isfinite(rate) or rate <= 0:
            raise SweepError(f"sweep(arrivals={arrivals!r}): a rate is runs per virtual "
                             f"second, finite and > 0 (input i starts at i / rate)",
                             argument="arrivals")
        instants = [i / rate for i in range(n)]
    elif callable(arrivals):
        instants = []
        for i in range(n):
            instants.append(arrivals(i))
        how = "arrivals(index)"
    elif isinstance(arrivals, (list, tuple)):
        if len(arrivals) != n:
            raise SweepError(f"sweep(arrivals=[...]): {len(arrivals)} instants for {n} inputs; "
                             f"give one start instant per input", argument="arrivals")
        instants = list(arrivals)
    else:
        instants = None
    if instants is None:
        raise SweepError(f"sweep(arrivals={arrivals!r}): give a rate (runs per virtual "
                         f"second), a function index -> virtual start instant, or a list of "
                         f"instants, one per input", argument="arrivals")
    out, before = [], 0.0
    for i, t in enumerate(instants):
        if isinstance(t, bool) or not isinstance(t, numbers.Real) or not math.isfinite(t):
            raise SweepError(f"sweep(arrivals=...): {how} gave {t!r} for input {i}; a start "
                             f"is a finite number of virtual seconds", argument="arrivals")
        t = float(t)
        if t < before:
            raise SweepError(f"sweep(arrivals=...): {how} goes back in time at input {i}: "
                             f"{t:g}s, after {before:g}s for input {i - 1 if i else 0}"
                             f"{'' if i else ' (the clock starts at 0)'}. Inputs arrive in "
                             f"index order, each no earlier than the one before",
                             argument="arrivals")
        out.append(t)
        before = t
    return out


def _seeds(seeds) -> list[int]:
    if isinstance(seeds, int) and not isinstance(seeds, bool):
        raise SweepError(f"sweep(seeds={seeds!r}): give the seeds themselves, e.g. "
                         f"seeds=range({seeds})", argument="seeds")
    try:
        out = list(seeds)
    except TypeError:
        out = None
    if not out or any(isinstance(s, bool) or not isinstance(s, numbers.Integral) for s in out):
        raise SweepError(f"sweep(seeds={seeds!r}): give a non-empty range or list of ints",
                         argument="seeds")
    out = [int(s) for s in out]   # numpy's ints too: the store and the JSON keep plain ints
    wide = next((s for s in out if not -2 ** 63 <= s < 2 ** 63), None)
    if wide is not None:
        raise SweepError(f"sweep(seeds=...): seed {wide} is outside the 64-bit range the "
                         f"store keeps (-2**63 to 2**63 - 1); seeds only need to differ",
                         argument="seeds")
    if len(set(out)) != len(out):
        raise SweepError(f"sweep(seeds=...): seed {_first_repeat(out)} appears twice; each "
                         f"seed makes one run per input and cell", argument="seeds")
    return out


def _first_repeat(values):
    seen = set()
    for v in values:
        if v in seen:
            return v
        seen.add(v)


__all__ = ["Spec", "FORMAT", "VERSION"]
