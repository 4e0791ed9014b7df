"""Store-side facts of concurrent delegations, for whoever wakes a quiet parent (a worker).

Children name their parent: a child Run's activation commit carries ``parent`` (thread,
Run, call), and the store keeps it on the child's row. A parent is quiet while its only
open work is Executing concurrent delegations; it should be driven again once one of
their children has ended. Workers need none of this: ``Store.runs_with_work`` finds such
a parent by itself (``runkernel.adapters.work``); these helpers are for hosts and tests
that ask about one Run.
"""

from __future__ import annotations

from collections.abc import Iterable

from runkernel.adapters.store import Store
from runkernel.kernel.delegation import executing_delegations
from runkernel.kernel.state import Ended, ParentCall


def parent_of(store: Store, child_run_id: str) -> ParentCall | None:
    """The parent call a child Run was activated for, as its activation recorded it
    (``Store.parent_of``: the Run's own row, never its Thread's commits)."""
    return store.parent_of(child_run_id)


def ended_children(store: Store, parent_run_id: str) -> list[str]:
    """Call ids of the parent's Executing concurrent delegations whose child has ended."""
    snapshot = store.run(parent_run_id)
    if snapshot is None or isinstance(snapshot.state, Ended) or snapshot.open_batch is None:
        return []
    woken = []
    for call in executing_delegations(snapshot.open_batch):
        assert call.delegation is not None
        child = store.run(call.delegation.run_id)
        if child is None or isinstance(child.state, Ended):
            woken.append(call.call_id)  # ended, or never activated: the parent must act
    return woken


def parents_to_wake(store: Store, run_ids: Iterable[str]) -> list[str]:
    """Of ``run_ids`` (e.g. the quiet Runs a worker released), those a child's end (or
    a child never activated) gives work again: drive them."""
    return [run_id for run_id in run_ids if ended_children(store, run_id)]
