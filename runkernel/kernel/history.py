"""What a Run's history answers by key: used tickets, closed batches, applied resumes.

These facts grow with the Run, so they never live in the snapshot that every commit
rewrites (Cost model). The kernel reads them through ``History``, a pure
lookup that a store answers from indexed rows; a commit's ``HistoryKeys`` name the
facts it adds, for the store to insert in the commit's own transaction.
"""

from __future__ import annotations

from typing import Protocol

import attrs
from attrs import frozen

from runkernel.kernel.state import RESUMED_EVENT, AppliedResume, Awaiting, RunSnapshot, ThreadCommit


class History(Protocol):
    """Keyed lookups into the committed history of one Run."""

    def ticket_used(self, ticket_id: str) -> bool:
        """Whether a commit of this Run awaited ``ticket_id``."""
        ...

    def batch_closed(self, batch_id: str) -> bool:
        """Whether a batch of this Run with ``batch_id`` was finalized."""
        ...

    def applied_digest(self, ticket_id: str) -> str | None:
        """The digest of the command that resumed ``ticket_id``, if one did."""
        ...


@frozen
class HistoryKeys:
    """The history facts one commit adds (each at most once per commit)."""

    ticket: str | None = None
    closed_batch: str | None = None
    resume: AppliedResume | None = None


NO_KEYS = HistoryKeys()


def commit_keys(prev: RunSnapshot | None, commit: ThreadCommit) -> HistoryKeys:
    """The history facts ``commit`` adds on top of ``prev`` (its Run's snapshot before).

    ``validate_commit`` reports the same in ``Accepted.keys``; a driver that holds its
    own history uses this to follow an acknowledged commit without judging it again.
    """
    if prev is None:
        return NO_KEYS  # a first commit awaits nothing, closes nothing, resumes nothing
    ticket = commit.disposition.ticket.ticket_id if isinstance(commit.disposition, Awaiting) else None
    batch = commit.batch
    closed = (
        batch.batch_id
        if batch is not None and batch.finalized and prev.open_batch is not None
        else None
    )
    resume = None
    for event in commit.events:
        if event.type == RESUMED_EVENT:
            data = event.data
            resume = AppliedResume(str(data.get("ticket_id", "")), str(data.get("digest", "")))
            break
    if ticket is None and closed is None and resume is None:
        return NO_KEYS
    return HistoryKeys(ticket=ticket, closed_batch=closed, resume=resume)


@frozen
class RunHistory:
    """An immutable, hashable History held in memory (checker, simulator, proofs).

    ``resumes`` keeps the order the resumes were applied in, so two histories compare
    equal only if they hold the same facts.
    """

    tickets: frozenset[str] = frozenset()
    closed_batches: frozenset[str] = frozenset()
    resumes: tuple[AppliedResume, ...] = ()

    def ticket_used(self, ticket_id: str) -> bool:
        return ticket_id in self.tickets

    def batch_closed(self, batch_id: str) -> bool:
        return batch_id in self.closed_batches

    def applied_digest(self, ticket_id: str) -> str | None:
        for applied in self.resumes:
            if applied.ticket_id == ticket_id:
                return applied.digest
        return None

    def plus(self, keys: HistoryKeys) -> RunHistory:
        """This history with a commit's keys added."""
        if keys == NO_KEYS:
            return self
        return attrs.evolve(
            self,
            tickets=self.tickets | {keys.ticket} if keys.ticket is not None else self.tickets,
            closed_batches=(
                self.closed_batches | {keys.closed_batch}
                if keys.closed_batch is not None
                else self.closed_batches
            ),
            resumes=self.resumes + (keys.resume,) if keys.resume is not None else self.resumes,
        )


#: The history of a Run with no commit yet.
NO_HISTORY = RunHistory()


class MutableHistory:
    """A History of dicts and sets that grows in place (MemoryStore, long traces)."""

    def __init__(self) -> None:
        self.tickets: set[str] = set()
        self.closed_batches: set[str] = set()
        self.resumes: dict[str, str] = {}

    def ticket_used(self, ticket_id: str) -> bool:
        return ticket_id in self.tickets

    def batch_closed(self, batch_id: str) -> bool:
        return batch_id in self.closed_batches

    def applied_digest(self, ticket_id: str) -> str | None:
        return self.resumes.get(ticket_id)

    def add(self, keys: HistoryKeys) -> None:
        """Record a commit's keys."""
        if keys.ticket is not None:
            self.tickets.add(keys.ticket)
        if keys.closed_batch is not None:
            self.closed_batches.add(keys.closed_batch)
        if keys.resume is not None:
            self.resumes[keys.resume.ticket_id] = keys.resume.digest
