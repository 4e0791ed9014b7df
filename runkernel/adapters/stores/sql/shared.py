"""What the SQLite and PostgreSQL stores share: the queries and the row mapping of
everything they do alike, written once.

Both keep the same tables (``work.STORE_TABLES``): each commit a row holding its
``runkernel/2`` line (the message delta), the latest state of every Run and Thread a
row of its own, history facts in indexed rows read by key. Their reads, the inbox, the
checkpoints, the reconciliations, the lease rules and the listing are therefore the same
SQL; ``SqlStore`` holds them, with every statement written in SQLite's ``?`` style and
handed to a few hooks each store implements (its ``dialect`` says how its database takes
a statement: ``dialect.POSTGRESQL.sql`` rewrites one for psycopg). What stays in each store is what truly differs: opening the database, the
commit's transaction and its checks (``BEGIN IMMEDIATE`` and reads inside it on SQLite;
one round trip of statements whose failures are the checks on PostgreSQL), how a lease
row is locked and which clock judges it, retries and error translation.
"""

from __future__ import annotations

import functools
import inspect
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from runkernel.adapters.stores.contract import (
    Checkpoint,
    DamagedStore,
    InboxEntry,
    Lease,
    LeaseStatus,
    Reconciliation,
    Writer,
)
from runkernel.adapters.stores.decode import decoded, integer, json_text, thread_head
from runkernel.adapters.stores.leases import LeaseRow, acquired, checked_duration, checked_take, require_held
from runkernel.adapters.stores.serial import commit_from_text, dumps, snapshot_from_json
from runkernel.adapters.stores.sql.dialect import Dialect
from runkernel.adapters.stores.sql.queries import count_query, listing_query, summary_from_row
from runkernel.adapters.stores.sql.statements import COMPACT_COMMANDS, HEAD_AND_RUN, REFUSED_COMMANDS, Row, SqlHistory
from runkernel.adapters.stores.sql.statements import LOG_AND_HEAD, STORED_COMMIT, THREAD_HEAD
from runkernel.adapters.stores.work import RunSummary, parent_from_columns
from runkernel.kernel.history import History
from runkernel.kernel.state import Message, ParentCall, RunSnapshot, ThreadCommit, ThreadHead
from runkernel.kernel.values import JsonValue

_CHECKPOINT_PUT = (
    "INSERT INTO checkpoints (run_id, step, data) VALUES (?, ?, ?) "
    "ON CONFLICT (run_id) DO UPDATE SET step = excluded.step, data = excluded.data"
)


def _one_call_at_a_time(method: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(method)
    def call(self: SqlStore, *args: Any, **kwargs: Any) -> Any:
        with self._serial:
            return method(self, *args, **kwargs)

    return call


def _serialize_public_methods(cls: type) -> None:
    for name, value in list(vars(cls).items()):
        if not name.startswith("_") and inspect.isfunction(value):
            setattr(cls, name, _one_call_at_a_time(value))


class SqlStore:
    """The methods both SQL stores share. A store sets ``where`` (how its errors name
    it) and its ``dialect``, and implements the hooks below; every statement it is handed
    is in ``?`` style.

    One call at a time: every public method (its subclasses' too) holds the instance's
    lock, so the store thread of an asyncio host's driver (``store_thread``) and the
    host's own calls never interleave two transactions on its one connection."""

    where: str
    #: the store's SQL: its placeholders, clock, null-safe equality and activation order
    dialect: Dialect
    #: the reads of a Thread's head (a store may keep the head's version elsewhere while a
    #: Run is active, as SQLite's ``sqlite.heads`` does)
    _thread_head, _stored_commit, _log_and_head = THREAD_HEAD, STORED_COMMIT, LOG_AND_HEAD

    def __new__(cls, *args: Any, **kwargs: Any) -> SqlStore:
        made = super().__new__(cls)
        made._serial = threading.RLock()
        return made

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        _serialize_public_methods(cls)

    _serial: threading.RLock

    # --- hooks ------------------------------------------------------------------------

    def _one(self, query: str, params: Sequence[Any]) -> Row | None:
        """The first row a read returns, or None."""
        raise NotImplementedError

    def _all(self, query: str, params: Sequence[Any]) -> list[Row]:
        """Every row a read returns."""
        raise NotImplementedError

    def _change_rows(self, query: str, params: Sequence[Any]) -> int:
        """A write that does the same when done twice; how many rows it changed."""
        raise NotImplementedError

    def _write_once(self, query: str, params: Sequence[Any]) -> None:
        """A write never repeated (done twice it would record its row twice)."""
        raise NotImplementedError

    def _checkpoint_write(self, query: str, params: Sequence[Any]) -> None:
        """A best-effort checkpoint write (Cost model)."""
        raise NotImplementedError

    def _lease_now(self, run_id: str) -> tuple[LeaseRow | None, float]:
        """The Run's stored lease and the store's clock."""
        raise NotImplementedError

    def _leases_now(self, run_ids: list[str]) -> tuple[dict[str, LeaseRow], float]:
        """The stored leases of those Runs (a Run never leased is missing) and the clock."""
        raise NotImplementedError

    def _with_lease_row(
        self, run_id: str, act: Callable[[LeaseRow | None, float], LeaseRow | None], doing: str
    ) -> None:
        """In one transaction: the Run's lease row, read so that no other lease act or
        commit can change it before this one ends, and the store's clock; then the row
        ``act`` returns (None: unchanged) written."""
        raise NotImplementedError

    # --- decoding ---------------------------------------------------------------------

    def _head(self, thread_id: str, version: Any, active: Any) -> ThreadHead:
        head: ThreadHead = decoded(
            self.where, f"threads row {thread_id!r}", lambda: thread_head(thread_id, version, active)
        )
        return head

    def _snapshot(self, run_id: str, text: Any) -> RunSnapshot:
        snapshot: RunSnapshot = decoded(
            self.where, f"runs row {run_id!r}", lambda: snapshot_from_json(json_text(text))
        )
        if snapshot.run_id != run_id:
            raise DamagedStore(f"{self.where}: the runs row {run_id!r} holds the state of run {snapshot.run_id!r}")
        return snapshot

    def _body(self, entry_id: Any, text: Any) -> JsonValue:
        body: JsonValue = decoded(self.where, f"inbox row {entry_id}", lambda: json_text(text))
        return body

    def _head_and_run(self, thread_id: str, run_id: str) -> tuple[ThreadHead | None, Any]:
        """The Thread's head and the Run's stored snapshot text (None: no row), in one
        statement."""
        row = self._one(HEAD_AND_RUN, (thread_id, thread_id, run_id))
        assert row is not None  # a SELECT without FROM returns its one row
        return (None if row[0] is None else self._head(thread_id, row[0], row[1])), row[2]

    def _stored(self, thread_id: str, version: int) -> tuple[str, Writer | None, int, str] | None:
        """(line, writer, the Thread's head version, run id) of a stored commit."""
        row = self._one(self._stored_commit, (thread_id, version))
        if row is None:
            return None
        stored: tuple[str, Writer | None, int, str] = decoded(
            self.where,
            f"commits row ({thread_id!r}, {version!r})",
            lambda: (str(row[0]), None if row[1] is None else Writer(str(row[1]), integer(row[2])), integer(row[3]), str(row[4])),
        )
        return stored

    # --- Runs and Threads -------------------------------------------------------------

    def history(self, run_id: str) -> History:
        return SqlHistory(self._one, run_id)

    def _ticket_known(self, ticket_id: str) -> bool:
        return self._one("SELECT 1 FROM tickets WHERE ticket_id = ?", (ticket_id,)) is not None

    def run(self, run_id: str) -> RunSnapshot | None:
        row = self._one("SELECT snapshot FROM runs WHERE run_id = ?", (run_id,))
        return None if row is None else self._snapshot(run_id, row[0])

    def trace_context(self, run_id: str) -> str | None:
        """The trace context stored with the Run's activation (None: none was)."""
        row = self._one("SELECT trace_context FROM runs WHERE run_id = ?", (run_id,))
        return None if row is None or row[0] is None else str(row[0])

    def thread_head(self, thread_id: str) -> ThreadHead | None:
        row = self._one(self._thread_head, (thread_id,))
        return None if row is None else self._head(thread_id, row[0], row[1])

    def thread_ids(self) -> list[str]:
        return [str(r[0]) for r in self._all("SELECT thread_id FROM threads ORDER BY thread_id", ())]

    def thread_of(self, run_id: str) -> str | None:
        row = self._one("SELECT thread_id FROM runs WHERE run_id = ?", (run_id,))
        return None if row is None else str(row[0])

    def parent_of(self, run_id: str) -> ParentCall | None:
        row = self._one("SELECT parent_thread_id, parent_run_id, parent_call_id FROM runs WHERE run_id = ?", (run_id,))
        return None if row is None else parent_from_columns(row)

    def writer_of(self, thread_id: str, version: int) -> Writer | None:
        row = self._one(
            "SELECT writer_id, writer_epoch FROM commits WHERE thread_id = ? AND version = ?", (thread_id, version)
        )
        return None if row is None or row[0] is None else Writer(str(row[0]), int(row[1]))

    def commits(self, thread_id: str) -> Iterator[ThreadCommit]:
        """The Thread's log, checked as it is read: versions 1..n without gap or repeat,
        each line's own version and Thread matching its row, and the last version the
        Thread's head; anything else is a DamagedStore, never a partial answer."""
        # one statement, so the head and the log come from one snapshot
        rows = self._all(self._log_and_head, (thread_id, thread_id))
        return iter(self._checked_log(thread_id, rows))

    def _checked_log(self, thread_id: str, rows: Sequence[Row]) -> list[ThreadCommit]:
        """``commits``' checks on the Thread's rows (version, line, the head's version),
        ordered by version."""
        if not rows:
            if self.thread_head(thread_id) is not None:
                raise DamagedStore(f"{self.where}: thread {thread_id!r} has a head but no commits")
            return []
        commits: list[ThreadCommit] = []
        for expected, (stored_version, line, _) in enumerate(rows, start=1):
            where = f"commits row ({thread_id!r}, {stored_version!r})"
            commit: ThreadCommit = decoded(self.where, where, lambda: commit_from_text(line))
            if stored_version != expected or commit.version != expected or commit.thread_id != thread_id:
                raise DamagedStore(
                    f"{self.where}: the {where} breaks the log: expected version {expected} of "
                    f"thread {thread_id!r}, found version {commit.version} of {commit.thread_id!r}"
                )
            commits.append(commit)
        head_version = rows[-1][2]
        if head_version != len(rows):
            raise DamagedStore(
                f"{self.where}: thread {thread_id!r} has {len(rows)} commits but its threads row "
                f"says version {head_version!r}"
            )
        return commits

    def commit_lines(self, thread_id: str) -> list[str]:
        """The stored ``runkernel/2`` lines, exactly as written."""
        rows = self._all("SELECT line FROM commits WHERE thread_id = ? ORDER BY version", (thread_id,))
        return [str(r[0]) for r in rows]

    def messages(self, thread_id: str) -> list[Message]:
        return [m for c in self.commits(thread_id) for m in c.messages]

    # --- inbox, checkpoints, reconciliations ------------------------------------------

    def pending_commands(self, run_id: str) -> list[InboxEntry]:
        rows = self._all(
            "SELECT entry_id, body FROM inbox WHERE run_id = ? AND state = 'pending' ORDER BY entry_id", (run_id,)
        )
        return self._pending_entries(run_id, rows)

    def _pending_entries(self, run_id: str, rows: Sequence[Row]) -> list[InboxEntry]:
        """Rows (entry id, body) of the Run's pending commands read back."""
        return [InboxEntry(int(r[0]), run_id, self._body(r[0], r[1]), "pending") for r in rows]

    def settle_command(self, entry_id: int, outcome: str) -> None:
        self._change_rows("UPDATE inbox SET state = 'settled', outcome = ? WHERE entry_id = ?", (outcome, entry_id))

    def inbox_entry(self, entry_id: int) -> InboxEntry | None:
        row = self._one("SELECT run_id, body, state, outcome FROM inbox WHERE entry_id = ?", (entry_id,))
        if row is None:
            return None
        return InboxEntry(entry_id, str(row[0]), self._body(entry_id, row[1]), str(row[2]), row[3])

    def commands(self, run_id: str) -> list[InboxEntry]:
        rows = self._all(
            "SELECT entry_id, body, state, outcome FROM inbox WHERE run_id = ? ORDER BY entry_id", (run_id,)
        )
        return [InboxEntry(int(r[0]), run_id, self._body(r[0], r[1]), str(r[2]), r[3]) for r in rows]

    def compact_commands(self, run_id: str) -> int:
        if self._one(REFUSED_COMMANDS + " LIMIT 1", (run_id,)) is None:
            return 0  # the common case: nothing to delete, so no write
        return self._change_rows(COMPACT_COMMANDS, (run_id,))

    def save_checkpoint(self, checkpoint: Checkpoint) -> None:
        self._checkpoint_write(_CHECKPOINT_PUT, (checkpoint.run_id, checkpoint.step, dumps(checkpoint.data)))

    def load_checkpoint(self, run_id: str) -> Checkpoint | None:
        return self._checkpoint(run_id, self._one("SELECT step, data FROM checkpoints WHERE run_id = ?", (run_id,)))

    def _checkpoint(self, run_id: str, row: Row | None) -> Checkpoint | None:
        """A checkpoints row (step, data) read back."""
        if row is None:
            return None
        checkpoint: Checkpoint = decoded(
            self.where, f"checkpoints row {run_id!r}", lambda: Checkpoint(run_id, integer(row[0]), json_text(row[1]))
        )
        return checkpoint

    def delete_checkpoint(self, run_id: str) -> None:
        self._checkpoint_write("DELETE FROM checkpoints WHERE run_id = ?", (run_id,))

    def record_reconciliation(self, record: Reconciliation) -> None:
        self._write_once(
            "INSERT INTO reconciliations (operation_id, outcome, note) VALUES (?, ?, ?)",
            (record.operation_id, record.outcome, record.note),
        )

    def reconciliations(self, operation_id: str | None = None) -> list[Reconciliation]:
        query = "SELECT operation_id, outcome, note FROM reconciliations"
        params: tuple[str, ...] = ()
        if operation_id is not None:
            query, params = query + " WHERE operation_id = ?", (operation_id,)
        rows = self._all(query + " ORDER BY entry_id", params)
        return [Reconciliation(str(r[0]), str(r[1]), r[2]) for r in rows]

    # --- leases (Workers and leases) ---------------------------------------

    def acquire_lease(self, run_id: str, worker_id: str, duration: float) -> Lease:
        checked_take(worker_id, duration)
        granted: list[Lease] = []

        def take(row: LeaseRow | None, now: float) -> LeaseRow:
            granted.append(acquired(run_id, row, worker_id, duration, now))
            return LeaseRow(granted[-1], released=False)

        self._with_lease_row(run_id, take, "taking a lease")
        return granted[-1]

    def renew_lease(self, lease: Lease, duration: float) -> Lease:
        checked_duration(duration)
        renewed: list[Lease] = []

        def renew(row: LeaseRow | None, now: float) -> LeaseRow:
            require_held(lease, row, now)
            renewed.append(acquired(lease.run_id, row, lease.worker_id, duration, now))
            return LeaseRow(renewed[-1], released=False)

        self._with_lease_row(lease.run_id, renew, "renewing a lease")
        return renewed[-1]

    def release_lease(self, lease: Lease) -> bool:
        released: list[bool] = []

        def release(row: LeaseRow | None, now: float) -> LeaseRow | None:
            mine = row is not None and row.valid_at(now) and row.lease.writer == lease.writer
            released.append(mine)
            return LeaseRow(row.lease, released=True) if mine and row is not None else None

        self._with_lease_row(lease.run_id, release, "releasing a lease")
        return released[-1]

    def check_lease(self, lease: Lease, margin: float) -> Lease:
        row, now = self._lease_now(lease.run_id)
        return require_held(lease, row, now, margin)

    def current_lease(self, run_id: str) -> Lease | None:
        row, now = self._lease_now(run_id)
        return row.lease if row is not None and row.valid_at(now) else None

    def lease_status(self, run_id: str) -> LeaseStatus:
        row, now = self._lease_now(run_id)
        return LeaseStatus(None if row is None else row.lease, row is not None and row.released, now)

    def lease_statuses(self, run_ids: Sequence[str]) -> dict[str, LeaseStatus]:
        wanted = list(dict.fromkeys(run_ids))
        if not wanted:
            return {}
        found, now = self._leases_now(wanted)
        return {
            run_id: LeaseStatus(None if row is None else row.lease, row is not None and row.released, now)
            for run_id in wanted
            for row in (found.get(run_id),)
        }

    # --- listing ----------------------------------------------------------------------

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
            self.dialect, state=state, thread_id=thread_id, limit=limit, app=app, after=after
        )
        return [summary_from_row(r) for r in self._all(query, params)]

    def count_runs(
        self, *, state: str | None = None, thread_id: str | None = None, app: str | None = None, cap: int = 1000
    ) -> int:
        query, params = count_query(state=state, thread_id=thread_id, app=app, cap=cap)
        row = self._one(query, params)
        return 0 if row is None else int(row[0])


_serialize_public_methods(SqlStore)
