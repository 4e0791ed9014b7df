"""A third-party store in one file: a JSON-lines journal in a directory, behind a file
lock, that passes runkernel's store contract suite (docs/how-to/write-a-store.md).

Every change is one line appended to ``journal.jsonl`` and fsync'd under an exclusive
``flock`` of ``lock``: a commit (with the settlement and the release it carries), a lease
row, an inbox command or its settlement, a checkpoint, a reconciliation. One line per
change is what makes a commit atomic: a crash leaves the line whole or torn, and a torn
last line (no newline) was never acknowledged, so it is ignored and cut off by the next
writer. Every instance keeps the state the journal folds to and, under the lock, first
reads whatever other instances (threads or processes) appended since, judging each
commit line again with ``judge_append`` as its append did. It imports only
``runkernel.adapters.stores.kit``.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import attrs

from runkernel.adapters.stores.kit import (
    FORGET_AFTER, NO_HISTORY, Accepted, AnswerPending, Checkpoint, CommitConflict, DamagedStore, Ended, IllegalCommit,
    InboxEntry, Lease, LeaseRow, LeaseStatus, Message, MutableHistory, ParentCall, Reconciliation, RunSnapshot,
    RunSummary, Settlement, ThreadCommit, ThreadHead, WorkerRecord, Writer, acquired, answered_ticket,
    awaited_children, checked_acceptance, checked_release, commit_from_text, commit_text, commit_writer, has_work,
    is_own_landed_commit, judge_append, may_drive, renewed_each, require_held, summary_of, taken_each,
)

Record = dict[str, Any]


class _State:
    """What the journal folds to."""

    def __init__(self) -> None:
        self.heads: dict[str, ThreadHead] = {}
        self.runs: dict[str, RunSnapshot] = {}  # in activation order
        self.log: dict[str, list[ThreadCommit]] = {}
        self.writers: dict[tuple[str, int], Writer] = {}
        self.histories: dict[str, MutableHistory] = {}
        self.tickets: set[str] = set()
        self.apps: dict[str, str | None] = {}
        self.app_versions: dict[str, str | None] = {}
        self.workers: dict[str, WorkerRecord] = {}
        self.compatible: dict[tuple[str, str], set[str]] = {}
        self.parents: dict[str, ParentCall] = {}
        self.leases: dict[str, LeaseRow] = {}
        self.inbox: dict[int, InboxEntry] = {}
        self.last_entry = 0
        self.checkpoints: dict[str, Checkpoint] = {}
        self.reconciliations: list[Reconciliation] = []


class JsonlStore:
    """A store in ``directory`` (created if missing); ``clock`` is its store clock."""

    def __init__(self, directory: str | Path, *, clock: Callable[[], float] = time.time) -> None:
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self._journal = self.directory / "journal.jsonl"
        self._journal.touch()
        self._lock_file = open(self.directory / "lock", "a+b")
        self._mutex = threading.RLock()  # flock excludes processes; this, threads sharing an instance
        self._clock = clock
        self._state = _State()
        self._offset = 0
        self._inode = -1

    # --- the journal ----------------------------------------------------------------

    @contextlib.contextmanager
    def _locked(self, exclusive: bool) -> Iterator[_State]:
        with self._mutex:
            fcntl.flock(self._lock_file, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
            try:
                self._catch_up(exclusive)
                yield self._state
            finally:
                fcntl.flock(self._lock_file, fcntl.LOCK_UN)

    def _catch_up(self, exclusive: bool) -> None:
        """Fold in what was appended since this instance last looked."""
        with open(self._journal, "rb") as journal:
            stat = os.fstat(journal.fileno())
            if stat.st_ino != self._inode or stat.st_size < self._offset:  # reset: start over
                self._state, self._offset, self._inode = _State(), 0, stat.st_ino
            journal.seek(self._offset)
            new = journal.read()
        whole = new[: new.rfind(b"\n") + 1]
        for line in whole.splitlines():
            self._apply(json.loads(line))
        self._offset += len(whole)
        if exclusive and len(whole) < len(new):
            os.truncate(self._journal, self._offset)  # a torn last line: never acknowledged

    def _write(self, record: Record) -> None:
        """Append one record and fsync it, then fold it in (under the exclusive lock)."""
        data = (json.dumps(record, separators=(",", ":"), ensure_ascii=False, allow_nan=False) + "\n").encode()
        fd = os.open(self._journal, os.O_WRONLY | os.O_APPEND)
        try:
            os.write(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)
        self._apply(record)
        self._offset += len(data)

    def _apply(self, record: Record) -> None:
        state = self._state
        op = record["op"]
        if op == "commit":
            self._apply_commit(record)
        elif op == "lease":
            lease = Lease(record["run_id"], record["worker_id"], record["epoch"], record["expires_at"])
            state.leases[lease.run_id] = LeaseRow(lease, record["released"])
        elif op == "put":
            state.inbox[record["id"]] = InboxEntry(record["id"], record["run_id"], record["body"], "pending")
            state.last_entry = max(state.last_entry, record["id"])
        elif op == "settle":
            self._settle(record["id"], record["outcome"], pending_only=False)
        elif op == "compact":
            for entry_id in record["ids"]:
                state.inbox.pop(entry_id, None)
        elif op == "checkpoint":
            state.checkpoints[record["run_id"]] = Checkpoint(record["run_id"], record["step"], record["data"])
        elif op == "uncheckpoint":
            state.checkpoints.pop(record["run_id"], None)
        elif op == "reconcile":
            state.reconciliations.append(Reconciliation(record["operation_id"], record["outcome"], record["note"]))
        elif op == "worker":
            state.workers[record["worker_id"]] = WorkerRecord(
                record["worker_id"], record["app"], record["version"], record["heartbeat_at"]
            )
        elif op == "forget":
            for worker_id in record["ids"]:
                state.workers.pop(worker_id, None)
        elif op == "accept":
            state.compatible.setdefault((record["app"], record["version"]), set()).update(record["drives"])
        else:
            raise DamagedStore(f"{self._journal}: unknown journal record {op!r}")

    def _judge(self, commit: ThreadCommit) -> Accepted:
        state = self._state
        history = state.histories.get(commit.run_id) or NO_HISTORY
        return judge_append(
            state.heads.get(commit.thread_id), state.runs.get(commit.run_id), commit, history, state.tickets.__contains__
        )

    def _apply_commit(self, record: Record) -> None:
        state = self._state
        commit = commit_from_text(record["line"])
        try:
            accepted = self._judge(commit)  # a replayed line is judged as its append was
        except (CommitConflict, IllegalCommit) as refusal:
            raise DamagedStore(f"{self._journal}: version {commit.version} of {commit.thread_id}: {refusal}") from None
        state.heads[commit.thread_id] = accepted.head
        if commit.run_id not in state.runs:
            state.apps[commit.run_id] = commit.app
            state.app_versions[commit.run_id] = commit.app_version
            if commit.parent is not None:
                state.parents[commit.run_id] = commit.parent
        state.runs[commit.run_id] = accepted.run
        state.log.setdefault(commit.thread_id, []).append(commit)
        state.histories.setdefault(commit.run_id, MutableHistory()).add(accepted.keys)
        if accepted.keys.ticket is not None:
            state.tickets.add(accepted.keys.ticket)
        if record["writer"] is not None:
            state.writers[(commit.thread_id, commit.version)] = Writer(*record["writer"])
        if record["settle"] is not None:
            self._settle(record["settle"][0], record["settle"][1], pending_only=True)
        if record["release"]:
            row = state.leases[commit.run_id]
            state.leases[commit.run_id] = LeaseRow(row.lease, released=True)

    def _settle(self, entry_id: int, outcome: str, *, pending_only: bool) -> None:
        entry = self._state.inbox.get(entry_id)
        if entry is not None and (entry.state == "pending" or not pending_only):
            self._state.inbox[entry_id] = attrs.evolve(entry, state="settled", outcome=outcome)

    @staticmethod
    def _lease_record(row: LeaseRow) -> Record:
        lease = row.lease
        return {"op": "lease", "run_id": lease.run_id, "worker_id": lease.worker_id, "epoch": lease.epoch,
                "expires_at": lease.expires_at, "released": row.released}

    # --- commits --------------------------------------------------------------------

    def append(
        self, commit: ThreadCommit, settle: Settlement | None = None, *, lease: Lease | None = None, release: bool = False
    ) -> RunSnapshot:
        checked_release(lease, release)
        with self._locked(exclusive=True) as state:
            log = state.log.get(commit.thread_id, [])
            stored = log[commit.version - 1] if 0 < commit.version <= len(log) else None
            head = state.heads.get(commit.thread_id)
            if is_own_landed_commit(
                commit, lease, None if head is None else head.version, None if stored is None else stored.run_id,
                stored == commit, state.writers.get((commit.thread_id, commit.version)),
            ):
                return state.runs[commit.run_id]  # W4: its reply was lost, it landed
            writer = commit_writer(commit, lease, state.leases.get(commit.run_id), self._clock())
            self._judge(commit)  # refused: nothing is written
            self._write({
                "op": "commit", "line": commit_text(commit),
                "writer": None if writer is None else [writer.worker_id, writer.epoch],
                "settle": None if settle is None else [settle.entry_id, settle.outcome],
                "release": release,
            })
            return state.runs[commit.run_id]

    def run(self, run_id: str) -> RunSnapshot | None:
        with self._locked(exclusive=False) as state:
            return state.runs.get(run_id)

    def history(self, run_id: str) -> _LiveHistory:
        return _LiveHistory(self, run_id)

    def thread_head(self, thread_id: str) -> ThreadHead | None:
        with self._locked(exclusive=False) as state:
            return state.heads.get(thread_id)

    def thread_ids(self) -> list[str]:
        with self._locked(exclusive=False) as state:
            return sorted(state.heads)

    def thread_of(self, run_id: str) -> str | None:
        snapshot = self.run(run_id)
        return None if snapshot is None else snapshot.thread_id

    def commits(self, thread_id: str) -> Iterator[ThreadCommit]:
        with self._locked(exclusive=False) as state:
            return iter(list(state.log.get(thread_id, [])))

    def messages(self, thread_id: str) -> list[Message]:
        return [m for c in self.commits(thread_id) for m in c.messages]

    def writer_of(self, thread_id: str, version: int) -> Writer | None:
        with self._locked(exclusive=False) as state:
            return state.writers.get((thread_id, version))

    def parent_of(self, run_id: str) -> ParentCall | None:
        with self._locked(exclusive=False) as state:
            return state.parents.get(run_id)

    # --- leases ---------------------------------------------------------------------

    def store_time(self) -> float:
        return self._clock()

    def acquire_lease(self, run_id: str, worker_id: str, duration: float) -> Lease:
        with self._locked(exclusive=True) as state:
            lease = acquired(run_id, state.leases.get(run_id), worker_id, duration, self._clock())
            self._write(self._lease_record(LeaseRow(lease, released=False)))
            return lease

    def renew_lease(self, lease: Lease, duration: float) -> Lease:
        with self._locked(exclusive=True) as state:
            now = self._clock()
            require_held(lease, state.leases.get(lease.run_id), now)
            renewed = acquired(lease.run_id, state.leases.get(lease.run_id), lease.worker_id, duration, now)
            self._write(self._lease_record(LeaseRow(renewed, released=False)))
            return renewed

    def acquire_leases(self, run_ids: Sequence[str], worker_id: str, duration: float) -> list[Lease]:
        with self._locked(exclusive=True) as state:
            ended = {r for r in run_ids if r in state.runs and isinstance(state.runs[r].state, Ended)}
            granted = taken_each(run_ids, state.leases, worker_id, duration, self._clock(), ended)
            for lease in granted:
                self._write(self._lease_record(LeaseRow(lease, released=False)))
            return granted

    def renew_leases(self, leases: Sequence[Lease], duration: float) -> list[Lease]:
        with self._locked(exclusive=True) as state:
            renewed = renewed_each(leases, state.leases, duration, self._clock())
            for lease in renewed:
                self._write(self._lease_record(LeaseRow(lease, released=False)))
            return renewed

    def check_lease(self, lease: Lease, margin: float) -> Lease:
        with self._locked(exclusive=False) as state:
            return require_held(lease, state.leases.get(lease.run_id), self._clock(), margin)

    def release_lease(self, lease: Lease) -> bool:
        with self._locked(exclusive=True) as state:
            row = state.leases.get(lease.run_id)
            if row is None or not row.valid_at(self._clock()) or row.lease.writer != lease.writer:
                return False
            self._write(self._lease_record(LeaseRow(row.lease, released=True)))
            return True

    def current_lease(self, run_id: str) -> Lease | None:
        with self._locked(exclusive=False) as state:
            row = state.leases.get(run_id)
            return row.lease if row is not None and row.valid_at(self._clock()) else None

    def lease_status(self, run_id: str) -> LeaseStatus:
        return self.lease_statuses([run_id])[run_id]

    def lease_statuses(self, run_ids: Sequence[str]) -> dict[str, LeaseStatus]:
        with self._locked(exclusive=False) as state:
            now = self._clock()
            rows = {run_id: state.leases.get(run_id) for run_id in run_ids}
        return {
            run_id: LeaseStatus(None if row is None else row.lease, row is not None and row.released, now)
            for run_id, row in rows.items()
        }

    # --- listing and work discovery ---------------------------------------------------

    def list_runs(
        self, *, state: str | None = None, thread_id: str | None = None, limit: int | None = None,
        app: str | None = None, after: str | None = None,
    ) -> list[RunSummary]:
        with self._locked(exclusive=False) as kept:
            order = list(kept.runs)  # activation order
            summaries = [
                summary_of(kept.runs[run_id], kept.apps.get(run_id), kept.app_versions.get(run_id))
                for run_id in reversed(order)
            ]
        found = [
            s for s in summaries
            if thread_id in (None, s.thread_id) and state in (None, s.state) and app in (None, s.app)
        ]
        if after is not None:
            before = order.index(after) if after in order else -1
            found = [s for s in found if order.index(s.run_id) < before]
        return found if limit is None else found[:limit]

    def count_runs(
        self, *, state: str | None = None, thread_id: str | None = None, app: str | None = None, cap: int = 1000
    ) -> int:
        return len(self.list_runs(state=state, thread_id=thread_id, app=app, limit=cap))

    def runs_with_work(self, app: str | None, limit: int = 100, *, version: str | None = None) -> list[str]:
        with self._locked(exclusive=False) as state:
            now = self._clock()
            pending = {e.run_id for e in state.inbox.values() if e.state == "pending"}
            compatible = state.compatible.get((app or "", version or ""), set())
            found = []
            for run_id, snapshot in state.runs.items():
                row = state.leases.get(run_id)
                if state.apps.get(run_id) != app or (row is not None and row.valid_at(now)):
                    continue
                if not may_drive(state.app_versions.get(run_id), version, compatible):
                    continue
                awaited = awaited_children(snapshot)
                done = any(
                    child not in state.runs or isinstance(state.runs[child].state, Ended) for child in awaited
                )
                if has_work(summary_of(snapshot, app), run_id in pending, now, quiet=bool(awaited), child_done=done):
                    found.append(run_id)
            return found[:limit]

    # --- the worker registry and the versions recorded compatible -------------------

    def register_worker(self, worker_id: str, app: str | None, version: str | None) -> None:
        if not isinstance(worker_id, str) or not worker_id:
            raise ValueError(f"worker_id must be a non-empty string, not {worker_id!r}")
        with self._locked(exclusive=True):
            now = self._clock()
            self._write({"op": "worker", "worker_id": worker_id, "app": app, "version": version, "heartbeat_at": now})

    def heartbeat_worker(self, worker_id: str) -> bool:
        with self._locked(exclusive=True) as state:
            found = state.workers.get(worker_id)
            if found is None:
                return False
            self._write({"op": "worker", "worker_id": worker_id, "app": found.app, "version": found.version,
                         "heartbeat_at": self._clock()})
            return True

    def forget_worker(self, worker_id: str) -> None:
        with self._locked(exclusive=True) as state:
            now = self._clock()
            gone = [w.worker_id for w in state.workers.values() if w.worker_id == worker_id or w.heartbeat_at < now - FORGET_AFTER]
            if gone:
                self._write({"op": "forget", "ids": gone})

    def workers(self) -> list[WorkerRecord]:
        with self._locked(exclusive=False) as state:
            return [state.workers[k] for k in sorted(state.workers)]

    def accept_versions(self, app: str, version: str, drives: Sequence[str]) -> None:
        found = checked_acceptance(app, version, drives)
        with self._locked(exclusive=True):
            self._write({"op": "accept", "app": app, "version": version, "drives": list(found)})  # one line: atomic

    def compatible_versions(self, app: str, version: str) -> frozenset[str]:
        with self._locked(exclusive=False) as state:
            return frozenset({version, *state.compatible.get((app, version), set())})

    # --- the inbox, checkpoints and reconciliations -----------------------------------

    def put_command(self, run_id: str, body: Any) -> int:
        ticket = answered_ticket(body)  # a resume: its wait takes one pending answer
        with self._locked(exclusive=True) as state:
            for entry in state.inbox.values():
                if entry.state == "pending" and ticket is not None and answered_ticket(entry.body) == ticket:
                    raise AnswerPending(entry.entry_id, ticket)
            entry_id = state.last_entry + 1
            self._write({"op": "put", "id": entry_id, "run_id": run_id, "body": body})
            return entry_id

    def pending_commands(self, run_id: str) -> list[InboxEntry]:
        return [e for e in self.commands(run_id) if e.state == "pending"]

    def settle_command(self, entry_id: int, outcome: str) -> None:
        with self._locked(exclusive=True):
            self._write({"op": "settle", "id": entry_id, "outcome": outcome})

    def inbox_entry(self, entry_id: int) -> InboxEntry | None:
        with self._locked(exclusive=False) as state:
            return state.inbox.get(entry_id)

    def commands(self, run_id: str) -> list[InboxEntry]:
        with self._locked(exclusive=False) as state:
            return [e for e in state.inbox.values() if e.run_id == run_id]

    def compact_commands(self, run_id: str) -> int:
        with self._locked(exclusive=True) as state:
            refused = [
                e.entry_id for e in state.inbox.values()
                if e.run_id == run_id and e.state == "settled" and (e.outcome or "").startswith("refused")
            ]
            if refused:
                self._write({"op": "compact", "ids": refused})
            return len(refused)

    def save_checkpoint(self, checkpoint: Checkpoint) -> None:
        with self._locked(exclusive=True):
            self._write({"op": "checkpoint", "run_id": checkpoint.run_id, "step": checkpoint.step,
                         "data": checkpoint.data})

    def load_checkpoint(self, run_id: str) -> Checkpoint | None:
        with self._locked(exclusive=False) as state:
            return state.checkpoints.get(run_id)

    def delete_checkpoint(self, run_id: str) -> None:
        with self._locked(exclusive=True):
            self._write({"op": "uncheckpoint", "run_id": run_id})

    def record_reconciliation(self, record: Reconciliation) -> None:
        with self._locked(exclusive=True):
            self._write({"op": "reconcile", "operation_id": record.operation_id, "outcome": record.outcome,
                         "note": record.note})

    def reconciliations(self, operation_id: str | None = None) -> list[Reconciliation]:
        with self._locked(exclusive=False) as state:
            return [r for r in state.reconciliations if operation_id in (None, r.operation_id)]

    def reset(self) -> None:
        with self._locked(exclusive=True):
            fresh = self.directory / "journal.jsonl.new"
            fresh.write_bytes(b"")
            os.replace(fresh, self._journal)  # a new file: every instance starts over
            self._catch_up(exclusive=True)

    def reopen(self) -> JsonlStore:
        """Another instance on the same directory, with this clock (a worker's slot's)."""
        return JsonlStore(self.directory, clock=self._clock)

    def close(self) -> None:
        self._lock_file.close()


class _LiveHistory:
    """A Run's history as the journal holds it at each lookup."""

    def __init__(self, store: JsonlStore, run_id: str) -> None:
        self._store = store
        self._run_id = run_id

    def _history(self) -> MutableHistory:
        with self._store._locked(exclusive=False) as state:
            return state.histories.get(self._run_id) or MutableHistory()

    def ticket_used(self, ticket_id: str) -> bool:
        return self._history().ticket_used(ticket_id)

    def batch_closed(self, batch_id: str) -> bool:
        return self._history().batch_closed(batch_id)

    def applied_digest(self, ticket_id: str) -> str | None:
        return self._history().applied_digest(ticket_id)

