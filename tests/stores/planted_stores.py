"""Planted stores: the worked example store (``examples/jsonl_store.py``) with one bug
each, the bugs a new backend is most likely to have. ``test_conformance_catches.py``
runs the public store contract suite on each, as its author would, and checks the test
that must catch the bug fails. Each imports only the example store and
``runkernel.adapters.stores.kit``.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Callable

from examples.jsonl_store import JsonlStore, Record
from runkernel.adapters.stores.kit import (
    NO_HISTORY, Accepted, Lease, LeaseRow, MutableHistory, RunSnapshot, Settlement, ThreadCommit, acquired,
    commit_from_text, judge_append, require_held,
)


class NonAtomicCommitStore(JsonlStore):
    """A commit written in two records, its line and then its head, with a crash window
    between them: killed there, the log holds a version its head does not, and the next
    writer writes that version again (1, 2, 3, 4, 4, 5 ...)."""

    WINDOW = 0.02  # seconds between the two writes: where a kill lands most often

    def _write(self, record: Record) -> None:
        if record["op"] != "commit":
            super()._write(record)
            return
        super()._write({"op": "line", "line": record["line"]})
        time.sleep(self.WINDOW)
        super()._write({**record, "op": "head"})

    def _apply(self, record: Record) -> None:
        if record["op"] == "line":
            commit = commit_from_text(record["line"])
            self._state.log.setdefault(commit.thread_id, []).append(commit)
        elif record["op"] == "head":
            commit = commit_from_text(record["line"])
            self._state.log[commit.thread_id].pop()  # folded again with the head
            self._apply_commit({**record, "op": "commit"})
        else:
            super()._apply(record)


class NonAtomicSettlementStore(JsonlStore):
    """Settles the inbox command a commit applies in a write of its own, after the
    commit: killed between them, the commit is there and its command still pending, and
    the next commit applies it a second time."""

    WINDOW = 0.02

    def append(
        self, commit: ThreadCommit, settle: Settlement | None = None, *, lease: Lease | None = None, release: bool = False
    ) -> RunSnapshot:
        landed = super().append(commit, lease=lease, release=release)
        if settle is not None:
            time.sleep(self.WINDOW)
            self.settle_command(settle.entry_id, settle.outcome)
        return landed


class DoubleGrantStore(JsonlStore):
    """Takes a lease by reading the row, then writing the grant in a transaction of its
    own: racing takers all read the same unleased row, and all are granted it."""

    def acquire_lease(self, run_id: str, worker_id: str, duration: float) -> Lease:
        with self._locked(exclusive=False) as state:
            row = state.leases.get(run_id)
        lease = acquired(run_id, row, worker_id, duration, self._clock())
        with self._locked(exclusive=True):
            self._write(self._lease_record(LeaseRow(lease, released=False)))
        return lease


class StaleReadStore(JsonlStore):
    """Reads its journal once, when it opens, and never what another instance (another
    process) appends after that."""

    def _catch_up(self, exclusive: bool) -> None:
        if self._inode == -1:
            super()._catch_up(exclusive)


class UnjudgedReplayStore(JsonlStore):
    """Replays what other instances appended into heads and snapshots, but not into the
    judgment's history: the tickets used, batches closed and resumes applied that the
    judgment found are known only to the instance that appended them, so a reopened
    instance judges as if they never were."""

    _replaying = False

    def _catch_up(self, exclusive: bool) -> None:
        self._replaying = True
        try:
            super()._catch_up(exclusive)
        finally:
            self._replaying = False

    def _apply_commit(self, record: Record) -> None:
        if not self._replaying:
            super()._apply_commit(record)
            return
        run_id = commit_from_text(record["line"]).run_id
        kept, tickets = self._state.histories.pop(run_id, None), set(self._state.tickets)
        super()._apply_commit(record)
        self._state.histories[run_id] = kept if kept is not None else MutableHistory()
        self._state.tickets = tickets


class StaleRenewStore(JsonlStore):
    """Renews a lease by the lease it granted last, remembered in the instance, not by
    the stored row: a lease another instance released and took over is renewed."""

    def __init__(self, directory: str | Path, **options: Any) -> None:
        super().__init__(directory, **options)
        self._granted: dict[str, Lease] = {}

    def acquire_lease(self, run_id: str, worker_id: str, duration: float) -> Lease:
        lease = super().acquire_lease(run_id, worker_id, duration)
        self._granted[run_id] = lease
        return lease

    def renew_lease(self, lease: Lease, duration: float) -> Lease:
        now = self._clock()
        known = self._granted.get(lease.run_id)
        require_held(lease, None if known is None else LeaseRow(known, released=False), now)
        renewed = Lease(lease.run_id, lease.worker_id, lease.epoch, now + duration)
        with self._locked(exclusive=True):
            self._write(self._lease_record(LeaseRow(renewed, released=False)))
        self._granted[lease.run_id] = renewed
        return renewed


class NoHistoryJudgeStore(JsonlStore):
    """Judges every append with ``NO_HISTORY``, the history of a Run's first commit,
    instead of the Run's own (which it keeps, and answers in ``history``): a Run may open
    again a batch id it closed."""

    def _judge(self, commit: ThreadCommit) -> Accepted:
        state = self._state
        return judge_append(
            state.heads.get(commit.thread_id), state.runs.get(commit.run_id), commit, NO_HISTORY,
            state.tickets.__contains__,
        )


class SettlesTwiceStore(JsonlStore):
    """Settles the command a commit names whether or not it is still pending: a command
    settled already (applied, or refused) is rewritten by the next commit that names it."""

    def _settle(self, entry_id: int, outcome: str, *, pending_only: bool) -> None:
        super()._settle(entry_id, outcome, pending_only=False)


class CompactsAppliedStore(JsonlStore):
    """Compacts every settled command of a Run, the applied ones too, not only its refusals."""

    def compact_commands(self, run_id: str) -> int:
        with self._locked(exclusive=True) as state:
            settled = [e.entry_id for e in state.inbox.values() if e.run_id == run_id and e.state == "settled"]
            if settled:
                self._write({"op": "compact", "ids": settled})
            return len(settled)


class UnsortedThreadsStore(JsonlStore):
    """Lists its Threads in the order they were first committed, not sorted."""

    def thread_ids(self) -> list[str]:
        with self._locked(exclusive=False) as state:
            return list(state.heads)


class ManyAnswersStore(JsonlStore):
    """Queues every command, a second answer to a wait too: nothing keeps one answer per wait."""

    def put_command(self, run_id: str, body: Any) -> int:
        with self._locked(exclusive=True) as state:
            entry_id = state.last_entry + 1
            self._write({"op": "put", "id": entry_id, "run_id": run_id, "body": body})
            return entry_id


#: each planted store, and the test of the suite that must catch it
CAUGHT_BY: dict[str, tuple[str, ...]] = {
    "NonAtomicCommitStore": ("test_a_child_killed_while_committing_loses_no_acknowledged_commit",),
    "NonAtomicSettlementStore": ("test_a_child_killed_while_committing_loses_no_acknowledged_commit",),
    "DoubleGrantStore": (
        "test_threads_racing_for_a_lease_through_their_own_instances_are_granted_it_once",
        "test_processes_racing_for_a_lease_are_granted_it_once",
    ),
    "StaleReadStore": (
        "test_two_instances_interleaving_commits_and_reads_see_every_commit_at_once",
        "test_a_child_killed_while_committing_loses_no_acknowledged_commit",
    ),
    "UnjudgedReplayStore": ("test_a_reopened_instance_judges_with_the_history_it_replays",),
    "StaleRenewStore": ("test_a_lease_taken_over_through_another_instance_is_lost_to_the_first",),
    "NoHistoryJudgeStore": ("test_a_run_is_judged_with_its_own_history",),
    "SettlesTwiceStore": ("test_a_commit_settles_only_a_command_still_pending",),
    "CompactsAppliedStore": ("test_compaction_deletes_only_the_runs_settled_refusals",),
    "UnsortedThreadsStore": ("test_thread_ids_are_every_thread_sorted",),
    "ManyAnswersStore": (
        "test_a_wait_takes_one_pending_answer",
        "test_a_wait_takes_one_pending_answer_across_instances",
    ),
}

PLANTED: dict[str, Callable[..., JsonlStore]] = {
    "NonAtomicCommitStore": NonAtomicCommitStore,
    "NonAtomicSettlementStore": NonAtomicSettlementStore,
    "DoubleGrantStore": DoubleGrantStore,
    "StaleReadStore": StaleReadStore,
    "UnjudgedReplayStore": UnjudgedReplayStore,
    "StaleRenewStore": StaleRenewStore,
    "NoHistoryJudgeStore": NoHistoryJudgeStore,
    "SettlesTwiceStore": SettlesTwiceStore,
    "CompactsAppliedStore": CompactsAppliedStore,
    "UnsortedThreadsStore": UnsortedThreadsStore,
    "ManyAnswersStore": ManyAnswersStore,
}
