"""The schema steps that let work discovery find a quiet parent by key (SQLite 3→4,
PostgreSQL 1→2): a store written before them, holding a quiet parent and its children,
is refused until migrated, and afterwards answers ``runs_with_work`` and ``parent_of``
as a store that was written at the new schema."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from postgres_support import fresh_url
from runkernel.adapters.stores.sqlite.migrate import migrate_sqlite
from runkernel.adapters.stores.sqlite import SqliteStore
from runkernel.adapters.stores.sqlite.schema import SCHEMA_VERSION
from runkernel.adapters.stores.contract import SchemaError, Store
from runkernel.cli.entry import main
from runkernel.conformance import append_all
from runkernel.testing import DelegatingRun, delegating_run


def _write_quiet_parent(store: Store) -> DelegatingRun:
    """A quiet parent whose second child has ended (so the parent has work) and whose
    first child still runs."""
    run = delegating_run("tp", "parent", app="a")
    append_all(store, [*run.opened, run.quiet, *run.activations, run.child_ends[1]])
    return run


def _answers_like_a_new_store(store: Store, run: DelegatingRun) -> None:
    assert store.runs_with_work("a") == ["parent", run.children[0]]
    assert [store.parent_of(child) for child in run.children] == list(run.parents)
    store.append(run.second_done)
    assert store.runs_with_work("a") == [run.children[0]]  # quiet again, for d1 alone


def as_sqlite_schema_5(path: Path) -> None:
    """Turn a fresh SQLite store back into what schema 5 wrote (no trace context column);
    the older steps' helpers start from it."""
    db = sqlite3.connect(path)
    db.execute("ALTER TABLE runs DROP COLUMN trace_context")
    db.execute("UPDATE meta SET value = '5' WHERE key = 'version'")
    db.commit()
    db.close()


def as_sqlite_schema_4(path: Path) -> None:
    """Turn a fresh SQLite store back into what schema 4 wrote (nor the listing indexes)."""
    as_sqlite_schema_5(path)
    db = sqlite3.connect(path)
    for index in ("runs_by_state_only", "runs_by_app", "runs_by_thread"):  # schema 5's
        db.execute(f"DROP INDEX {index}")
    db.execute("UPDATE meta SET value = '4' WHERE key = 'version'")
    db.commit()
    db.close()


def as_sqlite_schema_3(path: Path) -> None:
    """Turn a fresh SQLite store back into what schema 3 wrote (no quiet flags, awaited
    children or parent columns); the older steps' tests start from it too."""
    as_sqlite_schema_4(path)
    db = sqlite3.connect(path)
    db.execute("DROP TABLE awaited_children")
    for column in ("quiet", "parent_thread_id", "parent_run_id", "parent_call_id"):
        db.execute(f"ALTER TABLE runs DROP COLUMN {column}")
    db.execute("UPDATE meta SET value = '3' WHERE key = 'version'")
    db.commit()
    db.close()


def test_a_schema_3_sqlite_store_is_migrated_to_find_its_quiet_parent(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "three.db"
    store = SqliteStore(path)
    run = _write_quiet_parent(store)
    store.close()
    as_sqlite_schema_3(path)
    with pytest.raises(SchemaError, match="db migrate"):
        SqliteStore(path)
    assert main(["db", "migrate", "--store", f"sqlite:///{path}"]) == 0
    assert f"migrated schema version 3 to {SCHEMA_VERSION}" in capsys.readouterr().out
    store = SqliteStore(path)
    _answers_like_a_new_store(store, run)
    store.close()
    assert migrate_sqlite(path) == (SCHEMA_VERSION, SCHEMA_VERSION)


def test_a_schema_1_postgres_store_is_migrated_to_find_its_quiet_parent(capsys: pytest.CaptureFixture[str]) -> None:
    psycopg = pytest.importorskip("psycopg", reason="the postgres extra (psycopg) is not installed")
    from runkernel.adapters.stores.postgres.schema import SCHEMA_VERSION as PG_VERSION
    from runkernel.adapters.stores.postgres.schema import drop_store, init_postgres, migrate_postgres, split_url
    from runkernel.adapters.stores.postgres import PostgresStore

    url = fresh_url("wake")
    init_postgres(url)
    try:
        store = PostgresStore(url)
        run = _write_quiet_parent(store)
        store.close()
        conninfo, schema = split_url(url)
        with psycopg.connect(conninfo, autocommit=True) as conn:
            conn.execute(psycopg.sql.SQL("SET search_path TO {}").format(psycopg.sql.Identifier(schema)))
            conn.execute("DROP TABLE awaited_children")
            conn.execute(
                "ALTER TABLE runs DROP COLUMN trace_context, DROP COLUMN quiet, DROP COLUMN parent_thread_id, DROP COLUMN parent_run_id, "
                "DROP COLUMN parent_call_id"
            )
            conn.execute("UPDATE meta SET value = '1' WHERE key = 'version'")
        with pytest.raises(SchemaError, match="db migrate"):
            PostgresStore(url)
        assert main(["db", "migrate", "--store", url]) == 0
        assert f"migrated schema version 1 to {PG_VERSION}" in capsys.readouterr().out
        store = PostgresStore(url)
        _answers_like_a_new_store(store, run)
        store.close()
        assert migrate_postgres(url) == (PG_VERSION, PG_VERSION)
    finally:
        drop_store(url)
