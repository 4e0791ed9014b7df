"""The embedded default store: stdlib sqlite3, WAL, ``synchronous=FULL``.

Each commit is one row holding its ``runkernel/2`` line: the message *delta*, never
the history again, so a commit's size does not grow with the Thread. The latest state
of every Run and Thread is kept in rows of its own, updated in the same transaction,
so reading it is one primary-key lookup whatever the history's length. A commit writes
only the rows it changes: the Thread's row only when its active Run changes (the head's
version is the active Run's row's meanwhile: ``sqlite.heads``), the state indexes only
when the Run's state changes. The schema is
versioned (``sqlite.schema``): a file that is not a runkernel store, or is newer, is
refused.

What this store shares with the PostgreSQL one (reads, inbox, checkpoints,
reconciliations, lease rules, listing) is ``sql.shared.SqlStore``. Its own: each write
is a ``BEGIN IMMEDIATE`` transaction, so the rows a commit or a lease act is judged
against are read under the write lock, and the lease clock is this process's.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from runkernel.adapters.stores.contract import (
    CommitConflict, IllegalCommit, Lease, LeaseLost, SIMULATE_CLAIM, Settlement, StoreUnavailable, Writer,
    judge_append,
)
from runkernel.adapters.stores.leases import LeaseRow, checked_release, commit_writer, is_own_landed_commit
from runkernel.adapters.stores.serial import commit_text, line_text, snapshot_text
from runkernel.adapters.stores.sql.dialect import SQLITE
from runkernel.adapters.stores.sql.queries import work_query
from runkernel.adapters.stores.sql.statements import (
    INSERT_COMMIT, INSERT_RUN, INSERT_THREAD, RELEASE_IN_COMMIT, UPDATE_RUN, UPDATE_RUN_SAME_STATE, UPDATE_THREAD, Row,
    history_statements,
)
from runkernel.adapters.stores.sqlite import heads
from runkernel.adapters.stores.sqlite.inbox import put_command
from runkernel.adapters.stores.sqlite.leases import SqliteLeases, lease_row_of
from runkernel.adapters.stores.sqlite.opening import Access, Recognized, connect, path_of, recognize, statements, store_error
from runkernel.adapters.stores.sqlite.schema import LAYOUT, SCHEMA, SCHEMA_NAME, SCHEMA_VERSION
from runkernel.adapters.stores.work import STORE_TABLES, awaited_children, parent_columns, state_name, summary_of
from runkernel.kernel.codec import commit_to_json
from runkernel.kernel.state import RunSnapshot, ThreadCommit, ThreadHead
from runkernel.kernel.values import JsonValue

#: Runs with work, judged by this process's clock (given twice as a parameter).
_WORK = work_query(SQLITE)


class SqliteStore(SqliteLeases):
    """A store in one SQLite file, one call at a time from any thread (``reopen()``: another)."""

    dialect = SQLITE
    _thread_head, _stored_commit, _log_and_head = heads.THREAD_HEAD, heads.STORED_COMMIT, heads.LOG_AND_HEAD

    def __init__(
        self,
        path: str | Path,
        *,
        synchronous: str = "FULL",
        create: bool = True,
        read_only: bool = False,
        busy_timeout: float = 30.0,
        clock: Callable[[], float] = time.time,
    ) -> None:
        if synchronous not in ("FULL", "NORMAL", "EXTRA"):
            raise ValueError(f"synchronous must be FULL, NORMAL or EXTRA, not {synchronous!r}")
        self.path = self.where = str(path)
        self._options = (synchronous, read_only, busy_timeout)
        # the store's clock for leases: every process on one file shares the machine's
        # wall clock, the only clock they have in common
        self._clock = clock
        self._scratch: sqlite3.Connection | None = None
        #: (run id, snapshot row text, snapshot) of this connection's last commit
        self._written: tuple[str, str, RunSnapshot] | None = None
        # recognized before any write or pragma; a read-only store stays in one read
        # transaction for its life, so a read command sees one snapshot
        access = Access.READ if read_only else Access.CREATE if create else Access.WRITE
        self._db, found = connect(self.path, access, LAYOUT, timeout=busy_timeout)
        if read_only:
            return
        try:
            if found is Recognized.EMPTY:
                self._create_schema()
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute(f"PRAGMA synchronous={synchronous}")
            if found is Recognized.EMPTY:
                self._start_wal()
        except sqlite3.Error as error:
            self._db.close()
            raise store_error(self.path, "creating the schema", error) from None
        except BaseException:
            self._db.close()
            raise

    # --- schema ---------------------------------------------------------------------

    def _create_schema(self) -> None:
        self._db.execute("BEGIN IMMEDIATE")
        try:
            # another process may have created it since the file was recognized
            if recognize(self._db, self.path, LAYOUT) is Recognized.EMPTY:
                for statement in statements(SCHEMA):
                    self._db.execute(statement)
                self._db.execute(
                    "INSERT INTO meta (key, value) VALUES ('schema', ?), ('version', ?)",
                    (SCHEMA_NAME, str(SCHEMA_VERSION)),
                )
            self._db.execute("COMMIT")
        except BaseException:
            if self._db.in_transaction:
                self._db.execute("ROLLBACK")
            raise

    def _start_wal(self) -> None:
        """One write in WAL mode when the store is created, so that making the WAL file
        is paid here and not by the first commit. (Switching to WAL before the schema
        exists would do it too, but that pragma does not wait for a concurrent creator.)"""
        self._db.execute("BEGIN IMMEDIATE")
        try:
            self._db.execute("UPDATE meta SET value = value WHERE key = 'schema'")
            self._db.execute("COMMIT")
        except BaseException:
            if self._db.in_transaction:
                self._db.execute("ROLLBACK")
            raise

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
        db = self._db
        try:
            db.execute("BEGIN IMMEDIATE")
        except sqlite3.Error as error:
            # named, as every store failure is: an operator may hold several stores
            failure = store_error(self.path, "beginning a write", error)
            raise (failure if isinstance(failure, StoreUnavailable) else StoreUnavailable(str(failure))) from None
        try:
            head, before, lease_row = self._before(commit.thread_id, commit.run_id)
            line = commit_to_json(commit)  # built once: scanned by the judge, then written
            try:
                writer = commit_writer(commit, lease, lease_row, self._clock())
                accepted = judge_append(head, before, commit, self.history(commit.run_id), self._ticket_known, line)
            except (CommitConflict, IllegalCommit, LeaseLost):
                # W4, only when the commit is refused (never on the common path): a
                # retry of this writer's commit that landed, its reply lost, is adopted
                if lease is not None and self._landed_already(commit, lease):
                    adopted = self.run(commit.run_id)
                    db.execute("ROLLBACK")
                    assert adopted is not None  # the landed commit wrote the Run's row
                    return adopted
                raise
            written_line = (commit.thread_id, commit.version, commit.run_id, line_text(line), *_writer_columns(writer))
            db.execute(INSERT_COMMIT, written_line)
            new_head = accepted.head
            keeps_row = head is not None and not heads.moves_threads_row(head.active_run_id, new_head.active_run_id, commit.run_id)
            if not keeps_row or accepted.run.version != new_head.version:
                db.execute(
                    INSERT_THREAD if head is None else UPDATE_THREAD,
                    (new_head.version, new_head.active_run_id, new_head.thread_id),
                )
            snapshot = snapshot_text(accepted.run)  # msgspec, as the commit line
            summary = summary_of(accepted.run, commit.app, commit.app_version)
            awaited = awaited_children(accepted.run)
            changed = (
                snapshot, summary.state, summary.step, summary.version, summary.waiting_for, summary.wake_at, bool(awaited)
            )
            if before is None:
                # the app, its version and the parent are the activation's: later commits never change them
                parent = parent_columns(commit.parent)
                db.execute(
                    INSERT_RUN, (*changed, commit.run_id, commit.thread_id, summary.app, summary.app_version, *parent)
                )
            else:
                same_state = summary.state == state_name(before)
                db.execute(UPDATE_RUN_SAME_STATE if same_state else UPDATE_RUN, (*changed, commit.run_id))
            if trace_context is not None:
                db.execute("UPDATE runs SET trace_context = ? WHERE run_id = ?", (trace_context, commit.run_id))
            for statement, params in history_statements(commit.run_id, accepted.keys, awaited, settle):
                db.execute(statement, params)
            if release and lease is not None:
                db.execute(RELEASE_IN_COMMIT, (True, lease.run_id, lease.worker_id, lease.epoch))
            self._written = None
            db.execute("COMMIT")
            self._written = (commit.run_id, snapshot, accepted.run)
        except BaseException as error:
            if db.in_transaction:
                db.execute("ROLLBACK")
            if isinstance(error, sqlite3.Error):
                raise StoreUnavailable(f"write failed: {error}") from None
            raise
        return accepted.run

    def _before(self, thread_id: str, run_id: str) -> tuple[ThreadHead | None, RunSnapshot | None, LeaseRow | None]:
        """The Thread's head, the Run's latest snapshot and its lease row for a commit,
        read in one statement. If the Run's row holds exactly the text this connection
        wrote last, the snapshot kept from that commit is used instead of decoding the
        row again."""
        row = self._db.execute(heads.HEAD_RUN_AND_LEASE, (thread_id, run_id, run_id)).fetchone()
        # no threads row: both NULL (an active Run without its runs row has no head version:
        # damage, which ``_head`` names)
        head = None if row[0] is None and row[1] is None else self._head(thread_id, row[0], row[1])
        lease = None if row[3] is None else lease_row_of(run_id, *row[3:])
        text = row[2]
        if text is None:
            return head, None, lease
        written = self._written
        if written is not None and written[0] == run_id and written[1] == text:
            return head, written[2], lease
        return head, self._snapshot(run_id, text), lease

    def _landed_already(self, commit: ThreadCommit, lease: Lease) -> bool:
        """W4, inside the append's transaction: the Thread's latest commit is this one,
        written under this lease (its acknowledgement was lost)."""
        stored = self._stored(commit.thread_id, commit.version)
        if stored is None:
            return False
        line, writer, head_version, run_id = stored
        return is_own_landed_commit(commit, lease, head_version, run_id, line == commit_text(commit), writer)

    def runs_with_work(self, app: str | None, limit: int = 100, *, version: str | None = None) -> list[str]:
        now = self._clock()
        return [str(r[0]) for r in self._all(_WORK, (app, version, version, version, now, now, limit))]

    # --- inbox, checkpoints -------------------------------------------------------------

    def put_command(self, run_id: str, body: JsonValue) -> int:
        return put_command(self._db, run_id, body, self._write)

    def _checkpoint_write(self, query: str, params: Sequence[Any]) -> None:
        """A best-effort write that never waits for an fsync (Cost model): its
        own connection with ``synchronous=OFF``. In WAL mode a process crash keeps it;
        a power loss may lose it, which only loses a partial inference."""
        try:
            if self._scratch is None:
                self._scratch = sqlite3.connect(self.path, isolation_level=None, timeout=30.0)
                self._scratch.execute("PRAGMA synchronous=OFF")
            self._scratch.execute(query, params)
        except sqlite3.Error as error:
            raise StoreUnavailable(f"checkpoint write failed: {error}") from None

    # --- reset and the simulate claim -------------------------------------------------

    def reset(self) -> None:
        self._written = None
        try:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                self._wipe()
                self._db.execute("COMMIT")
            except BaseException:
                if self._db.in_transaction:
                    self._db.execute("ROLLBACK")
                raise
        except sqlite3.Error as error:
            raise store_error(self.path, "the reset", error) from None

    def _wipe(self) -> None:
        """Delete every row but the schema's own (in the caller's transaction)."""
        for table in STORE_TABLES:
            if table != "meta":
                self._db.execute(f"DELETE FROM {table}")
        self._db.execute("DELETE FROM meta WHERE key = 'claimed_by'")

    def claim_empty(self, owner: str, *, reset: bool) -> str | None:
        """In one write transaction: with ``reset`` delete what the store holds if
        ``simulate`` filled it (its claim row, ``owner`` starting with
        ``SIMULATE_CLAIM``, says so), then claim the store for ``owner`` if it holds no
        Thread and nobody claimed it. None when claimed; else why not. Two ``simulate``
        runs started together on one fresh store cannot both pass this check, as they
        could with a read then a write."""
        try:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                (threads,) = self._db.execute("SELECT count(*) FROM threads").fetchone()
                claim = self._db.execute("SELECT value FROM meta WHERE key = 'claimed_by'").fetchone()
                if reset and threads and not (claim and str(claim[0]).startswith(SIMULATE_CLAIM)):
                    # the claim row is what marks a store simulate filled: Runs of any
                    # other origin are never deleted by a reset
                    self._db.execute("ROLLBACK")
                    return f"holds {threads} thread{'' if threads == 1 else 's'} that simulate did not create"
                if reset:
                    self._wipe()
                    threads, claim = 0, None
                if threads or claim:
                    self._db.execute("ROLLBACK")
                    return f"already holds {threads} thread{'' if threads == 1 else 's'}" if threads else f"is in use by {claim[0]}"
                self._db.execute("INSERT INTO meta (key, value) VALUES ('claimed_by', ?)", (owner,))
                self._db.execute("COMMIT")
                return None
            except BaseException:
                if self._db.in_transaction:
                    self._db.execute("ROLLBACK")
                raise
        except sqlite3.Error as error:
            raise store_error(self.path, "claiming the store", error) from None

    def reopen(self) -> SqliteStore:
        """Another connection to the same file, with this one's options and clock."""
        synchronous, read_only, timeout = self._options
        return SqliteStore(self.path, synchronous=synchronous, create=False, read_only=read_only,
                           busy_timeout=timeout, clock=self._clock)

    def close(self) -> None:
        if self._scratch is not None:
            self._scratch.close()
        self._db.close()

    # --- plumbing: the hooks of SqlStore ----------------------------------------------

    def _read(self, query: Callable[[], Any]) -> Any:
        try:
            return query()
        except sqlite3.Error as error:
            raise store_error(self.path, "a read", error) from None

    def _write(self, query: str, params: Sequence[Any]) -> sqlite3.Cursor:
        try:
            return self._db.execute(query, params)
        except sqlite3.Error as error:
            raise store_error(self.path, "a write", error) from None

    def _one(self, query: str, params: Sequence[Any]) -> Row | None:
        row: Row | None = self._read(lambda: self._db.execute(query, params).fetchone())
        return row

    def _all(self, query: str, params: Sequence[Any]) -> list[Row]:
        rows: list[Row] = self._read(lambda: self._db.execute(query, params).fetchall())
        return rows

    def _change_rows(self, query: str, params: Sequence[Any]) -> int:
        return int(self._write(query, params).rowcount)

    def _write_once(self, query: str, params: Sequence[Any]) -> None:
        self._write(query, params)


def _writer_columns(writer: Writer | None) -> tuple[str | None, int | None]:
    """The ``writer_id, writer_epoch`` columns of a commit row (None: no lease)."""
    return (None, None) if writer is None else (writer.worker_id, writer.epoch)


def open_sqlite(url: str, *, create: bool = True, read_only: bool = False) -> SqliteStore:
    """The store a ``sqlite:///path.db`` URL names (``SqliteStore``'s ``create`` and
    ``read_only``), as ``registry.open_store`` opens it."""
    return SqliteStore(path_of(url), create=create, read_only=read_only)
