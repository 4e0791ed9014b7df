"""An in-process store: the reference for the store contract and the fastest for tests."""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Callable, Iterator, Sequence

import attrs

from runkernel.adapters.stores.leases import (
    LeaseRow, acquired, checked_release, commit_writer, is_own_landed_commit, renewed_each, require_held, taken_each,
)
from runkernel.adapters.stores.contract import (
    AnswerPending,
    Checkpoint,
    InboxEntry,
    Lease,
    LeaseStatus,
    Reconciliation,
    Settlement,
    Writer,
    judge_append,
)
from runkernel.adapters.stores.memory_versions import MemoryVersions
from runkernel.adapters.stores.serial import answered_ticket
from runkernel.adapters.stores.versions import WorkerRecord, may_drive
from runkernel.adapters.stores.work import RunSummary, awaited_children, has_work, summary_of
from runkernel.kernel.history import NO_HISTORY, History, MutableHistory
from runkernel.kernel.state import (
    Awaiting,
    Ended,
    Message,
    ParentCall,
    RunSnapshot,
    ThreadCommit,
    ThreadHead,
)
from runkernel.kernel.values import JsonValue


class MemoryStore:
    """Everything in dicts behind one lock. ``clock`` is the store's clock for leases
    (seconds; wall time unless a test gives its own)."""

    def __init__(self, *, clock: Callable[[], float] = time.time) -> None:
        self._lock = threading.Lock()
        self._clock = clock
        self.reset()

    def reset(self) -> None:
        self._heads: dict[str, ThreadHead] = {}
        self._runs: dict[str, RunSnapshot] = {}
        self._log: dict[str, list[ThreadCommit]] = {}
        self._tickets: set[str] = set()
        self._histories: dict[str, MutableHistory] = {}
        self._inbox: dict[int, InboxEntry] = {}
        #: per Run, the ids of its pending commands in order (no scan of every command)
        self._pending: dict[str, dict[int, None]] = {}
        self._ids = itertools.count(1)
        self._checkpoints: dict[str, Checkpoint] = {}
        self._reconciliations: list[Reconciliation] = []
        self._leases: dict[str, LeaseRow] = {}
        self._writers: dict[tuple[str, int], Writer] = {}
        self._apps: dict[str, str | None] = {}
        self._app_versions: dict[str, str] = {}
        self._versions = MemoryVersions()
        self._parents: dict[str, ParentCall] = {}
        self._traces: dict[str, str] = {}

    def append(
        self,
        commit: ThreadCommit,
        settle: Settlement | None = None,
        *,
        lease: Lease | None = None,
        release: bool = False,
        trace_context: str | None = None,
    ) -> RunSnapshot:
        """``Store.append``; ``trace_context`` (an activation's) is kept beside the Run."""
        checked_release(lease, release)
        with self._lock:
            if self._landed_already(commit, lease):
                return self._runs[commit.run_id]
            writer = commit_writer(commit, lease, self._leases.get(commit.run_id), self._clock())
            accepted = judge_append(
                self._heads.get(commit.thread_id),
                self._runs.get(commit.run_id),
                commit,
                self._stored_history(commit.run_id),
                self._tickets.__contains__,
            )
            self._heads[commit.thread_id] = accepted.head
            if commit.run_id not in self._runs:
                self._apps[commit.run_id] = commit.app
                if commit.app_version is not None:
                    self._app_versions[commit.run_id] = commit.app_version
                if commit.parent is not None:
                    self._parents[commit.run_id] = commit.parent
            self._runs[commit.run_id] = accepted.run
            self._log.setdefault(commit.thread_id, []).append(commit)
            if writer is not None:
                self._writers[(commit.thread_id, commit.version)] = writer
            self._histories.setdefault(commit.run_id, MutableHistory()).add(accepted.keys)
            if isinstance(commit.disposition, Awaiting):
                self._tickets.add(commit.disposition.ticket.ticket_id)
            if trace_context is not None:
                self._traces[commit.run_id] = trace_context
            if settle is not None:
                self._settle(settle.entry_id, settle.outcome)
            if release and lease is not None:
                self._leases[commit.run_id] = LeaseRow(self._leases[commit.run_id].lease, released=True)
            return accepted.run

    def trace_context(self, run_id: str) -> str | None:
        """The trace context stored with the Run's activation (None: none was)."""
        with self._lock:
            return self._traces.get(run_id)

    def _landed_already(self, commit: ThreadCommit, lease: Lease | None) -> bool:
        head = self._heads.get(commit.thread_id)
        log = self._log.get(commit.thread_id, [])
        stored = log[commit.version - 1] if head is not None and 0 < commit.version <= len(log) else None
        return is_own_landed_commit(
            commit,
            lease,
            None if head is None else head.version,
            None if stored is None else stored.run_id,
            stored == commit,
            self._writers.get((commit.thread_id, commit.version)),
        )

    # --- leases ---------------------------------------------------------------------

    def store_time(self) -> float:
        return self._clock()

    def acquire_lease(self, run_id: str, worker_id: str, duration: float) -> Lease:
        with self._lock:
            lease = acquired(run_id, self._leases.get(run_id), worker_id, duration, self._clock())
            self._leases[run_id] = LeaseRow(lease, released=False)
            return lease

    def renew_lease(self, lease: Lease, duration: float) -> Lease:
        with self._lock:
            now = self._clock()
            require_held(lease, self._leases.get(lease.run_id), now)
            renewed = acquired(lease.run_id, self._leases.get(lease.run_id), lease.worker_id, duration, now)
            self._leases[lease.run_id] = LeaseRow(renewed, released=False)
            return renewed

    def acquire_leases(self, run_ids: Sequence[str], worker_id: str, duration: float) -> list[Lease]:
        with self._lock:
            ended = {r for r in run_ids if (run := self._runs.get(r)) is not None and isinstance(run.state, Ended)}
            granted = taken_each(run_ids, self._leases, worker_id, duration, self._clock(), ended)
            self._leases.update({lease.run_id: LeaseRow(lease, released=False) for lease in granted})
            return granted

    def renew_leases(self, leases: Sequence[Lease], duration: float) -> list[Lease]:
        with self._lock:
            renewed = renewed_each(leases, self._leases, duration, self._clock())
            self._leases.update({lease.run_id: LeaseRow(lease, released=False) for lease in renewed})
            return renewed

    def check_lease(self, lease: Lease, margin: float) -> Lease:
        with self._lock:
            return require_held(lease, self._leases.get(lease.run_id), self._clock(), margin)

    def release_lease(self, lease: Lease) -> bool:
        with self._lock:
            row = self._leases.get(lease.run_id)
            if row is None or not row.valid_at(self._clock()):
                return False
            if (row.lease.worker_id, row.lease.epoch) != (lease.worker_id, lease.epoch):
                return False
            self._leases[lease.run_id] = LeaseRow(row.lease, released=True)
            return True

    def current_lease(self, run_id: str) -> Lease | None:
        row = self._leases.get(run_id)
        return row.lease if row is not None and row.valid_at(self._clock()) else None

    def lease_status(self, run_id: str) -> LeaseStatus:
        with self._lock:
            row = self._leases.get(run_id)
            now = self._clock()
        return LeaseStatus(None if row is None else row.lease, row is not None and row.released, now)

    def lease_statuses(self, run_ids: Sequence[str]) -> dict[str, LeaseStatus]:
        with self._lock:
            rows = {run_id: self._leases.get(run_id) for run_id in run_ids}
            now = self._clock()
        return {
            run_id: LeaseStatus(None if row is None else row.lease, row is not None and row.released, now)
            for run_id, row in rows.items()
        }

    def writer_of(self, thread_id: str, version: int) -> Writer | None:
        return self._writers.get((thread_id, version))

    def list_runs(
        self,
        *,
        state: str | None = None,
        thread_id: str | None = None,
        limit: int | None = None,
        app: str | None = None,
        after: str | None = None,
    ) -> list[RunSummary]:
        found = [
            summary_of(snapshot, self._apps.get(run_id), self._app_versions.get(run_id))
            for run_id, snapshot in reversed(list(self._runs.items()))
            if thread_id in (None, snapshot.thread_id)
        ]
        found = [s for s in found if state in (None, s.state) and app in (None, s.app)]
        if after is not None:
            ids = [s.run_id for s in found]
            if after in ids:
                found = found[ids.index(after) + 1 :]
            else:  # a Run filtered out: those activated before it, by activation order
                order = list(self._runs)
                before = order.index(after) if after in order else -1
                found = [s for s in found if order.index(s.run_id) < before]
        return found if limit is None else found[:limit]

    def count_runs(
        self, *, state: str | None = None, thread_id: str | None = None, app: str | None = None, cap: int = 1000
    ) -> int:
        return len(self.list_runs(state=state, thread_id=thread_id, app=app, limit=cap))

    def runs_with_work(self, app: str | None, limit: int = 100, *, version: str | None = None) -> list[str]:
        with self._lock:
            now = self._clock()
            pending = {e.run_id for e in self._inbox.values() if e.state == "pending"}
            compatible = self._versions.compatible(app, version) if version is not None else frozenset()
            found = []
            for run_id, snapshot in self._runs.items():
                if self._apps.get(run_id) != app:
                    continue
                if not may_drive(self._app_versions.get(run_id), version, compatible):
                    continue
                row = self._leases.get(run_id)
                if row is not None and row.valid_at(now):
                    continue
                awaited = awaited_children(snapshot)
                done = any(self._child_done(child) for child in awaited)
                if has_work(summary_of(snapshot, app), run_id in pending, now, quiet=bool(awaited), child_done=done):
                    found.append(run_id)
            return found[:limit]

    # --- the worker registry and recorded compatibility (``versions``) ----------------

    def register_worker(self, worker_id: str, app: str | None, version: str | None) -> None:
        with self._lock:
            self._versions.register(worker_id, app, version, self._clock())

    def heartbeat_worker(self, worker_id: str) -> bool:
        with self._lock:
            return self._versions.heartbeat(worker_id, self._clock())

    def forget_worker(self, worker_id: str) -> None:
        with self._lock:
            self._versions.forget(worker_id, self._clock())

    def workers(self) -> list[WorkerRecord]:
        with self._lock:
            return self._versions.records()

    def accept_versions(self, app: str, version: str, drives: Sequence[str]) -> None:
        with self._lock:
            self._versions.accept(app, version, drives)

    def compatible_versions(self, app: str, version: str) -> frozenset[str]:
        with self._lock:
            return self._versions.compatible(app, version)

    def _child_done(self, child_run_id: str) -> bool:
        child = self._runs.get(child_run_id)
        return child is None or isinstance(child.state, Ended)

    def parent_of(self, run_id: str) -> ParentCall | None:
        return self._parents.get(run_id)

    def run(self, run_id: str) -> RunSnapshot | None:
        return self._runs.get(run_id)

    def history(self, run_id: str) -> History:
        return _LiveHistory(self, run_id)

    def _stored_history(self, run_id: str) -> History:
        return self._histories.get(run_id) or NO_HISTORY

    def thread_head(self, thread_id: str) -> ThreadHead | None:
        return self._heads.get(thread_id)

    def thread_ids(self) -> list[str]:
        return sorted(self._heads)

    def thread_of(self, run_id: str) -> str | None:
        snapshot = self._runs.get(run_id)
        return snapshot.thread_id if snapshot else None

    def commits(self, thread_id: str) -> Iterator[ThreadCommit]:
        return iter(list(self._log.get(thread_id, [])))

    def messages(self, thread_id: str) -> list[Message]:
        return [m for c in self._log.get(thread_id, []) for m in c.messages]

    def put_command(self, run_id: str, body: JsonValue) -> int:
        ticket = answered_ticket(body)
        with self._lock:
            if ticket is not None:
                for pending in self._pending.get(run_id, ()):
                    if answered_ticket(self._inbox[pending].body) == ticket:
                        raise AnswerPending(pending, ticket)
            entry_id = next(self._ids)
            self._inbox[entry_id] = InboxEntry(entry_id, run_id, body, "pending")
            self._pending.setdefault(run_id, {})[entry_id] = None
            return entry_id

    def pending_commands(self, run_id: str) -> list[InboxEntry]:
        return [self._inbox[entry_id] for entry_id in list(self._pending.get(run_id, ()))]

    def settle_command(self, entry_id: int, outcome: str) -> None:
        with self._lock:
            entry = self._inbox[entry_id]
            self._inbox[entry_id] = attrs.evolve(entry, state="settled", outcome=outcome)
            self._pending.get(entry.run_id, {}).pop(entry_id, None)

    def _settle(self, entry_id: int, outcome: str) -> None:
        entry = self._inbox.get(entry_id)
        if entry is not None and entry.state == "pending":
            self._inbox[entry_id] = attrs.evolve(entry, state="settled", outcome=outcome)
            self._pending.get(entry.run_id, {}).pop(entry_id, None)

    def inbox_entry(self, entry_id: int) -> InboxEntry | None:
        return self._inbox.get(entry_id)

    def commands(self, run_id: str) -> list[InboxEntry]:
        return [e for e in self._inbox.values() if e.run_id == run_id]

    def compact_commands(self, run_id: str) -> int:
        with self._lock:
            refused = [
                e.entry_id
                for e in self._inbox.values()
                if e.run_id == run_id and e.state == "settled" and (e.outcome or "").startswith("refused")
            ]
            for entry_id in refused:
                del self._inbox[entry_id]
        return len(refused)

    def save_checkpoint(self, checkpoint: Checkpoint) -> None:
        self._checkpoints[checkpoint.run_id] = checkpoint

    def load_checkpoint(self, run_id: str) -> Checkpoint | None:
        return self._checkpoints.get(run_id)

    def delete_checkpoint(self, run_id: str) -> None:
        self._checkpoints.pop(run_id, None)

    def record_reconciliation(self, record: Reconciliation) -> None:
        self._reconciliations.append(record)

    def reconciliations(self, operation_id: str | None = None) -> list[Reconciliation]:
        return [r for r in self._reconciliations if operation_id in (None, r.operation_id)]

    def reopen(self) -> MemoryStore:
        """This store itself: one process's dicts, already behind one lock."""
        return self

    def close(self) -> None:
        """Nothing to release."""


class _LiveHistory:
    """A Run's history as the store holds it now (it follows later commits)."""

    def __init__(self, store: MemoryStore, run_id: str) -> None:
        self._store = store
        self._run_id = run_id

    def ticket_used(self, ticket_id: str) -> bool:
        return self._store._stored_history(self._run_id).ticket_used(ticket_id)

    def batch_closed(self, batch_id: str) -> bool:
        return self._store._stored_history(self._run_id).batch_closed(batch_id)

    def applied_digest(self, ticket_id: str) -> str | None:
        return self._store._stored_history(self._run_id).applied_digest(ticket_id)
