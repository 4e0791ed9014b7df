"""The SQLite store's inbox writes: a command appended, and a wait's answer appended only
if its ticket has none pending (the unique key ``inbox_one_answer``, schema 7)."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Sequence
from typing import Any

from runkernel.adapters.stores.contract import AnswerPending
from runkernel.adapters.stores.serial import answered_ticket, dumps
from runkernel.adapters.stores.sql.statements import PENDING_ANSWER, PUT_ANSWER
from runkernel.kernel.values import JsonValue


def put_command(
    db: sqlite3.Connection, run_id: str, body: JsonValue, write: Callable[[str, Sequence[Any]], sqlite3.Cursor]
) -> int:
    """``Store.put_command`` on ``db``, each statement through ``write`` (which turns a
    SQLite failure into the store's typed error)."""
    ticket = answered_ticket(body)
    if ticket is None:
        return int(write("INSERT INTO inbox (run_id, body) VALUES (?, ?)", (run_id, dumps(body))).lastrowid or 0)
    # under the write lock, so the pending answer read cannot change before the insert;
    # read first only so a refused answer uses up no command number: the unique key
    # ``inbox_one_answer`` is what refuses a second pending answer
    write("BEGIN IMMEDIATE", ())
    try:
        pending = write(PENDING_ANSWER, (run_id, ticket)).fetchone()
        entry_id = None
        if pending is None:
            inserted = write(PUT_ANSWER, (run_id, dumps(body), ticket))
            if inserted.rowcount:
                entry_id = int(inserted.lastrowid or 0)
            else:
                pending = write(PENDING_ANSWER, (run_id, ticket)).fetchone()
        write("COMMIT", ())
    finally:
        if db.in_transaction:
            db.execute("ROLLBACK")
    if entry_id is None:
        raise AnswerPending(int(pending[0]) if pending is not None else 0, ticket)
    return entry_id
