"""The SQLite store's schema: its name and version, and the tables a new store is made
with. ``sqlite.migrate`` upgrades older files; the tables it adds take their
definitions from here, so a migrated store and a new one declare them alike."""

from __future__ import annotations

from runkernel.adapters.stores.sqlite.opening import Layout
from runkernel.adapters.stores.work import STORE_TABLES

SCHEMA_NAME = "runkernel-sqlite"
SCHEMA_VERSION = 9

#: The history facts kept as indexed rows of their own (schema 2).
HISTORY_TABLES = """
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
"""

#: The children each quiet Run waits for (schema 4).
AWAITED_CHILDREN_TABLE = """
CREATE TABLE awaited_children (
    parent_run_id TEXT NOT NULL,
    child_run_id TEXT NOT NULL,
    PRIMARY KEY (parent_run_id, child_run_id)
) WITHOUT ROWID;
"""

#: One pending answer per wait (schema 7): a resume's row names the ticket it answers,
#: and no two pending rows name the same one.
ONE_ANSWER_INDEX = """
CREATE UNIQUE INDEX IF NOT EXISTS inbox_one_answer ON inbox (run_id, ticket_id) WHERE state = 'pending' AND ticket_id IS NOT NULL;
"""

#: The worker registry and the versions recorded compatible (schema 8): each live worker's
#: app, version and last heartbeat (store time); and per app, which Runs' versions
#: (``drives``) the workers of a version may drive (``accept_versions``).
VERSIONS_TABLES = """
CREATE TABLE IF NOT EXISTS workers (
    worker_id TEXT PRIMARY KEY,
    app TEXT,
    version TEXT,
    heartbeat_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS compatible_versions (
    app TEXT NOT NULL,
    version TEXT NOT NULL,
    drives TEXT NOT NULL,
    PRIMARY KEY (app, version, drives)
) WITHOUT ROWID;
"""

#: One row per leased Run (schema 3).
LEASES_TABLE = """
CREATE TABLE leases (
    run_id TEXT PRIMARY KEY,
    worker_id TEXT NOT NULL,
    epoch INTEGER NOT NULL,
    expires_at REAL NOT NULL,
    released INTEGER NOT NULL DEFAULT 0
);
"""

SCHEMA = f"""
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
    trace_context TEXT,
    app_version TEXT
);
CREATE INDEX runs_by_state ON runs (state, app);
CREATE INDEX runs_by_state_only ON runs (state);
CREATE INDEX runs_by_app ON runs (app);
CREATE INDEX runs_by_thread ON runs (thread_id);{AWAITED_CHILDREN_TABLE.rstrip()}
CREATE TABLE commits (
    thread_id TEXT NOT NULL,
    version INTEGER NOT NULL,
    run_id TEXT NOT NULL,
    line TEXT NOT NULL,
    writer_id TEXT,
    writer_epoch INTEGER,
    PRIMARY KEY (thread_id, version)
) WITHOUT ROWID;
CREATE TABLE tickets (ticket_id TEXT PRIMARY KEY, run_id TEXT NOT NULL);{HISTORY_TABLES.rstrip()}
CREATE TABLE inbox (
    entry_id INTEGER PRIMARY KEY AUTOINCREMENT,
    run_id TEXT NOT NULL,
    body TEXT NOT NULL,
    state TEXT NOT NULL DEFAULT 'pending',
    outcome TEXT,
    ticket_id TEXT
);
CREATE INDEX inbox_pending ON inbox (run_id, state);{ONE_ANSWER_INDEX.rstrip()}
CREATE TABLE checkpoints (run_id TEXT PRIMARY KEY, step INTEGER NOT NULL, data TEXT NOT NULL);
CREATE TABLE reconciliations (
    entry_id INTEGER PRIMARY KEY AUTOINCREMENT,
    operation_id TEXT NOT NULL,
    outcome TEXT NOT NULL,
    note TEXT
);
CREATE INDEX reconciliations_by_operation ON reconciliations (operation_id);{LEASES_TABLE}{VERSIONS_TABLES}"""

LAYOUT = Layout(SCHEMA_NAME, SCHEMA_VERSION, STORE_TABLES)
