"""The store kit: every name a store of your own needs, in one module.

A store calls three things of runkernel's, and keeps the rest of the contract
(``Store``, docs/how-to/write-a-store.md) itself:

- **its judgment of an append**: ``judge_append(head, run, commit, history, ticket_seen)``
  inside the append's transaction, before anything is written. It raises
  ``CommitConflict`` or ``IllegalCommit`` (write nothing then) or returns ``Accepted``:
  the Thread's new ``head``, the Run's new snapshot ``run``, and the history ``keys`` the
  commit adds (a ticket awaited, a batch closed, a resume applied), which the store keeps
  by key in the same transaction (``MutableHistory.add`` does it in memory), so its
  ``history(run_id)`` and ``ticket_seen`` answer the next judgment;
- **the line codec**: ``commit_text(commit)`` is the commit's ``runkernel/2`` trace line,
  what the store writes and what its export is; ``commit_from_text(line)`` reads one back
  (``commit_from_text(commit_text(c)) == c``); ``snapshot_text`` and
  ``snapshot_from_text`` store a Run's latest snapshot the same way;
- **the lease rules and the work-discovery helpers**, pure functions of a stored lease row,
  a snapshot and the store's clock, so every store decides as runkernel's own do:
  ``acquired``, ``require_held``, ``commit_writer``, ``checked_release``,
  ``is_own_landed_commit`` (W4); ``summary_of``, ``awaited_children`` and ``has_work``
  (what ``runs_with_work`` must find); ``answered_ticket(body)``, the ticket an inbox
  command answers: ``put_command`` refuses a second pending answer for one ticket with
  ``AnswerPending(entry_id, ticket_id)``, atomically;
- **the version rules**: ``may_drive`` (which Runs a worker of a version finds),
  ``checked_acceptance`` (what ``accept_versions`` records) and ``WorkerRecord`` with
  ``FORGET_AFTER`` (the worker registry).

A store that replays a journal when it opens judges every line again with
``judge_append``, exactly as when it was appended, so its heads, snapshots and history
are what the appends made (``examples/jsonl_store.py`` does).
"""

from __future__ import annotations

from runkernel.adapters.stores.contract import (
    Checkpoint,
    InboxEntry,
    Lease,
    LeaseStatus,
    Reconciliation,
    Settlement,
    Store,
    Writer,
    judge_append,
)
from runkernel.adapters.stores.leases import (
    LeaseRow,
    acquired,
    checked_duration,
    checked_release,
    commit_writer,
    is_own_landed_commit,
    renewed_each,
    require_held,
    taken_each,
)
from runkernel.adapters.stores.serial import answered_ticket, commit_from_text, commit_text, snapshot_from_text, snapshot_text
from runkernel.adapters.stores import versions as _versions
from runkernel.adapters.stores.versions import WorkerRecord, checked_acceptance, may_drive
from runkernel.adapters.stores.work import RunSummary, awaited_children, has_work, summary_of
from runkernel.errors import (
    AnswerPending,
    CommitConflict,
    DamagedStore,
    IllegalCommit,
    LeaseHeld,
    LeaseLost,
    SchemaError,
    StoreError,
    StoreUnavailable,
)
from runkernel.kernel.history import NO_HISTORY, History, HistoryKeys, MutableHistory
from runkernel.kernel.state import Ended, Message, ParentCall, RunSnapshot, ThreadCommit, ThreadHead
from runkernel.kernel.validate import Accepted

#: How long a worker that stopped heartbeating stays in the registry, in seconds of the
#: store's clock: ``forget_worker`` deletes every worker silent for longer.
FORGET_AFTER = _versions.FORGET_AFTER

__all__ = [
    # the contract and its records
    "Store",
    "Lease",
    "LeaseStatus",
    "Writer",
    "InboxEntry",
    "Settlement",
    "Checkpoint",
    "Reconciliation",
    "RunSummary",
    # the errors a store raises
    "StoreError",
    "CommitConflict",
    "IllegalCommit",
    "LeaseHeld",
    "LeaseLost",
    "StoreUnavailable",
    "DamagedStore",
    "SchemaError",
    "AnswerPending",
    # the judgment of an append
    "judge_append",
    "Accepted",
    "History",
    "HistoryKeys",
    "MutableHistory",
    "NO_HISTORY",
    # the line codec
    "commit_text",
    "commit_from_text",
    "snapshot_text",
    "snapshot_from_text",
    # the inbox: the ticket a resume answers (one pending answer per ticket)
    "answered_ticket",
    # the lease rules
    "LeaseRow",
    "acquired",
    "require_held",
    "taken_each",
    "renewed_each",
    "commit_writer",
    "checked_release",
    "checked_duration",
    "is_own_landed_commit",
    # work discovery
    "summary_of",
    "awaited_children",
    "has_work",
    # app versions and the worker registry
    "may_drive",
    "checked_acceptance",
    "WorkerRecord",
    "FORGET_AFTER",
    # the kernel's values a store holds
    "ThreadCommit",
    "ThreadHead",
    "RunSnapshot",
    "Message",
    "ParentCall",
    "Ended",
]
