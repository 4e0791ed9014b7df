"""On PostgreSQL, what the worker group counts at the server: the durable transactions
and rows of one database, read from the WAL itself (``pg_walinspect``, PostgreSQL >= 15:
the server is shared, so only the records of that database count), and the CPU of the
server backends serving the group's processes (read from ``/proc``: the server must run
on this machine, else that figure is 0)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from bench.peers import PeerMissing

APP_NAME = "rk-bench-worker"
"""``PGAPPNAME`` of the runkernel workers' connections: how their server backends are found."""
DBOS_APP_NAME = "dbos_transact"
"""What DBOS names its executors' connections (its client's are ``dbos_transact_client``)."""


class ServerCounts:
    """A PostgreSQL database of one side, watched from a connection of its own."""

    def __init__(self, conninfo: str) -> None:
        import psycopg

        self.connection = psycopg.connect(conninfo, autocommit=True)
        try:
            self.connection.execute("CREATE EXTENSION IF NOT EXISTS pg_walinspect")
        except psycopg.Error as error:
            raise PeerMissing(f"pg_walinspect (PostgreSQL >= 15) is needed to count durable transactions: {error}") from None
        self.oid = int(self._one("SELECT oid FROM pg_database WHERE datname = current_database()"))
        self.tick = os.sysconf("SC_CLK_TCK")

    def _one(self, sql: str, *args: Any) -> Any:
        row = self.connection.execute(sql, args).fetchone()
        assert row is not None
        return row[0]

    def lsn(self) -> str:
        """Where the WAL is flushed to now."""
        return str(self._one("SELECT pg_current_wal_flush_lsn()"))

    def backend_cpu(self) -> dict[int, float]:
        """CPU seconds so far of each backend serving the group's processes."""
        rows = self.connection.execute(
            "SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND application_name IN (%s, %s)",
            (APP_NAME, DBOS_APP_NAME),
        ).fetchall()
        found = {}
        for (pid,) in rows:
            try:
                fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue  # the server runs elsewhere, or the backend just ended
            found[int(pid)] = (int(fields[11]) + int(fields[12])) / self.tick
        return found

    def written(self, start: str, end: str) -> tuple[int, int]:
        """(committed transactions that wrote to this database, heap rows they wrote to
        its logged tables) between two WAL positions."""
        filenodes = self.connection.execute(
            "SELECT pg_relation_filenode(c.oid)::bigint FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace"
            " WHERE c.relkind = 'r' AND n.nspname NOT IN ('pg_catalog', 'information_schema')"
            " AND n.nspname NOT LIKE 'pg_toast%%'"
        ).fetchall()
        row = self.connection.execute(
            "WITH r AS (SELECT xid::text::bigint AS xid, resource_manager AS rm, record_type AS rt,"
            "  description AS d, block_ref AS b FROM pg_get_wal_records_info(%s::pg_lsn, %s::pg_lsn)),"
            " mine AS (SELECT DISTINCT xid FROM r WHERE xid <> 0 AND b LIKE %s)"
            " SELECT (SELECT count(*) FROM r WHERE rm = 'Transaction' AND rt LIKE 'COMMIT%%'"
            "   AND xid IN (SELECT xid FROM mine)),"
            " (SELECT coalesce(sum(CASE WHEN rt LIKE 'MULTI_INSERT%%'"
            "   THEN coalesce(substring(d from '(\\d+) tuples')::int, 1) ELSE 1 END), 0) FROM r"
            "   WHERE ((rm = 'Heap' AND rt ~ '^(INSERT|UPDATE|HOT_UPDATE|DELETE)')"
            "   OR (rm = 'Heap2' AND rt LIKE 'MULTI_INSERT%%'))"
            "   AND substring(b from 'rel \\d+/\\d+/(\\d+)')::bigint = ANY(%s))",
            (start, end, f"% rel %/{self.oid}/%", [n for (n,) in filenodes if n is not None]),
        ).fetchone()
        assert row is not None
        return int(row[0]), int(row[1])
