"""A PostgreSQL cluster of a test's own, which it may stop and start (the shared server
on 5432 is never restarted): ``initdb`` and ``pg_ctl`` from the server packages on this
machine, run as the server's non-root user ``postgres`` (via ``runuser``) in a directory
that user owns under /tmp (pytest's temporary directories are 0700 for root), on a free
loopback port, with its socket in that directory. Removed afterwards."""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path

import pytest

SERVER_USER = "postgres"


class OwnCluster:
    """A stopped-or-running cluster: ``start()``, ``stop_immediately()``, ``close()``."""

    def __init__(self) -> None:
        found = sorted(glob.glob("/usr/lib/postgresql/*/bin/pg_ctl"))
        # runuser lives in sbin, which a bare PATH (CI's `env -i`) leaves out
        runuser = shutil.which("runuser", path=os.pathsep.join([os.environ.get("PATH", ""), "/usr/sbin", "/sbin"]))
        if not found or runuser is None or os.geteuid() != 0:
            pytest.skip("an own PostgreSQL cluster needs the server packages, runuser and root")
        self.runuser = runuser
        try:
            user = pwd.getpwnam(SERVER_USER)
        except KeyError:
            pytest.skip(f"no {SERVER_USER!r} user to run an own PostgreSQL cluster as")
        self.bin = Path(found[-1]).parent
        self.base = Path(tempfile.mkdtemp(prefix="runkernel-pg-", dir="/tmp"))
        os.chown(self.base, user.pw_uid, user.pw_gid)
        self.data = self.base / "data"
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            self.port = probe.getsockname()[1]
        self.running = False
        self._as_server("initdb", "-D", str(self.data), "-A", "trust", "-U", "postgres", "-E", "UTF8", "--no-sync")

    def dsn(self, connect_timeout: int = 3) -> str:
        """The cluster's database ``postgres``, with libpq's connect timeout."""
        return f"postgresql://postgres@127.0.0.1:{self.port}/postgres?connect_timeout={connect_timeout}"

    def start(self) -> None:
        options = f"-p {self.port} -k {self.base} -c listen_addresses=127.0.0.1 -c fsync=off"
        self._as_server("pg_ctl", "-D", str(self.data), "-l", str(self.base / "log"), "-w", "-o", options, "start")
        self.running = True

    def stop_immediately(self) -> None:
        """``pg_ctl stop -m immediate``: every backend killed, as a crash would."""
        self._as_server("pg_ctl", "-D", str(self.data), "-m", "immediate", "-w", "stop")
        self.running = False

    def close(self) -> None:
        try:
            if self.running:
                self.stop_immediately()
        finally:
            shutil.rmtree(self.base, ignore_errors=True)

    def _as_server(self, program: str, *args: str) -> None:
        subprocess.run(
            [self.runuser, "-u", SERVER_USER, "--", str(self.bin / program), *args],
            check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd=self.base,
        )
