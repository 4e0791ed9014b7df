"""The short-Run PostgreSQL row under a slow disk (issue 33 item 4, for the record): N
Runs whose model and tool do not wait, drained by one process, on a server whose every
flush is slow, runkernel beside DBOS.

A database waits for its write-ahead log to reach the disk at each commit. On a cloud
disk a flush takes milliseconds, and a Run that commits 7 times waits for 7 flushes one
after the other; concurrent transactions share a flush (PostgreSQL's group commit), so
what decides the drain is how many commits are in flight at once: runkernel's slots
against DBOS's queue concurrency (the same number).

The server is a cluster of this group's own (``initdb``, ``pg_ctl``, as the server's
non-root user, on a free loopback port), whose processes have ``fsync`` and
``fdatasync`` slowed by ``SLOW_MS`` (a shim compiled here with ``cc`` and preloaded).
Without the server packages, a C compiler, ``runuser`` or root, the group says so and
measures nothing. The cluster is removed at exit.
"""

from __future__ import annotations

import atexit
import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path

import attrs

from bench import latency, subject, workers
from bench.framework import Prepared, Sizes
from bench.peers import PeerMissing

GROUP = "latency/postgres-slow-disk"
#: milliseconds every flush of the server waits before it is done
SLOW_MS = 10
SERVER_USER = "postgres"

_SHIM = r"""
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdlib.h>
#include <unistd.h>

static void slow(void) {
    const char *us = getenv("RUNKERNEL_SLOW_FSYNC_US");
    if (us) usleep((useconds_t) atoi(us));
}

int fsync(int fd) {
    static int (*real)(int);
    if (!real) real = (int (*)(int)) dlsym(RTLD_NEXT, "fsync");
    slow();
    return real(fd);
}

int fdatasync(int fd) {
    static int (*real)(int);
    if (!real) real = (int (*)(int)) dlsym(RTLD_NEXT, "fdatasync");
    slow();
    return real(fd);
}
"""


def _cluster() -> str:
    """A running cluster whose flushes are slow; its DSN. Stopped and removed at exit."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/pg_ctl"))
    compiler = shutil.which("cc")
    # runuser lives in sbin, which a bare PATH (CI's `env -i`) leaves out
    runuser = shutil.which("runuser", path=os.pathsep.join([os.environ.get("PATH", ""), "/usr/sbin", "/sbin"]))
    if not found or compiler is None or runuser is None or os.geteuid() != 0:
        raise PeerMissing(
            "peer not installed: a slow-disk cluster needs the PostgreSQL server packages, cc, runuser and root"
        )
    try:
        user = pwd.getpwnam(SERVER_USER)
    except KeyError:
        raise PeerMissing(f"no {SERVER_USER!r} user to run a cluster as") from None
    bin_dir = Path(found[-1]).parent
    base = Path(tempfile.mkdtemp(prefix="runkernel-slow-pg-", dir="/tmp"))
    os.chown(base, user.pw_uid, user.pw_gid)
    (base / "shim.c").write_text(_SHIM)
    subprocess.run([compiler, "-shared", "-fPIC", "-O2", "-o", str(base / "slow.so"), str(base / "shim.c"), "-ldl"], check=True)
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]

    def as_server(*command: str) -> None:
        subprocess.run(
            [runuser, "-u", SERVER_USER, "--", "env", f"LD_PRELOAD={base / 'slow.so'}",
             f"RUNKERNEL_SLOW_FSYNC_US={SLOW_MS * 1000}", *command],
            check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd=base,
        )

    data = base / "data"
    as_server(str(bin_dir / "initdb"), "-D", str(data), "-A", "trust", "-U", "postgres", "-E", "UTF8", "--no-sync")
    options = f"-p {port} -k {base} -c listen_addresses=127.0.0.1 -c max_connections=300"
    as_server(str(bin_dir / "pg_ctl"), "-D", str(data), "-l", str(base / "log"), "-w", "-o", options, "start")

    def remove() -> None:
        try:
            as_server(str(bin_dir / "pg_ctl"), "-D", str(data), "-m", "immediate", "-w", "stop")
        finally:
            shutil.rmtree(base, ignore_errors=True)

    atexit.register(remove)
    return f"postgresql://postgres@127.0.0.1:{port}/postgres"


def latency_slow_disk(sizes: Sizes, scratch: Path) -> Prepared:
    """The group: the largest N of the latency groups, Runs that do not wait, on a
    database for each side in the slow cluster."""
    dsn = _cluster()
    url = workers._with_query(workers._database(dsn, "slow_rk"), schema="rk_bench")
    store = subject.postgres_store(url)
    directory = scratch / "latency-slow-disk"
    directory.mkdir()
    short = attrs.evolve(sizes, latency_sleep=0.0, latency_runs=sizes.latency_runs[-1:])
    prepared = latency._prepared(store, url, workers._database(dsn, "slow_dbos"), short, directory)
    prepared.notes["disk"] = f"every fsync and fdatasync of the server waits {SLOW_MS} ms first (a preloaded shim)"
    return prepared


__all__ = ["GROUP", "SLOW_MS", "latency_slow_disk"]
