"""The statements of one PostgreSQL commit, sent as one simple query (bound by psycopg
on the client): PostgreSQL runs them as one implicit transaction, committed when the
last succeeds, rolled back whole when any fails, in one round trip. Each check the database makes is an error, so a refused commit writes
nothing: a rival writer of the version (the commit row's key, or the Thread's head not
at the expected version: the commit's line comes out NULL, which its column refuses),
and a lease that is not the Run's valid one by the server's clock now() (a division by
zero, the one error a plain SELECT can be made to raise)."""

from __future__ import annotations

from typing import Any

from runkernel.adapters.stores.contract import Lease, Settlement
from runkernel.adapters.stores.sql.dialect import POSTGRESQL
from runkernel.adapters.stores.sql.statements import COMPACT_COMMANDS, RELEASE_IN_COMMIT, history_statements
from runkernel.adapters.stores.work import RunSummary, parent_columns
from runkernel.kernel.history import HistoryKeys
from runkernel.kernel.state import ThreadCommit, ThreadHead

#: The store's clock, in seconds since the Unix epoch: the server's, never a worker's.
NOW = POSTGRESQL.now

#: The statements every commit runs, prepared once per connection (``PREPARED``) and
#: run by name, so the server parses and plans them once, not at every commit.
PREPARED = (
    # the writer's lease, locked FOR SHARE so no take-over commits between check and
    # commit; its answer is the seconds the lease has left (``postgres.echo``)
    f"PREPARE rk_lease_held (text, text, bigint) AS SELECT (max(expires_at) - {NOW}) * (1 / count(*)) FROM "
    "(SELECT expires_at FROM leases "
    f"WHERE run_id = $1 AND worker_id = $2 AND epoch = $3 AND NOT released AND expires_at > {NOW} FOR SHARE) AS held",
    f"PREPARE rk_no_lease_held (text) AS SELECT 1 / (1 - count(*)) FROM leases WHERE run_id = $1 AND NOT released "
    f"AND expires_at > {NOW}",
    # version, active run, thread, expected version, run, line, writer id, writer epoch
    "PREPARE rk_advance (bigint, text, text, bigint, text, text, text, bigint) AS "
    "WITH moved AS (UPDATE threads SET version = $1, active_run_id = $2 WHERE thread_id = $3 AND version = $4 "
    "RETURNING 1) INSERT INTO commits (thread_id, version, run_id, line, writer_id, writer_epoch) "
    "VALUES ($3, $1, $5, (SELECT $6::text FROM moved), $7, $8)",
    # a Thread's first commit: its threads row must not exist (its key refuses a rival)
    "PREPARE rk_first (bigint, text, text, text, text, text, bigint) AS "
    "WITH made AS (INSERT INTO threads (thread_id, version, active_run_id) VALUES ($3, $1, $2) RETURNING 1) "
    "INSERT INTO commits (thread_id, version, run_id, line, writer_id, writer_epoch) "
    "VALUES ($3, $1, $4, (SELECT $5::text FROM made), $6, $7)",
    # a Run's first commit (its activation, which names the app, its version and a
    # child's parent call: later commits keep them)
    "PREPARE rk_put_run (text, text, text, text, text, bigint, bigint, text, float8, boolean, text, text, text, text) AS "
    "INSERT INTO runs (run_id, thread_id, snapshot, app, state, step, version, waiting_for, wake_at, quiet, "
    "parent_thread_id, parent_run_id, parent_call_id, app_version) "
    "VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)",
    # a Run's later commits: a plain update (an upsert would try the insert first)
    "PREPARE rk_update_run (text, text, text, bigint, bigint, text, float8, boolean) AS "
    "UPDATE runs SET snapshot = $2, state = $3, step = $4, version = $5, waiting_for = $6, wake_at = $7, "
    "quiet = $8 WHERE run_id = $1",
)


Statement = tuple[bytes, tuple[Any, ...]]


def compacts_inbox(summary: RunSummary) -> bool:
    """Whether the commit that leaves a Run as ``summary`` says deletes its settled
    refusals in its own transaction: the commit that ends it."""
    return summary.state == "ended"

#: The Run's pending inbox commands, the last statement of every commit.
PENDING = "SELECT entry_id, body FROM inbox WHERE run_id = %s AND state = 'pending' ORDER BY entry_id"


def commit_statements(
    commit: ThreadCommit,
    line: str,
    head: ThreadHead | None,
    new_head: ThreadHead,
    snapshot_text: str,
    summary: RunSummary,
    keys: HistoryKeys,
    settle: Settlement | None,
    lease: Lease | None,
    new_run: bool,
    notify: tuple[str, str] | None,
    awaited: tuple[str, ...] = (),
    notify_channel: str | None = None,
    trace_context: str | None = None,
    release: bool = False,
) -> list[Statement]:
    """The statements and their parameters for one commit judged against ``head``
    (``new_run``: the Run has no row yet); ``notify`` is (channel, payload) to wake
    workers when it commits; ``awaited`` the children the Run is quiet for
    (``runkernel.adapters.stores.work.awaited_children``); ``notify_channel`` where a child's
    end wakes its parent's workers; ``trace_context`` what a new Run's telemetry keeps
    beside it; ``release`` gives ``lease`` up once the commit is written."""
    found: list[Statement] = []

    def add(text: str, *params: Any) -> None:
        found.append((text.encode(), params))

    if lease is None:
        add("EXECUTE rk_no_lease_held (%s)", commit.run_id)
    else:
        add("EXECUTE rk_lease_held (%s, %s, %s)", lease.run_id, lease.worker_id, lease.epoch)
    writer = (None, None) if lease is None else (lease.worker_id, lease.epoch)
    if head is None:
        add(
            "EXECUTE rk_first (%s, %s, %s, %s, %s, %s, %s)",
            new_head.version, new_head.active_run_id, commit.thread_id, commit.run_id, line, *writer,
        )
    else:
        add(
            "EXECUTE rk_advance (%s, %s, %s, %s, %s, %s, %s, %s)",
            new_head.version, new_head.active_run_id, commit.thread_id, commit.expected_version,
            commit.run_id, line, *writer,
        )
    if new_run:
        add(
            "EXECUTE rk_put_run (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)",
            commit.run_id, commit.thread_id, snapshot_text, summary.app, summary.state, summary.step,
            summary.version, summary.waiting_for, summary.wake_at, bool(awaited), *parent_columns(commit.parent),
            summary.app_version,
        )
    else:
        add(
            "EXECUTE rk_update_run (%s, %s, %s, %s, %s, %s, %s, %s)",
            commit.run_id, snapshot_text, summary.state, summary.step, summary.version, summary.waiting_for,
            summary.wake_at, bool(awaited),
        )
    if new_run and trace_context is not None:
        add("UPDATE runs SET trace_context = %s WHERE run_id = %s", trace_context, commit.run_id)
    for text, params in history_statements(commit.run_id, keys, awaited, settle):
        add(POSTGRESQL.sql(text), *params)
    if release and lease is not None:
        add(POSTGRESQL.sql(RELEASE_IN_COMMIT), True, lease.run_id, lease.worker_id, lease.epoch)
    if notify is not None:
        add("SELECT pg_notify(%s, %s)", *notify)
    if compacts_inbox(summary):
        # the Run's end settles its inbox: its refusals go now (``compact_commands``)
        add(POSTGRESQL.sql(COMPACT_COMMANDS), commit.run_id)
        if notify_channel is not None:
            # a child's end is its quiet parent's work: wake the workers at once
            add(
                "SELECT pg_notify(%s, parent_run_id) FROM runs WHERE run_id = %s AND parent_run_id IS NOT NULL",
                notify_channel, commit.run_id,
            )
    # last: the Run's inbox as this transaction sees it (``pending_seen_in_commit``)
    add(PENDING, commit.run_id)
    return found
