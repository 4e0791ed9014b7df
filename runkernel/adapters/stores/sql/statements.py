"""The statements the SQL stores share that are not methods of ``sql.shared.SqlStore``:
the commit's reads and history rows; a Run's history read by key. Every statement is
written in SQLite's ``?`` style (``dialect`` says how each database takes one)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from runkernel.adapters.stores.contract import Settlement
from runkernel.kernel.history import HistoryKeys

Row = tuple[Any, ...]
#: One statement and its parameters, in ``?`` style.
Statement = tuple[str, tuple[Any, ...]]

#: The Thread's head and the Run's latest snapshot text, read in one statement (each
#: NULL when its row does not exist): what a commit is judged against.
HEAD_AND_RUN = (
    "SELECT (SELECT version FROM threads WHERE thread_id = ?), "
    "(SELECT active_run_id FROM threads WHERE thread_id = ?), "
    "(SELECT snapshot FROM runs WHERE run_id = ?)"
)

#: SQLite's writes of a commit: its line, the Thread's head (a new Thread's row, or the
#: head moved on, when ``sqlite.heads`` says the commit moves it) and the Run's row (a new Run's, with the app, version and parent its
#: activation names and later commits keep; or the latest state moved on). The head's
#: and the Run's changed columns come first, their keys last.
INSERT_COMMIT = (
    "INSERT INTO commits (thread_id, version, run_id, line, writer_id, writer_epoch) VALUES (?, ?, ?, ?, ?, ?)"
)
INSERT_THREAD = "INSERT INTO threads (version, active_run_id, thread_id) VALUES (?, ?, ?)"
UPDATE_THREAD = "UPDATE threads SET version = ?, active_run_id = ? WHERE thread_id = ?"
INSERT_RUN = (
    "INSERT INTO runs (snapshot, state, step, version, waiting_for, wake_at, quiet, run_id, thread_id, app, "
    "app_version, parent_thread_id, parent_run_id, parent_call_id) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)
UPDATE_RUN = (
    "UPDATE runs SET snapshot = ?, state = ?, step = ?, version = ?, waiting_for = ?, wake_at = ?, quiet = ? "
    "WHERE run_id = ?"
)
#: ``UPDATE_RUN`` for a commit that leaves the Run's state as it was (most do): the same
#: parameters, its state unused. SQLite rewrites the entries of every index on a column
#: an UPDATE sets, changed or not: naming ``state`` would write a page of each of the
#: two state indexes on every commit for nothing.
UPDATE_RUN_SAME_STATE = (
    "UPDATE runs SET snapshot = ?1, step = ?3, version = ?4, waiting_for = ?5, wake_at = ?6, quiet = ?7 "
    "WHERE run_id = ?8"
)

#: The commit's lease given up in the commit's own transaction (``append(release=True)``),
#: after its lease check found it the Run's valid one: (run id, worker id, epoch, True).
RELEASE_IN_COMMIT = "UPDATE leases SET released = ? WHERE run_id = ? AND worker_id = ? AND epoch = ?"

#: A Run's settled refusals (run id): what ``compact_commands`` deletes.
#: A resume's answer, queued only if its ticket has none pending (the unique key
#: ``inbox_one_answer``: one pending answer per wait), and the pending one found instead.
PUT_ANSWER = "INSERT INTO inbox (run_id, body, ticket_id) VALUES (?, ?, ?) ON CONFLICT DO NOTHING"
PENDING_ANSWER = "SELECT entry_id FROM inbox WHERE run_id = ? AND ticket_id = ? AND state = 'pending'"

REFUSED_COMMANDS = "SELECT entry_id FROM inbox WHERE run_id = ? AND state = 'settled' AND outcome LIKE 'refused%'"
#: ... and deleting them (run id).
COMPACT_COMMANDS = f"DELETE FROM inbox WHERE entry_id IN ({REFUSED_COMMANDS})"


def history_statements(
    run_id: str, keys: HistoryKeys, awaited: tuple[str, ...], settle: Settlement | None
) -> list[Statement]:
    """The rows a commit writes besides its line, head and Run row, in its transaction:
    the history facts it adds (``keys``), the children a quiet Run waits for (only
    quiet commits write those, so a Run's rows are its last quiet commit's) and the
    inbox entry it settles."""
    found: list[Statement] = []
    if awaited:
        found.append(("DELETE FROM awaited_children WHERE parent_run_id = ?", (run_id,)))
        for child in awaited:
            found.append(("INSERT INTO awaited_children (parent_run_id, child_run_id) VALUES (?, ?)", (run_id, child)))
    if keys.ticket is not None:
        found.append(("INSERT INTO tickets (ticket_id, run_id) VALUES (?, ?)", (keys.ticket, run_id)))
    if keys.closed_batch is not None:
        found.append(("INSERT INTO closed_batches (run_id, batch_id) VALUES (?, ?)", (run_id, keys.closed_batch)))
    if keys.resume is not None:
        found.append(
            (
                "INSERT INTO applied_resumes (run_id, ticket_id, digest) VALUES (?, ?, ?)",
                (run_id, keys.resume.ticket_id, keys.resume.digest),
            )
        )
    if settle is not None:
        found.append(
            (
                "UPDATE inbox SET state = 'settled', outcome = ? WHERE entry_id = ? AND state = 'pending'",
                (settle.outcome, settle.entry_id),
            )
        )
    return found


class SqlHistory:
    """A Run's history answered by primary-key lookups on the store's rows."""

    def __init__(self, one: Callable[[str, Sequence[Any]], Row | None], run_id: str) -> None:
        self._one = one
        self._run_id = run_id

    def ticket_used(self, ticket_id: str) -> bool:
        found = self._one("SELECT 1 FROM tickets WHERE run_id = ? AND ticket_id = ?", (self._run_id, ticket_id))
        return found is not None

    def batch_closed(self, batch_id: str) -> bool:
        found = self._one(
            "SELECT 1 FROM closed_batches WHERE run_id = ? AND batch_id = ?", (self._run_id, batch_id)
        )
        return found is not None

    def applied_digest(self, ticket_id: str) -> str | None:
        row = self._one(
            "SELECT digest FROM applied_resumes WHERE run_id = ? AND ticket_id = ?", (self._run_id, ticket_id)
        )
        return None if row is None else str(row[0])


#: The reads of a Thread's head, as kept in the ``threads`` table (``SqlStore``'s
#: defaults; SQLite's ``sqlite.heads`` reads the version of an active Run's row instead).
THREAD_HEAD = "SELECT version, active_run_id FROM threads WHERE thread_id = ?"
#: a stored commit with the head's version (thread id, version)
STORED_COMMIT = (
    "SELECT c.line, c.writer_id, c.writer_epoch, t.version, c.run_id FROM commits c "
    "JOIN threads t ON t.thread_id = c.thread_id WHERE c.thread_id = ? AND c.version = ?"
)
#: the log with the head's version on each row (thread id, thread id)
LOG_AND_HEAD = (
    "SELECT c.version, c.line, (SELECT t.version FROM threads t WHERE t.thread_id = ?) "
    "FROM commits c WHERE c.thread_id = ? ORDER BY c.version"
)
