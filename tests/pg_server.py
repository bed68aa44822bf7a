"""A throwaway PostgreSQL server on 127.0.0.1 for the DBOS tests.

`initdb` and `pg_ctl` refuse to run as root, so as root the server runs as the `postgres`
user (created with `useradd -r` when missing) in a folder that user owns. Starting takes
about a second; `stop()` removes everything.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path

CANDIDATES = ("/usr/lib/postgresql/15/bin", "/usr/lib/postgresql/16/bin",
              "/usr/lib/postgresql/17/bin", "/usr/local/bin", "/usr/bin")


def find_bin() -> Path | None:
    for folder in CANDIDATES:
        if (Path(folder) / "initdb").exists() and (Path(folder) / "pg_ctl").exists():
            return Path(folder)
    return None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class PostgresServer:
    def __init__(self):
        self.bin = find_bin()
        if self.bin is None:
            raise FileNotFoundError("no PostgreSQL server binaries (initdb, pg_ctl) found in "
                                    + ", ".join(CANDIDATES))
        self.root = Path(tempfile.mkdtemp(prefix="durablelab-pg-"))
        self.data = self.root / "data"
        self.port = _free_port()
        self.as_root = os.geteuid() == 0

    def _run(self, *args: str) -> None:
        cmd = [str(self.bin / args[0]), *args[1:]]
        if self.as_root:
            cmd = ["runuser", "-u", "postgres", "--", *cmd]
        subprocess.run(cmd, check=True, capture_output=True, timeout=60)

    def start(self) -> str:
        if self.as_root:
            if subprocess.run(["id", "postgres"], capture_output=True).returncode != 0:
                subprocess.run(["useradd", "-r", "postgres"], check=True)
            shutil.chown(self.root, "postgres")
        self._run("initdb", "-D", str(self.data), "-A", "trust", "-U", "postgres", "--no-sync")
        self._run("pg_ctl", "-D", str(self.data), "-w", "-l", str(self.root / "log"), "-o",
                  f"-p {self.port} -k {self.root} -c listen_addresses=127.0.0.1 -c fsync=off",
                  "start")
        return f"postgresql+psycopg://postgres@127.0.0.1:{self.port}"

    def stop(self) -> None:
        try:
            self._run("pg_ctl", "-D", str(self.data), "-m", "immediate", "stop")
        except (subprocess.SubprocessError, OSError):
            pass
        shutil.rmtree(self.root, ignore_errors=True)
