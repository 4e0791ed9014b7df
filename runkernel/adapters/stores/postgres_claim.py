"""``runkernel simulate``'s claim of a PostgreSQL store: a session advisory lock keyed by
the store's schema, taken on a connection of its own before the "holds no Thread" check
and held until the simulation ends, so two simulations started together on one store
cannot both pass the check (SQLite's claim is a row written in the check's transaction).
The lock goes with the session: a simulation that dies leaves no stale claim."""

from __future__ import annotations

from types import TracebackType
from typing import Any

import psycopg

from runkernel.adapters.stores.postgres_schema import split_url, unavailable

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
