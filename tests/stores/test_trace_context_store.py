"""A Run's trace context (OpenTelemetry's, ``runkernel.integrations.otel``) is kept by
every store beside the Run, written with its activation only, outside the commit log;
``runkernel db migrate`` gives an older store its column (SQLite 5→6, PostgreSQL 2→3)."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from postgres_support import fresh_url
from runkernel.adapters.stores.memory import MemoryStore
from runkernel.adapters.stores.sqlite import SqliteStore
from runkernel.adapters.stores.sqlite.schema import SCHEMA_VERSION
from runkernel.adapters.stores.sqlite.migrate import migrate_sqlite
from runkernel.adapters.stores.contract import SchemaError
from runkernel.cli.entry import main
from runkernel.conformance import text_run
from test_quiet_parent_migration import as_sqlite_schema_5

CONTEXT = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"

TracedStore = MemoryStore | SqliteStore


def _write_traced(store: TracedStore) -> None:
    """A Run whose activation carries the context, and one without."""
    first, *rest = text_run("t1", "r1", 2)
    store.append(first, trace_context=CONTEXT)
    for commit in rest:
        store.append(commit)
    for commit in text_run("t2", "r2", 1):
        store.append(commit)


def _reads_back(store: TracedStore) -> None:
    assert store.trace_context("r1") == CONTEXT
    assert store.trace_context("r2") is None
    assert store.trace_context("nope") is None


@pytest.fixture(params=["memory", "sqlite"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[TracedStore]:
    made: TracedStore = MemoryStore() if request.param == "memory" else SqliteStore(tmp_path / "s.db")
    yield made
    made.close()


def test_a_store_keeps_the_activations_trace_context_outside_the_commit_log(store: TracedStore) -> None:
    _write_traced(store)
    _reads_back(store)
    lines = "".join(str(c) for c in store.commits("t1"))
    assert "0af7651916cd43dd8448eb211c80319c" not in lines


def test_a_schema_5_sqlite_store_is_migrated_to_keep_trace_contexts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "five.db"
    store = SqliteStore(path)
    for commit in text_run("t0", "r0", 1):
        store.append(commit)
    store.close()
    as_sqlite_schema_5(path)
    with pytest.raises(SchemaError, match="db migrate"):
        SqliteStore(path)
    assert main(["db", "migrate", "--store", f"sqlite:///{path}"]) == 0
    assert f"migrated schema version 5 to {SCHEMA_VERSION}" in capsys.readouterr().out
    store = SqliteStore(path)
    assert store.trace_context("r0") is None  # made before: it has none
    _write_traced(store)
    _reads_back(store)
    store.close()
    columns = [row[1] for row in sqlite3.connect(path).execute("PRAGMA table_info(runs)")]
    assert columns.count("trace_context") == 1
    assert migrate_sqlite(path) == (SCHEMA_VERSION, SCHEMA_VERSION)


def test_a_schema_2_postgres_store_is_migrated_to_keep_trace_contexts(capsys: pytest.CaptureFixture[str]) -> None:
    psycopg = pytest.importorskip("psycopg", reason="the postgres extra (psycopg) is not installed")
    from runkernel.adapters.stores.postgres import PostgresStore
    from runkernel.adapters.stores.postgres.schema import SCHEMA_VERSION as PG_VERSION
    from runkernel.adapters.stores.postgres.schema import drop_store, init_postgres, migrate_postgres, split_url

    url = fresh_url("trace")
    init_postgres(url)
    try:
        store = PostgresStore(url)
        for commit in text_run("t0", "r0", 1):
            store.append(commit)
        store.close()
        conninfo, schema = split_url(url)
        with psycopg.connect(conninfo, autocommit=True) as conn:
            conn.execute(psycopg.sql.SQL("SET search_path TO {}").format(psycopg.sql.Identifier(schema)))
            conn.execute("ALTER TABLE runs DROP COLUMN trace_context")
            conn.execute("UPDATE meta SET value = '2' WHERE key = 'version'")
        with pytest.raises(SchemaError, match="db migrate"):
            PostgresStore(url)
        assert main(["db", "migrate", "--store", url]) == 0
        assert f"migrated schema version 2 to {PG_VERSION}" in capsys.readouterr().out
        store = PostgresStore(url)
        assert store.trace_context("r0") is None
        first, *rest = text_run("t1", "r1", 2)
        store.append(first, trace_context=CONTEXT)
        for commit in rest:
            store.append(commit)
        for commit in text_run("t2", "r2", 1):
            store.append(commit)
        assert store.trace_context("r1") == CONTEXT and store.trace_context("r2") is None
        assert all("0af7651916cd43dd" not in line for line in store.commit_lines("t1"))
        store.close()
        assert migrate_postgres(url) == (PG_VERSION, PG_VERSION)
    finally:
        drop_store(url)
