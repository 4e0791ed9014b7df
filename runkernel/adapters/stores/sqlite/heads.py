"""Where a SQLite store keeps a Thread's head (schema 9), and the reads that find it.

A Thread's head is its latest version and its active Run. While a Run is active only
that Run may commit to the Thread (one active Run; nothing after Ended), so the head's
version is that Run's own latest version, which its ``runs`` row holds already. A
commit of the active Run that leaves it active therefore writes no ``threads`` row: one
page fewer per commit (issue 38). The ``threads`` row is written when the active Run
changes (an activation, an end), and then holds the head's version too. So: with no
active Run the head's version is ``threads.version``; with one, it is the Run's
``runs.version``.
"""

from __future__ import annotations

#: The head's version of the ``threads`` row ``t`` (see the module's docstring).
HEAD_VERSION = (
    "CASE WHEN t.active_run_id IS NULL THEN t.version"
    " ELSE (SELECT a.version FROM runs a WHERE a.run_id = t.active_run_id) END"
)

#: A Thread's head (thread id).
THREAD_HEAD = f"SELECT {HEAD_VERSION}, t.active_run_id FROM threads t WHERE t.thread_id = ?"

#: A commit's read inside its transaction: the Thread's head, the Run's snapshot text and
#: its lease row, in one statement (NULLs where a row is missing): (thread, run, run).
HEAD_RUN_AND_LEASE = (
    f"SELECT {HEAD_VERSION}, t.active_run_id, r.snapshot, l.worker_id, l.epoch, l.expires_at, l.released "
    "FROM (SELECT 1) AS one LEFT JOIN threads t ON t.thread_id = ? LEFT JOIN runs r ON r.run_id = ? "
    "LEFT JOIN leases l ON l.run_id = ?"
)

#: A stored commit with its Thread's head version: (thread, version).
STORED_COMMIT = (
    f"SELECT c.line, c.writer_id, c.writer_epoch, {HEAD_VERSION}, c.run_id FROM commits c "
    "JOIN threads t ON t.thread_id = c.thread_id WHERE c.thread_id = ? AND c.version = ?"
)

#: A Thread's log with its head's version on each row, from one snapshot: (thread, thread).
LOG_AND_HEAD = (
    f"SELECT c.version, c.line, (SELECT {HEAD_VERSION} FROM threads t WHERE t.thread_id = ?) "
    "FROM commits c WHERE c.thread_id = ? ORDER BY c.version"
)


def moves_threads_row(before_active: str | None, after_active: str | None, run_id: str) -> bool:
    """Whether a commit of ``run_id`` that takes the head's active Run from
    ``before_active`` to ``after_active`` writes the ``threads`` row: unless the Run was
    and stays the active one (its ``runs`` row then holds the head's version)."""
    return not (before_active == run_id and after_active == run_id)
