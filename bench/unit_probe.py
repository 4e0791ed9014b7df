"""Inside each process of the worker group (a ``runkernel worker`` or a DBOS worker): the
start barrier, and what the process reports when it exits.

The group measures draining, not starting: a process's first unit stops at
``barrier()``, which writes ``ready-<pid>`` into ``BENCH_UNIT_DIR`` and waits for a line
on standard input; the group writes "go" to every process once all are ready, so the
interpreters' start-up, imports and connections fall before the measured window. From
the go on, the process counts its CPU time and, on SQLite (``BENCH_UNIT_SQLITE=1``), the
write transactions and rows of its sqlite3 connections (``bench.counting``, armed before
any connection opens); at exit it writes them to ``report-<pid>.json``.
"""

from __future__ import annotations

import atexit
import json
import os
import sys
import threading
import time
from pathlib import Path

from bench.counting import TransactionCounter

DIRECTORY = "BENCH_UNIT_DIR"
SQLITE = "BENCH_UNIT_SQLITE"


class _Probe:
    def __init__(self, directory: Path, counter: TransactionCounter | None) -> None:
        self.directory = directory
        self.counter = counter
        self.lock = threading.Lock()
        self.went = threading.Event()
        self.armed = False
        self.cpu = 0.0
        self.transactions = 0
        self.rows = 0

    def barrier(self) -> None:
        with self.lock:
            first = not self.armed
            self.armed = True
        if not first:
            self.went.wait()
            return
        (self.directory / f"ready-{os.getpid()}").write_text("ready", encoding="utf-8")
        sys.stdin.readline()  # the group's "go"
        self.cpu = time.process_time()
        if self.counter is not None:
            self.transactions, self.rows = self.counter.transactions, self.counter.rows
        self.went.set()

    def report(self) -> None:
        found: dict[str, float] = {"cpu": time.process_time() - self.cpu if self.armed else 0.0}
        if self.counter is not None:
            found["transactions"] = float(self.counter.transactions - self.transactions)
            found["rows"] = float(self.counter.rows - self.rows)
        (self.directory / f"report-{os.getpid()}.json").write_text(json.dumps(found), encoding="utf-8")


_probe: _Probe | None = None


def arm() -> None:
    """Set the probe up for this process (once; nothing outside the group's processes)."""
    global _probe
    if _probe is not None or DIRECTORY not in os.environ:
        return
    counter = TransactionCounter().__enter__() if os.environ.get(SQLITE) == "1" else None
    _probe = _Probe(Path(os.environ[DIRECTORY]), counter)
    atexit.register(_probe.report)


def barrier() -> None:
    """Wait for the group's go (the first caller); later callers wait for the same go."""
    if _probe is not None:
        _probe.barrier()
