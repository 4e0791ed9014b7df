"""An in-process store: the reference for the store contract and the fastest for tests."""

from __future__ import annotations

import itertools
import threading
from collections.abc import Iterator

import attrs

from runkernel.adapters.store import (
    Checkpoint,
    InboxEntry,
    Reconciliation,
    Settlement,
    StoreUnavailable,
    judge_append,
)
from runkernel.kernel.history import NO_HISTORY, History, MutableHistory
from runkernel.kernel.state import (
    Awaiting,
    Message,
    RunSnapshot,
    ThreadCommit,
    ThreadHead,
)
from runkernel.kernel.values import JsonValue


class MemoryStore:
    """Everything in dicts behind one lock. ``fail_writes`` makes every append fail,
    to test the runtime's handling of an unavailable store."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.fail_writes = False
        self.fail_checkpoints = False
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

    def append(self, commit: ThreadCommit, settle: Settlement | None = None) -> RunSnapshot:
        with self._lock:
            if self.fail_writes:
                raise StoreUnavailable("memory store: writes are failing (injected)")
            accepted = judge_append(
                self._heads.get(commit.thread_id),
                self._runs.get(commit.run_id),
                commit,
                self._stored_history(commit.run_id),
                self._tickets.__contains__,
            )
            self._heads[commit.thread_id] = accepted.head
            self._runs[commit.run_id] = accepted.run
            self._log.setdefault(commit.thread_id, []).append(commit)
            self._histories.setdefault(commit.run_id, MutableHistory()).add(accepted.keys)
            if isinstance(commit.disposition, Awaiting):
                self._tickets.add(commit.disposition.ticket.ticket_id)
            if settle is not None:
                self._settle(settle.entry_id, settle.outcome)
            return accepted.run

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
        with self._lock:
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
        if self.fail_checkpoints:
            raise StoreUnavailable("memory store: checkpoint writes are failing (injected)")
        self._checkpoints[checkpoint.run_id] = checkpoint

    def load_checkpoint(self, run_id: str) -> Checkpoint | None:
        return self._checkpoints.get(run_id)

    def delete_checkpoint(self, run_id: str) -> None:
        self._checkpoints.pop(run_id, None)

    def record_reconciliation(self, record: Reconciliation) -> None:
        self._reconciliations.append(record)

    def reconciliations(self, operation_id: str | None = None) -> list[Reconciliation]:
        return [r for r in self._reconciliations if operation_id in (None, r.operation_id)]

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
