"""The `durablelab` command: reading never writes, every error is one line that names the
file and the fix (exit 1, or 2 for usage), never a traceback, and the demo leaves a store
the other commands read.

The commands a learner types run as real processes here (their exit status and stderr are
what is asserted); the long list of bad invocations goes through `cli.main`, which is what
`python -m durablelab` calls and returns as its exit status.
"""

from __future__ import annotations

import hashlib
import json
import os
import pickle
import re
import shlex
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest

import durablelab as dl
from durablelab import cli, curriculum
from durablelab.export import file_kind

ROOT = Path(__file__).resolve().parent.parent
ENV = {**os.environ, "PYTHONPATH": str(ROOT), "TQDM_DISABLE": "1"}


def durablelab(*args, cwd=None, check=None, timeout=120) -> subprocess.CompletedProcess:
    """`durablelab ARGS` as a learner runs it: a real process, its exit status and output."""
    done = subprocess.run([sys.executable, "-m", "durablelab", *map(str, args)], cwd=cwd,
                          env=ENV, capture_output=True, text=True, timeout=timeout)
    if check is not None:
        assert done.returncode == check, (done.returncode, done.stdout, done.stderr)
    return done


def digest(path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def one_line_error(text: str) -> str:
    """The error a command printed: exactly one line, starting 'durablelab: '."""
    assert "Traceback" not in text, text
    lines = text.splitlines()
    assert len(lines) == 1 and lines[0].startswith("durablelab: "), text
    return lines[0]


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    """`durablelab demo --db demo.duckdb`, once: the folder, the store and what it printed."""
    folder = tmp_path_factory.mktemp("demo")
    done = durablelab("demo", "--db", "demo.duckdb", cwd=folder, check=0)
    return folder, folder / "demo.duckdb", done.stdout


# --- the demo and the commands it prints --------------------------------------------------


def test_demo_survives_429_broken_answer_and_crash_without_a_duplicate(demo):
    _, store, out = demo
    assert "run 'demo' in demo.duckdb" in out
    assert "the run is completed" in out
    assert "1 vendor(s) created, 0 duplicate(s)" in out
    outcomes = re.findall(r"^\s+2\s+extract_fields\s+\d\s+\S+\s+(\w+)", out, re.M)
    assert outcomes == ["rate_limited", "malformed", "ok"]
    assert re.search(r"create_vendor\s+1\s+\S+\s+crashed", out)
    assert file_kind(store) == "duckdb"


def test_commands_the_demo_prints_read_its_store_and_change_nothing(demo):
    folder, store, out = demo
    commands = [shlex.split(line.strip())[1:] for line in out.splitlines()
                if line.startswith("  durablelab ")]
    assert [c[0] for c in commands] == ["runs", "show", "timeline", "export"]
    before = digest(store)
    files = sorted(p.name for p in folder.iterdir())
    results = {c[0]: durablelab(*c, cwd=folder, check=0) for c in commands}
    assert digest(store) == before                       # not a byte changed
    assert sorted(p.name for p in folder.iterdir()) == sorted(files + ["demo.png", "demo.jsonl"])
    assert "demo" in results["runs"].stdout and "completed" in results["runs"].stdout
    assert "history:" in results["show"].stdout and "create_vendor" in results["show"].stdout
    assert (folder / "demo.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert [r.run_id for r in dl.load(folder / "demo.jsonl")] == ["demo"]
    for done in results.values():
        assert done.stderr == ""


def test_demo_again_adds_a_run_to_its_store(tmp_path, capsys):
    db = str(tmp_path / "d.duckdb")
    assert cli.main(["demo", "--db", db]) == 0
    assert cli.main(["demo", "--db", db]) == 0
    assert "run 'demo-2'" in capsys.readouterr().out
    with dl.Engine(db, read_only=True) as engine:
        assert list(engine.runs()["run_id"]) == ["demo", "demo-2"]
        assert list(engine.runs()["status"]) == ["completed", "completed"]


# --- reading never writes -------------------------------------------------------------------


def wait_for_approval(ctx, _):
    ctx.activity("ask", lambda: "sent")
    return ctx.wait_signal("approval")


@pytest.fixture
def waiting_store(tmp_path):
    """A store whose one run waits for a signal: an engine closing on it would save a clock."""
    db = tmp_path / "waiting.duckdb"
    engine = dl.Engine(db)
    engine.start(wait_for_approval, None, run_id="w-1")
    engine.run_until_idle()
    engine.advance(500)
    engine.close()
    return db


def test_reading_commands_leave_the_store_byte_for_byte(waiting_store, tmp_path, capsys):
    before = digest(waiting_store)
    clock = duckdb.connect(str(waiting_store), read_only=True)
    saved = clock.execute("SELECT value FROM meta WHERE key = 'clock'").fetchall()
    clock.close()
    db = str(waiting_store)
    assert cli.main(["runs", db]) == 0
    assert cli.main(["show", "w-1", "--db", db]) == 0
    assert cli.main(["timeline", "w-1", "--db", db, "-o", str(tmp_path / "w.png")]) == 0
    assert cli.main(["export", db, "-o", str(tmp_path / "w.parquet")]) == 0
    assert "w-1" in capsys.readouterr().out
    assert digest(waiting_store) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["w.parquet", "w.png", "waiting.duckdb"]
    engine = dl.Engine(waiting_store, workflows=[wait_for_approval])
    try:
        assert engine.clock.now() == float(saved[0][0]) == 500.0
        engine.run_until_idle()
        assert engine.run("w-1").status == "waiting"
    finally:
        engine.close()


def test_read_only_engine_refuses_every_call_that_records(waiting_store):
    before = digest(waiting_store)
    engine = dl.Engine(waiting_store, read_only=True)
    assert engine.run("w-1").history["name"].tolist()[:1] == ["ask"]
    for call, args in (("start", (wait_for_approval, None)), ("signal", ("w-1", "approval")),
                       ("advance", (10,)), ("run_until_idle", ()), ("crash", ())):
        with pytest.raises(dl.ReadOnlyEngineError, match=rf"cannot {call}\(\)") as info:
            getattr(engine, call)(*args)
        assert isinstance(info.value, ValueError) and info.value.path == str(waiting_store)
    engine.close()
    assert digest(waiting_store) == before


def test_read_only_engine_needs_an_existing_store(tmp_path):
    with pytest.raises(dl.ReadOnlyEngineError, match="needs the path"):
        dl.Engine(read_only=True)
    with pytest.raises(dl.StoreFormatError, match="no such file"):
        dl.Engine(tmp_path / "missing.duckdb", read_only=True)
    assert not (tmp_path / "missing.duckdb").exists()        # and it made none
    (tmp_path / "notes.txt").write_text("hello\n")
    with pytest.raises(dl.StoreFormatError, match="not a DuckDB database file"):
        dl.Engine(tmp_path / "notes.txt", read_only=True)
    duckdb.connect(str(tmp_path / "other.duckdb")).close()
    with pytest.raises(dl.StoreFormatError, match="not a durablelab store"):
        dl.Engine(tmp_path / "other.duckdb", read_only=True)


# --- every error on one line --------------------------------------------------------------


@pytest.fixture(scope="module")
def files(tmp_path_factory, demo):
    """Every kind of thing a learner may hand a command, in one folder."""
    folder = tmp_path_factory.mktemp("files")
    _, store, _ = demo
    data = store.read_bytes()
    (folder / "store.duckdb").write_bytes(data)
    (folder / "cut.duckdb").write_bytes(data[:len(data) // 3])
    (folder / "empty.duckdb").write_bytes(b"")
    (folder / "notes.txt").write_text("hello, this is text\n")
    (folder / "noise.bin").write_bytes(bytes(range(256)) * 4)
    (folder / "runs.pkl").write_bytes(pickle.dumps({"run": 1}))
    (folder / "a-folder").mkdir()
    other = duckdb.connect(str(folder / "other.duckdb"))
    other.execute("CREATE TABLE t (x INTEGER)")
    other.close()
    with dl.Engine(folder / "store.duckdb", read_only=True) as engine:
        dl.export(engine, folder / "runs.jsonl")
        dl.export(engine, folder / "runs.parquet")
    text = (folder / "runs.jsonl").read_text()
    (folder / "cut.jsonl").write_text(text[:len(text) // 2])
    (folder / "cut.parquet").write_bytes((folder / "runs.parquet").read_bytes()[:2000])
    (folder / "not-export.jsonl").write_text('{"hello": 1}\n')
    return folder


# (argv, exit status, words the one-line error must hold); {f} is the folder of `files`.
BAD = [
    (["runs", "{f}/missing.duckdb"], 1, "no such file"),
    (["runs", "{f}/no-folder/x.duckdb"], 1, "no folder"),
    (["runs", "{f}/a-folder"], 1, "this is a folder"),
    (["runs", "{f}/notes.txt"], 1, "neither a DuckDB store nor a durablelab export"),
    (["runs", "{f}/noise.bin"], 1, "neither a DuckDB store nor a durablelab export"),
    (["runs", "{f}/empty.duckdb"], 1, "the file is empty"),
    (["runs", "{f}/cut.duckdb"], 1, "damaged"),
    (["runs", "{f}/other.duckdb"], 1, "not a durablelab store"),
    (["runs", "{f}/runs.pkl"], 1, "never unpickles"),
    (["runs", "{f}/cut.jsonl"], 1, "truncated"),
    (["runs", "{f}/cut.parquet"], 1, "not a readable Parquet file"),
    (["runs", "{f}/not-export.jsonl"], 1, "not a durablelab export"),
    (["show", "nope", "--db", "{f}/store.duckdb"], 1,
     "no run 'nope' here. It holds 1 run(s): 'demo'"),
    (["show", "nope", "--db", "{f}/runs.jsonl"], 1, "no run 'nope' here"),
    (["show", "nope", "--db", "{f}/runs.parquet"], 1, "no run 'nope' here"),
    (["show", "demo", "--db", "{f}/a-folder"], 1, "this is a folder"),
    (["timeline", "nope", "--db", "{f}/store.duckdb", "-o", "{f}/t.png"], 1, "no run 'nope'"),
    (["timeline", "demo", "--db", "{f}/store.duckdb", "-o", "{f}/no-folder/t.png"], 1,
     "does not exist"),
    (["timeline", "demo", "--db", "{f}/store.duckdb", "-o", "{f}/a-folder"], 1, "is a folder"),
    (["export", "{f}/store.duckdb", "-o", "{f}/no-folder/x.jsonl"], 1, "does not exist"),
    (["export", "{f}/store.duckdb", "-o", "{f}/x.jsonl", "--run", "nope"], 1, "no run 'nope'"),
    (["export", "{f}/a-folder", "-o", "{f}/x.jsonl"], 1, "this is a folder"),
    (["export", "{f}/notes.txt", "-o", "{f}/x.jsonl"], 1, "neither a DuckDB store"),
    (["demo", "--db", "{f}/notes.txt"], 1, "not a DuckDB store, and the demo writes one"),
    (["demo", "--db", "{f}/a-folder"], 1, "this is a folder"),
    (["demo", "--db", "{f}/no-folder/d.duckdb"], 1, "does not exist"),
    (["demo", "--db", "{f}/other.duckdb"], 1, "not a durablelab store"),
    (["lab", "--notebooks", "{f}/no-folder"], 1, "no such folder"),
    ([], 2, "choose a command"),
    (["bogus"], 2, "invalid choice: 'bogus'"),
    (["runs"], 2, "required: DB"),
    (["show", "demo"], 2, "required: --db"),
    (["show", "--db", "{f}/store.duckdb"], 2, "required: RUN"),
    (["show", "demo", "--db"], 2, "expected one argument"),
    (["runs", "{f}/store.duckdb", "--frobnicate"], 2, "unrecognized arguments: --frobnicate"),
    (["timeline", "demo", "--db", "{f}/store.duckdb", "-o", "{f}/t.xyz"], 2, "use .png or .svg"),
    (["timeline", "demo", "--db", "{f}/store.duckdb", "-o", "{f}/t.png", "--dpi", "abc"], 2,
     "invalid int value"),
    (["timeline", "demo", "--db", "{f}/store.duckdb", "-o", "{f}/t.png", "--dpi", "0"], 2,
     "from 10 to 1200"),
    (["export", "{f}/store.duckdb", "-o", "{f}/x.csv"], 2, "use .jsonl or .parquet"),
    (["export", "{f}/store.duckdb"], 2, "required: -o/--output"),
]


@pytest.mark.parametrize("argv, status, words", BAD, ids=[" ".join(b[0]) or "(none)" for b in BAD])
def test_bad_invocation_is_one_line_naming_the_file_and_the_fix(files, capsys, argv, status,
                                                                words):
    before = {p.name: digest(p) for p in files.iterdir() if p.is_file()}
    argv = [a.format(f=files) for a in argv]
    assert cli.main(argv) == status
    out, err = capsys.readouterr()
    line = one_line_error(err)
    assert words in line
    assert out == ""
    paths = [a for a in argv if a.startswith(str(files))]
    if status == 1:
        assert any(p in line for p in paths)             # the file it is about
        assert re.search(r"\. [A-Z`]", line)             # ... then the fix, as a sentence
    else:
        assert "--help" in line or "use ." in line or "from 10" in line
    assert {p.name: digest(p) for p in files.iterdir() if p.is_file()} == before


def test_real_process_exits_1_for_a_failure_and_2_for_usage(files):
    failed = durablelab("runs", files / "notes.txt")
    assert failed.returncode == 1 and failed.stdout == ""
    assert str(files / "notes.txt") in one_line_error(failed.stderr)
    usage = durablelab("show", "demo")
    assert usage.returncode == 2 and "required: --db" in one_line_error(usage.stderr)


def test_store_held_by_another_process_names_it_and_the_way_out(tmp_path, capsys):
    db = tmp_path / "held.duckdb"
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys, time, durablelab as dl; e = dl.Engine(sys.argv[1]); "
         "print('open', flush=True); time.sleep(60)", str(db)],
        env=ENV, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "open"
        assert cli.main(["runs", str(db)]) == 1
        line = one_line_error(capsys.readouterr().err)
        assert f"process {holder.pid} holds this store open" in line
        assert str(db) in line and "engine.close()" in line and "dl.export" in line
        assert holder.poll() is None
    finally:
        holder.kill()
        holder.wait()


def test_show_into_a_pipe_closed_early_ends_quietly(tmp_path):
    def many_steps(ctx, n):
        return sum(ctx.activity(f"step-{i}", lambda i: i, i) for i in range(n))
    db = tmp_path / "long.duckdb"
    engine = dl.Engine(db, durability="batch")
    engine.start(many_steps, 1500, run_id="long")
    engine.run_until_idle()
    engine.close()
    show = subprocess.Popen([sys.executable, "-m", "durablelab", "show", "long", "--db", str(db)],
                            env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert show.stdout.readline().startswith(b"Run('long'")
    show.stdout.close()                                  # `| head -1` has read enough
    assert show.wait(timeout=60) == 141
    assert show.stderr.read() == b""


# --- load, help, lab ------------------------------------------------------------------------


def test_load_of_a_duckdb_store_says_it_is_one_and_how_to_open_it(files):
    with pytest.raises(dl.ExportFormatError) as info:
        dl.load(files / "store.duckdb")
    assert "this is a DuckDB store" in str(info.value)
    assert "read_only=True" in str(info.value) and "durablelab export" in str(info.value)
    with pytest.raises(dl.ExportFormatError, match="this is a directory"):
        dl.load(files / "a-folder")


def test_file_kind_reads_bytes_not_names(files, tmp_path):
    (tmp_path / "store.jsonl").write_bytes((files / "store.duckdb").read_bytes()[:4096])
    (tmp_path / "export.duckdb").write_bytes((files / "runs.parquet").read_bytes())
    assert file_kind(tmp_path / "store.jsonl") == "duckdb"
    assert file_kind(tmp_path / "export.duckdb") == "parquet"
    assert [file_kind(files / n) for n in ("runs.jsonl", "runs.pkl", "empty.duckdb", "a-folder",
                                           "missing")] == ["text", "pickle", "empty",
                                                           "directory", "missing"]


def test_every_command_has_help_and_a_readme_line(capsys):
    readme = (ROOT / "README.md").read_text()
    top = durablelab("--help", check=0).stdout
    cli.parser()
    assert set(cli.COMMANDS) >= {"lab", "lessons", "demo", "runs", "show", "timeline", "export"}
    for name in cli.COMMANDS:
        assert name in top
        with pytest.raises(SystemExit) as info:
            cli.main([name, "--help"])
        assert info.value.code == 0
        assert f"usage: durablelab {name}" in capsys.readouterr().out
        assert re.search(rf"^- `durablelab {re.escape(name)}\b[^`]*`: \w", readme, re.M), name


def test_lessons_lists_number_title_and_minutes(capsys):
    assert cli.main(["lessons"]) == 0
    out = capsys.readouterr().out
    rows = re.findall(r"^(\d\d)\s+~?(\d+) min\s+(.+)$", out, re.M)
    numbers = [n for n, _, _ in rows]
    assert numbers == sorted(p.name[:2] for p in (ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
    assert ("01" in numbers) and all(int(m) > 0 for _, m, _ in rows)
    assert any(t.startswith("Replay") for _, _, t in rows)


@pytest.mark.parametrize("uid", [0, 1000])
def test_lab_as_root_says_so_and_passes_allow_root(monkeypatch, capsys, uid, tmp_path):
    seen = []
    monkeypatch.setenv("JUPYTERLAB_DIR", str(tmp_path))
    monkeypatch.setattr(os, "geteuid", lambda: uid)
    monkeypatch.setattr(os, "execv", lambda exe, argv: seen.append(argv))
    assert cli.main(["lab", "--no-browser", "--port", "8899"]) == 0
    argv = seen[0]
    assert argv[1:3] == ["-m", "jupyterlab"] and argv[-3:] == ["--no-browser", "--port", "8899"]
    assert f"--ServerApp.root_dir={ROOT}" in argv
    out = capsys.readouterr().out
    assert ("--allow-root" in argv) == (uid == 0) == ("running as root" in out)


def test_lab_opens_the_quickstart_and_no_ServerApp_default_url(monkeypatch, tmp_path):
    """JupyterLab overwrites ServerApp.default_url with its own LabApp.default_url, so only
    the latter opens the lessons; a learner's own default_url is left alone."""
    argv = curriculum.lab_command(ROOT, ["--port=8899"])
    assert "--LabApp.default_url=/lab/tree/notebooks/00_quickstart.ipynb" in argv
    assert not [a for a in argv if a.startswith("--ServerApp.default_url")]
    mine = curriculum.lab_command(ROOT, ["--LabApp.default_url=/lab/tree/notebooks"])
    assert [a for a in mine if "default_url" in a] == ["--LabApp.default_url=/lab/tree/notebooks"]
    elsewhere = curriculum.lab_command(tmp_path, [], open_notebooks=False)
    assert not [a for a in elsewhere if "default_url" in a]


def test_lab_switches_off_jupyter_news_in_a_file_of_its_own(monkeypatch, tmp_path):
    monkeypatch.setenv("JUPYTERLAB_DIR", str(tmp_path))
    settings = tmp_path / "settings"
    settings.mkdir()
    (settings / "overrides.json").write_text('{"mine": {"theme": "dark"}}')
    written = curriculum.quiet_news()
    assert written == settings / "overrides.d" / "durablelab.json"
    assert json.loads(written.read_text()) == {
        "@jupyterlab/apputils-extension:notification": {"fetchNews": "false",
                                                        "checkForUpdates": False}}
    assert (settings / "overrides.json").read_text() == '{"mine": {"theme": "dark"}}'
    written.write_text('{"edited": true}')             # someone's edit is kept
    assert curriculum.quiet_news() == written and written.read_text() == '{"edited": true}'


def test_lab_that_cannot_write_its_settings_says_so_and_goes_on(monkeypatch, tmp_path, capsys):
    blocked = tmp_path / "file"
    blocked.write_text("not a folder")
    monkeypatch.setenv("JUPYTERLAB_DIR", str(blocked))
    assert curriculum.quiet_news() is None
    assert "could not switch off the \"Jupyter news\" notice" in capsys.readouterr().out


def test_lab_serves_the_lessons_on_localhost_and_stops(tmp_path):
    pytest.importorskip("jupyterlab")
    import labserver
    port = labserver.free_port()
    app = labserver.app_dir(tmp_path)
    env = {**ENV, "JUPYTER_RUNTIME_DIR": str(tmp_path / "runtime"),
           "JUPYTER_CONFIG_DIR": str(tmp_path / "config"), "HOME": str(tmp_path),
           "JUPYTERLAB_DIR": app}
    lab = subprocess.Popen([sys.executable, "-m", "durablelab", "lab", *labserver.options(port)],
                           env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        listing = labserver.contents(port, "notebooks", lab)
        assert "01_replay.ipynb" in {item["name"] for item in listing["content"]}
        assert labserver.landing(port).startswith("/lab/tree/notebooks/00_quickstart.ipynb")
        assert labserver.news_setting(port) == "false"
    finally:
        lab.terminate()
        lab.wait(timeout=30)
    out = lab.stdout.read()
    assert "opening the lessons of this checkout" in out
    assert f"127.0.0.1:{port}/lab/tree/notebooks/00_quickstart.ipynb?token=" in out
    assert "Traceback" not in out


def test_show_and_runs_read_both_export_formats(files, capsys):
    for name in ("runs.jsonl", "runs.parquet"):
        assert cli.main(["runs", str(files / name)]) == 0
        assert cli.main(["show", "demo", "--db", str(files / name)]) == 0
        out = capsys.readouterr().out
        assert "completed" in out and "create_vendor" in out


def test_read_only_engine_beside_this_process_s_writer_says_to_use_that_one(waiting_store):
    writer = dl.Engine(waiting_store, workflows=[wait_for_approval])
    try:
        with pytest.raises(dl.ReadOnlyEngineError, match="already has that file open"):
            dl.Engine(waiting_store, read_only=True)
        assert writer.run("w-1").history["name"].tolist()[:1] == ["ask"]   # not taken over
    finally:
        writer.close()


def test_a_pipe_is_refused_without_reading_it(tmp_path, capsys):
    """A FIFO (or a device) given as a store or an export: reading its first bytes would
    wait for a writer that never comes. It is refused by what it is, at once."""
    fifo = tmp_path / "runs.jsonl"
    os.mkfifo(fifo)
    assert cli.main(["runs", str(fifo)]) == 1
    assert "not a regular file" in capsys.readouterr().err
    with pytest.raises(dl.ExportFormatError, match="not a regular file"):
        dl.load(fifo)
    with pytest.raises(dl.ExportFormatError, match="not a regular file"):
        dl.ops(str(fifo))
