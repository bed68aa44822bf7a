"""Starting JupyterLab for a test and waiting until it answers on 127.0.0.1
(tests/test_cli.py opens a checkout's lessons, tests/test_wheel.py an installed wheel's)."""

from __future__ import annotations

import json
import socket
import time
import urllib.request

TOKEN = "lesson"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def options(port: int) -> list[str]:
    """The `durablelab lab` options of a test: no browser, 127.0.0.1, a known token."""
    return ["--no-browser", f"--port={port}", "--ServerApp.ip=127.0.0.1",
            f"--IdentityProvider.token={TOKEN}"]


def contents(port: int, folder: str, process, wait: float = 90) -> dict:
    """The server's listing of `folder`, once it answers; fails if `process` ends first."""
    url = f"http://127.0.0.1:{port}/api/contents/{folder}?token={TOKEN}"
    deadline = time.monotonic() + wait
    while True:
        try:
            with urllib.request.urlopen(url, timeout=5) as answer:
                return json.load(answer)
        except OSError:
            assert process.poll() is None, process.stdout.read()
            assert time.monotonic() < deadline, f"JupyterLab did not answer in {wait:g} s"
            time.sleep(0.5)


def app_dir(tmp_path) -> str:
    """A JupyterLab application folder of the test's own (JUPYTERLAB_DIR) that serves the
    installed JupyterLab's static files, schemas and themes: what `durablelab lab` writes
    in its settings lands there, never in the shared environment."""
    import sysconfig
    from pathlib import Path
    installed = Path(sysconfig.get_paths()["data"]) / "share" / "jupyter" / "lab"
    folder = Path(tmp_path) / "jupyterlab-app"
    folder.mkdir()
    for name in ("static", "schemas", "themes"):
        if (installed / name).exists():
            (folder / name).symlink_to(installed / name)
    return str(folder)


def landing(port: int) -> str:
    """Where JupyterLab sends a browser that opens the server's root URL."""
    import http.client
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        connection.request("GET", f"/?token={TOKEN}")
        answer = connection.getresponse()
        return answer.getheader("Location") or ""
    finally:
        connection.close()


def news_setting(port: int) -> str:
    """The "Fetch official Jupyter news" default the server hands the page: "none" asks
    the learner in a notice over the notebook, "false" does not."""
    url = (f"http://127.0.0.1:{port}/lab/api/settings/"
           f"@jupyterlab/apputils-extension:notification?token={TOKEN}")
    with urllib.request.urlopen(url, timeout=10) as answer:
        return json.load(answer)["schema"]["properties"]["fetchNews"]["default"]
