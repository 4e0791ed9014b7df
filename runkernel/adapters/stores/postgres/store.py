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

The store never creates its schema: ``runkernel db init`` does (``postgres.schema``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from psycopg import errors, sql

from runkernel.adapters.stores.contract import (
    CommitConflict,
    IllegalCommit,
    InboxEntry,
    Lease,
    LeaseLost,
    Settlement,
    StoreError,
    StoreUnavailable,
    judge_append,
)
from runkernel.adapters.stores.leases import LeaseRow, checked_release, checked_take, commit_writer
from runkernel.adapters.stores.folded_reads import PickUp
from runkernel.adapters.stores.postgres.commit import Statement, commit_statements, compacts_inbox
from runkernel.adapters.stores.postgres.connection import Connection
from runkernel.adapters.stores.postgres.inbox import put_command
from runkernel.adapters.stores.postgres.echo import CommitEcho, HistoryMemo
from runkernel.adapters.stores.postgres.pick_up import Rows, pick_up_rows
from runkernel.adapters.stores.postgres.schema import TABLES
from runkernel.adapters.stores.postgres.send import RIVAL_WRITE, ConnectionLost, send_commit
from runkernel.adapters.stores.postgres.sql import TAKE, PostgresSql
from runkernel.adapters.stores.sql.shared import SqlStore
from runkernel.adapters.stores.serial import commit_text, dumps, judged_dumps, snapshot_to_json
from runkernel.adapters.stores.work import awaited_children, parent_from_columns, summary_of
from runkernel.kernel.history import History
from runkernel.kernel.rules import Rejection, Rule
from runkernel.kernel.state import RunSnapshot, ThreadCommit, ThreadHead
from runkernel.kernel.values import JsonValue

#: How many times a commit is sent again after its connection dropped before an answer.
LOST_CONNECTION_ATTEMPTS = 4

class PostgresStore(PostgresSql):
    """A runkernel store in one PostgreSQL schema. Use one instance per thread of control.

    ``url`` is a libpq URL (``postgresql://user@host:5432/db``), optionally with
    ``?schema=NAME``. ``read_only`` opens it for a read command: one REPEATABLE READ,
    READ ONLY transaction for the store's life, so everything read is one snapshot.
    ``wait_for_work(timeout)`` is the LISTEN/NOTIFY wake-up of a worker."""

    def __init__(
        self, url: str, *, read_only: bool = False, connect_timeout: float = 10.0, _checked: bool = False
    ) -> None:
        #: how many lost acknowledgements were recovered by adopting this store's own commit
        self.adopted_after_lost_ack = 0
        #: a test hook called with the connection just before a commit is sent
        self.before_commit: Callable[[Connection], None] | None = None
        #: (run id, thread head, snapshot) this store wrote last: judged against without
        #: reading, since the conditional update refuses it if the Thread moved since
        self._written: tuple[str, ThreadHead, RunSnapshot] | None = None
        #: what this store's last commit learnt in its own transaction, until this store
        #: writes anything else (``postgres.echo``)
        self._echo = CommitEcho()
        #: history answers read since ``_written`` was last fixed
        self._memo = HistoryMemo()
        super().__init__(url, read_only=read_only, connect_timeout=connect_timeout, _checked=_checked)

    def reopen(self) -> PostgresStore:
        """Another session on the same schema (its own connection and memos), for another
        thread of control: each slot of a worker opens one."""
        # the server is still asked first (a direct connection: one that is down is
        # refused at once), its schema not again: this instance found it current
        return PostgresStore(self.url, read_only=self.read_only, connect_timeout=self.connect_timeout, _checked=True)

    def _reconnect(self) -> None:
        self._judge_against(None)
        self._echo.forget()
        super()._reconnect()

    def _change(self, work: Callable[[Connection], Any], *, repeat: bool = True) -> Any:
        self._echo.forget()  # a write (a command put or settled, a lease given up) may change it
        return super()._change(work, repeat=repeat)

    def _execute(self, query: str, params: tuple[Any, ...]) -> int:
        self._echo.forget()
        return super()._execute(query, params)

    def _with_lease_row(
        self, run_id: str, act: Callable[[LeaseRow | None, float], LeaseRow | None], doing: str
    ) -> None:
        self._echo.forget()  # a lease renewed or given up
        super()._with_lease_row(run_id, act, doing)

    def _judge_against(self, written: tuple[str, ThreadHead, RunSnapshot] | None) -> None:
        """Fix what the next commit is judged against without reading (None: read it);
        history answers read before are no longer valid for it."""
        self._written = written
        self._memo.clear()

    def pending_seen_in_commit(self, run_id: str, version: int) -> list[InboxEntry] | None:
        """The Run's pending commands as this store's commit of ``version`` saw them in its
        own transaction, once, and only if this store wrote nothing since; None: a read
        must tell (``stores.folded_reads``)."""
        return self._echo.pending(run_id, version)

    def lease_left_in_commit(self, lease: Lease) -> float | None:
        """How many seconds ``lease`` is still valid at least, by the server's clock, as
        this store's last commit found it in its own transaction, less the time elapsed
        since that commit was sent; None if this store's last act was not a commit under
        ``lease`` (the W1 re-check must then ask, ``LeaseKeeper.before_executor``)."""
        return self._echo.lease_left(lease)

    def history(self, run_id: str) -> History:
        written = self._written
        if written is None or written[0] != run_id:
            return super().history(run_id)  # kept only for the Run the next commit is judged for
        return self._memo.recording(run_id, super().history(run_id))

    def compact_commands(self, run_id: str) -> int:
        """``Store.compact_commands``: nothing to delete right after the commit that ended
        the Run, which deleted its settled refusals in its own transaction."""
        if self._echo.compacted(run_id):
            return 0
        return super().compact_commands(run_id)

    # --- commits --------------------------------------------------------------------

    def append(
        self,
        commit: ThreadCommit,
        settle: Settlement | None = None,
        *,
        lease: Lease | None = None,
        release: bool = False,
        trace_context: str | None = None,
    ) -> RunSnapshot:
        """``Store.append``; ``trace_context`` (a Run's activation only) is kept beside the
        Run, outside the commit log, in the same transaction (``trace_context()``)."""
        checked_release(lease, release)
        if self.read_only:
            raise StoreUnavailable(f"{self.where} was opened read-only")
        if lease is not None and lease.run_id != commit.run_id:
            raise LeaseLost(lease, f"it leases run {lease.run_id!r}, not the commit's run {commit.run_id!r}")
        sent: list[tuple[RunSnapshot, str]] = []  # the snapshot and line of each attempt sent
        lost = False
        for _ in range(LOST_CONNECTION_ATTEMPTS):
            try:
                return self._append_judged(commit, settle, lease, sent, lost, trace_context, release)
            except ConnectionLost:
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
        release: bool = False,
    ) -> RunSnapshot:
        """Judge, then write in one transaction; a rival write found by the database,
        or a conflict judged against this store's own last write, makes it judge once
        more against fresh rows (which names the conflict)."""
        for fresh in (False, True):
            unread = False
            try:
                head, before, unread = self._before(commit, fresh)
                history = super().history(commit.run_id)
                if unread:
                    history = self._memo.answering(commit.run_id, history)
                accepted = judge_append(head, before, commit, history, self._ticket_known)
            except (CommitConflict, IllegalCommit) as refusal:
                if unread:
                    # judged against this store's own last write (and history answers read
                    # since): another writer may have moved the Thread since, so judge
                    # once more against its rows
                    self._judge_against(None)
                    continue
                if isinstance(refusal, IllegalCommit):
                    raise
                adopted = self._landed(commit, lease, sent, lost)
                if adopted is not None:
                    return adopted
                raise
            line = commit_text(commit)
            sent.append((accepted.run, line))
            summary = summary_of(accepted.run, commit.app, commit.app_version)
            query = commit_statements(
                commit, line, head, accepted.head, judged_dumps(snapshot_to_json(accepted.run)), summary, accepted.keys,
                settle, lease, before is None, (self._channel, commit.run_id) if before is None else None,
                awaited_children(accepted.run), self._channel, trace_context, release,
            )
            self._echo.forget()
            sent_at = self._echo.clock()
            try:
                checked, pending = self._write(query)
            except errors.DivisionByZero:
                self._judge_against(None)
                self._refuse_lease(commit, lease)
                continue  # the lease was fine again when read: judge and send once more
            except RIVAL_WRITE:
                self._judge_against(None)
                continue
            self._judge_against((commit.run_id, accepted.head, accepted.run))
            held = None if lease is None or release else (lease, float(checked[0][0]), sent_at)
            self._echo.committed(
                commit.run_id, commit.version, self._pending_entries(commit.run_id, pending), held,
                compacted=compacts_inbox(summary),
            )
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

    def read_pick_up(self, run_id: str) -> PickUp:
        """A pick-up's reads (``stores.folded_reads``) in one round trip and one snapshot of
        the database: the Run's snapshot with its Thread's head and its parent's call,
        the Thread's log, the Run's checkpoint and its pending commands. The head and
        snapshot are what the Run's next commit is judged against, as after this store's
        own last write: the conditional update still refuses that commit if the Thread
        moved since."""
        rows = self._attempt("a read", lambda c: pick_up_rows(c, run_id, read_only=self.read_only))
        return self._picked(run_id, rows)

    def acquire_lease_and_pick_up(self, run_id: str, worker_id: str, duration: float) -> tuple[Lease, PickUp | None]:
        """``acquire_lease``, and the pick-up (``read_pick_up``) in the same round trip, read
        in a snapshot taken after the take committed (``postgres.pick_up``). The pick-up
        is None when the take found another worker's lease (``acquire_lease`` then names
        it by ``LeaseHeld``, or takes the lease if it expired since)."""
        checked_take(worker_id, duration)
        if self.read_only:
            raise StoreUnavailable(f"{self.where} was opened read-only")
        take = (TAKE, (run_id, worker_id, float(duration)))
        rows = self._change(lambda c: pick_up_rows(c, run_id, read_only=False, take=take))
        if not rows[0]:
            # another worker's lease: named by the rules (one more round trip, the rare path)
            return SqlStore.acquire_lease(self, run_id, worker_id, duration), None
        epoch, expires_at = rows[0][0][:2]
        lease = Lease(run_id, worker_id, int(epoch), float(expires_at))
        try:
            return lease, self._picked(run_id, rows[1:])
        except StoreError:
            return lease, None  # the lease is taken: the drive's own read reports what is wrong

    def _picked(self, run_id: str, rows: list[Rows]) -> PickUp:
        """The pick-up's four results read back; what the next commit is judged against."""
        (run_rows, log_rows, checkpoint_rows, pending_rows) = rows
        if not run_rows:
            return PickUp(None)
        text, thread_id, version, active = run_rows[0][:4]
        snapshot = self._snapshot(run_id, text)
        if version is not None and not self.read_only:
            self._judge_against((run_id, self._head(thread_id, version, active), snapshot))
        messages = tuple(m for c in self._checked_log(snapshot.thread_id, log_rows) for m in c.messages)
        checkpoint = self._checkpoint(run_id, checkpoint_rows[0] if checkpoint_rows else None)
        pending = tuple(self._pending_entries(run_id, pending_rows))
        return PickUp(snapshot, messages, checkpoint, parent_from_columns(run_rows[0][4:]), pending)

    def _before(self, commit: ThreadCommit, fresh: bool) -> tuple[ThreadHead | None, RunSnapshot | None, bool]:
        """The head and snapshot ``commit`` is judged against, and whether they are this
        store's own last write (or pick-up), unread."""
        written = self._written
        if not fresh and written is not None and written[0] == commit.run_id and written[1].thread_id == commit.thread_id:
            return written[1], written[2], True
        head, text = self._head_and_run(commit.thread_id, commit.run_id)
        return head, None if text is None else self._snapshot(commit.run_id, text), False

    def _write(self, statements: list[Statement]) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
        """One commit's statements sent in one round trip (``postgres.send``)."""
        return send_commit(self._conn, statements, self.url, self.before_commit)

    def _refuse_lease(self, commit: ThreadCommit, lease: Lease | None) -> None:
        """The commit's lease check failed in its transaction: raise what it found."""
        row, now = self._lease_now(commit.run_id)
        commit_writer(commit, lease, row, now)

    # --- inbox ------------------------------------------------------------------------

    def put_command(self, run_id: str, body: JsonValue) -> int:
        return put_command(self._change, self.where, self._channel, run_id, body)

    def reset(self) -> None:
        self._judge_against(None)

        def wipe(conn: Connection) -> None:
            with conn.transaction():
                for table in TABLES:
                    if table != "meta":
                        conn.execute(sql.SQL("DELETE FROM {}").format(sql.Identifier(table)))

        self._change(wipe)


def open_postgres(url: str, *, create: bool = True, read_only: bool = False) -> PostgresStore:
    """The store a ``postgresql://`` URL names, as ``registry.open_store`` opens it. It is
    never created here, whatever ``create`` says: ``runkernel db init`` creates it."""
    return PostgresStore(url, read_only=read_only)
