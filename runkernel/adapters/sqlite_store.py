"""The embedded default store: stdlib sqlite3, WAL, ``synchronous=FULL``.

Each commit is one row holding its ``runkernel/1`` line: the message *delta*, never
the history again, so a commit's size does not grow with the Thread. The latest state
of every Run and Thread is kept in rows of its own, updated in the same transaction,
so reading it is one primary-key lookup whatever the history's length. The schema is
versioned: a file that is not a runkernel store, or is newer, is refused.
"""

from __future__ import annotations

import json
import os
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from runkernel.adapters.serial import (
    commit_from_text,
    commit_text,
    dumps,
    snapshot_from_json,
    snapshot_to_json,
)
from runkernel.adapters.store import (
    Checkpoint,
    InboxEntry,
    Reconciliation,
    SchemaError,
    Settlement,
    StoreUnavailable,
    judge_append,
)
from runkernel.kernel.history import History, HistoryKeys
from runkernel.kernel.state import (
    Message,
    RunSnapshot,
    ThreadCommit,
    ThreadHead,
)
from runkernel.kernel.values import JsonValue

SCHEMA_NAME = "runkernel-sqlite"
SCHEMA_VERSION = 2

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
    snapshot TEXT NOT NULL
);
CREATE TABLE commits (
    thread_id TEXT NOT NULL,
    version INTEGER NOT NULL,
    run_id TEXT NOT NULL,
    line TEXT NOT NULL,
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
"""

_TABLES = (
    "meta",
    "threads",
    "runs",
    "commits",
    "tickets",
    "closed_batches",
    "applied_resumes",
    "inbox",
    "checkpoints",
    "reconciliations",
)


class SqliteStore:
    """A runkernel store in one SQLite file. Use one instance per thread of control."""

    def __init__(self, path: str | Path, *, synchronous: str = "FULL", create: bool = True) -> None:
        if synchronous not in ("FULL", "NORMAL", "EXTRA"):
            raise ValueError(f"synchronous must be FULL, NORMAL or EXTRA, not {synchronous!r}")
        self.path = str(path)
        if not create and not os.path.exists(self.path):
            raise StoreUnavailable(f"no store at {self.path}")
        self.fail_checkpoints = False
        self._scratch: sqlite3.Connection | None = None
        #: (run id, snapshot row text, snapshot) of this connection's last commit
        self._written: tuple[str, str, RunSnapshot] | None = None
        try:
            self._db = sqlite3.connect(self.path, isolation_level=None, timeout=30.0)
        except sqlite3.Error as error:
            raise StoreUnavailable(f"cannot open {self.path}: {error}") from None
        try:
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute(f"PRAGMA synchronous={synchronous}")
            self._ensure_schema()
        except sqlite3.DatabaseError as error:
            self._db.close()
            raise SchemaError(f"{self.path} is not a runkernel SQLite store: {error}") from None
        except SchemaError:
            self._db.close()
            raise

    # --- schema ---------------------------------------------------------------------

    def _ensure_schema(self) -> None:
        tables = {
            row[0]
            for row in self._db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
            if not str(row[0]).startswith("sqlite_")
        }
        if not tables:
            meta = (
                f"INSERT INTO meta (key, value) VALUES ('schema', '{SCHEMA_NAME}'), "
                f"('version', '{SCHEMA_VERSION}');"
            )
            try:
                self._db.executescript("BEGIN IMMEDIATE;" + _SCHEMA + meta + "COMMIT;")
            except sqlite3.OperationalError:
                if self._db.in_transaction:
                    self._db.execute("ROLLBACK")
                if not self._db.execute("SELECT 1 FROM sqlite_master WHERE name = 'meta'").fetchone():
                    raise
                # another process created the schema first: check it like any other file
                self._ensure_schema()
            return
        if "meta" not in tables:
            raise SchemaError(f"{self.path} holds tables {sorted(tables)} but is not a runkernel store")
        found: dict[str, str] = dict(self._db.execute("SELECT key, value FROM meta").fetchall())
        if found.get("schema") != SCHEMA_NAME:
            raise SchemaError(f"{self.path} is a {found.get('schema')!r} database, not a runkernel store")
        try:
            version = int(found.get("version", ""))
        except ValueError:
            raise SchemaError(f"{self.path} has an unreadable schema version {found.get('version')!r}") from None
        if version > SCHEMA_VERSION:
            raise SchemaError(
                f"{self.path} has schema version {version}; this runkernel knows up to "
                f"{SCHEMA_VERSION}: upgrade runkernel"
            )
        if version < SCHEMA_VERSION:
            raise SchemaError(
                f"{self.path} has schema version {version}, older than this runkernel's "
                f"{SCHEMA_VERSION}: upgrade it with `runkernel db migrate --store sqlite:///{self.path}`"
            )
        if not set(_TABLES) <= tables:
            raise SchemaError(f"{self.path} has an unknown or damaged schema (version {version})")

    # --- commits --------------------------------------------------------------------

    def append(self, commit: ThreadCommit, settle: Settlement | None = None) -> RunSnapshot:
        db = self._db
        try:
            db.execute("BEGIN IMMEDIATE")
        except sqlite3.Error as error:
            raise StoreUnavailable(f"cannot begin a write: {error}") from None
        try:
            accepted = judge_append(
                self._head_in(commit.thread_id),
                self._run_before(commit.run_id),
                commit,
                self.history(commit.run_id),
                self._ticket_known,
            )
            db.execute(
                "INSERT INTO commits (thread_id, version, run_id, line) VALUES (?, ?, ?, ?)",
                (commit.thread_id, commit.version, commit.run_id, commit_text(commit)),
            )
            head = accepted.head
            db.execute(
                "INSERT INTO threads (thread_id, version, active_run_id) VALUES (?, ?, ?) "
                "ON CONFLICT (thread_id) DO UPDATE SET version = excluded.version, "
                "active_run_id = excluded.active_run_id",
                (head.thread_id, head.version, head.active_run_id),
            )
            snapshot_text = dumps(snapshot_to_json(accepted.run))
            db.execute(
                "INSERT INTO runs (run_id, thread_id, snapshot) VALUES (?, ?, ?) "
                "ON CONFLICT (run_id) DO UPDATE SET snapshot = excluded.snapshot",
                (commit.run_id, commit.thread_id, snapshot_text),
            )
            self._insert_keys(commit.run_id, accepted.keys)
            if settle is not None:
                db.execute(
                    "UPDATE inbox SET state = 'settled', outcome = ? WHERE entry_id = ? AND state = 'pending'",
                    (settle.outcome, settle.entry_id),
                )
            self._written = None
            db.execute("COMMIT")
            self._written = (commit.run_id, snapshot_text, accepted.run)
        except BaseException as error:
            if db.in_transaction:
                db.execute("ROLLBACK")
            if isinstance(error, sqlite3.Error):
                raise StoreUnavailable(f"write failed: {error}") from None
            raise
        return accepted.run

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
        return None if row is None else ThreadHead(thread_id, int(row[0]), row[1])

    def _run_in(self, run_id: str) -> RunSnapshot | None:
        row = self._db.execute("SELECT snapshot FROM runs WHERE run_id = ?", (run_id,)).fetchone()
        if row is None:
            return None
        try:
            return snapshot_from_json(json.loads(row[0]))
        except (ValueError, KeyError, TypeError) as error:
            raise SchemaError(f"{self.path}: the stored state of run {run_id!r} is damaged: {error!r}") from None

    def run(self, run_id: str) -> RunSnapshot | None:
        snapshot: RunSnapshot | None = self._read(lambda: self._run_in(run_id))
        return snapshot

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
        rows = self._read(
            lambda: self._db.execute(
                "SELECT line FROM commits WHERE thread_id = ? ORDER BY version", (thread_id,)
            ).fetchall()
        )
        return (self._decode_commit(thread_id, r[0]) for r in rows)

    def _decode_commit(self, thread_id: str, line: str) -> ThreadCommit:
        try:
            return commit_from_text(line)
        except (ValueError, KeyError, TypeError) as error:
            raise SchemaError(f"{self.path}: a stored commit of thread {thread_id!r} is damaged: {error}") from None

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
        return [InboxEntry(int(r[0]), run_id, json.loads(r[1]), "pending") for r in rows]

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
        return InboxEntry(entry_id, str(row[0]), json.loads(row[1]), str(row[2]), row[3])

    def save_checkpoint(self, checkpoint: Checkpoint) -> None:
        if self.fail_checkpoints:
            raise StoreUnavailable("checkpoint writes are failing (injected)")
        self._scratch_write(
            "INSERT INTO checkpoints (run_id, step, data) VALUES (?, ?, ?) "
            "ON CONFLICT (run_id) DO UPDATE SET step = excluded.step, data = excluded.data",
            (checkpoint.run_id, checkpoint.step, dumps(checkpoint.data)),
        )

    def load_checkpoint(self, run_id: str) -> Checkpoint | None:
        row = self._read(
            lambda: self._db.execute("SELECT step, data FROM checkpoints WHERE run_id = ?", (run_id,)).fetchone()
        )
        return None if row is None else Checkpoint(run_id, int(row[0]), json.loads(row[1]))

    def delete_checkpoint(self, run_id: str) -> None:
        self._scratch_write("DELETE FROM checkpoints WHERE run_id = ?", (run_id,))

    def _scratch_write(self, sql: str, params: tuple[Any, ...]) -> None:
        """A best-effort write that never waits for an fsync (DESIGN.md, Cost model): its
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
        self._db.execute("BEGIN IMMEDIATE")
        try:
            for table in _TABLES:
                if table != "meta":
                    self._db.execute(f"DELETE FROM {table}")
            self._db.execute("COMMIT")
        except BaseException:
            if self._db.in_transaction:
                self._db.execute("ROLLBACK")
            raise

    def close(self) -> None:
        if self._scratch is not None:
            self._scratch.close()
        self._db.close()

    # --- plumbing -------------------------------------------------------------------

    def _read(self, query: Any) -> Any:
        try:
            return query()
        except sqlite3.Error as error:
            raise StoreUnavailable(f"read failed: {error}") from None

    def _write(self, sql: str, params: tuple[Any, ...]) -> sqlite3.Cursor:
        try:
            return self._db.execute(sql, params)
        except sqlite3.Error as error:
            raise StoreUnavailable(f"write failed: {error}") from None


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
