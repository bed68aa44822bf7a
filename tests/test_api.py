"""The public surface: exported names, docstrings, the README, the CLI."""

import re
from pathlib import Path

import durablelab as dl

ROOT = Path(__file__).resolve().parent.parent


def test_public_names_are_pinned():
    assert sorted(dl.__all__) == sorted([
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
        "Handle", "Cancelled", "ChildFailed", "idempotency_key", "ObserverWarning", "tracing"])


def test_every_public_callable_has_a_docstring():
    missing = [name for name in dl.__all__
               if callable(getattr(dl, name)) and not (getattr(dl, name).__doc__ or "").strip()]
    assert missing == []
    for method in ("activity", "now", "random", "uuid", "sleep", "wait_signal", "patched",
                   "continue_as_new", "saga", "log"):
        assert getattr(dl.Context, method).__doc__, method
    for method in ("start", "signal", "run_until_idle", "advance", "run", "runs", "crash",
                   "close"):
        assert getattr(dl.Engine, method).__doc__, method


def test_readme_quick_start_runs_verbatim():
    text = (ROOT / "README.md").read_text()
    code = re.search(r"## Quick start\n\n```python\n(.*?)```", text, re.S).group(1)
    exec(compile(code, "README.md", "exec"), {})


def test_readme_commands_are_what_ci_runs():
    readme = (ROOT / "README.md").read_text()
    ci = (ROOT / ".ci" / "run").read_text()
    test_command = re.search(r"Run the tests.*?```bash\n(.*?)\n```", readme, re.S).group(1)
    assert test_command in ci
    assert "durablelab lab" in readme


def test_the_version_is_kept_in_one_place_and_matches_pyproject():
    import importlib
    export, version = (importlib.import_module(f"durablelab.{m}") for m in ("export", "version"))
    text = (ROOT / "pyproject.toml").read_text()
    assert f'version = "{version.__version__}"' in text
    assert dl.__version__ == export.__version__ == version.__version__


def test_no_module_imports_the_version_from_the_package_face():
    # The package face (durablelab/__init__.py) imports everything: a module that takes
    # the version from it runs back up the layers. version.py is where it lives.
    package = ROOT / "durablelab"
    found = [str(path.relative_to(ROOT)) for path in package.rglob("*.py")
             if path.name != "__init__.py" or path.parent != package
             if re.search(r"from (\.+|durablelab) import [^\n]*__version__",
                          path.read_text())]
    assert found == []
