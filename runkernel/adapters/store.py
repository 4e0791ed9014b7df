"""The store contract every store implements, its typed errors and its records.

A store appends a ThreadCommit atomically if and only if identity and expected version
match (anything else is a typed error and nothing is written), reads the latest state
of a Run or Thread in time that does not grow with history, and exports a Thread as
``runkernel/1``. Stores also judge each commit with the kernel before writing it, so
no store ever holds an illegal commit. Beside the commit log a store keeps a command
inbox, best-effort stream checkpoints and recorded reconciliations; none of them is
Thread truth.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Protocol

from attrs import frozen

from runkernel.errors import RunkernelError
from runkernel.kernel.codec import commit_json_problem
from runkernel.kernel.history import History
from runkernel.kernel.rules import Rejection, Rule
from runkernel.kernel.state import Message, RunSnapshot, ThreadCommit, ThreadHead
from runkernel.kernel.validate import Accepted, validate_commit
from runkernel.kernel.values import JsonValue, json_problem


class StoreError(RunkernelError):
    """Base class of every error a store raises on purpose."""


class CommitConflict(StoreError):
    """Identity or expected version did not match: another writer won. Nothing was written."""

    def __init__(self, rejection: Rejection) -> None:
        super().__init__(str(rejection))
        self.rejection = rejection


class IllegalCommit(StoreError):
    """The commit is not a legal successor of the committed state. Nothing was written."""

    def __init__(self, rejection: Rejection) -> None:
        super().__init__(str(rejection))
        self.rejection = rejection


class StoreUnavailable(StoreError):
    """The store could not be reached or failed mid-write; the write did not happen."""


class SchemaError(StoreError):
    """The database is not a runkernel store, or has a schema this version does not know."""


class DamagedStore(StoreError):
    """A stored value cannot be decoded, or the stored facts contradict each other (a gap
    or repeat in a Thread's versions, a snapshot that disagrees with the log). The
    message names the row; nothing is answered from a damaged store."""


class UnknownRun(StoreError):
    """No commit exists for the named Run."""


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
class Checkpoint:
    """Best-effort partial inference output: never truth, deleted after recovery."""

    run_id: str
    step: int
    data: JsonValue


@frozen
class Reconciliation:
    """What a downstream system said happened to an Indeterminate call's operation."""

    operation_id: str
    outcome: str
    note: str | None


CONFLICT_RULES = frozenset({Rule.VERSION, Rule.IDENTITY})


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
    write it), so it is scanned without being built twice.
    """
    problem = commit_json_problem(commit) if line is None else json_problem(line)
    if problem is not None:
        raise IllegalCommit(Rejection(Rule.JSON_VALUE, f"the commit holds a value that is not JSON: {problem}"))
    verdict = validate_commit(head, run, commit, history, ticket_seen)
    if isinstance(verdict, Rejection):
        if verdict.rule in CONFLICT_RULES:
            raise CommitConflict(verdict)
        raise IllegalCommit(verdict)
    return verdict


class Store(Protocol):
    """What the runtime, the CLI and the conformance suite need from a store."""

    def append(self, commit: ThreadCommit, settle: Settlement | None = None) -> RunSnapshot:
        """Write ``commit`` atomically, and settle the inbox entry ``settle`` names (if
        it is still pending) in the same transaction; return the Run's new snapshot."""
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
        """A Thread's commits in version order (its ``runkernel/1`` trace)."""
        ...

    def messages(self, thread_id: str) -> list[Message]:
        """Every committed message of a Thread, in order (what inference sees)."""
        ...

    def put_command(self, run_id: str, body: JsonValue) -> int:
        """Append a command to the inbox; returns its entry id."""
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
        ...

    def delete_checkpoint(self, run_id: str) -> None:
        """Best effort, like ``save_checkpoint`` (a stale checkpoint is never used: it
        names a step that has passed)."""
        ...

    def record_reconciliation(self, record: Reconciliation) -> None:
        """Keep a reconciliation beside the log; it never changes a committed fact."""
        ...

    def reconciliations(self, operation_id: str | None = None) -> list[Reconciliation]:
        ...

    def reset(self) -> None:
        """Delete everything (``simulate --reset``)."""
        ...

    def close(self) -> None:
        ...
