"""SQLite schema 9 reads the head's version of a Thread with an active Run from that Run's
row (``sqlite.heads``), so its commits write no ``threads`` row. ``db migrate`` from 8:
a schema 8 file holds the same version in both rows, so the migration changes no row;
the store reads the same heads, logs and Runs after it, and goes on committing. An
active Run whose row is gone leaves its Thread without a head version: damage, named,
never a new Thread."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from runkernel.adapters.stores.contract import DamagedStore, SchemaError
from runkernel.adapters.stores.sqlite import SqliteStore
from runkernel.adapters.stores.sqlite.migrate import migrate_sqlite
from runkernel.adapters.stores.sqlite.schema import SCHEMA_VERSION
from runkernel.cli.entry import main
from runkernel.conformance.runs import text_run
from runkernel.kernel.state import ThreadHead


def _schema_eight(path: Path) -> None:
    """Make the store a schema 8 file: each ``threads`` row holds its head's version."""
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("UPDATE threads SET version = (SELECT max(version) FROM commits c WHERE c.thread_id = threads.thread_id)")
    db.execute("UPDATE meta SET value = '8' WHERE key = 'version'")
    db.close()


def test_db_migrate_takes_a_sqlite_store_from_8_to_9(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert SCHEMA_VERSION == 9
    path = tmp_path / "eight.db"
    active, ended = text_run("t1", "r1", 4), text_run("t2", "r2", 2)
    made = SqliteStore(path)
    for commit in [*active[:3], *ended]:
        made.append(commit)
    made.close()
    _schema_eight(path)
    with pytest.raises(SchemaError, match="db migrate"):
        SqliteStore(path)
    assert main(["db", "migrate", "--store", f"sqlite:///{path}"]) == 0
    assert "migrated schema version 8 to 9" in capsys.readouterr().out
    store = SqliteStore(path)
    try:
        assert store.thread_head("t1") == ThreadHead("t1", 3, "r1")
        assert store.thread_head("t2") == ThreadHead("t2", 3, None)
        assert list(store.commits("t1")) == active[:3]
        assert list(store.commits("t2")) == ended
        # the active Run goes on and ends: its head moves with its row, then with the Thread's
        store.append(active[3])
        assert store.thread_head("t1") == ThreadHead("t1", 4, "r1")
        store.append(active[4])
        assert store.thread_head("t1") == ThreadHead("t1", 5, None)
        assert list(store.commits("t1")) == active
    finally:
        store.close()
    assert migrate_sqlite(path) == (SCHEMA_VERSION, SCHEMA_VERSION)


def test_an_active_runs_missing_row_is_damage_never_a_new_thread(tmp_path: Path) -> None:
    path = tmp_path / "damaged.db"
    commits = text_run("t1", "r1", 3)
    made = SqliteStore(path)
    for commit in commits[:2]:
        made.append(commit)
    made.close()
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("DELETE FROM runs")
    db.close()
    store = SqliteStore(path)
    try:
        for read in (lambda: store.thread_head("t1"), lambda: store.append(commits[2]), lambda: list(store.commits("t1"))):
            with pytest.raises(DamagedStore, match="threads row"):
                read()
    finally:
        store.close()
