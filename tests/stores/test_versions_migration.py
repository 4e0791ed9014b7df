"""``db migrate`` to the schema of app versions (SQLite 7 -> 8, PostgreSQL 4 -> 5): each
Run's row gains an app version (none for the Runs made before, so any worker of their
app still drives them), and the worker registry and the recorded compatibility tables
appear, empty. Every other command refuses the old schema first, naming ``db migrate``."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from postgres_support import fresh_url
from runkernel.adapters.stores.contract import SchemaError, Store
from runkernel.adapters.stores.sqlite import SqliteStore
from runkernel.adapters.stores.sqlite.migrate import migrate_sqlite
from runkernel.adapters.stores.sqlite.schema import SCHEMA_VERSION
from runkernel.cli.entry import main
from runkernel.conformance.runs import text_run


def _fill(store: Store) -> None:
    """A Run of app ``shop`` left Running (work), activated before versions existed."""
    store.append(text_run("t1", "r1", 2, app="shop")[0])


def _works_as_before(store: Store) -> None:
    assert [(s.run_id, s.app, s.app_version) for s in store.list_runs()] == [("r1", "shop", None)]
    # no version recorded: a worker of any version of its app drives it
    assert store.runs_with_work("shop", version="v9") == ["r1"]
    assert store.workers() == []
    assert store.compatible_versions("shop", "v9") == frozenset({"v9"})
    store.register_worker("w1", "shop", "v9")
    store.accept_versions("shop", "v9", ["v8"])
    assert [w.version for w in store.workers()] == ["v9"]
    assert store.compatible_versions("shop", "v9") == frozenset({"v8", "v9"})
    # a Run activated now records its version
    store.append(text_run("t2", "r2", 2, app="shop", app_version="v9")[0])
    assert store.list_runs()[0].app_version == "v9"


def test_db_migrate_takes_a_sqlite_store_from_7_to_8(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "seven.db"
    made = SqliteStore(path)
    _fill(made)
    made.close()
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("DROP TABLE workers")
    db.execute("DROP TABLE compatible_versions")
    db.execute("ALTER TABLE runs DROP COLUMN app_version")
    db.execute("UPDATE meta SET value = '7' WHERE key = 'version'")
    db.close()
    with pytest.raises(SchemaError, match="db migrate"):
        SqliteStore(path)
    assert main(["db", "migrate", "--store", f"sqlite:///{path}"]) == 0
    assert f"migrated schema version 7 to {SCHEMA_VERSION}" in capsys.readouterr().out
    store = SqliteStore(path)
    try:
        _works_as_before(store)
    finally:
        store.close()
    assert migrate_sqlite(path) == (SCHEMA_VERSION, SCHEMA_VERSION)


def test_db_migrate_takes_a_postgres_store_from_4_to_5(capsys: pytest.CaptureFixture[str]) -> None:
    psycopg = pytest.importorskip("psycopg", reason="the postgres extra (psycopg) is not installed")
    from runkernel.adapters.stores.postgres import PostgresStore
    from runkernel.adapters.stores.postgres.schema import SCHEMA_VERSION as PG_VERSION
    from runkernel.adapters.stores.postgres.schema import drop_store, init_postgres, split_url

    url = fresh_url("versions_migrate")
    init_postgres(url)
    try:
        made = PostgresStore(url)
        _fill(made)
        made.close()
        conninfo, schema = split_url(url)
        with psycopg.connect(conninfo, autocommit=True) as conn:
            conn.execute(psycopg.sql.SQL("SET search_path TO {}").format(psycopg.sql.Identifier(schema)))
            conn.execute("DROP TABLE workers")
            conn.execute("DROP TABLE compatible_versions")
            conn.execute("ALTER TABLE runs DROP COLUMN app_version")
            conn.execute("UPDATE meta SET value = '4' WHERE key = 'version'")
        with pytest.raises(SchemaError, match="db migrate"):
            PostgresStore(url)
        assert main(["db", "migrate", "--store", url]) == 0
        assert f"migrated schema version 4 to {PG_VERSION}" in capsys.readouterr().out
        assert PG_VERSION == 5
        store = PostgresStore(url)
        try:
            _works_as_before(store)
        finally:
            store.close()
    finally:
        drop_store(url)
