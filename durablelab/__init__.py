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

from . import agents, exercises, faults, sim, versioning, viz
from .clock import VirtualClock, WallClock
from .context import Context, Saga
from .diagnose import Diagnosis, diagnose
from .breaker import CircuitBreaker
from .budget import Budget
from .engine import Engine, workflow
from .errors import (ActivityFailed, AgentConfigError, BudgetExceeded, CompensationFailed,
                     ConfigError, DeterminismGuardError, DuplicateRunError, DurableLabError,
                     ModelOutputError, NonDeterminismError, NonRetryable, PolicyError,
                     RateLimited, ReadOnlyEngineError, ReplayCheckError, RunFinishedError,
                     RunNotFoundError, RunTimedOut, SerializationError, StoreFormatError,
                     StoreLockedError, SweepError, Transient, UnknownWorkflowWarning, WorkflowError,
                     WorkflowRedefinedWarning)
from .faults import FaultPlan
from .retry import RetryPolicy, classify, next_delay
from .compare import compare
from .amplification import retry_amplification
from .counterfactual import counterfactual, failures_plan
from .crashes import CrashReport, explore_crashes
from . import matrix
from .matrix import FaultMatrix, fault_matrix
from .export import ExportFormatError, export, load
from .run import Run
from .structured import ask_structured, structured
from .backends.dbos_import import from_dbos
from .experiments import Experiment, sweep
from .presets import presets
from .versioning import ReplayReport, replay_check
from .temporal import TemporalHistoryError, TemporalRunEnded, decode_payloads, load_temporal
from .heartbeat import heartbeat, last_heartbeat
from .errors import HeartbeatError, HeartbeatIgnoredWarning

from .version import __version__  # noqa: E402 (kept in one place; see version.py)

__all__ = [
    "Engine", "Context", "Saga", "Run", "VirtualClock", "WallClock",
    "RetryPolicy", "classify", "next_delay", "CircuitBreaker", "Budget",
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
    "explore_crashes", "CrashReport", "counterfactual", "failures_plan", "fault_matrix",
    "FaultMatrix", "matrix", "retry_amplification",
    "ReadOnlyEngineError",
    "agents", "AgentConfigError",
    "sweep", "Experiment", "presets", "SweepError", "ConfigError", "exercises",
    "heartbeat", "last_heartbeat", "HeartbeatError", "HeartbeatIgnoredWarning",
    "versioning", "replay_check", "ReplayReport", "ReplayCheckError", "CompensationFailed",
]
