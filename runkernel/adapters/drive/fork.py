"""Forking a Run in a store: ``fork(store, run_id, at=N)`` (``runkernel fork``).

It reads the source Thread's commits up to version N once, asks the kernel for the
fork's first commit (``runkernel.kernel.fork``: the rules are there), and appends it to
a new Thread in one write that the store judges like every commit: the fork exists
whole, or not at all, and the source is never changed. A worker of the source's app
then drives the new Run like any other.
"""

from __future__ import annotations

from attrs import frozen

from runkernel.adapters.drive.sources import IdSource, SecretIds
from runkernel.adapters.stores.contract import Store
from runkernel.errors import CommitConflict, ForkRefused, UnknownRun
from runkernel.kernel.fork import ForkIds, ForkRefusal, ForkRefusalKind, fork_commit, fork_point
from runkernel.kernel.state import Awaiting, CallIndeterminate, ThreadCommit


@frozen
class ForkResult:
    """A fork made: its Thread and Run, where it came from, its first commit, the ticket
    it waits on (an Awaiting fork; None otherwise) and the calls it closed Indeterminate
    because they may not run again (``abandon_open_calls``)."""

    thread_id: str
    run_id: str
    source_thread_id: str
    source_run_id: str
    version: int
    commit: ThreadCommit
    ticket_id: str | None
    abandoned: tuple[str, ...]

    @property
    def state(self) -> str:
        """``"running"`` or ``"awaiting"``: the state the fork starts in."""
        return "awaiting" if self.ticket_id is not None else "running"


def fork(
    store: Store,
    run_id: str,
    *,
    at: int,
    thread_id: str | None = None,
    abandon_open_calls: bool = False,
    ids: IdSource | None = None,
) -> ForkResult:
    """Fork Run ``run_id`` at version ``at`` of its Thread into a new Thread and Run.

    ``thread_id`` names the new Thread (default: a new random id); ``ids`` gives the new
    Run, operation and ticket ids (default: ``SecretIds``). Raises ``UnknownRun`` for a
    Run the store has no commit for, and ``ForkRefused`` (naming the calls in ``calls``
    when calls refuse it) for a version that is not one of the Run's, a Thread id already
    in use, or calls Executing at that version under reconnect or indeterminate unless
    ``abandon_open_calls`` (then they are closed Indeterminate in the fork and never run).
    """
    ids = SecretIds() if ids is None else ids
    source_thread = store.thread_of(run_id)
    if source_thread is None:
        raise UnknownRun(f"no run {run_id!r} in this store")
    new_thread = thread_id if thread_id is not None else ids.new_id("thread")
    if store.thread_head(new_thread) is not None:
        raise _taken(new_thread)
    point = fork_point(store.commits(source_thread), run_id, at)
    if isinstance(point, ForkRefusal):
        raise ForkRefused(point)
    batch = point.run.open_batch
    calls = len(batch.calls) if batch is not None else 0
    fork_ids = ForkIds(new_thread, ids.new_id("run"), [ids.new_id("op") for _ in range(calls)], ids.ticket_id())
    made = fork_commit(point, fork_ids, abandon_open_calls=abandon_open_calls)
    if isinstance(made, ForkRefusal):
        raise ForkRefused(made)
    try:
        store.append(made)
    except CommitConflict:  # another writer took the Thread since: the same refusal
        if store.thread_head(new_thread) is None:
            raise
        raise _taken(new_thread) from None
    source_calls = {c.call_id: c for c in batch.calls} if batch is not None else {}
    abandoned = tuple(
        c.call_id
        for c in (made.batch.calls if made.batch is not None else ())
        if isinstance(c.status, CallIndeterminate) and not isinstance(source_calls[c.call_id].status, CallIndeterminate)
    )
    ticket = made.disposition.ticket.ticket_id if isinstance(made.disposition, Awaiting) else None
    return ForkResult(made.thread_id, made.run_id, point.thread_id, run_id, at, made, ticket, abandoned)


def _taken(thread_id: str) -> ForkRefused:
    return ForkRefused(ForkRefusal(ForkRefusalKind.THREAD_TAKEN, f"thread {thread_id!r} already has commits"))


__all__ = ["ForkResult", "fork"]
