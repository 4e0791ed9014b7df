"""``runkernel simulate``'s claim of a PostgreSQL store: a session advisory lock keyed by
the store's schema, taken on a connection of its own before the "holds no Thread" check
and held until the simulation ends, so two simulations started together on one store
cannot both pass the check (SQLite's claim is a row written in the check's transaction).
The lock goes with the session: a simulation that dies leaves no stale claim."""

from __future__ import annotations

from types import TracebackType
from typing import Any

import psycopg
from psycopg import sql

from runkernel.adapters.stores.contract import SIMULATE_CLAIM
from runkernel.adapters.stores.postgres.schema import split_url, unavailable

#: The lock's key is this text and the schema name, hashed by the server.
_KEY = "runkernel simulate claim:"


class SimulateClaim:
    """``with SimulateClaim(url) as claim``: ``claim.taken`` is False when another
    simulation holds the store; the lock is released on leaving the block."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.conninfo, self.schema = split_url(url)
        self.taken = False
        self._conn: psycopg.Connection[tuple[Any, ...]] | None = None

    def __enter__(self) -> SimulateClaim:
        try:
            self._conn = psycopg.connect(self.conninfo, autocommit=True, connect_timeout=10)
            row = self._conn.execute(
                "SELECT pg_try_advisory_lock(hashtextextended(%s, 0))", (_KEY + self.schema,)
            ).fetchone()
        except psycopg.Error as error:
            self._close()
            raise unavailable(self.url, "claiming the store", error) from None
        self.taken = bool(row and row[0])
        return self

    def simulated(self) -> bool:
        """Whether simulate filled this store: its claim row is in ``meta`` (written by
        ``mark`` and kept until a reset), as SQLite's claim row is."""
        row = self._meta(sql.SQL("SELECT value FROM {}.meta WHERE key = 'claimed_by'"), ())
        return bool(row and str(row[0]).startswith(SIMULATE_CLAIM))

    def mark(self, owner: str) -> None:
        """Record that simulate fills this store (while the lock is held)."""
        self._meta(
            sql.SQL(
                "INSERT INTO {}.meta (key, value) VALUES ('claimed_by', %s) "
                "ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value RETURNING value"
            ),
            (owner,),
        )

    def _meta(self, query: sql.SQL, params: tuple[str, ...]) -> tuple[Any, ...] | None:
        assert self._conn is not None, "use SimulateClaim in a with block"
        try:
            return self._conn.execute(query.format(sql.Identifier(self.schema)), params).fetchone()
        except psycopg.Error as error:
            raise unavailable(self.url, "claiming the store", error) from None

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        self._close()

    def _close(self) -> None:
        if self._conn is not None:
            try:
                self._conn.close()  # ends the session, and with it the lock
            except psycopg.Error:
                pass
            self._conn = None
