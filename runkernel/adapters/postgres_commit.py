"""The statements of one PostgreSQL commit, sent as one simple query (bound by psycopg
on the client): PostgreSQL runs them as one implicit transaction, committed when the
last succeeds, rolled back whole when any fails, in one round trip. Each check the database makes is an error, so a refused commit writes
nothing: a rival writer of the version (the commit row's key, or the Thread's head not
at the expected version: the commit's line comes out NULL, which its column refuses),
and a lease that is not the Run's valid one by the server's clock now() (a division by
zero, the one error a plain SELECT can be made to raise)."""

from __future__ import annotations

from typing import Any

from runkernel.adapters.store import Lease, Settlement
from runkernel.kernel.history import HistoryKeys
from runkernel.kernel.state import ThreadCommit, ThreadHead

#: The store's clock, in seconds since the Unix epoch: the server's, never a worker's.
NOW = "extract(epoch FROM now())::float8"

_LEASE_HELD_BY_WRITER = (
    # locked FOR SHARE, so no take-over commits between this check and the commit
    "SELECT 1 / count(*) FROM (SELECT 1 FROM leases WHERE run_id = %s AND worker_id = %s AND epoch = %s "
    f"AND NOT released AND expires_at > {NOW} FOR SHARE) AS held"
)
_NO_LEASE_HELD = (
    f"SELECT 1 / (1 - count(*)) FROM leases WHERE run_id = %s AND NOT released AND expires_at > {NOW}"
)
_ADVANCE_HEAD = (
    "WITH moved AS (UPDATE threads SET version = %s, active_run_id = %s "
    "WHERE thread_id = %s AND version = %s RETURNING 1) "
    "INSERT INTO commits (thread_id, version, run_id, line, writer_id, writer_epoch) "
    "VALUES (%s, %s, %s, (SELECT %s::text FROM moved), %s, %s)"
)
_FIRST_HEAD = (
    # a Thread's first commit: its threads row must not exist (its key refuses a rival)
    "WITH made AS (INSERT INTO threads (thread_id, version, active_run_id) VALUES (%s, %s, %s) RETURNING 1) "
    "INSERT INTO commits (thread_id, version, run_id, line, writer_id, writer_epoch) "
    "VALUES (%s, %s, %s, (SELECT %s::text FROM made), %s, %s)"
)
_PUT_RUN = (
    "INSERT INTO runs (run_id, thread_id, snapshot) VALUES (%s, %s, %s) "
    "ON CONFLICT (run_id) DO UPDATE SET snapshot = excluded.snapshot"
)


Statement = tuple[bytes, tuple[Any, ...]]


def commit_statements(
    commit: ThreadCommit,
    line: str,
    head: ThreadHead | None,
    new_head: ThreadHead,
    snapshot_text: str,
    keys: HistoryKeys,
    settle: Settlement | None,
    lease: Lease | None,
    notify: tuple[str, str] | None,
) -> list[Statement]:
    """The statements and their parameters for one commit judged against ``head``;
    ``notify`` is (channel, payload) to wake workers when it commits."""
    found: list[Statement] = []

    def add(text: str, *params: Any) -> None:
        found.append((text.encode(), params))

    if lease is None:
        add(_NO_LEASE_HELD, commit.run_id)
    else:
        add(_LEASE_HELD_BY_WRITER, lease.run_id, lease.worker_id, lease.epoch)
    writer = (None, None) if lease is None else (lease.worker_id, lease.epoch)
    row = (commit.thread_id, new_head.version, commit.run_id, line, *writer)
    if head is None:
        add(_FIRST_HEAD, commit.thread_id, new_head.version, new_head.active_run_id, *row)
    else:
        add(_ADVANCE_HEAD, new_head.version, new_head.active_run_id, commit.thread_id, commit.expected_version, *row)
    add(_PUT_RUN, commit.run_id, commit.thread_id, snapshot_text)
    if keys.ticket is not None:
        add("INSERT INTO tickets (ticket_id, run_id) VALUES (%s, %s)", keys.ticket, commit.run_id)
    if keys.closed_batch is not None:
        add("INSERT INTO closed_batches (run_id, batch_id) VALUES (%s, %s)", commit.run_id, keys.closed_batch)
    if keys.resume is not None:
        add(
            "INSERT INTO applied_resumes (run_id, ticket_id, digest) VALUES (%s, %s, %s)",
            commit.run_id, keys.resume.ticket_id, keys.resume.digest,
        )
    if settle is not None:
        add(
            "UPDATE inbox SET state = 'settled', outcome = %s WHERE entry_id = %s AND state = 'pending'",
            settle.outcome, settle.entry_id,
        )
    if notify is not None:
        add("SELECT pg_notify(%s, %s)", *notify)
    return found
