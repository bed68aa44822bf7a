"""The public surface: exported names, docstrings, the README, the CLI."""

import re
import subprocess
import sys
from pathlib import Path

import durablelab as dl
from durablelab import cli

ROOT = Path(__file__).resolve().parent.parent


def test_public_names_are_pinned():
    assert sorted(dl.__all__) == sorted([
        "Engine", "Context", "Saga", "Run", "VirtualClock", "WallClock",
        "RetryPolicy", "classify", "next_delay", "CircuitBreaker", "Budget",
        "Transient", "RateLimited", "NonRetryable", "ModelOutputError",
        "ActivityFailed", "NonDeterminismError", "WorkflowError", "DurableLabError",
        "SerializationError", "RunNotFoundError", "RunFinishedError", "DuplicateRunError",
        "StoreLockedError", "StoreFormatError", "BudgetExceeded", "RunTimedOut",
        "FaultPlan", "faults", "viz", "sim", "structured", "ask_structured",
        "diagnose", "Diagnosis", "load_temporal", "decode_payloads", "TemporalHistoryError",
        "TemporalRunEnded", "export", "load", "compare", "ExportFormatError",
        "PolicyError",
        "workflow", "UnknownWorkflowWarning", "WorkflowRedefinedWarning", "from_dbos",
        "explore_crashes", "CrashReport", "counterfactual", "fault_matrix", "FaultMatrix",
        "matrix"])


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


def test_every_cli_command_has_help():
    commands = cli.parser()._subparsers._group_actions[0].choices
    assert set(commands) == {"lab", "demo", "runs", "show", "timeline", "export"}
    for name, sub in commands.items():
        assert sub.format_help()
    for name in commands:
        assert f"durablelab {name}" in cli.__doc__


def test_cli_demo_runs_end_to_end():
    out = subprocess.run([sys.executable, "-m", "durablelab", "demo"], capture_output=True,
                         text=True, timeout=120, check=True).stdout
    assert "after approval: completed" in out and "duplicates: 0" in out


def test_cli_runs_and_show_read_a_file(db_path, capsys):
    def wf(ctx, _):
        return ctx.activity("hello", lambda: "hi")
    engine = dl.Engine(db_path)
    run_id = engine.start(wf, None, run_id="r-cli")
    engine.run_until_idle()
    engine.close()
    assert cli.main(["runs", db_path]) == 0
    assert "r-cli" in capsys.readouterr().out
    assert cli.main(["show", "r-cli", "--db", db_path]) == 0
    out = capsys.readouterr().out
    assert "completed" in out and "hello" in out
    image = db_path + ".png"
    assert cli.main(["timeline", "r-cli", "--db", db_path, "-o", image]) == 0
    with open(image, "rb") as f:
        assert f.read(8) == b"\x89PNG\r\n\x1a\n"


def test_cli_exports_and_reads_an_export(db_path, tmp_path, capsys):
    def wf(ctx, _):
        return ctx.activity("hello", lambda: "hi")
    engine = dl.Engine(db_path)
    engine.start(wf, None, run_id="r-exp")
    engine.run_until_idle()
    engine.close()
    for suffix in (".jsonl", ".parquet"):
        out = str(tmp_path / f"runs{suffix}")
        assert cli.main(["export", db_path, "-o", out]) == 0
        assert cli.main(["runs", out]) == 0
        assert "r-exp" in capsys.readouterr().out
        assert cli.main(["show", "r-exp", "--db", out]) == 0
        assert "hello" in capsys.readouterr().out


def test_cli_lab_passes_unknown_options_to_jupyter(monkeypatch):
    seen = []
    monkeypatch.setattr(cli, "_lab", lambda args: seen.append(args.extra) or 0)
    assert cli.main(["lab", "--no-browser", "--port", "8899"]) == 0
    assert seen == [["--no-browser", "--port", "8899"]]


def test_cli_other_commands_refuse_unknown_options(db_path):
    import pytest
    with pytest.raises(SystemExit) as info:
        cli.main(["runs", db_path, "--bogus"])
    assert info.value.code == 2
