"""Stopping a worker process outside its transactions: how the stall tests SIGSTOP a
worker (``held_points``) without leaving it stopped while it holds what every other
worker would wait on. A worker with several slots has other drives than the held one: one
of them stopped inside a transaction would hold the SQLite write lock or PostgreSQL row
locks, or the lock of a point's start count, and block every other worker until it is
continued. ``stop`` looks (``/proc/locks``; PostgreSQL's ``pg_stat_activity`` by the
process's client ports) and, if so, continues it and stops it again."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

#: a worker process, its output read as text or not
Process = subprocess.Popen[str] | subprocess.Popen[bytes]
#: how often a stopped process is looked at (a poll of a condition)
POLL = 0.005

#: whether a stopped process is inside a transaction another worker would wait on
InTransaction = Callable[[int], bool]


def sqlite_writing(pid: int) -> bool:
    """Whether process ``pid`` holds a SQLite lock another process's write would wait on,
    as ``/proc/locks`` lists its POSIX locks: in WAL mode (the store) an exclusive lock on a
    WAL index's writer, checkpointer or recovery byte (120-122 of its ``-shm`` file); in
    rollback-journal mode (the tools' downstream records) any lock on the database's lock
    bytes (a reader's SHARED lock too: a writer cannot commit past it)."""
    opened: dict[int, str] = {}  # the files the process has open, by inode
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            target = os.readlink(fd)
            opened[os.stat(target).st_ino] = target
        except OSError:
            continue
    paths = set(opened.values())
    for line in Path("/proc/locks").read_text().splitlines():
        # "1: POSIX  ADVISORY  WRITE 25547 fe:00:2151891 120 120"
        fields = line.split()
        if len(fields) < 8 or fields[1] != "POSIX" or fields[4] != str(pid):
            continue
        path, start = opened.get(int(fields[5].rpartition(":")[2]), ""), int(fields[6])
        if path.endswith("-shm"):
            if fields[3] == "WRITE" and start in (120, 121, 122):
                return True
        elif f"{path}-shm" not in paths and start >= 0x40000000:  # rollback mode: PENDING, RESERVED, SHARED
            return True
    return False


def _counting(pid: int) -> bool:
    """Whether process ``pid`` holds the lock of a point's start count (``_hold``): stopped
    there, it would stop every other worker's count of that tool (seen: the points after
    it never reached)."""
    for line in Path("/proc/locks").read_text().splitlines():
        fields = line.split()
        if len(fields) >= 5 and fields[1] == "FLOCK" and fields[4] == str(pid):
            return True
    return False


def _tcp_ports(pid: int) -> list[int]:
    """The local ports of process ``pid``'s TCP sockets."""
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            target = os.readlink(fd)
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[len("socket:["):-1])
    ports = []
    for table in ("tcp", "tcp6"):
        path = Path(f"/proc/{pid}/net/{table}")
        if not path.exists():
            continue
        for row in path.read_text().splitlines()[1:]:
            fields = row.split()
            if fields[9] in inodes:
                ports.append(int(fields[1].rpartition(":")[2], 16))
    return ports


def postgres_in_transaction(url: str) -> InTransaction:
    """Whether process ``pid`` has a session on ``url``'s server (reached over TCP) inside
    a transaction (``pg_stat_activity.xact_start``), or holds a SQLite write lock."""
    import psycopg

    from runkernel.adapters.stores.postgres.schema import split_url

    conninfo, _schema = split_url(url)

    def busy(pid: int) -> bool:
        ports = _tcp_ports(pid)
        with psycopg.connect(conninfo, autocommit=True) as conn:
            row = conn.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE client_port = ANY(%s) AND xact_start IS NOT NULL",
                (ports,),
            ).fetchone()
        return (row is not None and int(row[0]) > 0) or sqlite_writing(pid)

    return busy


def stop(process: Process, in_transaction: InTransaction = sqlite_writing) -> int:
    """SIGSTOP ``process`` outside every transaction and return once the kernel shows it
    stopped (a signal is delivered asynchronously, and a worker let go before it stops
    would move on); how often it was found stopped inside a transaction (or holding the
    lock of a point's start count) and continued to be stopped again. A worker with several slots has other drives than the held one: one
    of them stopped inside a transaction would hold the SQLite write lock, or PostgreSQL
    row locks, and block every other worker until it is continued."""
    inside = 0
    while True:
        process.send_signal(signal.SIGSTOP)
        stat = Path(f"/proc/{process.pid}/stat")
        while stat.read_text().rpartition(")")[2].split()[0] != "T":
            time.sleep(POLL)
        try:
            busy = _counting(process.pid) or in_transaction(process.pid)
        except BaseException:
            process.send_signal(signal.SIGCONT)  # never leave it stopped behind a failing test
            raise
        if not busy:
            return inside
        inside += 1
        process.send_signal(signal.SIGCONT)
        time.sleep(POLL)  # the next try, not a wait for anything in particular
