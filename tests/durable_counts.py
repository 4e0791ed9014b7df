"""Counting the durable transactions a store makes, on SQLite and on PostgreSQL, for the
tests that hold a drive to its cost (Cost model: a drive costs at most its commits + 1).

On SQLite every connection opened while ``bench.counting.TransactionCounter`` is active
is traced, and a transaction counts when it changed a row. On PostgreSQL the server's
WAL is read (``pg_walinspect``, PostgreSQL >= 15): a transaction counts when it wrote a
commit record and touched a table or index of the store's own schema, so other tests'
writes to the same database never count.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Protocol

import pytest

from bench.counting import TransactionCounter


class DurableCount(Protocol):
    """Durable transactions so far: ``transactions()`` since the counter began."""

    def transactions(self) -> int: ...


class _SqliteCount:
    def __init__(self, counter: TransactionCounter) -> None:
        self.counter = counter

    def transactions(self) -> int:
        return self.counter.transactions


@contextmanager
def sqlite_count() -> Iterator[DurableCount]:
    """Counts the write transactions of every sqlite3 connection opened inside."""
    with TransactionCounter() as counter:
        yield _SqliteCount(counter)


class PostgresCount:
    """The committed transactions that wrote to ``schema``, read from the WAL."""

    def __init__(self, conninfo: str, schema: str) -> None:
        import psycopg

        self.connection = psycopg.connect(conninfo, autocommit=True)
        try:
            self.connection.execute("CREATE EXTENSION IF NOT EXISTS pg_walinspect")
        except psycopg.Error as error:
            self.connection.close()
            pytest.skip(f"counting durable transactions needs pg_walinspect (PostgreSQL >= 15): {error}")
        self.schema = schema
        self.start = self._lsn()

    def _lsn(self) -> str:
        row = self.connection.execute("SELECT pg_current_wal_flush_lsn()::text").fetchone()
        assert row is not None
        return str(row[0])

    def transactions(self) -> int:
        nodes = [
            int(n)
            for (n,) in self.connection.execute(
                "SELECT pg_relation_filenode(c.oid) FROM pg_class c JOIN pg_namespace s ON s.oid = c.relnamespace "
                "WHERE s.nspname = %s AND c.relkind IN ('r', 'i')",
                (self.schema,),
            ).fetchall()
            if n is not None
        ]
        row = self.connection.execute(
            "WITH r AS (SELECT xid::text::bigint AS xid, resource_manager AS rm, record_type AS rt, "
            "block_ref AS b FROM pg_get_wal_records_info(%s::pg_lsn, %s::pg_lsn)), "
            "mine AS (SELECT DISTINCT xid FROM r WHERE xid <> 0 "
            "AND substring(b from 'rel \\d+/\\d+/(\\d+)')::bigint = ANY(%s)) "
            "SELECT count(*) FROM r WHERE rm = 'Transaction' AND rt LIKE 'COMMIT%%' AND xid IN (SELECT xid FROM mine)",
            (self.start, self._lsn(), nodes),
        ).fetchone()
        assert row is not None
        return int(row[0])

    def close(self) -> None:
        self.connection.close()


__all__ = ["DurableCount", "PostgresCount", "sqlite_count"]
