"""``runkernel db migrate``: upgrade a SQLite store to the current schema in place.

Each step runs in the one transaction of the migration, so a crash leaves the file at
its old schema or at the current one, never between.

Schema 1 kept a Run's history facts (used tickets, closed batch ids, applied resumes)
inside the latest-state row, which every commit rewrote. Schema 2 keeps them in
indexed rows of their own; the migration moves them there and rewrites each
latest-state row without them, in one transaction: a crash leaves the file at
schema 1 or at schema 2, never between. Schema 3 adds leases: a table of them, and
each commit's writer (worker id and lease epoch; none for the commits made before).
Schema 4 lets work discovery find a quiet parent by key: each Run's row says whether
the Run is quiet and names the parent call of a child's activation, and a table holds
the children each quiet Run waits for (filled from the latest states and activations).
Schema 5 adds the indexes that page ``runs`` and the console's Runs list by state, app
or Thread, newest first, without reading every Run.
Schema 6 keeps each Run's trace context (OpenTelemetry) beside its row, written with its
activation; the Runs made before have none.
Schema 7 allows one pending answer per wait: each pending resume names its ticket, under a
unique key; a ticket's pending answers after its oldest are settled first (refused,
naming the oldest), as the runtime would have found them.
Schema 8 records each Run's app version beside its app (the Runs made before have none:
any worker of their app drives them), and adds the worker registry and the versions
recorded compatible (both empty).
Schema 9 keeps the head's version of a Thread with an active Run in that Run's row
(``sqlite.heads``), so a commit of the active Run writes no ``threads`` row. A schema 8
file already holds it there (a Run's row holds its latest version, and only the active
Run commits to its Thread), so the step changes no row: what changes is that a file
written by schema 9 is not readable as schema 8, whose readers take ``threads.version``.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from runkernel.adapters.stores.serial import dumps, legacy_history_from_json, snapshot_from_json, snapshot_to_json
from runkernel.adapters.stores.contract import SchemaError, StoreUnavailable
from runkernel.adapters.stores.sqlite.opening import not_a_database, store_error
from runkernel.adapters.stores.sqlite.schema import (
    AWAITED_CHILDREN_TABLE,
    HISTORY_TABLES,
    LEASES_TABLE,
    ONE_ANSWER_INDEX,
    SCHEMA_NAME,
    SCHEMA_VERSION,
    VERSIONS_TABLES,
)
from runkernel.adapters.stores.sql.migrate import one_answer_statements, quiet_parent_statements
from runkernel.adapters.stores.work import summary_of
from runkernel.kernel.codec import upgrade_v1_line
from runkernel.kernel.state import RESUMED_EVENT

_SCHEMA_1_TO_2 = HISTORY_TABLES

_SCHEMA_2_TO_3 = f"""
ALTER TABLE commits ADD COLUMN writer_id TEXT;
ALTER TABLE commits ADD COLUMN writer_epoch INTEGER;{LEASES_TABLE}ALTER TABLE runs ADD COLUMN app TEXT;
ALTER TABLE runs ADD COLUMN state TEXT NOT NULL DEFAULT 'running';
ALTER TABLE runs ADD COLUMN step INTEGER NOT NULL DEFAULT 0;
ALTER TABLE runs ADD COLUMN version INTEGER NOT NULL DEFAULT 0;
ALTER TABLE runs ADD COLUMN waiting_for TEXT;
ALTER TABLE runs ADD COLUMN wake_at REAL;
CREATE INDEX runs_by_state ON runs (state, app);
"""

_SCHEMA_3_TO_4 = f"""
ALTER TABLE runs ADD COLUMN quiet INTEGER NOT NULL DEFAULT 0;
ALTER TABLE runs ADD COLUMN parent_thread_id TEXT;
ALTER TABLE runs ADD COLUMN parent_run_id TEXT;
ALTER TABLE runs ADD COLUMN parent_call_id TEXT;{AWAITED_CHILDREN_TABLE}"""

_SCHEMA_4_TO_5 = """
CREATE INDEX runs_by_state_only ON runs (state);
CREATE INDEX runs_by_app ON runs (app);
CREATE INDEX runs_by_thread ON runs (thread_id);
"""

_SCHEMA_5_TO_6 = """
ALTER TABLE runs ADD COLUMN trace_context TEXT;
"""

_SCHEMA_7_TO_8 = VERSIONS_TABLES


#: How long a migration waits for another writer's lock, as every store connection does.
BUSY_TIMEOUT = 30.0


def migrate_sqlite(path: str | Path) -> tuple[int, int]:
    """Upgrade the store at ``path``; returns (version before, version after).

    A store already at the current version is left alone; a file that is not a
    runkernel store, or is newer than this runkernel, is refused with SchemaError.
    """
    name = str(path)
    try:
        # mode=rw: a missing file is an error, never a new empty store
        db = sqlite3.connect(
            Path(name).resolve().as_uri() + "?mode=rw", uri=True, isolation_level=None, timeout=BUSY_TIMEOUT
        )
    except sqlite3.Error as error:
        raise StoreUnavailable(f"cannot open {name}: {error}") from None
    try:
        db.execute("BEGIN IMMEDIATE")
        version = _version(db, name)
        if version == SCHEMA_VERSION:
            db.execute("ROLLBACK")
            return version, version
        if version not in (1, 2, 3, 4, 5, 6, 7, 8):
            raise SchemaError(
                f"{name} has schema version {version}; this runkernel migrates 1 to 8 to {SCHEMA_VERSION}"
            )
        if version == 1:
            _one_to_two(db, name)
        if version <= 2:
            _two_to_three(db, name)
        if version <= 3:
            _three_to_four(db, name)
        if version <= 4:
            _run_statements(db, _SCHEMA_4_TO_5)
        if version <= 5:
            _run_statements(db, _SCHEMA_5_TO_6)
        if version <= 6:
            _six_to_seven(db)
        if version <= 7:
            _seven_to_eight(db)
        # 8 -> 9: no row changes (the docstring says why)
        db.execute("UPDATE meta SET value = ? WHERE key = 'version'", (str(SCHEMA_VERSION),))
        db.execute("COMMIT")
        return version, SCHEMA_VERSION
    except sqlite3.OperationalError as error:
        # locked beyond the busy timeout, a full disk, read-only: a store failure (exit 1)
        raise store_error(name, "migrating", error) from None
    except sqlite3.DatabaseError as error:
        raise not_a_database(name, error) or SchemaError(f"{name} cannot be migrated: {error}") from None
    finally:
        if db.in_transaction:
            db.execute("ROLLBACK")
        db.close()


def _version(db: sqlite3.Connection, name: str) -> int:
    if db.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'meta'").fetchone() is None:
        raise SchemaError(f"{name} is not a runkernel store")
    found: dict[str, str] = dict(db.execute("SELECT key, value FROM meta").fetchall())
    if found.get("schema") != SCHEMA_NAME:
        raise SchemaError(f"{name} is a {found.get('schema')!r} database, not a runkernel store")
    try:
        return int(found.get("version", ""))
    except ValueError:
        raise SchemaError(f"{name} has an unreadable schema version {found.get('version')!r}") from None


def _run_statements(db: sqlite3.Connection, script: str) -> None:
    # one statement at a time: executescript would commit the open transaction
    for statement in script.split(";"):
        if statement.strip():
            db.execute(statement)


def _two_to_three(db: sqlite3.Connection, name: str) -> None:
    """Leases, writers and the Run summary rows (filled from each latest state; the Runs
    of older schemas were activated without an app)."""
    _run_statements(db, _SCHEMA_2_TO_3)
    for run_id, text in db.execute("SELECT run_id, snapshot FROM runs").fetchall():
        try:
            summary = summary_of(snapshot_from_json(json.loads(text)), None)
        except (ValueError, KeyError, TypeError) as error:
            raise SchemaError(f"{name}: the stored state of run {run_id!r} is damaged: {error!r}") from None
        db.execute(
            "UPDATE runs SET state = ?, step = ?, version = ?, waiting_for = ?, wake_at = ? WHERE run_id = ?",
            (summary.state, summary.step, summary.version, summary.waiting_for, summary.wake_at, run_id),
        )


def _six_to_seven(db: sqlite3.Connection) -> None:
    """One pending answer per wait: name the tickets, settle the later answers, then the key."""
    columns = {str(row[1]) for row in db.execute("PRAGMA table_info(inbox)").fetchall()}
    if "ticket_id" not in columns:  # a file made older by hand may have kept it
        db.execute("ALTER TABLE inbox ADD COLUMN ticket_id TEXT")
    pending = db.execute("SELECT entry_id, run_id, body FROM inbox WHERE state = 'pending' ORDER BY entry_id")
    for statement, params in list(one_answer_statements(pending.fetchall())):
        db.execute(statement, params)
    _run_statements(db, ONE_ANSWER_INDEX)


def _seven_to_eight(db: sqlite3.Connection) -> None:
    """Each Run's app version (none for the Runs made before), the registry, the compatibility."""
    columns = {str(row[1]) for row in db.execute("PRAGMA table_info(runs)").fetchall()}
    if "app_version" not in columns:  # a file made older by hand may have kept it
        db.execute("ALTER TABLE runs ADD COLUMN app_version TEXT")
    _run_statements(db, _SCHEMA_7_TO_8)


def _three_to_four(db: sqlite3.Connection, name: str) -> None:
    """Quietness, awaited children and parents, from each latest state and activation."""
    _run_statements(db, _SCHEMA_3_TO_4)
    runs = db.execute("SELECT run_id, snapshot FROM runs").fetchall()
    lines = db.execute("SELECT run_id, line FROM commits").fetchall()
    for statement, params in quiet_parent_statements(name, runs, lines):
        db.execute(statement, params)


def _one_to_two(db: sqlite3.Connection, name: str) -> None:
    _run_statements(db, _SCHEMA_1_TO_2)
    rows = db.execute("SELECT run_id, snapshot FROM runs").fetchall()
    for run_id, text in rows:
        try:
            obj = json.loads(text)
            history = legacy_history_from_json(obj)
            snapshot = snapshot_from_json(obj)
        except (ValueError, KeyError, TypeError) as error:
            raise SchemaError(f"{name}: the stored state of run {run_id!r} is damaged: {error!r}") from None
        for ticket in sorted(history.tickets):
            db.execute("INSERT OR IGNORE INTO tickets (ticket_id, run_id) VALUES (?, ?)", (ticket, run_id))
        for batch_id in sorted(history.closed_batches):
            db.execute("INSERT INTO closed_batches (run_id, batch_id) VALUES (?, ?)", (run_id, batch_id))
        for applied in history.resumes:
            db.execute(
                "INSERT OR REPLACE INTO applied_resumes (run_id, ticket_id, digest) VALUES (?, ?, ?)",
                (run_id, applied.ticket_id, applied.digest),
            )
        db.execute("UPDATE runs SET snapshot = ? WHERE run_id = ?", (dumps(snapshot_to_json(snapshot)), run_id))
    _upgrade_commit_lines(db, name)


def _upgrade_commit_lines(db: sqlite3.Connection, name: str) -> None:
    """Schema 1 stored runkernel/1 lines: rewrite each as runkernel/2, and keep each
    applied resume's digest equal to its (now RFC 8785) event digest."""
    rows = db.execute("SELECT thread_id, version, run_id, line FROM commits").fetchall()
    for thread_id, version, run_id, line in rows:
        try:
            upgraded = upgrade_v1_line(json.loads(line))
        except (ValueError, KeyError, TypeError) as error:
            raise SchemaError(f"{name}: commit {version} of thread {thread_id!r} is damaged: {error!r}") from None
        db.execute(
            "UPDATE commits SET line = ? WHERE thread_id = ? AND version = ?", (dumps(upgraded), thread_id, version)
        )
        for event in upgraded.get("events") or ():
            if isinstance(event, dict) and event.get("type") == RESUMED_EVENT:
                db.execute(
                    "UPDATE applied_resumes SET digest = ? WHERE run_id = ? AND ticket_id = ?",
                    (event.get("digest"), run_id, event.get("ticket_id")),
                )
