"""Every exception durablelab raises, and the words of their messages, in one package.

Read in this order: `classes` (the hierarchy: what can go wrong, and the facts each error
carries), `checks` (arguments refused where they are given), `messages` (how a run's
errors are worded: what, where, recorded versus requested, the fix), `stores` (files
durablelab will not read, and reading without writing). Every name is importable from
`durablelab.errors` itself.
"""

from .classes import (  # noqa: F401
    DurableLabError, ActivityError, Transient, RateLimited, NonRetryable, ModelOutputError,
    ActivityFailed, CompensationFailed, ChildFailed, Cancelled, NonDeterminismError,
    WorkflowError, DeterminismGuardError, BudgetExceeded, RunTimedOut, SerializationError,
    HeartbeatError, RunNotFoundError, RunFinishedError, DuplicateRunError, StoreLockedError,
    StoreFormatError, PolicyError, UsageError, BadValue, BadType, EngineClosedError,
    ExportFormatError, TemporalHistoryError, TemporalRunEnded, RunnerOpenError,
    UnknownWorkflowError, DBOSReadError, LangGraphReadError, DatasetError,
    DurableLabWarning, UnknownWorkflowWarning, ObserverWarning, WorkflowRedefinedWarning,
    UnmatchedFaultRuleWarning, GuardOffWarning, HeartbeatIgnoredWarning, AgentConfigError,
    FrameworkError, RetryAmplificationWarning, SweepError, ConfigError, ReplayCheckError,
    StoreOpenError, DamagedRunError, ReadOnlyEngineError, CommandError, ForeignStoreError,
    error_from_json)
from .checks import (  # noqa: F401
    policy_error, bad_value, bad_type, limit_error, plan_error, not_a_workflow,
    check_seconds, check_probability, check_int, check_seed, check_text, check_json_keys,
    check_later, not_a_clock, not_a_path, not_a_policy, not_callable)
from .messages import (  # noqa: F401
    dataset_missing, engine_closed, unknown_workflows, workflow_redefined,
    framework_missing, framework_version, SHOWN_ARGS, divergence_table, non_determinism,
    activity_failed, child_failed, cancelled, compensation_failed, workflow_error,
    determinism_guard)
from .stores import (  # noqa: F401
    store_open_error, damaged_run, history_gap, read_only_engine, read_only_needs_path,
    no_such_source, ops_now_error, read_only_beside_writer, command_error, READABLE,
    store_unreadable, store_not_readable_as_is, foreign_store, store_tampered)
