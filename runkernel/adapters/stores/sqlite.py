"""The embedded default store: stdlib sqlite3, WAL, ``synchronous=FULL``.

Each commit is one row holding its ``runkernel/1`` line: the message *delta*, never
the history again, so a commit's size does not grow with the Thread. The latest state
of every Run and Thread is kept in rows of its own, updated in the same transaction,
so reading it is one primary-key lookup whatever the history's length. The schema is
versioned: a file that is not a runkernel store, or is newer, is refused.
"""

from __future__ import annotations

import contextlib
import json
import sqlite3
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from runkernel.adapters.stores.serial import (
    commit_from_text,
    commit_text,
    dumps,
    line_text,
    snapshot_from_json,
    snapshot_text,
)
from runkernel.adapters.stores.sqlite_decode import decoded, integer, json_text, thread_head
from runkernel.adapters.stores.sqlite_open import (
    Access,
    Layout,
    Recognized,
    connect,
    recognize,
    statements,
    store_error,
)
from runkernel.adapters.stores.leases import LeaseRow, acquired, commit_writer, is_own_landed_commit, require_held
from runkernel.adapters.stores.work import (
    STORE_TABLES,
    RunSummary,
    awaited_children,
    count_query,
    listing_query,
    parent_columns,
    parent_from_columns,
    summary_from_row,
    summary_of,
    work_query,
)
from runkernel.adapters.stores.contract import (
    Checkpoint,
    DamagedStore,
    InboxEntry,
    Lease,
    LeaseStatus,
    SIMULATE_CLAIM,
    Reconciliation,
    SchemaError,
    Settlement,
    StoreUnavailable,
    Writer,
    judge_append,
)
from runkernel.kernel.codec import commit_to_json
from runkernel.kernel.history import History, HistoryKeys
from runkernel.kernel.state import (
    Message,
    ParentCall,
    RunSnapshot,
    ThreadCommit,
    ThreadHead,
)
from runkernel.kernel.values import JsonValue

SCHEMA_NAME = "runkernel-sqlite"
SCHEMA_VERSION = 6

_SCHEMA = """
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE threads (
    thread_id TEXT PRIMARY KEY,
    version INTEGER NOT NULL,
    active_run_id TEXT
);
CREATE TABLE runs (
    run_id TEXT PRIMARY KEY,
    thread_id TEXT NOT NULL,
    snapshot TEXT NOT NULL,
    app TEXT,
    state TEXT NOT NULL DEFAULT 'running',
    step INTEGER NOT NULL DEFAULT 0,
    version INTEGER NOT NULL DEFAULT 0,
    waiting_for TEXT,
    wake_at REAL,
    quiet INTEGER NOT NULL DEFAULT 0,
    parent_thread_id TEXT,
    parent_run_id TEXT,
    parent_call_id TEXT,
    trace_context TEXT
);
CREATE INDEX runs_by_state ON runs (state, app);
CREATE INDEX runs_by_state_only ON runs (state);
CREATE INDEX runs_by_app ON runs (app);
CREATE INDEX runs_by_thread ON runs (thread_id);
CREATE TABLE awaited_children (
    parent_run_id TEXT NOT NULL,
    child_run_id TEXT NOT NULL,
    PRIMARY KEY (parent_run_id, child_run_id)
) WITHOUT ROWID;
CREATE TABLE commits (
    thread_id TEXT NOT NULL,
    version INTEGER NOT NULL,
    run_id TEXT NOT NULL,
    line TEXT NOT NULL,
    writer_id TEXT,
    writer_epoch INTEGER,
    PRIMARY KEY (thread_id, version)
) WITHOUT ROWID;
CREATE TABLE tickets (ticket_id TEXT PRIMARY KEY, run_id TEXT NOT NULL);
CREATE TABLE closed_batches (
    run_id TEXT NOT NULL,
    batch_id TEXT NOT NULL,
    PRIMARY KEY (run_id, batch_id)
) WITHOUT ROWID;
CREATE TABLE applied_resumes (
    run_id TEXT NOT NULL,
    ticket_id TEXT NOT NULL,
    digest TEXT NOT NULL,
    PRIMARY KEY (run_id, ticket_id)
) WITHOUT ROWID;
CREATE TABLE inbox (
    entry_id INTEGER PRIMARY KEY AUTOINCREMENT,
    run_id TEXT NOT NULL,
    body TEXT NOT NULL,
    state TEXT NOT NULL DEFAULT 'pending',
    outcome TEXT
);
CREATE INDEX inbox_pending ON inbox (run_id, state);
CREATE TABLE checkpoints (run_id TEXT PRIMARY KEY, step INTEGER NOT NULL, data TEXT NOT NULL);
CREATE TABLE reconciliations (
    entry_id INTEGER PRIMARY KEY AUTOINCREMENT,
    operation_id TEXT NOT NULL,
    outcome TEXT NOT NULL,
    note TEXT
);
CREATE INDEX reconciliations_by_operation ON reconciliations (operation_id);
CREATE TABLE leases (
    run_id TEXT PRIMARY KEY,
    worker_id TEXT NOT NULL,
    epoch INTEGER NOT NULL,
    expires_at REAL NOT NULL,
    released INTEGER NOT NULL DEFAULT 0
);
"""

_TABLES = STORE_TABLES
LAYOUT = Layout(SCHEMA_NAME, SCHEMA_VERSION, _TABLES)


class SqliteStore:
    """A runkernel store in one SQLite file. Use one instance per thread of control."""

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
        self.path = str(path)
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
                for statement in statements(_SCHEMA):
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
        trace_context: str | None = None,
    ) -> RunSnapshot:
        """``Store.append``; ``trace_context`` (a Run's activation only) is kept beside the
        Run, outside the commit log, in the same transaction (``trace_context()``)."""
        db = self._db
        try:
            db.execute("BEGIN IMMEDIATE")
        except sqlite3.Error as error:
            # named, as every store failure is: an operator may hold several stores
            failure = store_error(self.path, "beginning a write", error)
            raise (failure if isinstance(failure, StoreUnavailable) else StoreUnavailable(str(failure))) from None
        try:
            if lease is not None and self._landed_already(commit, lease):
                adopted = self._run_in(commit.run_id)
                db.execute("ROLLBACK")
                assert adopted is not None  # the landed commit wrote the Run's row
                return adopted
            writer = commit_writer(commit, lease, self._lease_row(commit.run_id), self._clock())
            line = commit_to_json(commit)  # built once: scanned by the judge, then written
            accepted = judge_append(
                self._head_in(commit.thread_id),
                self._run_before(commit.run_id),
                commit,
                self.history(commit.run_id),
                self._ticket_known,
                line,
            )
            db.execute(
                "INSERT INTO commits (thread_id, version, run_id, line, writer_id, writer_epoch) "
                "VALUES (?, ?, ?, ?, ?, ?)",
                (
                    commit.thread_id,
                    commit.version,
                    commit.run_id,
                    line_text(line),
                    None if writer is None else writer.worker_id,
                    None if writer is None else writer.epoch,
                ),
            )
            head = accepted.head
            db.execute(
                "INSERT INTO threads (thread_id, version, active_run_id) VALUES (?, ?, ?) "
                "ON CONFLICT (thread_id) DO UPDATE SET version = excluded.version, "
                "active_run_id = excluded.active_run_id",
                (head.thread_id, head.version, head.active_run_id),
            )
            snapshot = snapshot_text(accepted.run)  # msgspec, as the commit line
            summary = summary_of(accepted.run, commit.app)
            awaited = awaited_children(accepted.run)
            # the app and the parent are the activation's: later commits never change them
            db.execute(
                "INSERT INTO runs (run_id, thread_id, snapshot, app, state, step, version, waiting_for, wake_at, "
                "quiet, parent_thread_id, parent_run_id, parent_call_id) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
                "ON CONFLICT (run_id) DO UPDATE SET snapshot = excluded.snapshot, state = excluded.state, "
                "step = excluded.step, version = excluded.version, waiting_for = excluded.waiting_for, "
                "wake_at = excluded.wake_at, quiet = excluded.quiet",
                (
                    commit.run_id,
                    commit.thread_id,
                    snapshot,
                    summary.app,
                    summary.state,
                    summary.step,
                    summary.version,
                    summary.waiting_for,
                    summary.wake_at,
                    1 if awaited else 0,
                    *parent_columns(commit.parent),
                ),
            )
            if awaited:
                self._await_children(commit.run_id, awaited)
            if trace_context is not None:
                db.execute("UPDATE runs SET trace_context = ? WHERE run_id = ?", (trace_context, commit.run_id))
            self._insert_keys(commit.run_id, accepted.keys)
            if settle is not None:
                db.execute(
                    "UPDATE inbox SET state = 'settled', outcome = ? WHERE entry_id = ? AND state = 'pending'",
                    (settle.outcome, settle.entry_id),
                )
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

    def _landed_already(self, commit: ThreadCommit, lease: Lease) -> bool:
        """W4, inside the append's transaction: the Thread's latest commit is this one,
        written under this lease (its acknowledgement was lost)."""
        head = self._head_in(commit.thread_id)
        if head is None or head.version != commit.version:
            return False
        row = self._db.execute(
            "SELECT run_id, line, writer_id, writer_epoch FROM commits WHERE thread_id = ? AND version = ?",
            (commit.thread_id, commit.version),
        ).fetchone()
        if row is None:
            return False
        writer = None if row[2] is None else Writer(str(row[2]), int(row[3]))
        return is_own_landed_commit(commit, lease, head.version, str(row[0]), row[1] == commit_text(commit), writer)

    # --- leases ---------------------------------------------------------------------

    def store_time(self) -> float:
        return self._clock()

    def _lease_row(self, run_id: str) -> LeaseRow | None:
        row = self._db.execute(
            "SELECT worker_id, epoch, expires_at, released FROM leases WHERE run_id = ?", (run_id,)
        ).fetchone()
        if row is None:
            return None
        return LeaseRow(Lease(run_id, str(row[0]), int(row[1]), float(row[2])), bool(row[3]))

    def _put_lease(self, row: LeaseRow) -> None:
        lease = row.lease
        self._db.execute(
            "INSERT INTO leases (run_id, worker_id, epoch, expires_at, released) VALUES (?, ?, ?, ?, ?) "
            "ON CONFLICT (run_id) DO UPDATE SET worker_id = excluded.worker_id, epoch = excluded.epoch, "
            "expires_at = excluded.expires_at, released = excluded.released",
            (lease.run_id, lease.worker_id, lease.epoch, lease.expires_at, int(row.released)),
        )

    @contextlib.contextmanager
    def _immediate(self, doing: str) -> Iterator[sqlite3.Connection]:
        """One write transaction, begun at once so the rows read in it stay current."""
        db = self._db
        try:
            db.execute("BEGIN IMMEDIATE")
            try:
                yield db
                db.execute("COMMIT")
            finally:
                if db.in_transaction:
                    db.execute("ROLLBACK")
        except sqlite3.Error as error:
            raise store_error(self.path, doing, error) from None

    def acquire_lease(self, run_id: str, worker_id: str, duration: float) -> Lease:
        with self._immediate("taking a lease"):
            lease = acquired(run_id, self._lease_row(run_id), worker_id, duration, self._clock())
            self._put_lease(LeaseRow(lease, released=False))
        return lease

    def renew_lease(self, lease: Lease, duration: float) -> Lease:
        with self._immediate("renewing a lease"):
            now = self._clock()
            row = self._lease_row(lease.run_id)
            require_held(lease, row, now)
            renewed = acquired(lease.run_id, row, lease.worker_id, duration, now)
            self._put_lease(LeaseRow(renewed, released=False))
        return renewed

    def check_lease(self, lease: Lease, margin: float) -> Lease:
        row = self._read(lambda: self._lease_row(lease.run_id))
        return require_held(lease, row, self._clock(), margin)

    def release_lease(self, lease: Lease) -> bool:
        with self._immediate("releasing a lease"):
            row = self._lease_row(lease.run_id)
            if row is None or not row.valid_at(self._clock()):
                return False
            if (row.lease.worker_id, row.lease.epoch) != (lease.worker_id, lease.epoch):
                return False
            self._put_lease(LeaseRow(row.lease, released=True))
        return True

    def current_lease(self, run_id: str) -> Lease | None:
        row: LeaseRow | None = self._read(lambda: self._lease_row(run_id))
        return row.lease if row is not None and row.valid_at(self._clock()) else None

    def lease_status(self, run_id: str) -> LeaseStatus:
        row: LeaseRow | None = self._read(lambda: self._lease_row(run_id))
        return LeaseStatus(None if row is None else row.lease, row is not None and row.released, self._clock())

    def lease_statuses(self, run_ids: Sequence[str]) -> dict[str, LeaseStatus]:
        wanted = list(dict.fromkeys(run_ids))
        marks = ", ".join("?" * len(wanted))
        rows = self._read(
            lambda: self._db.execute(
                f"SELECT run_id, worker_id, epoch, expires_at, released FROM leases WHERE run_id IN ({marks})", wanted
            ).fetchall()
        ) if wanted else []
        now = self._clock()
        found = {str(r[0]): LeaseRow(Lease(str(r[0]), str(r[1]), int(r[2]), float(r[3])), bool(r[4])) for r in rows}
        return {
            run_id: LeaseStatus(None if row is None else row.lease, row is not None and row.released, now)
            for run_id in wanted
            for row in (found.get(run_id),)
        }

    def writer_of(self, thread_id: str, version: int) -> Writer | None:
        row = self._read(
            lambda: self._db.execute(
                "SELECT writer_id, writer_epoch FROM commits WHERE thread_id = ? AND version = ?",
                (thread_id, version),
            ).fetchone()
        )
        if row is None or row[0] is None:
            return None
        return Writer(str(row[0]), int(row[1]))

    # --- listing and work discovery ---------------------------------------------------

    def list_runs(
        self,
        *,
        state: str | None = None,
        thread_id: str | None = None,
        limit: int | None = None,
        app: str | None = None,
        after: str | None = None,
    ) -> list[RunSummary]:
        query, params = listing_query(
            "?", "rowid", state=state, thread_id=thread_id, limit=limit, app=app, after=after
        )
        rows = self._read(lambda: self._db.execute(query, params).fetchall())
        return [summary_from_row(r) for r in rows]

    def count_runs(
        self, *, state: str | None = None, thread_id: str | None = None, app: str | None = None, cap: int = 1000
    ) -> int:
        query, params = count_query("?", state=state, thread_id=thread_id, app=app, cap=cap)
        row = self._read(lambda: self._db.execute(query, params).fetchone())
        return int(row[0])

    def runs_with_work(self, app: str | None, limit: int = 100) -> list[str]:
        now = self._clock()
        query = work_query("?", "?", "IS", "r.rowid")
        rows = self._read(lambda: self._db.execute(query, (app, now, now, limit)).fetchall())
        return [str(r[0]) for r in rows]

    def _await_children(self, parent_run_id: str, children: tuple[str, ...]) -> None:
        """A quiet commit's children: the rows a later search joins to their runs rows
        (only quiet commits write them, so a Run's rows are its last quiet commit's)."""
        self._db.execute("DELETE FROM awaited_children WHERE parent_run_id = ?", (parent_run_id,))
        self._db.executemany(
            "INSERT INTO awaited_children (parent_run_id, child_run_id) VALUES (?, ?)",
            [(parent_run_id, child) for child in children],
        )

    def parent_of(self, run_id: str) -> ParentCall | None:
        row = self._read(
            lambda: self._db.execute(
                "SELECT parent_thread_id, parent_run_id, parent_call_id FROM runs WHERE run_id = ?", (run_id,)
            ).fetchone()
        )
        return None if row is None else parent_from_columns(row)

    def _run_before(self, run_id: str) -> RunSnapshot | None:
        """The Run's latest snapshot for a commit. Its row is read (one key lookup); if
        it holds exactly the text this connection wrote last, the snapshot kept from
        that commit is used instead of decoding the row again."""
        written = self._written
        if written is None or written[0] != run_id:
            return self._run_in(run_id)
        row = self._db.execute("SELECT snapshot FROM runs WHERE run_id = ?", (run_id,)).fetchone()
        if row is not None and row[0] == written[1]:
            return written[2]
        return self._run_in(run_id)

    def _insert_keys(self, run_id: str, keys: HistoryKeys) -> None:
        """The history facts a commit adds, as indexed rows of its transaction."""
        if keys.ticket is not None:
            self._db.execute("INSERT INTO tickets (ticket_id, run_id) VALUES (?, ?)", (keys.ticket, run_id))
        if keys.closed_batch is not None:
            self._db.execute(
                "INSERT INTO closed_batches (run_id, batch_id) VALUES (?, ?)", (run_id, keys.closed_batch)
            )
        if keys.resume is not None:
            self._db.execute(
                "INSERT INTO applied_resumes (run_id, ticket_id, digest) VALUES (?, ?, ?)",
                (run_id, keys.resume.ticket_id, keys.resume.digest),
            )

    def history(self, run_id: str) -> History:
        return _SqliteHistory(self, run_id)

    def _ticket_known(self, ticket_id: str) -> bool:
        row = self._db.execute("SELECT 1 FROM tickets WHERE ticket_id = ?", (ticket_id,)).fetchone()
        return row is not None

    def _head_in(self, thread_id: str) -> ThreadHead | None:
        row = self._db.execute(
            "SELECT version, active_run_id FROM threads WHERE thread_id = ?", (thread_id,)
        ).fetchone()
        if row is None:
            return None
        head: ThreadHead = decoded(
            self.path, f"threads row {thread_id!r}", lambda: thread_head(thread_id, row[0], row[1])
        )
        return head

    def _run_in(self, run_id: str) -> RunSnapshot | None:
        row = self._db.execute("SELECT snapshot FROM runs WHERE run_id = ?", (run_id,)).fetchone()
        if row is None:
            return None
        snapshot: RunSnapshot = decoded(
            self.path, f"runs row {run_id!r}", lambda: snapshot_from_json(json.loads(row[0]))
        )
        if snapshot.run_id != run_id:
            raise DamagedStore(f"{self.path}: the runs row {run_id!r} holds the state of run {snapshot.run_id!r}")
        return snapshot

    def run(self, run_id: str) -> RunSnapshot | None:
        snapshot: RunSnapshot | None = self._read(lambda: self._run_in(run_id))
        return snapshot

    def trace_context(self, run_id: str) -> str | None:
        """The trace context stored with the Run's activation (None: none was)."""
        row = self._read(
            lambda: self._db.execute("SELECT trace_context FROM runs WHERE run_id = ?", (run_id,)).fetchone()
        )
        return None if row is None or row[0] is None else str(row[0])

    def thread_head(self, thread_id: str) -> ThreadHead | None:
        head: ThreadHead | None = self._read(lambda: self._head_in(thread_id))
        return head

    def thread_ids(self) -> list[str]:
        rows = self._read(lambda: self._db.execute("SELECT thread_id FROM threads ORDER BY thread_id").fetchall())
        return [str(r[0]) for r in rows]

    def thread_of(self, run_id: str) -> str | None:
        row = self._read(
            lambda: self._db.execute("SELECT thread_id FROM runs WHERE run_id = ?", (run_id,)).fetchone()
        )
        return None if row is None else str(row[0])

    def commits(self, thread_id: str) -> Iterator[ThreadCommit]:
        """The Thread's log, checked as it is read: versions 1..n without gap or repeat,
        each line's own version and Thread matching its row, and the last version the
        Thread's head; anything else is a DamagedStore, never a partial answer."""
        # one statement, so the head and the log come from one snapshot
        rows = self._read(
            lambda: self._db.execute(
                "SELECT c.version, c.line, (SELECT t.version FROM threads t WHERE t.thread_id = ?) "
                "FROM commits c WHERE c.thread_id = ? ORDER BY c.version",
                (thread_id, thread_id),
            ).fetchall()
        )
        if not rows:
            if self.thread_head(thread_id) is not None:
                raise DamagedStore(f"{self.path}: thread {thread_id!r} has a head but no commits")
            return iter(())
        return self._checked_log(thread_id, rows)

    def _checked_log(self, thread_id: str, rows: list[tuple[Any, ...]]) -> Iterator[ThreadCommit]:
        commits: list[ThreadCommit] = []
        for expected, (stored_version, line, _) in enumerate(rows, start=1):
            where = f"commits row ({thread_id!r}, {stored_version!r})"
            commit: ThreadCommit = decoded(self.path, where, lambda: commit_from_text(line))
            if stored_version != expected or commit.version != expected or commit.thread_id != thread_id:
                raise DamagedStore(
                    f"{self.path}: the {where} breaks the log: expected version {expected} of "
                    f"thread {thread_id!r}, found version {commit.version} of {commit.thread_id!r}"
                )
            commits.append(commit)
        head_version = rows[-1][2]
        if head_version != len(rows):
            raise DamagedStore(
                f"{self.path}: thread {thread_id!r} has {len(rows)} commits but its threads row "
                f"says version {head_version!r}"
            )
        return iter(commits)

    def commit_lines(self, thread_id: str) -> list[str]:
        """The stored ``runkernel/1`` lines, exactly as written."""
        rows = self._read(
            lambda: self._db.execute(
                "SELECT line FROM commits WHERE thread_id = ? ORDER BY version", (thread_id,)
            ).fetchall()
        )
        return [str(r[0]) for r in rows]

    def messages(self, thread_id: str) -> list[Message]:
        return [m for c in self.commits(thread_id) for m in c.messages]

    # --- inbox, checkpoints, reconciliations ------------------------------------

    def put_command(self, run_id: str, body: JsonValue) -> int:
        cursor = self._write("INSERT INTO inbox (run_id, body) VALUES (?, ?)", (run_id, dumps(body)))
        return int(cursor.lastrowid or 0)

    def pending_commands(self, run_id: str) -> list[InboxEntry]:
        rows = self._read(
            lambda: self._db.execute(
                "SELECT entry_id, body FROM inbox WHERE run_id = ? AND state = 'pending' "
                "ORDER BY entry_id",
                (run_id,),
            ).fetchall()
        )
        return [
            InboxEntry(int(r[0]), run_id, decoded(self.path, f"inbox row {r[0]}", lambda: json_text(r[1])), "pending")
            for r in rows
        ]

    def settle_command(self, entry_id: int, outcome: str) -> None:
        self._write("UPDATE inbox SET state = 'settled', outcome = ? WHERE entry_id = ?", (outcome, entry_id))

    def inbox_entry(self, entry_id: int) -> InboxEntry | None:
        row = self._read(
            lambda: self._db.execute(
                "SELECT run_id, body, state, outcome FROM inbox WHERE entry_id = ?", (entry_id,)
            ).fetchone()
        )
        if row is None:
            return None
        body = decoded(self.path, f"inbox row {entry_id}", lambda: json_text(row[1]))
        return InboxEntry(entry_id, str(row[0]), body, str(row[2]), row[3])

    def commands(self, run_id: str) -> list[InboxEntry]:
        rows = self._read(
            lambda: self._db.execute(
                "SELECT entry_id, body, state, outcome FROM inbox WHERE run_id = ? ORDER BY entry_id", (run_id,)
            ).fetchall()
        )
        return [
            InboxEntry(int(r[0]), run_id, decoded(self.path, f"inbox row {r[0]}", lambda: json_text(r[1])), str(r[2]), r[3])
            for r in rows
        ]

    def compact_commands(self, run_id: str) -> int:
        refused = "SELECT entry_id FROM inbox WHERE run_id = ? AND state = 'settled' AND outcome LIKE 'refused%'"
        if not self._read(lambda: self._db.execute(refused + " LIMIT 1", (run_id,)).fetchone()):
            return 0  # the common case: nothing to delete, so no write transaction
        cursor = self._write(f"DELETE FROM inbox WHERE entry_id IN ({refused})", (run_id,))
        return int(cursor.rowcount)

    def save_checkpoint(self, checkpoint: Checkpoint) -> None:
        self._scratch_write(
            "INSERT INTO checkpoints (run_id, step, data) VALUES (?, ?, ?) "
            "ON CONFLICT (run_id) DO UPDATE SET step = excluded.step, data = excluded.data",
            (checkpoint.run_id, checkpoint.step, dumps(checkpoint.data)),
        )

    def load_checkpoint(self, run_id: str) -> Checkpoint | None:
        row = self._read(
            lambda: self._db.execute("SELECT step, data FROM checkpoints WHERE run_id = ?", (run_id,)).fetchone()
        )
        if row is None:
            return None
        checkpoint: Checkpoint = decoded(
            self.path, f"checkpoints row {run_id!r}", lambda: Checkpoint(run_id, integer(row[0]), json_text(row[1]))
        )
        return checkpoint

    def delete_checkpoint(self, run_id: str) -> None:
        self._scratch_write("DELETE FROM checkpoints WHERE run_id = ?", (run_id,))

    def _scratch_write(self, sql: str, params: tuple[Any, ...]) -> None:
        """A best-effort write that never waits for an fsync (Cost model): its
        own connection with ``synchronous=OFF``. In WAL mode a process crash keeps it;
        a power loss may lose it, which only loses a partial inference."""
        try:
            if self._scratch is None:
                self._scratch = sqlite3.connect(self.path, isolation_level=None, timeout=30.0)
                self._scratch.execute("PRAGMA synchronous=OFF")
            self._scratch.execute(sql, params)
        except sqlite3.Error as error:
            raise StoreUnavailable(f"checkpoint write failed: {error}") from None

    def record_reconciliation(self, record: Reconciliation) -> None:
        self._write(
            "INSERT INTO reconciliations (operation_id, outcome, note) VALUES (?, ?, ?)",
            (record.operation_id, record.outcome, record.note),
        )

    def reconciliations(self, operation_id: str | None = None) -> list[Reconciliation]:
        query = "SELECT operation_id, outcome, note FROM reconciliations"
        params: tuple[str, ...] = ()
        if operation_id is not None:
            query += " WHERE operation_id = ?"
            params = (operation_id,)
        rows = self._read(lambda: self._db.execute(query + " ORDER BY entry_id", params).fetchall())
        return [Reconciliation(str(r[0]), str(r[1]), r[2]) for r in rows]

    def reset(self) -> None:
        self._written = None
        try:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                for table in _TABLES:
                    if table != "meta":
                        self._db.execute(f"DELETE FROM {table}")
                self._db.execute("DELETE FROM meta WHERE key = 'claimed_by'")
                self._db.execute("COMMIT")
            except BaseException:
                if self._db.in_transaction:
                    self._db.execute("ROLLBACK")
                raise
        except sqlite3.Error as error:
            raise store_error(self.path, "the reset", error) from None

    def claim_empty(self, owner: str, *, reset: bool) -> str | None:
        """In one write transaction: with ``reset`` delete what the store holds if
        ``simulate`` filled it (its claim row, ``owner`` starting with
        ``SIMULATE_CLAIM``, says so), then claim the store for ``owner`` if it holds no
        Thread and nobody claimed it. None when claimed; else why not. Two ``simulate`` runs started together on one fresh
        store cannot both pass this check, as they could with a read then a write."""
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
                    for table in _TABLES:
                        if table != "meta":
                            self._db.execute(f"DELETE FROM {table}")
                    self._db.execute("DELETE FROM meta WHERE key = 'claimed_by'")
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

    def close(self) -> None:
        if self._scratch is not None:
            self._scratch.close()
        self._db.close()

    # --- plumbing -------------------------------------------------------------------

    def _read(self, query: Any) -> Any:
        try:
            return query()
        except sqlite3.Error as error:
            raise store_error(self.path, "a read", error) from None

    def _write(self, sql: str, params: tuple[Any, ...]) -> sqlite3.Cursor:
        try:
            return self._db.execute(sql, params)
        except sqlite3.Error as error:
            raise store_error(self.path, "a write", error) from None


class _SqliteHistory:
    """A Run's history answered by primary-key lookups on the store's rows."""

    def __init__(self, store: SqliteStore, run_id: str) -> None:
        self._store = store
        self._run_id = run_id

    def _one(self, sql: str, key: str) -> Any:
        db = self._store._db
        return self._store._read(lambda: db.execute(sql, (self._run_id, key)).fetchone())

    def ticket_used(self, ticket_id: str) -> bool:
        return self._one("SELECT 1 FROM tickets WHERE run_id = ? AND ticket_id = ?", ticket_id) is not None

    def batch_closed(self, batch_id: str) -> bool:
        found = self._one("SELECT 1 FROM closed_batches WHERE run_id = ? AND batch_id = ?", batch_id)
        return found is not None

    def applied_digest(self, ticket_id: str) -> str | None:
        row = self._one("SELECT digest FROM applied_resumes WHERE run_id = ? AND ticket_id = ?", ticket_id)
        return None if row is None else str(row[0])
