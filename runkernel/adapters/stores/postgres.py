"""The server store: PostgreSQL through psycopg 3 and psycopg-pool.

The same layout and cost model as the SQLite store: each commit is one row holding its
``runkernel/2`` line (the message delta), the latest state of every Run and Thread is a
row of its own, history facts are indexed rows read by key, and a commit is one
transaction, sent in one round trip. The expected-version check is the
database's own: the Thread's head moves by a conditional update in the commit's
transaction and the commit row's key is (thread, version), so of two writers of one
version exactly one commits and the other gets a typed conflict with nothing written.

A connection that drops after COMMIT was sent (W4, lost acknowledgement) is answered by
looking the commit up by identity and version on a new connection: this store's own
line there is adopted, another line is a conflict, no line means nothing was written and
the commit is sent again. Nothing is ever committed twice.

The store never creates its schema: ``runkernel db init`` does (``postgres_schema``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import psycopg
from psycopg import errors, sql

from runkernel.adapters.stores.leases import commit_writer
from runkernel.adapters.stores.postgres_commit import Statement, commit_statements
from runkernel.adapters.stores.postgres_connection import Connection
from runkernel.adapters.stores.postgres_leases import PostgresLeases
from runkernel.adapters.stores.postgres_schema import TABLES, unavailable
from runkernel.adapters.stores.serial import commit_from_text, commit_text, dumps, judged_dumps, snapshot_from_json, snapshot_to_json
from runkernel.adapters.stores.sqlite_decode import decoded, integer, json_text, thread_head
from runkernel.adapters.stores.contract import (
    Checkpoint,
    CommitConflict,
    DamagedStore,
    InboxEntry,
    Lease,
    LeaseLost,
    Reconciliation,
    Settlement,
    StoreUnavailable,
    Writer,
    judge_append,
)
from runkernel.adapters.stores.work import awaited_children, summary_of
from runkernel.kernel.history import History
from runkernel.kernel.rules import Rejection, Rule
from runkernel.kernel.state import Message, RunSnapshot, ThreadCommit, ThreadHead
from runkernel.kernel.values import JsonValue

#: How many times a commit is sent again after its connection dropped before an answer.
LOST_CONNECTION_ATTEMPTS = 4

#: Errors that mean "another writer got there first": the commit is judged again.
_RIVAL_WRITE = (errors.UniqueViolation, errors.NotNullViolation, errors.DeadlockDetected, errors.SerializationFailure)


class _ConnectionLost(Exception):
    """The connection broke during a write: whether it committed is unknown."""


class PostgresStore(PostgresLeases):
    """A runkernel store in one PostgreSQL schema. Use one instance per thread of control.

    ``url`` is a libpq URL (``postgresql://user@host:5432/db``), optionally with
    ``?schema=NAME``. ``read_only`` opens it for a read command: one REPEATABLE READ,
    READ ONLY transaction for the store's life, so everything read is one snapshot.
    ``wait_for_work(timeout)`` is the LISTEN/NOTIFY wake-up of a worker."""

    def __init__(self, url: str, *, read_only: bool = False, connect_timeout: float = 10.0) -> None:
        #: how many lost acknowledgements were recovered by adopting this store's own commit
        self.adopted_after_lost_ack = 0
        #: a test hook called with the connection just before a commit is sent
        self.before_commit: Callable[[Connection], None] | None = None
        #: (run id, thread head, snapshot) this store wrote last: judged against without
        #: reading, since the conditional update refuses it if the Thread moved since
        self._written: tuple[str, ThreadHead, RunSnapshot] | None = None
        super().__init__(url, read_only=read_only, connect_timeout=connect_timeout)

    def _reconnect(self) -> None:
        self._written = None
        super()._reconnect()

    def writer_of(self, thread_id: str, version: int) -> Writer | None:
        stored = self._stored(thread_id, version)
        return None if stored is None else stored[1]

    # --- commits --------------------------------------------------------------------

    def append(
        self,
        commit: ThreadCommit,
        settle: Settlement | None = None,
        *,
        lease: Lease | None = None,
        trace_context: str | None = None,
    ) -> RunSnapshot:
        """``Store.append``; ``trace_context`` (a Run's activation only) is kept beside the
        Run, outside the commit log, in the same transaction (``trace_context()``)."""
        if self.read_only:
            raise StoreUnavailable(f"{self.where} was opened read-only")
        if lease is not None and lease.run_id != commit.run_id:
            raise LeaseLost(lease, f"it leases run {lease.run_id!r}, not the commit's run {commit.run_id!r}")
        sent: list[tuple[RunSnapshot, str]] = []  # the snapshot and line of each attempt sent
        lost = False
        for _ in range(LOST_CONNECTION_ATTEMPTS):
            try:
                return self._append_judged(commit, settle, lease, sent, lost, trace_context)
            except _ConnectionLost:
                lost = True
                self._reconnect()
                stored = self._stored(commit.thread_id, commit.version)
                if stored is None:
                    continue  # it never committed: send it again
                if sent and stored[:2] == (sent[-1][1], None if lease is None else lease.writer):
                    self.adopted_after_lost_ack += 1
                    return sent[-1][0]
                raise CommitConflict(self._taken(commit)) from None
        raise StoreUnavailable(
            f"{self.where}: the connection dropped {LOST_CONNECTION_ATTEMPTS} times during a commit; "
            f"commit {commit.version} of thread {commit.thread_id!r} was not written"
        )

    def _append_judged(
        self,
        commit: ThreadCommit,
        settle: Settlement | None,
        lease: Lease | None,
        sent: list[tuple[RunSnapshot, str]],
        lost: bool,
        trace_context: str | None = None,
    ) -> RunSnapshot:
        """Judge, then write in one transaction; a rival write found by the database,
        or a conflict judged against this store's own last write, makes it judge once
        more against fresh rows (which names the conflict)."""
        for fresh in (False, True):
            try:
                head, before = self._before(commit, fresh)
                accepted = judge_append(head, before, commit, self.history(commit.run_id), self._ticket_known)
            except CommitConflict:
                if not fresh and self._written is not None:
                    # judged against this store's own last write: another writer may
                    # have moved the Thread since, so judge once more against its rows
                    self._written = None
                    continue
                adopted = self._landed(commit, lease, sent, lost)
                if adopted is not None:
                    return adopted
                raise
            line = commit_text(commit)
            sent.append((accepted.run, line))
            query = commit_statements(
                commit, line, head, accepted.head, judged_dumps(snapshot_to_json(accepted.run)),
                summary_of(accepted.run, commit.app), accepted.keys,
                settle, lease, before is None, (self._channel, commit.run_id) if before is None else None,
                awaited_children(accepted.run), self._channel, trace_context,
            )
            try:
                self._write(query)
            except errors.DivisionByZero:
                self._written = None
                self._refuse_lease(commit, lease)
                continue  # the lease was fine again when read: judge and send once more
            except _RIVAL_WRITE:
                self._written = None
                continue
            self._written = (commit.run_id, accepted.head, accepted.run)
            return accepted.run
        adopted = self._landed(commit, lease, sent, lost)
        if adopted is not None:
            return adopted
        raise CommitConflict(self._taken(commit))

    def _landed(
        self, commit: ThreadCommit, lease: Lease | None, sent: list[tuple[RunSnapshot, str]], lost: bool
    ) -> RunSnapshot | None:
        """W4: the snapshot to adopt if this very commit already landed by this writer
        (a retry after a lost acknowledgement), else None. A caller's retry under a
        lease is adopted only while it is the Thread's latest commit; a retry this
        store makes after its connection dropped needs no lease."""
        if lease is None and not lost:
            return None
        stored = self._stored(commit.thread_id, commit.version)
        if stored is None:
            return None
        line, writer, head_version, run_id = stored
        mine = (sent[-1][1] if sent else commit_text(commit)) == line and run_id == commit.run_id
        if not mine or writer != (None if lease is None else lease.writer):
            return None
        if lost and sent:
            self.adopted_after_lost_ack += 1
            return sent[-1][0]
        if lease is None or head_version != commit.version:
            return None
        return self.run(commit.run_id)

    def _taken(self, commit: ThreadCommit) -> Rejection:
        return Rejection(
            Rule.VERSION,
            f"version {commit.version} of thread {commit.thread_id!r} was committed by another writer",
        )

    def _before(self, commit: ThreadCommit, fresh: bool) -> tuple[ThreadHead | None, RunSnapshot | None]:
        written = self._written
        if not fresh and written is not None and written[0] == commit.run_id and written[1].thread_id == commit.thread_id:
            return written[1], written[2]
        row = self._fetch(
            "SELECT (SELECT version FROM threads WHERE thread_id = %s), "
            "(SELECT active_run_id FROM threads WHERE thread_id = %s), "
            "(SELECT snapshot FROM runs WHERE run_id = %s)",
            (commit.thread_id, commit.thread_id, commit.run_id),
        )
        assert row is not None
        head = None if row[0] is None else self._head(commit.thread_id, row[0], row[1])
        return head, None if row[2] is None else self._snapshot(commit.run_id, row[2])

    def _write(self, statements: list[Statement]) -> None:
        """One commit's statements as one simple query: one round trip, one implicit
        transaction. (A pipeline would let psycopg prepare them, but a statement refused
        in a pipeline leaves psycopg's cache naming statements never prepared.)"""
        conn = self._conn
        try:
            if self.before_commit is not None:
                self.before_commit(conn)
            cursor = psycopg.ClientCursor(conn)
            cursor.execute("; ".join(cursor.mogrify(text, params) for text, params in statements).encode())
        except (*_RIVAL_WRITE, errors.DivisionByZero):
            raise
        except psycopg.Error as error:
            if conn.broken or conn.closed:
                raise _ConnectionLost() from None
            raise unavailable(self.url, "a commit", error) from None

    def _refuse_lease(self, commit: ThreadCommit, lease: Lease | None) -> None:
        """The commit's lease check failed in its transaction: raise what it found."""
        row, now = self._lease_row(commit.run_id)
        commit_writer(commit, lease, row, now)

    def _stored(self, thread_id: str, version: int) -> tuple[str, Writer | None, int, str] | None:
        """(line, writer, the Thread's head version, run id) of a stored commit."""
        row = self._fetch(
            "SELECT c.line, c.writer_id, c.writer_epoch, t.version, c.run_id FROM commits c "
            "JOIN threads t ON t.thread_id = c.thread_id WHERE c.thread_id = %s AND c.version = %s",
            (thread_id, version),
        )
        if row is None:
            return None
        writer = None if row[1] is None else Writer(str(row[1]), int(row[2]))
        return str(row[0]), writer, int(row[3]), str(row[4])

    # --- reads ----------------------------------------------------------------------

    def _head(self, thread_id: str, version: Any, active: Any) -> ThreadHead:
        head: ThreadHead = decoded(self.where, f"threads row {thread_id!r}", lambda: thread_head(thread_id, version, active))
        return head

    def _snapshot(self, run_id: str, text: Any) -> RunSnapshot:
        snapshot: RunSnapshot = decoded(
            self.where, f"runs row {run_id!r}", lambda: snapshot_from_json(json_text(text))
        )
        if snapshot.run_id != run_id:
            raise DamagedStore(f"{self.where}: the runs row {run_id!r} holds the state of run {snapshot.run_id!r}")
        return snapshot

    def history(self, run_id: str) -> History:
        return _PostgresHistory(self, run_id)

    def _ticket_known(self, ticket_id: str) -> bool:
        return self._fetch("SELECT 1 FROM tickets WHERE ticket_id = %s", (ticket_id,)) is not None

    def run(self, run_id: str) -> RunSnapshot | None:
        row = self._fetch("SELECT snapshot FROM runs WHERE run_id = %s", (run_id,))
        return None if row is None else self._snapshot(run_id, row[0])

    def trace_context(self, run_id: str) -> str | None:
        """The trace context stored with the Run's activation (None: none was)."""
        row = self._fetch("SELECT trace_context FROM runs WHERE run_id = %s", (run_id,))
        return None if row is None or row[0] is None else str(row[0])

    def thread_head(self, thread_id: str) -> ThreadHead | None:
        row = self._fetch("SELECT version, active_run_id FROM threads WHERE thread_id = %s", (thread_id,))
        return None if row is None else self._head(thread_id, row[0], row[1])

    def thread_ids(self) -> list[str]:
        return [str(r[0]) for r in self._fetch_all("SELECT thread_id FROM threads ORDER BY thread_id", ())]

    def thread_of(self, run_id: str) -> str | None:
        row = self._fetch("SELECT thread_id FROM runs WHERE run_id = %s", (run_id,))
        return None if row is None else str(row[0])

    def commits(self, thread_id: str) -> Iterator[ThreadCommit]:
        """The Thread's log, checked as it is read (versions 1..n, each line's identity
        matching its row, the last one the head); anything else is a DamagedStore."""
        rows = self._fetch_all(
            "SELECT c.version, c.line, (SELECT t.version FROM threads t WHERE t.thread_id = %s) "
            "FROM commits c WHERE c.thread_id = %s ORDER BY c.version",
            (thread_id, thread_id),
        )
        if not rows:
            if self.thread_head(thread_id) is not None:
                raise DamagedStore(f"{self.where}: thread {thread_id!r} has a head but no commits")
            return iter(())
        found: list[ThreadCommit] = []
        for expected, (stored_version, line, _) in enumerate(rows, start=1):
            where = f"commits row ({thread_id!r}, {stored_version!r})"
            commit: ThreadCommit = decoded(self.where, where, lambda: commit_from_text(line))
            if stored_version != expected or commit.version != expected or commit.thread_id != thread_id:
                raise DamagedStore(f"{self.where}: the {where} breaks the log: expected version {expected}")
            found.append(commit)
        if rows[-1][2] != len(rows):
            raise DamagedStore(f"{self.where}: thread {thread_id!r} has {len(rows)} commits but its head says {rows[-1][2]!r}")
        return iter(found)

    def commit_lines(self, thread_id: str) -> list[str]:
        """The stored ``runkernel/2`` lines, exactly as written."""
        rows = self._fetch_all("SELECT line FROM commits WHERE thread_id = %s ORDER BY version", (thread_id,))
        return [str(r[0]) for r in rows]

    def messages(self, thread_id: str) -> list[Message]:
        return [m for c in self.commits(thread_id) for m in c.messages]

    # --- inbox, checkpoints, reconciliations ------------------------------------

    def put_command(self, run_id: str, body: JsonValue) -> int:
        def put(conn: Connection) -> int:
            with conn.transaction():
                row = conn.execute(
                    "INSERT INTO inbox (run_id, body) VALUES (%s, %s) RETURNING entry_id", (run_id, dumps(body))
                ).fetchone()
                conn.execute("SELECT pg_notify(%s, %s)", (self._channel, run_id))
            assert row is not None
            return int(row[0])

        entry: int = self._change(put, repeat=False)  # twice would queue the command twice
        return entry

    def pending_commands(self, run_id: str) -> list[InboxEntry]:
        rows = self._fetch_all(
            "SELECT entry_id, body FROM inbox WHERE run_id = %s AND state = 'pending' ORDER BY entry_id", (run_id,)
        )
        return [InboxEntry(int(r[0]), run_id, self._body(r[0], r[1]), "pending") for r in rows]

    def _body(self, entry_id: Any, text: Any) -> JsonValue:
        body: JsonValue = decoded(self.where, f"inbox row {entry_id}", lambda: json_text(text))
        return body

    def settle_command(self, entry_id: int, outcome: str) -> None:
        self._execute("UPDATE inbox SET state = 'settled', outcome = %s WHERE entry_id = %s", (outcome, entry_id))

    def inbox_entry(self, entry_id: int) -> InboxEntry | None:
        row = self._fetch("SELECT run_id, body, state, outcome FROM inbox WHERE entry_id = %s", (entry_id,))
        if row is None:
            return None
        return InboxEntry(entry_id, str(row[0]), self._body(entry_id, row[1]), str(row[2]), row[3])

    def commands(self, run_id: str) -> list[InboxEntry]:
        rows = self._fetch_all(
            "SELECT entry_id, body, state, outcome FROM inbox WHERE run_id = %s ORDER BY entry_id", (run_id,)
        )
        return [InboxEntry(int(r[0]), run_id, self._body(r[0], r[1]), str(r[2]), r[3]) for r in rows]

    def compact_commands(self, run_id: str) -> int:
        return self._execute(
            "DELETE FROM inbox WHERE run_id = %s AND state = 'settled' AND outcome LIKE 'refused%%'", (run_id,)
        )

    def save_checkpoint(self, checkpoint: Checkpoint) -> None:
        self._execute(
            "INSERT INTO checkpoints (run_id, step, data) VALUES (%s, %s, %s) "
            "ON CONFLICT (run_id) DO UPDATE SET step = excluded.step, data = excluded.data",
            (checkpoint.run_id, checkpoint.step, dumps(checkpoint.data)),
        )

    def load_checkpoint(self, run_id: str) -> Checkpoint | None:
        row = self._fetch("SELECT step, data FROM checkpoints WHERE run_id = %s", (run_id,))
        if row is None:
            return None
        checkpoint: Checkpoint = decoded(
            self.where, f"checkpoints row {run_id!r}", lambda: Checkpoint(run_id, integer(row[0]), json_text(row[1]))
        )
        return checkpoint

    def delete_checkpoint(self, run_id: str) -> None:
        self._execute("DELETE FROM checkpoints WHERE run_id = %s", (run_id,))

    def record_reconciliation(self, record: Reconciliation) -> None:
        query = "INSERT INTO reconciliations (operation_id, outcome, note) VALUES (%s, %s, %s)".encode()
        params = (record.operation_id, record.outcome, record.note)
        self._change(lambda c: c.execute(query, params), repeat=False)  # twice would record it twice

    def reconciliations(self, operation_id: str | None = None) -> list[Reconciliation]:
        if operation_id is None:
            rows = self._fetch_all("SELECT operation_id, outcome, note FROM reconciliations ORDER BY entry_id", ())
        else:
            rows = self._fetch_all(
                "SELECT operation_id, outcome, note FROM reconciliations WHERE operation_id = %s ORDER BY entry_id",
                (operation_id,),
            )
        return [Reconciliation(str(r[0]), str(r[1]), r[2]) for r in rows]

    def reset(self) -> None:
        self._written = None

        def wipe(conn: Connection) -> None:
            with conn.transaction():
                for table in TABLES:
                    if table != "meta":
                        conn.execute(sql.SQL("DELETE FROM {}").format(sql.Identifier(table)))

        self._change(wipe)

class _PostgresHistory:
    """A Run's history answered by primary-key lookups on the store's rows."""

    def __init__(self, store: PostgresStore, run_id: str) -> None:
        self._store = store
        self._run_id = run_id

    def ticket_used(self, ticket_id: str) -> bool:
        found = self._store._fetch("SELECT 1 FROM tickets WHERE run_id = %s AND ticket_id = %s", (self._run_id, ticket_id))
        return found is not None

    def batch_closed(self, batch_id: str) -> bool:
        found = self._store._fetch(
            "SELECT 1 FROM closed_batches WHERE run_id = %s AND batch_id = %s", (self._run_id, batch_id)
        )
        return found is not None

    def applied_digest(self, ticket_id: str) -> str | None:
        row = self._store._fetch(
            "SELECT digest FROM applied_resumes WHERE run_id = %s AND ticket_id = %s", (self._run_id, ticket_id)
        )
        return None if row is None else str(row[0])
