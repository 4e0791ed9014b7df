"""One PostgreSQL commit sent: its statements (``postgres.commit``) as one simple query,
so one round trip and one implicit transaction, and what its failure means. A rival
writer found by the database and a lease refused in the transaction come out as
psycopg's own errors (the store judges again); a connection that broke during the send
is ``ConnectionLost`` (whether it committed is unknown: the store looks the commit up);
any other failure is ``StoreUnavailable``.

Written once on psycopg's async API (``send_async.py``); ``send.py``, the synchronous
store's, is generated from it by ``tools/async_to_sync.py`` (``postgres.connection_async``
says how).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import psycopg
from psycopg import errors

from runkernel.adapters.stores.postgres.commit import Statement
from runkernel.adapters.stores.postgres.connection_async import AsyncConnection
from runkernel.adapters.stores.postgres.schema import unavailable

#: Errors that mean "another writer got there first": the commit is judged again.
RIVAL_WRITE = (errors.UniqueViolation, errors.NotNullViolation, errors.DeadlockDetected, errors.SerializationFailure)


class ConnectionLost(Exception):
    """The connection broke during a write: whether it committed is unknown."""


async def send_commit(
    conn: AsyncConnection,
    statements: list[Statement],
    url: str,
    before_commit: Callable[[AsyncConnection], None] | None = None,
) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
    """One commit's statements as one simple query: one round trip, one implicit
    transaction; returns the rows of the first statement (the lease check) and of
    the last (the inbox). (A pipeline would let psycopg prepare them, but a
    statement refused in a pipeline leaves psycopg's cache naming statements never
    prepared.) ``before_commit``, a test's hook, is called with the connection first."""
    try:
        if before_commit is not None:
            before_commit(conn)
        cursor = psycopg.AsyncClientCursor(conn)
        await cursor.execute("; ".join(cursor.mogrify(text, params) for text, params in statements).encode())
        first = await cursor.fetchall()
        while cursor.nextset():
            pass
        return first, await cursor.fetchall()
    except (*RIVAL_WRITE, errors.DivisionByZero):
        raise
    except psycopg.Error as error:
        if conn.broken or conn.closed:
            raise ConnectionLost() from None
        raise unavailable(url, "a commit", error) from None
