"""What a drive reads when it picks a Run up, in one call to the store.

A pick-up reads the Run's snapshot, its Thread's messages (the model's context), its
checkpoint and, for a child Run, its parent's call, before it decides anything. A store
that can answer these at once defines ``read_pick_up(run_id) -> PickUp`` (PostgreSQL:
one round trip, where four reads would be four); any other store is read the ordinary
ways. Either answer
is the same; only the number of round trips differs.
"""

from __future__ import annotations

from collections.abc import Callable

from attrs import frozen

from runkernel.adapters.stores.contract import Checkpoint, Store
from runkernel.kernel.state import Message, ParentCall, RunSnapshot


@frozen
class PickUp:
    """The Run's snapshot (None: no such Run, and nothing else is read), its Thread's
    committed messages, oldest first, its saved checkpoint (None: none), and the
    parent's call it was activated for (None: not a child Run)."""

    snapshot: RunSnapshot | None
    messages: tuple[Message, ...] = ()
    checkpoint: Checkpoint | None = None
    parent: ParentCall | None = None


def read_pick_up(store: Store, run_id: str) -> PickUp:
    """``run_id``'s pick-up reads: ``store.read_pick_up`` when the store has one, else
    ``run``, ``messages``, ``load_checkpoint`` and ``parent_of``."""
    reader: Callable[[str], PickUp] | None = getattr(store, "read_pick_up", None)
    if reader is not None:
        return reader(run_id)
    snapshot = store.run(run_id)
    if snapshot is None:
        return PickUp(None)
    return PickUp(
        snapshot, tuple(store.messages(snapshot.thread_id)), store.load_checkpoint(run_id), store.parent_of(run_id)
    )
