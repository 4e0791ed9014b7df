"""The store contract every store implements, its typed errors and its records.

A store appends a ThreadCommit atomically if and only if identity and expected version
match (anything else is a typed error and nothing is written), reads the latest state
of a Run or Thread in time that does not grow with history, and exports a Thread as
``runkernel/2``. Stores also judge each commit with the kernel before writing it, so
no store ever holds an illegal commit. Beside the commit log a store keeps a command
inbox, best-effort stream checkpoints and recorded reconciliations; none of them is
Thread truth.

Leases (Workers and leases) are part of the contract: a worker takes a
lease on a Run before it drives it, every commit it makes names that lease, and the
store checks the lease in the commit's own transaction, by the store's clock. So are
app versions (``versions``): each Run's row keeps the version its activation recorded,
workers register and heartbeat, and the versions an operator records compatible
decide which Runs a worker of a version finds.

Why this module is long: the ``Store`` protocol is the one written contract a store
author builds to; each method's docstring is its full rule, and splitting the protocol
would split the contract.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, Protocol

from attrs import frozen

from runkernel.adapters.stores.versions import WorkerRecord as WorkerRecord
from runkernel.adapters.stores.work import RunSummary
from runkernel.errors import (  # the store's errors, importable from here as before
    AnswerPending as AnswerPending,
    CommitConflict as CommitConflict,
    DamagedStore as DamagedStore,
    IllegalCommit as IllegalCommit,
    LeaseError as LeaseError,
    LeaseHeld as LeaseHeld,
    LeaseLost as LeaseLost,
    SchemaError as SchemaError,
    StoreError as StoreError,
    StoreUnavailable as StoreUnavailable,
    UnknownRun as UnknownRun,
)
from runkernel.kernel.codec import commit_json_problem
from runkernel.kernel.history import History
from runkernel.kernel.rules import Rejection, Rule
from runkernel.kernel.state import Message, ParentCall, RunSnapshot, ThreadCommit, ThreadHead
from runkernel.kernel.validate import Accepted
from runkernel.kernel.validate_edge import judge_commit
from runkernel.kernel.values import JsonValue, json_problem


@frozen
class InboxEntry:
    """A command waiting in the store's inbox for the runtime that drives its Run."""

    entry_id: int
    run_id: str
    body: JsonValue
    state: str
    outcome: str | None = None


@frozen
class Settlement:
    """How a commit settles the inbox command it applies: written in the commit's own
    transaction, so no crash can fall between the commit and the settlement."""

    entry_id: int
    outcome: str


@frozen
class Lease:
    """A worker's right to drive one Run until ``expires_at`` (seconds, the store's
    clock). ``epoch`` rises with every take-over of the Run and never falls, so it is a
    fencing token: a downstream that remembers the highest epoch it saw per Run can
    refuse a start from a worker whose lease was taken over."""

    run_id: str
    worker_id: str
    epoch: int
    expires_at: float

    @property
    def writer(self) -> Writer:
        """The writer a commit made under this lease records."""
        return Writer(self.worker_id, self.epoch)


@frozen
class LeaseStatus:
    """A Run's stored lease as an operator sees it: the last lease granted (valid,
    expired or released; None if the Run was never leased), and the store's clock read
    with it, the one clock its expiry is judged by."""

    lease: Lease | None
    released: bool
    now: float


@frozen
class Writer:
    """Who wrote a commit: the worker and the lease epoch it held (W4 tells a retried
    commit whose acknowledgement was lost apart from another writer's by it)."""

    worker_id: str
    epoch: int


@frozen
class Checkpoint:
    """Best-effort partial inference output: never truth, deleted after recovery."""

    run_id: str
    step: int
    data: JsonValue


@frozen
class Reconciliation:
    """What a downstream system said happened to an Indeterminate call's operation."""

    operation_id: str
    #: one of ``RECONCILE_OUTCOMES``
    outcome: str
    note: str | None


#: What a reconciliation may say happened downstream (``runkernel reconcile --outcome``,
#: the console's form).
RECONCILE_OUTCOMES = ("applied", "not_applied", "compensated", "unknown")


CONFLICT_RULES = frozenset({Rule.VERSION, Rule.IDENTITY})

#: How ``runkernel simulate`` names itself in a store's claim: a store whose claim
#: starts with it was filled by simulate, and only such a store may ``--reset`` empty.
SIMULATE_CLAIM = "simulate "


def judge_append(
    head: ThreadHead | None,
    run: RunSnapshot | None,
    commit: ThreadCommit,
    history: History,
    ticket_seen: Callable[[str], bool],
    line: Mapping[str, JsonValue] | None = None,
) -> Accepted:
    """Validate a commit for a store; raise CommitConflict or IllegalCommit on refusal.

    The store inserts the verdict's ``keys`` into its history rows in the same
    transaction as the commit. A value that no trace could hold (a lone surrogate, NaN,
    a non-string key) is refused first, as ``IllegalCommit`` under ``values-are-json``,
    so that every store refuses it the same way before anything is written. ``line``
    is the commit's ``commit_to_json`` dict when the store has built it already (to
    write it), so it is scanned without being built twice; a store of your own leaves it
    out.
    """
    problem = commit_json_problem(commit) if line is None else json_problem(line)
    if problem is not None:
        raise IllegalCommit(Rejection(Rule.JSON_VALUE, f"the commit holds a value that is not JSON: {problem}"))
    # a kernel-made commit is judged by the edge decide named (when it is that edge)
    verdict = judge_commit(head, run, commit, history, ticket_seen=ticket_seen)
    if isinstance(verdict, Rejection):
        if verdict.rule in CONFLICT_RULES:
            raise CommitConflict(verdict)
        raise IllegalCommit(verdict)
    return verdict


class Store(Protocol):
    """What the runtime, the CLI and the conformance suite need from a store."""

    def append(
        self,
        commit: ThreadCommit,
        settle: Settlement | None = None,
        *,
        lease: Lease | None = None,
        release: bool = False,
    ) -> RunSnapshot:
        """Write ``commit`` atomically, and settle the inbox entry ``settle`` names (if
        it is still pending) in the same transaction; return the Run's new snapshot.

        With ``lease``, the same transaction first checks that the lease is still the
        Run's valid lease by the store's clock (same worker, same epoch, not expired,
        not released), else raises ``LeaseLost``; the commit records ``lease.writer``.
        Without one, the commit is refused with ``LeaseHeld`` while any worker holds a
        valid lease on the Run, and records no writer.

        With ``release`` (only beside ``lease``), the same transaction also releases
        the lease once the commit is written: the commit that makes the Run quiet gives
        its lease up, so a drive costs no transaction of its own to release it. A
        commit that is refused releases nothing.

        A retried commit whose acknowledgement was lost (W4) is recognized by identity,
        version and writer: if the Thread's latest commit has this commit's version,
        Run, content and this lease's writer, it is adopted (the Run's snapshot is
        returned, nothing is written again, whatever the lease's state now); the same
        version written by another writer, or without one, is a ``CommitConflict``.
        """
        ...

    def store_time(self) -> float:
        """The store's clock, in seconds: the one clock every lease is judged by."""
        ...

    def acquire_lease(self, run_id: str, worker_id: str, duration: float) -> Lease:
        """Take the lease on ``run_id`` for ``duration`` seconds of store time, in one
        transaction. Raises ``LeaseHeld`` while another worker's lease is valid. If
        ``worker_id`` already holds a valid lease it is extended with the same epoch;
        otherwise (a new, released, expired or taken-over lease) the epoch is one more
        than the Run's highest epoch ever. A Run need not have commits yet. Worker ids
        must be unique per process that drives Runs."""
        ...

    def renew_lease(self, lease: Lease, duration: float) -> Lease:
        """Extend a still valid lease to ``duration`` seconds from now (store time),
        same epoch. Raises ``LeaseLost`` if it expired, was released or taken over:
        an expired lease is never revived, even if nobody took it."""
        ...

    def acquire_leases(self, run_ids: Sequence[str], worker_id: str, duration: float) -> list[Lease]:
        """``acquire_lease`` of each of ``run_ids`` (at most a page of them), all in one
        transaction (one statement where the database allows): the leases granted, in
        the order asked; a Run whose lease another worker holds valid is left out, not
        an error, and so is a Run that has ended (nothing is left to drive: a listing
        that found it was stale). What a worker calls to fill several free slots at
        once."""
        ...

    def renew_leases(self, leases: Sequence[Lease], duration: float) -> list[Lease]:
        """``renew_lease`` of each of ``leases``, all in one transaction (one statement
        where the database allows): the leases renewed; a lease that expired, was
        released or taken over is left out, not an error (and never revived). What a
        worker calls once per renewal round for every Run it has in flight."""
        ...

    def check_lease(self, lease: Lease, margin: float) -> Lease:
        """The lease as the store holds it, if it stays valid for at least ``margin``
        more seconds of store time; else ``LeaseLost``. What a worker calls
        immediately before it starts an executor (W1)."""
        ...

    def release_lease(self, lease: Lease) -> bool:
        """Give the lease up (the Run is quiet, or the worker stops), so another worker
        may take the Run at once; its epoch is kept, so the next one is higher. False
        (and nothing changed) if the lease was not valid any more."""
        ...

    def current_lease(self, run_id: str) -> Lease | None:
        """The Run's valid lease now (store time), or None."""
        ...

    def lease_status(self, run_id: str) -> LeaseStatus:
        """The Run's last lease row, whatever its state, and the store's clock now, read
        together: what ``inspect`` and ``runs`` show (who holds it, until when)."""
        ...

    def lease_statuses(self, run_ids: Sequence[str]) -> dict[str, LeaseStatus]:
        """``lease_status`` of each of ``run_ids`` (at most a page of them), read in one
        query on the leases' primary key: what the console's Runs list shows per Run."""
        ...

    def writer_of(self, thread_id: str, version: int) -> Writer | None:
        """The writer the commit at ``version`` of a Thread recorded (None: written
        without a lease, or no such commit)."""
        ...

    def list_runs(
        self,
        *,
        state: str | None = None,
        thread_id: str | None = None,
        limit: int | None = None,
        app: str | None = None,
        after: str | None = None,
    ) -> list[RunSummary]:
        """Runs, newest activation first, optionally only those in ``state``
        (``running``, ``awaiting``, ``ended``), of one ``app`` or of one Thread, and
        with ``after`` (a run id) only those activated before that Run (the next page);
        from the summary rows each commit rewrites (``runkernel.adapters.stores.work``),
        never from history."""
        ...

    def count_runs(
        self, *, state: str | None = None, thread_id: str | None = None, app: str | None = None, cap: int = 1000
    ) -> int:
        """How many Runs ``list_runs`` would list with these filters, counting at most
        ``cap`` (a count that stops, so its cost never follows the store's size)."""
        ...

    def runs_with_work(self, app: str | None, limit: int = 100, *, version: str | None = None) -> list[str]:
        """Ids of Runs of ``app`` (the activation's ``app``; None: Runs activated
        without one) that nobody holds a valid lease on and that need a worker now, by
        the store's clock (``runkernel.adapters.stores.work.has_work``), oldest activation
        first, at most ``limit``. A worker takes a lease on one before driving it.

        With ``version`` (the worker's), only the Runs a worker of that version may
        drive: recorded with no version (activated before versions existed), with
        ``version``, or with a version ``accept_versions`` recorded for it, as the store
        holds them when the query runs (``versions.may_drive``). None: every version.

        A quiet parent (``runkernel.adapters.stores.work.awaited_children`` of its latest
        state is not empty) is found only once one of the children it waits for has
        ended or has no commit yet; the store keeps what each commit says of this
        beside the Run's row, written in the commit's own transaction."""
        ...

    def register_worker(self, worker_id: str, app: str | None, version: str | None) -> None:
        """Record (or record again) a worker of ``app`` at ``version`` in the registry,
        its heartbeat now (store time), in one write. What a worker calls as it starts."""
        ...

    def heartbeat_worker(self, worker_id: str) -> bool:
        """Set a registered worker's heartbeat to now (store time); False (nothing
        changed) if it is not registered (forgotten: it registers again)."""
        ...

    def forget_worker(self, worker_id: str) -> None:
        """Delete a worker from the registry (it stops; nothing if it is not there), and
        in the same write every worker silent for ``versions.FORGET_AFTER`` seconds (it
        died without saying so), so the registry stays bounded."""
        ...

    def workers(self) -> list[WorkerRecord]:
        """Every registered worker, live or not (``WorkerRecord.live`` against
        ``store_time()`` tells), by worker id."""
        ...

    def accept_versions(self, app: str, version: str, drives: Sequence[str]) -> None:
        """Record that workers of ``app`` at ``version`` may drive the Runs recorded with
        any version in ``drives``: an operator's decision, kept in the store (never in a
        Run's log), all of it in one transaction; recording a pair again changes
        nothing. A worker of ``version`` finds those Runs at its next poll."""
        ...

    def compatible_versions(self, app: str, version: str) -> frozenset[str]:
        """The versions of ``app`` whose Runs a worker of ``version`` may drive: ``version``
        itself and every one ``accept_versions`` recorded for it."""
        ...

    def parent_of(self, run_id: str) -> ParentCall | None:
        """The parent call a child Run's activation named (None: not a child, or no
        such Run), from the Run's own row, never from its Thread's commits."""
        ...

    def run(self, run_id: str) -> RunSnapshot | None:
        """The latest committed snapshot of a Run, or None."""
        ...

    def history(self, run_id: str) -> History:
        """The Run's committed history, looked up by key (what ``decide`` needs beside
        the snapshot). It reads the store at each lookup, so it stays current."""
        ...

    def thread_head(self, thread_id: str) -> ThreadHead | None:
        """The latest committed version of a Thread, or None."""
        ...

    def thread_ids(self) -> list[str]:
        """Every Thread with at least one commit, sorted."""
        ...

    def thread_of(self, run_id: str) -> str | None:
        """The Thread a Run belongs to."""
        ...

    def commits(self, thread_id: str) -> Iterator[ThreadCommit]:
        """A Thread's commits in version order (its ``runkernel/2`` trace)."""
        ...

    def messages(self, thread_id: str) -> list[Message]:
        """Every committed message of a Thread, in order (what inference sees)."""
        ...

    def put_command(self, run_id: str, body: JsonValue) -> int:
        """Append a command to the inbox; returns its entry id. A wait takes one answer:
        a resume (``serial.answered_ticket``) for a ticket that already has one pending
        raises ``AnswerPending`` naming it and queues nothing, decided atomically (a
        unique key on the pending answer), so of two racing answers exactly one is
        queued."""
        ...

    def pending_commands(self, run_id: str) -> list[InboxEntry]:
        """Commands not yet settled for a Run, oldest first."""
        ...

    def settle_command(self, entry_id: int, outcome: str) -> None:
        """Mark an inbox command applied or refused, with the outcome text."""
        ...

    def inbox_entry(self, entry_id: int) -> InboxEntry | None:
        """One inbox command, pending or settled (what became of a submitted command)."""
        ...

    def commands(self, run_id: str) -> list[InboxEntry]:
        """Every inbox command of a Run still kept, pending or settled, oldest first."""
        ...

    def compact_commands(self, run_id: str) -> int:
        """Delete the settled refusals (outcome ``refused: ...``) of a Run, keeping its
        pending and applied commands, so the inbox of Ended Runs stays bounded by what
        was applied; returns how many were deleted."""
        ...

    def save_checkpoint(self, checkpoint: Checkpoint) -> None:
        """Best effort, never waiting for an fsync; may raise StoreUnavailable, which
        callers swallow."""
        ...

    def load_checkpoint(self, run_id: str) -> Checkpoint | None:
        """The Run's checkpoint as last saved, or None (never saved, or deleted)."""
        ...

    def delete_checkpoint(self, run_id: str) -> None:
        """Best effort, like ``save_checkpoint`` (a stale checkpoint is never used: it
        names a step that has passed)."""
        ...

    def record_reconciliation(self, record: Reconciliation) -> None:
        """Keep a reconciliation beside the log; it never changes a committed fact."""
        ...

    def reconciliations(self, operation_id: str | None = None) -> list[Reconciliation]:
        """The reconciliations recorded, oldest first: all, or those of ``operation_id``."""
        ...

    def reset(self) -> None:
        """Delete everything (``simulate --reset``)."""
        ...

    def reopen(self) -> Store:
        """Another instance on the same storage, for another thread: a worker's slots each
        drive through their own (its connection and memos). One safe to share returns itself."""
        ...

    def close(self) -> None:
        """Release the storage (connections, file handles); the store is not used again."""
        ...


def append_to(
    store: Store,
    commit: ThreadCommit,
    settle: Settlement | None = None,
    *,
    lease: Lease | None = None,
    release: bool = False,
    trace_context: str | None = None,
) -> RunSnapshot:
    """``store.append``, with ``release`` and a store's own ``trace_context`` passed only
    when they say something, so a store (or a test's wrapper) that takes neither is
    called as ``Store.append`` was before they existed."""
    options: dict[str, Any] = {}
    if release:
        options["release"] = True
    if trace_context is not None:
        options["trace_context"] = trace_context
    append: Callable[..., RunSnapshot] = store.append
    return append(commit, settle, lease=lease, **options)
