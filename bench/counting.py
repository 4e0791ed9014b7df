"""Counting durable transactions, and the raw fsync rate of the disk under the run.

Durable transactions are counted on the sqlite3 connections themselves: while a
``TransactionCounter`` is active, every connection opened through ``sqlite3.connect``
(runkernel's stores and the peers' savers alike) gets a trace callback that sees each
statement it runs. A transaction counts when it changed a row: a ``COMMIT`` (or
``END``) after which ``total_changes`` is higher than at its ``BEGIN``, or an
INSERT/UPDATE/DELETE/REPLACE run outside any transaction (SQLite's autocommit) that
changed a row. In WAL mode with ``synchronous=FULL`` each such
transaction is one fsync of the WAL; with ``NORMAL`` none waits for one. The rows a
counted transaction changed (``total_changes`` over it) are summed in ``rows``.
``sqlite3.dbapi2.connect`` is counted too: SQLAlchemy's driver opens its connections
through it (the DBOS peer of the worker group).
"""

from __future__ import annotations

import os
import sqlite3
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from types import TracebackType
from typing import Any

_WRITES = ("INSERT", "UPDATE", "DELETE", "REPLACE")
_ENDS = ("COMMIT", "END")


class _Watch:
    """The trace callback of one connection: it sees each statement as it starts."""

    def __init__(self, counter: TransactionCounter, connection: sqlite3.Connection) -> None:
        self.counter = counter
        self.connection = connection
        self.opened_at: int | None = None
        """``total_changes`` when the open explicit transaction began."""
        self.autocommit_from: int | None = None
        """``total_changes`` before an autocommit write still to be judged."""

    def settle(self) -> None:
        """Judge the last autocommit write: it was a transaction if it changed a row."""
        if self.autocommit_from is not None:
            changed = self.connection.total_changes - self.autocommit_from
            if changed > 0:
                self.counter.found += 1
                self.counter.rows += changed
            self.autocommit_from = None

    def __call__(self, statement: str) -> None:
        self.settle()
        head = statement.lstrip()[:8].upper()
        changes = self.connection.total_changes
        inside = self.connection.in_transaction
        if head.startswith("BEGIN"):
            self.opened_at = changes
        elif head.startswith(_WRITES):
            if not inside:
                self.autocommit_from = changes
            elif self.opened_at is None:
                self.opened_at = changes  # an implicit BEGIN the trace did not show
        elif head.startswith(_ENDS):
            if self.opened_at is not None and changes > self.opened_at:
                self.counter.found += 1
                self.counter.rows += changes - self.opened_at
            self.opened_at = None
        elif head.startswith("ROLLBACK") and not head.startswith("ROLLBACK TO"):
            self.opened_at = None


class TransactionCounter:
    """Counts the write transactions of every sqlite3 connection opened while active.

    A transaction counts when it changed at least one row (``total_changes`` rose):
    a DELETE that matched nothing writes no WAL frame and waits for no fsync.
    """

    def __init__(self) -> None:
        self.found = 0
        self.rows = 0
        """Rows inserted, updated or deleted by the counted transactions."""
        self._watches: list[_Watch] = []
        self._original: Callable[..., sqlite3.Connection] | None = None

    @property
    def transactions(self) -> int:
        """Write transactions so far (read while the connections are still open)."""
        for watch in self._watches:
            try:
                watch.settle()
            except sqlite3.ProgrammingError:  # closed: its last write stays unjudged
                watch.autocommit_from = None
        return self.found

    def reset(self) -> None:
        """Start counting from zero (after setting stores up)."""
        _ = self.transactions
        self.found = 0
        self.rows = 0

    def watch(self, connection: sqlite3.Connection) -> sqlite3.Connection:
        """Count a connection opened before the counter was active."""
        watch = _Watch(self, connection)
        self._watches.append(watch)
        connection.set_trace_callback(watch)
        return connection

    def __enter__(self) -> TransactionCounter:
        original = sqlite3.connect
        self._original = original

        def counted(*args: Any, **kwargs: Any) -> sqlite3.Connection:
            return self.watch(original(*args, **kwargs))

        setattr(sqlite3, "connect", counted)  # noqa: B010 - mypy refuses assigning an overload
        setattr(sqlite3.dbapi2, "connect", counted)  # noqa: B010
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        if self._original is not None:
            setattr(sqlite3, "connect", self._original)  # noqa: B010
            setattr(sqlite3.dbapi2, "connect", self._original)  # noqa: B010
            self._original = None


def database_bytes(path: Path) -> int:
    """The database's size as its readers see it (pages still in the WAL included)."""
    connection = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        pages = int(connection.execute("PRAGMA page_count").fetchone()[0])
        size = int(connection.execute("PRAGMA page_size").fetchone()[0])
    finally:
        connection.close()
    return pages * size


class FsyncProbe:
    """The raw ``write`` + ``fsync`` rate of one small file, sampled during the run."""

    def __init__(self, directory: Path) -> None:
        self.path = directory / "fsync-probe.bin"
        self.samples: list[float] = []

    def sample(self, seconds: float = 0.2) -> float:
        """fsyncs per second over about ``seconds``; kept for the report."""
        descriptor = os.open(self.path, os.O_WRONLY | os.O_CREAT, 0o600)
        try:
            count, started = 0, time.perf_counter()
            while time.perf_counter() - started < seconds:
                os.pwrite(descriptor, b"x" * 512, 0)
                os.fsync(descriptor)
                count += 1
            rate = count / (time.perf_counter() - started)
        finally:
            os.close(descriptor)
        self.samples.append(rate)
        return rate

    def summary(self) -> str:
        """min / median / max of the samples, per second."""
        if not self.samples:
            return "not sampled"
        return (
            f"{min(self.samples):,.0f} / {statistics.median(self.samples):,.0f} / "
            f"{max(self.samples):,.0f} fsyncs/s (min / median / max of {len(self.samples)} samples)"
        )
