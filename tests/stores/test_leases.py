"""Leases beyond the public store contract: the SQLite schema step that adds them, and
one lease shared by two processes' connections on one file (W3 by the store's clock)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from runkernel.adapters.stores.sqlite.migrate import migrate_sqlite
from runkernel.adapters.stores.sqlite import SqliteStore
from runkernel.adapters.stores.sqlite.schema import SCHEMA_VERSION
from runkernel.adapters.stores.contract import LeaseHeld, LeaseLost, SchemaError, Writer
from runkernel.conformance import append_all
from runkernel.specs.checker import Verdict, check_commits
from runkernel.testing import text_run
from test_quiet_parent_migration import as_sqlite_schema_3


def _as_schema_2(path: Path) -> None:
    """Turn a fresh store back into what schema 2 wrote: no leases, no writers."""
    as_sqlite_schema_3(path)
    db = sqlite3.connect(path)
    db.execute("DROP TABLE leases")
    db.execute("DROP INDEX runs_by_state")
    for column in ("app", "state", "step", "version", "waiting_for", "wake_at"):
        db.execute(f"ALTER TABLE runs DROP COLUMN {column}")
    db.execute("ALTER TABLE commits DROP COLUMN writer_id")
    db.execute("ALTER TABLE commits DROP COLUMN writer_epoch")
    db.execute("UPDATE meta SET value = '2' WHERE key = 'version'")
    db.commit()
    db.close()


def test_a_schema_2_store_is_refused_then_migrated_to_leases(tmp_path: Path) -> None:
    path = tmp_path / "two.db"
    store = SqliteStore(path)
    commits = text_run("t1", "r1", 2)
    append_all(store, commits[:2])
    store.close()
    _as_schema_2(path)
    with pytest.raises(SchemaError, match="db migrate"):
        SqliteStore(path)
    assert migrate_sqlite(path) == (2, SCHEMA_VERSION)
    store = SqliteStore(path)
    assert store.writer_of("t1", 1) is None and store.writer_of("t1", 2) is None
    (summary,) = store.list_runs()
    assert (summary.run_id, summary.state, summary.version, summary.app) == ("r1", "running", 2, None)
    assert store.runs_with_work(None) == ["r1"]
    lease = store.acquire_lease("r1", "worker-a", 600)
    store.append(commits[2], lease=lease)
    assert store.writer_of("t1", 3) == Writer("worker-a", 1)
    assert check_commits(list(store.commits("t1"))).verdict is Verdict.LEGAL
    store.close()
    assert migrate_sqlite(path) == (SCHEMA_VERSION, SCHEMA_VERSION)


def test_two_connections_on_one_file_share_one_lease_by_the_stores_clock(tmp_path: Path) -> None:
    now = [1000.0]
    first = SqliteStore(tmp_path / "s.db", clock=lambda: now[0])
    second = SqliteStore(tmp_path / "s.db", clock=lambda: now[0])
    held = first.acquire_lease("r1", "worker-a", 10)
    with pytest.raises(LeaseHeld):
        second.acquire_lease("r1", "worker-b", 10)
    now[0] += 9.5
    with pytest.raises(LeaseLost):
        first.check_lease(held, 1.0)  # inside the safety margin: start no executor
    now[0] += 0.5  # expiry is exclusive: at expires_at the lease is gone
    taken = second.acquire_lease("r1", "worker-b", 10)
    assert taken.epoch == held.epoch + 1
    with pytest.raises(LeaseLost):
        first.renew_lease(held, 10)
    (activation,) = text_run("t1", "r1", 1)[:1]
    with pytest.raises(LeaseLost):
        first.append(activation, lease=held)
    second.append(activation, lease=taken)
    assert first.writer_of("t1", 1) == taken.writer
    first.close()
    second.close()
