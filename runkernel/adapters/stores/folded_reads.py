"""Reads a store may fold into another round trip: a Run's pick-up in one call, and
the inbox looked at in a commit's own transaction.

A pick-up reads the Run's snapshot, its Thread's messages (the model's context), its
checkpoint, for a child Run its parent's call, and its inbox, before it decides
anything. A store that can answer these at once defines ``read_pick_up(run_id) ->
PickUp`` (PostgreSQL: one round trip, where five reads would be five); any other store
is read the ordinary ways. Either answer is the same; only the number of round trips
differs.

Before each model call, gate round and status check, and at each quiet point, a drive
looks at the Run's inbox. With nothing handed to the host since (no action, no gate
question; the observations its ``Observer`` is told of, which it never answers, do not
count), right after the pick-up the pick-up's read answers, and right after a commit a
store that read the inbox in that commit's own transaction may answer with what it
read (``pending_seen_in_commit(run_id, version)``: PostgreSQL reads it in the commit's
round trip). A command queued since is concurrent with that read, and the next look
finds it.
"""

from __future__ import annotations

from collections.abc import Callable

from attrs import frozen

from runkernel.adapters.stores.contract import Checkpoint, InboxEntry, Store
from runkernel.kernel.state import Message, ParentCall, RunSnapshot


@frozen
class PickUp:
    """The Run's snapshot (None: no such Run, and nothing else is read), its Thread's
    committed messages, oldest first, its saved checkpoint (None: none), the parent's
    call it was activated for (None: not a child Run), and its pending inbox commands."""

    snapshot: RunSnapshot | None
    messages: tuple[Message, ...] = ()
    checkpoint: Checkpoint | None = None
    parent: ParentCall | None = None
    pending: tuple[InboxEntry, ...] = ()


def read_pick_up(store: Store, run_id: str) -> PickUp:
    """``run_id``'s pick-up reads: ``store.read_pick_up`` when the store has one, else
    ``run``, ``messages``, ``load_checkpoint``, ``parent_of`` and ``pending_commands``."""
    reader: Callable[[str], PickUp] | None = getattr(store, "read_pick_up", None)
    if reader is not None:
        return reader(run_id)
    snapshot = store.run(run_id)
    if snapshot is None:
        return PickUp(None)
    messages = tuple(store.messages(snapshot.thread_id))
    checkpoint, parent = store.load_checkpoint(run_id), store.parent_of(run_id)
    return PickUp(snapshot, messages, checkpoint, parent, tuple(store.pending_commands(run_id)))


def pending_commands(store: Store, run_id: str, committed: int | None = None) -> list[InboxEntry]:
    """The Run's pending inbox commands; with ``committed`` (the version the drive just
    committed, nothing handed to the host since), what the store saw in that commit's
    transaction when it looked (``store.pending_seen_in_commit``), else a read."""
    if committed is not None:
        seen: Callable[[str, int], list[InboxEntry] | None] | None = getattr(store, "pending_seen_in_commit", None)
        found = None if seen is None else seen(run_id, committed)
        if found is not None:
            return found
    return store.pending_commands(run_id)
