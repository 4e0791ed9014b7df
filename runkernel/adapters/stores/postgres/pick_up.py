# generated from runkernel/adapters/stores/postgres/pick_up_async.py by tools/async_to_sync.py, do not edit:
# change runkernel/adapters/stores/postgres/pick_up_async.py and run `python tools/async_to_sync.py`
"""A PostgreSQL pick-up in one round trip (``stores.folded_reads``): the Run's snapshot with
its Thread's head and its parent's call, the Thread's log, the checkpoint and the
pending commands, read in one REPEATABLE READ, READ ONLY block, so in one snapshot of
the database. A worker's pick-up can be sent with the lease take before it: the take
is its own transaction, committed before the reads' block begins, so the reads see
every commit an earlier holder of the lease made (none can land after the take).

Written once on psycopg's async API (``pick_up_async.py``); ``pick_up.py``, which the
synchronous store sends its pick-ups through, is generated from it by
``tools/async_to_sync.py`` (``postgres.connection_async`` says how).
"""

from __future__ import annotations

from typing import Any

import psycopg

from runkernel.adapters.stores.postgres.commit import PENDING
from runkernel.adapters.stores.postgres.connection import Connection

Rows = list[tuple[Any, ...]]

#: A pick-up's reads, each of one parameter (the run id): the Run's snapshot, its
#: Thread's head and its parent's call; the Thread's log with the head's version
#: (``SqlStore.commits``' rows); the checkpoint; the pending commands.
PICK_UP = (
    "SELECT r.snapshot, r.thread_id, t.version, t.active_run_id, r.parent_thread_id, r.parent_run_id, "
    "r.parent_call_id FROM runs r "
    "LEFT JOIN threads t ON t.thread_id = r.thread_id WHERE r.run_id = %s",
    "SELECT c.version, c.line, t.version FROM runs r JOIN commits c ON c.thread_id = r.thread_id "
    "LEFT JOIN threads t ON t.thread_id = r.thread_id WHERE r.run_id = %s ORDER BY c.version",
    "SELECT step, data FROM checkpoints WHERE run_id = %s",
    PENDING,
)


def pick_up_rows(
    conn: Connection, run_id: str, *, read_only: bool, take: tuple[str, tuple[Any, ...]] | None = None
) -> list[Rows]:
    """The rows of each result: the take's (when ``take``, a statement and its
    parameters, is sent first in a transaction of its own), then the pick-up's four.
    A read-only store's connection is one snapshot already: its reads need no block.
    A statement that fails leaves no block open."""
    cursor = psycopg.ClientCursor(conn)
    statements = [cursor.mogrify(query, (run_id,)) for query in PICK_UP]
    if not read_only:
        statements = ["BEGIN ISOLATION LEVEL REPEATABLE READ, READ ONLY", *statements, "COMMIT"]
    if take is not None:
        statements = ["BEGIN", cursor.mogrify(*take), "COMMIT", *statements]
    try:
        cursor.execute("; ".join(statements).encode())
    except psycopg.Error:
        # a statement that failed leaves its block open and aborted: end it
        if not read_only and conn.info.transaction_status == psycopg.pq.TransactionStatus.INERROR:
            conn.execute("ROLLBACK")
        raise
    found = []
    while True:
        if cursor.description is not None:
            found.append(cursor.fetchall())
        if not cursor.nextset():
            return found
