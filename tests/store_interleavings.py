"""Stores that force what happens around a driver's Executing commit, the commit an
executor start follows, so a test reaches its race by construction, never by timing:

- ``before_executing(commit)`` runs once, just before the first Executing commit is
  written: a rival's write lands between this driver's decision and its own write;
- ``after_executing(commit)`` runs once, right after the first Executing commit landed
  and before its reply returns: the lease is lost at that instant;
- ``refuse_executing`` answers ``CommitConflict`` once, to the first Executing commit,
  and writes nothing (a store that says another writer won).

``open_stores`` gives the store the driver under test uses and the one its rival uses:
one memory store shared, or two connections to one SQLite file or PostgreSQL schema.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Protocol

import pytest

from runkernel.adapters.stores.memory import MemoryStore
from runkernel.adapters.stores.sqlite import SqliteStore
from runkernel.adapters.stores.contract import CommitConflict, Lease, Settlement, Store
from runkernel.kernel.rules import Rejection, Rule
from runkernel.kernel.state import CallExecuting, RunSnapshot, ThreadCommit

#: the stores every test here runs on (PostgreSQL skips without its server)
STORES = ("memory", "sqlite", "postgres")


def starts_a_call(commit: ThreadCommit) -> bool:
    """Whether ``commit`` leaves a call Executing: an executor start may follow it."""
    return commit.batch is not None and any(isinstance(c.status, CallExecuting) for c in commit.batch.calls)


class InterleavedStore(Store, Protocol):
    """A store with the hooks above."""

    before_executing: Callable[[ThreadCommit], None] | None
    after_executing: Callable[[ThreadCommit], None] | None
    refuse_executing: bool
    #: the conflicts this store made up
    conflicts_answered: int

    def close(self) -> None: ...


class _AtExecuting:
    """The hooks, mixed into a real store (each fires once, then is cleared)."""

    before_executing: Callable[[ThreadCommit], None] | None = None
    after_executing: Callable[[ThreadCommit], None] | None = None
    refuse_executing = False
    conflicts_answered = 0

    def append(
        self,
        commit: ThreadCommit,
        settle: Settlement | None = None,
        *,
        lease: Lease | None = None,
        release: bool = False,
        trace_context: str | None = None,
    ) -> RunSnapshot:
        if not starts_a_call(commit):
            return super().append(commit, settle, lease=lease, release=release, trace_context=trace_context)  # type: ignore[misc, no-any-return]
        if self.refuse_executing:
            self.refuse_executing = False
            self.conflicts_answered += 1
            raise CommitConflict(Rejection(Rule.VERSION, "another writer won this version (injected)"))
        before, self.before_executing = self.before_executing, None
        if before is not None:
            before(commit)
        stored: RunSnapshot = super().append(commit, settle, lease=lease, release=release, trace_context=trace_context)  # type: ignore[misc]
        after, self.after_executing = self.after_executing, None
        if after is not None:
            after(commit)
        return stored


class MemoryAtExecuting(_AtExecuting, MemoryStore):
    """A memory store with the hooks."""


class SqliteAtExecuting(_AtExecuting, SqliteStore):
    """A SQLite store with the hooks (one connection to the file)."""


def open_stores(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest, *, clock: Callable[[], float] = time.time
) -> tuple[InterleavedStore, Store]:
    """The store of ``kind`` the driver under test uses, with the hooks, and the one its
    rival uses; ``clock`` is the store's lease clock (PostgreSQL keeps its own)."""
    if kind == "memory":
        shared = MemoryAtExecuting(clock=clock)
        return shared, shared
    if kind == "sqlite":
        path = tmp_path / "runs.db"
        hooked, rival = SqliteAtExecuting(path, clock=clock), SqliteStore(path, clock=clock)
        request.addfinalizer(rival.close)
        request.addfinalizer(hooked.close)
        return hooked, rival
    assert kind == "postgres", kind
    assert clock is time.time, "a PostgreSQL store judges leases by the server's clock"
    url: str = request.getfixturevalue("postgres_url")  # skips without a server
    from runkernel.adapters.stores.postgres import PostgresStore

    class PostgresAtExecuting(_AtExecuting, PostgresStore):
        """A PostgreSQL store with the hooks (one connection to the schema)."""

    hooked_pg, rival_pg = PostgresAtExecuting(url), PostgresStore(url)
    request.addfinalizer(rival_pg.close)
    request.addfinalizer(hooked_pg.close)
    return hooked_pg, rival_pg
