"""The determinism guard: workflow code that reads the clock, randomness or the world fails
at the call, instead of diverging silently on some later replay.

Workflow code runs again from the top on every wake-up, so it must ask for the same things
in the same order every time. A call such as ``time.time()`` or ``random.random()`` in
workflow code answers differently on each execution; sooner or later a branch or an argument
built from it differs from what history recorded. Replay then stops with a
`NonDeterminismError`, often days later and far from the cause, or, worse, the code takes a
branch whose steps happen to match and nobody notices. The guard catches the cause instead:
while workflow code runs, these calls raise `DeterminismGuardError` naming the call, the
workflow line and what to use instead.

=============================================  =============================================
call                                           use instead
=============================================  =============================================
``time.time``, ``time.time_ns``,               ``ctx.now()``
``time.localtime``, ``time.strftime``
``datetime.now``/``utcnow``/``today``,         ``ctx.now()``
``date.today``
the ``random`` module's functions              ``ctx.random()``
``uuid.uuid1``, ``uuid.uuid4``                 ``ctx.uuid()``
``secrets``                                    ``ctx.random()`` or an activity
``os.environ``, ``os.getenv``                  the workflow's input, or an activity
``open()``                                     an activity
=============================================  =============================================

*Workflow code* is the workflow function and the helpers it calls: any frame whose module
(its globals) is the workflow function's module. That is decided by the frames, not by file
paths, so a workflow installed in site-packages is guarded like one in a notebook. A call is
stopped only when workflow code makes it *directly*; when a library frame stands between
(``logging`` stamping a record with ``time.time``, ``pathlib`` opening a file) the library is
acting on the workflow's behalf and the call goes through. A helper in *another* module
counts as a library. `ctx` methods switch the guard off while they run, so activities
(which run inside ``ctx.activity``) and durablelab itself are never stopped.

How: a ``sys.setprofile`` hook is installed only while workflow code runs, and removed
inside every `ctx` method, so the engine's own work pays nothing for it (from Python 3.12,
where installing a hook costs microseconds, it stays in and returns at once inside `ctx`
methods). CPython removes a hook that raises, so the guard remembers the trip: the run fails
with the guard's error even if the workflow catches it and carries on (the next `ctx` call
raises it again). Under a
profiler (``cProfile``, ``%prun``) the hook slot is taken: the guard then stays off and says
so once with a `GuardOffWarning`, rather than fight the profiler. `Engine(guard=False)`
turns it off for good, which is how the lesson shows the silent divergence it prevents.

What no guard sees: a clock read from C code (an extension module, or a built-in such as
``collections.defaultdict(time.time)`` calling it), ``pandas.Timestamp.now()``, a pydantic
``Field(default_factory=time.time)`` (called from pydantic's compiled core; a dataclass's
``default_factory`` is stopped, as the ``__init__`` a dataclass generates belongs to the
workflow's module), a helper in another module. Those lead to a `NonDeterminismError` on a
later replay instead; notebooks/09_non_determinism.ipynb shows each one.
"""

from __future__ import annotations

import datetime as _datetime
import functools
import os
import random
import secrets
import sys
import time
import types
import uuid
import warnings
from typing import Any, Callable

from .errors import DeterminismGuardError, GuardOffWarning, determinism_guard

_CLOCK = "ctx.now() (the engine's clock: recorded once, replayed after)"
_RANDOM = "ctx.random() (drawn from the run's seed: recorded once, replayed after)"
_UUID = "ctx.uuid() (drawn from the run's seed: recorded once, replayed after)"
_SECRETS = ("ctx.random() for a draw, or an activity for a secret (ctx.activity records "
            "what it returns)")
_ENVIRON = ("the workflow's input (pass the setting to engine.start), or an activity that "
            "reads it (ctx.activity records what it saw)")
_OPEN = ("an activity that reads the file (ctx.activity(\"read_config\", read_config, "
         "path)), so what was read is recorded and replayed")


def _c_calls() -> dict[int, tuple[str, str]]:
    """C functions, by id, that the guard stops: id(function) -> (call, replacement)."""
    table = {}
    for name in ("time", "time_ns", "localtime", "strftime"):
        table[getattr(time, name)] = (f"time.{name}()", _CLOCK)
    table[open] = ("open()", _OPEN)
    for name in random.__all__:
        fn = getattr(random, name)
        if not isinstance(fn, type) and callable(fn):
            table[fn] = (f"random.{name}()", _RANDOM)
    for name in ("token_bytes", "token_hex", "token_urlsafe", "choice", "randbelow",
                 "randbits"):
        table[getattr(secrets, name)] = (f"secrets.{name}()", _SECRETS)
    return table


# Objects stay alive as module attributes, so their ids are never reused by others.
_C_TABLE = _c_calls()
C_CALLS = {id(fn): entry for fn, entry in _C_TABLE.items()}
# datetime.now is a class method of a C type: every attribute access makes a new bound
# method, so these are recognised by the class they are bound to and their name.
DATETIME = {_datetime.datetime: {"now", "utcnow", "today"}, _datetime.date: {"today"}}


def _py_calls() -> dict:
    """Python functions the guard stops, by code object: code -> ((call, replacement,
    self), ...). `self`, when not None, is the object the call must be bound to (the random
    module's hidden instance, secrets' SystemRandom, os.environ): a seeded random.Random(7)
    of the workflow's own is deterministic and goes through."""
    table: dict = {}

    def add(fn, call, replacement, bound=None):
        fn = getattr(fn, "__func__", fn)
        code = getattr(fn, "__code__", None)
        if code is not None:
            entries = table.setdefault(code, [])
            if all(entry[2] is not bound for entry in entries):
                entries.append((call, replacement, bound))

    for name in random.__all__:
        fn = getattr(random, name)
        if not isinstance(fn, type) and callable(fn):
            add(fn, f"random.{name}()", _RANDOM, getattr(fn, "__self__", None))
    for name in ("token_bytes", "token_hex", "token_urlsafe", "choice", "randbelow",
                 "randbits"):
        fn = getattr(secrets, name)
        add(fn, f"secrets.{name}()", _SECRETS, getattr(fn, "__self__", None))
    add(uuid.uuid1, "uuid.uuid1()", _UUID)
    add(uuid.uuid4, "uuid.uuid4()", _UUID)
    add(os.getenv, "os.getenv()", _ENVIRON)
    # os.environ[...] runs _Environ.__getitem__; .get, `in`, iteration and the rest run a
    # method of _Environ or of a Mapping base class, bound to os.environ.
    for cls in type(os.environ).__mro__:
        for name, fn in vars(cls).items():
            if callable(fn) and name not in ("__init__", "__repr__", "__class_getitem__",
                                             "__subclasshook__", "__init_subclass__"):
                add(fn, "os.environ" if name.startswith("__") else f"os.environ.{name}()",
                    _ENVIRON, os.environ)
    return table


# By id: hashing a code object hashes its bytecode and constants (about 1 us), and the hook
# looks up every Python call. The functions keep their code objects (and so the ids) alive.
_PY_TABLE = _py_calls()
PY_CALLS = {id(code): tuple(entries) for code, entries in _PY_TABLE.items()}


_MONITORING = getattr(sys, "monitoring", None)   # Python 3.12+: cProfile lives there


def _profiler_active() -> bool:
    if sys.getprofile() is not None:
        return True
    monitoring = _MONITORING
    return monitoring is not None and monitoring.get_tool(monitoring.PROFILER_ID) is not None


class Guard:
    """The determinism guard of one engine. `call` runs workflow code under it; `context`
    is the Context class whose methods switch it off while they run."""

    def __init__(self, context_class: type):
        self.context = guarded_context(context_class)
        self.warned = False

    def call(self, fn: Callable, ctx, input: Any) -> Any:
        """Run ``fn(ctx, input)`` with the guard on; raise its error if it tripped, whatever
        the code did with it."""
        if _profiler_active():
            if not self.warned:
                self.warned = True
                warnings.warn(GuardOffWarning(
                    "The determinism guard is off while a profiler (cProfile, %prun) is "
                    "running: both need the interpreter's profile hook, and the profiler "
                    "keeps it. Workflow code that reads the clock, randomness or the "
                    "environment is not stopped in this session."), stacklevel=4)
            return fn(ctx, input)
        trip = ctx._trip = []
        target = _workflow_globals(fn)
        hook = _hook(target, ctx.run_id, ctx._state.workflow, trip,
                     None if SWAP_HOOK else ctx)
        ctx._hook = hook
        sys.setprofile(hook)
        try:
            result = fn(ctx, input)
        except Exception:
            if trip:
                raise trip[0] from None
            raise
        finally:
            sys.setprofile(None)
        if trip:
            raise trip[0]
        return result


def _workflow_globals(fn: Callable) -> dict | None:
    """The globals of the workflow's module: frames running there are workflow code."""
    target = getattr(_unwrap(fn), "__globals__", None)
    if target is None:
        module = sys.modules.get(getattr(fn, "__module__", None) or "")
        target = getattr(module, "__dict__", None)
    return target


def _unwrap(fn):
    if type(fn) is types.FunctionType and "__wrapped__" not in fn.__dict__:
        return fn   # the common case, without the cost of a failed attribute lookup
    while hasattr(fn, "__wrapped__"):
        fn = fn.__wrapped__
    return fn


#: Python 3.11 swaps the hook out inside ctx methods (sys.setprofile costs ~0.1 us there).
#: From 3.12 sys.setprofile re-instruments the interpreter (~5 us a call), so the hook stays
#: in and returns at once while a ctx method runs (it checks the context's flag).
SWAP_HOOK = sys.version_info < (3, 12)


def _hook(target: dict | None, run_id: str, workflow: str, trip: list, ctx=None):
    """The profile hook for one wake-up. It runs on every call and return while workflow
    code runs, so it does as little as it can before it knows a call matters: a C call is
    looked at only when workflow code made it, a Python call only when it is a guarded
    function. With `ctx` (Python 3.12+), nothing is looked at while a ctx method runs."""
    c_calls, py_calls, dt = C_CALLS, PY_CALLS, DATETIME

    def stop(entry, frame):
        error = determinism_guard(run_id, workflow, entry[0], entry[1],
                                  f"{frame.f_code.co_filename}:{frame.f_lineno}")
        trip.append(error)
        raise error

    def hook(frame, event, arg):
        if ctx is not None and ctx._paused:
            return
        if event == "c_call":
            if frame.f_globals is not target:
                return
            entry = c_calls.get(id(arg))
            if entry is None:
                owner = getattr(arg, "__self__", None)
                names = dt.get(owner) if type(owner) is type else None
                if names is None or arg.__name__ not in names:
                    return
                entry = (f"{arg.__self__.__name__}.{arg.__name__}()", _CLOCK)
            stop(entry, frame)
        elif event == "call":
            entries = py_calls.get(id(frame.f_code))
            if entries is None:
                return
            caller = frame.f_back
            if caller is None or caller.f_globals is not target:
                return
            for entry in entries:
                if entry[2] is None or frame.f_locals.get("self") is entry[2]:
                    stop(entry, caller)

    return hook


def guarded_context(context_class: type) -> type:
    """A subclass of `context_class` whose public methods switch the guard off while they
    run (activities run inside ``ctx.activity``, and the engine's work is not workflow
    code), and raise the guard's error first if it already tripped: workflow code that
    caught it must not go on recording."""
    methods = {}
    for name, attr in vars(context_class).items():
        if not name.startswith("_") and callable(attr) and not isinstance(attr, type):
            methods[name] = _pausing(attr)
    return type(context_class.__name__, (context_class,),
                {"__module__": context_class.__module__, "__doc__": context_class.__doc__,
                 "_caller": context_class._caller + 1, "_hook": None, "_trip": (),
                 "_paused": False,
                 "__qualname__": context_class.__qualname__, **methods})


def _pausing(method: Callable) -> Callable:
    setprofile, swap = sys.setprofile, SWAP_HOOK

    @functools.wraps(method)
    def paused(self, *args, **kwargs):
        hook = self._hook
        if hook is None or self._paused:    # the guard is off, or already paused
            return method(self, *args, **kwargs)
        if self._trip:
            raise self._trip[0]
        self._paused = True
        if swap:
            setprofile(None)
        try:
            return method(self, *args, **kwargs)
        finally:
            self._paused = False
            if swap:
                setprofile(hook)

    return paused


def workflow_code(ctx, code: Callable[[], Any]) -> Any:
    """Run `code` (workflow code a ctx method calls back, as `ctx.retry` runs its scope)
    under the guard again: the method paused it, and what it calls back is the workflow's."""
    hook = getattr(ctx, "_hook", None)
    if hook is None or not ctx._paused:
        return code()
    ctx._paused = False
    if SWAP_HOOK:
        sys.setprofile(hook)
    try:
        return code()
    finally:
        if SWAP_HOOK:
            sys.setprofile(None)
        ctx._paused = True


__all__ = ["Guard", "GuardOffWarning", "DeterminismGuardError", "guarded_context",
           "workflow_code"]
