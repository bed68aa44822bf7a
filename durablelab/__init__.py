"""durablelab: learn durable execution by running it, breaking it, and watching it recover.

Workflow code is a plain deterministic function ``fn(ctx, input)``, run again from the top on
every wake-up. Activities (model calls, HTTP, writes, email) go through ``ctx.activity``:
their outcomes are recorded in a DuckDB history and handed back on replay, so a crash costs
a replay, not a repeated side effect.

    import durablelab as dl

    def greet(ctx, name):
        return ctx.activity("greet", lambda n: f"hello {n}", name)

    engine = dl.Engine()
    run_id = engine.start(greet, "ada", seed=7)
    engine.run_until_idle()
    engine.run(run_id).result          # 'hello ada'
"""

import sys
import types

# The core is imported here; the lab tools, importers, lessons' helpers and views load on
# first use (PEP 562 `__getattr__` below), so `import durablelab` costs the engine only.
from . import faults
from .breaker import CircuitBreaker
from .budget import Budget
from .clock import VirtualClock, WallClock
from .context import Context, Saga
from .handles import Handle
from .engine import Engine
from .errors import (ActivityFailed, AgentConfigError, BudgetExceeded, Cancelled, ChildFailed,
                     CompensationFailed,
                     ConfigError, DeterminismGuardError, DuplicateRunError, DurableLabError,
                     ExportFormatError, HeartbeatError, HeartbeatIgnoredWarning, ModelOutputError,
                     NonDeterminismError, NonRetryable, PolicyError, RateLimited,
                     ReadOnlyEngineError, ReplayCheckError, RunFinishedError, RunNotFoundError,
                     RunTimedOut, SerializationError, StoreFormatError, StoreLockedError,
                     SweepError, TemporalHistoryError, TemporalRunEnded, Transient,
                     UnknownWorkflowWarning, WorkflowError, WorkflowRedefinedWarning,
                     ObserverWarning)
from .faults import FaultPlan
from .heartbeat import heartbeat, idempotency_key, last_heartbeat
from .limits import AdaptiveThrottle, RetryQuota
from .registry import workflow
from .retry import RetryPolicy, classify, next_delay

#: sub-modules reached as ``dl.<name>``.
_MODULES = {"tracing": ".tracing", "agents": ".agents", "exercises": ".exercises", "sim": ".sim",
            "versioning": ".versioning", "viz": ".viz", "matrix": ".lab.matrix"}
#: name -> the module that defines it.
_LAZY = {
    "Run": ".run", "Diagnosis": ".diagnose", "diagnose": ".diagnose",
    "compare": ".compare", "retry_amplification": ".lab.amplification",
    "counterfactual": ".lab.counterfactual", "failures_plan": ".lab.counterfactual",
    "CrashReport": ".lab.crashes", "explore_crashes": ".lab.crashes",
    "FaultMatrix": ".lab.matrix", "fault_matrix": ".lab.matrix",
    "export": ".export", "load": ".export",
    "ask_structured": ".structured", "structured": ".structured",
    "from_dbos": ".importers.dbos", "from_langgraph": ".importers.langgraph",
    "Experiment": ".experiments", "sweep": ".experiments",
    "presets": ".presets", "ReplayReport": ".versioning", "replay_check": ".versioning",
    "decode_payloads": ".importers.temporal", "load_temporal": ".importers.temporal",
    "ops": ".ops", "Ops": ".ops",
}


def __getattr__(name: str):
    """Load a lab tool, importer or view the first time it is used (`_MODULES`, `_LAZY`)."""
    import importlib
    if name in _MODULES:
        value = importlib.import_module(_MODULES[name], __name__)
    elif name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name], __name__), name)
    else:
        raise AttributeError(f"module 'durablelab' has no attribute {name!r}")
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(_LAZY) | set(_MODULES))


class _Package(types.ModuleType):
    """Python binds a submodule to its package when it is first imported: `durablelab.export`
    would then hide the function `dl.export`. Where a public name shares its module's name,
    the package keeps the name's own value instead."""

    def __setattr__(self, name, value):
        if isinstance(value, types.ModuleType) and _LAZY.get(name) == f".{name}":
            value = getattr(value, name)
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package


from .version import __version__  # noqa: E402 (kept in one place; see version.py)

__all__ = [
    "Engine", "Context", "Saga", "Run", "VirtualClock", "WallClock",
    "RetryPolicy", "classify", "next_delay", "CircuitBreaker", "Budget",
    "RetryQuota", "AdaptiveThrottle",
    "Transient", "RateLimited", "NonRetryable", "ModelOutputError",
    "ActivityFailed", "NonDeterminismError", "WorkflowError", "DurableLabError",
    "DeterminismGuardError",
    "SerializationError", "RunNotFoundError", "RunFinishedError", "DuplicateRunError",
    "StoreLockedError", "StoreFormatError", "BudgetExceeded", "RunTimedOut",
    "FaultPlan", "faults", "viz", "sim", "structured", "ask_structured",
    "diagnose", "Diagnosis", "load_temporal", "decode_payloads", "TemporalHistoryError",
    "TemporalRunEnded", "export", "load", "compare", "ExportFormatError",
    "PolicyError",
    "workflow", "UnknownWorkflowWarning", "WorkflowRedefinedWarning", "from_dbos",
    "from_langgraph", "explore_crashes", "CrashReport", "counterfactual", "failures_plan",
    "fault_matrix", "FaultMatrix", "matrix", "retry_amplification",
    "ReadOnlyEngineError",
    "agents", "AgentConfigError",
    "sweep", "Experiment", "presets", "SweepError", "ConfigError", "exercises",
    "heartbeat", "last_heartbeat", "HeartbeatError", "HeartbeatIgnoredWarning",
    "versioning", "replay_check", "ReplayReport", "ReplayCheckError", "CompensationFailed",
    "ops", "Ops",
    "Handle", "Cancelled", "ChildFailed", "idempotency_key", "ObserverWarning", "tracing",
]
