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
