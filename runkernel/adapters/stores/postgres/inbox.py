# generated from runkernel/adapters/stores/postgres/inbox_async.py by tools/async_to_sync.py, do not edit:
# change runkernel/adapters/stores/postgres/inbox_async.py and run `python tools/async_to_sync.py`
"""The PostgreSQL store's inbox writes: a command appended (and its Run's workers woken),
and a wait's answer appended only if its ticket has none pending: the unique key
``inbox_one_answer`` (schema 4) decides, so of racing answers one is inserted and the
others, once its transaction commits, insert nothing and name it.

Written once on psycopg's async API (``inbox_async.py``); ``inbox.py``, the synchronous
store's, is generated from it by ``tools/async_to_sync.py`` (``postgres.connection_async``
says how)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from runkernel.adapters.stores.contract import AnswerPending, StoreUnavailable
from runkernel.adapters.stores.serial import answered_ticket, dumps
from runkernel.adapters.stores.sql.dialect import POSTGRESQL
from runkernel.adapters.stores.sql.statements import PENDING_ANSWER, PUT_ANSWER
from runkernel.adapters.stores.postgres.connection import Connection
from runkernel.kernel.values import JsonValue

_PUT_ANSWER = POSTGRESQL.sql(PUT_ANSWER + " RETURNING entry_id").encode()
_PENDING_ANSWER = POSTGRESQL.sql(PENDING_ANSWER).encode()
#: How often an answer is tried whose refusing pending answer was settled between the
#: refused insert and its read (each try waits for no one).
_PUT_TRIES = 5


def put_command(
    change: Callable[..., Any], where: str, channel: str, run_id: str, body: JsonValue
) -> int:
    """``Store.put_command`` through the store's ``change`` (a write, never repeated:
    twice would queue the command twice); ``channel`` is the workers' wake-up channel."""
    ticket = answered_ticket(body)

    def put(conn: Connection) -> int | AnswerPending | None:
        with conn.transaction():
            if ticket is None:
                cursor = conn.execute(
                    "INSERT INTO inbox (run_id, body) VALUES (%s, %s) RETURNING entry_id", (run_id, dumps(body))
                )
            else:
                cursor = conn.execute(_PUT_ANSWER, (run_id, dumps(body), ticket))
            row = cursor.fetchone()
            if row is None and ticket is not None:
                cursor = conn.execute(_PENDING_ANSWER, (run_id, ticket))
                pending = cursor.fetchone()
                # None: settled since the insert was refused, so try again
                return None if pending is None else AnswerPending(int(pending[0]), ticket)
            conn.execute("SELECT pg_notify(%s, %s)", (channel, run_id))
        assert row is not None
        return int(row[0])

    for _ in range(_PUT_TRIES):
        entry: int | AnswerPending | None = change(put, repeat=False)
        if isinstance(entry, AnswerPending):
            raise entry
        if entry is not None:
            return entry
    raise StoreUnavailable(f"{where}: the pending answer of ticket {ticket!r} kept changing")
