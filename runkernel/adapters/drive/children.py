"""The push-mode driver's side of concurrent delegations (Step and ToolBatch):
reconnecting to a child Run, the termini an end of the parent carries, and the action a
quiet parent hands its host. Sans-IO like the core: they yield store operations and are
sent the answers (``ChildFound`` for a ``ReadChild``)."""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

from runkernel.adapters.drive.delegations import ChildFound, child_activation
from runkernel.adapters.drive.actions import ChildRun, ChildrenRunning, DriverError
from runkernel.adapters.drive.protocol import ActivateChild, Operation, ReadChild, ReadHead
from runkernel.kernel.decide import decide
from runkernel.kernel.delegation import executing_delegations
from runkernel.kernel.history import History
from runkernel.kernel.policies import Policies
from runkernel.kernel.protocol import ChildEnded, ChildTerminus, Decision, StartChild
from runkernel.kernel.rules import Rejection
from runkernel.kernel.state import RunSnapshot, ThreadHead


def start_child(
    effect: StartChild,
    state: RunSnapshot,
    policies: Policies,
    lookups: History,
    app: str | None,
    *,
    self_check: bool = False,
    app_version: str | None = None,
) -> Generator[Operation, Any, Decision | None]:
    """The executor of a concurrent delegation (its Executing commit is durable):
    reconnect to its child by its fixed identity. An ended child completes the call (the
    decision returned); one never activated is activated now, with ``app`` and
    ``app_version``; None means
    the child runs, and the parent may be quiet."""
    found: ChildFound = yield ReadChild(effect.child)
    if found.terminus is not None:
        ended = ChildEnded(effect.call_id, effect.attempt, found.terminus)
        verdict = decide(state, ended, policies, lookups, self_check=self_check)
        if isinstance(verdict, Rejection):
            raise DriverError(f"the end of child run {effect.child.run_id!r} was refused: {verdict}")
        return verdict
    if not found.activated:
        head: ThreadHead | None = yield ReadHead(effect.child.thread_id)
        activation = decide(None, child_activation(effect, head.version if head else 0, app, app_version))
        if isinstance(activation, Rejection):
            raise DriverError(f"can't activate child run {effect.child.run_id!r}: {activation}")
        assert activation.commit is not None
        stored: RunSnapshot | None = yield ActivateChild(activation.commit)
        if stored is not None and stored != activation.state:
            raise DriverError(f"store and kernel disagree about child run {effect.child.run_id!r}")
    return None


def ended_children(state: RunSnapshot) -> Generator[Operation, Any, tuple[ChildTerminus, ...]]:
    """The committed termini of the Run's children that ended, for an end of the parent:
    their calls complete with them, the others close Indeterminate."""
    batch = state.open_batch
    found: list[ChildTerminus] = []
    for call in executing_delegations(batch) if batch is not None else ():
        assert call.delegation is not None
        child: ChildFound = yield ReadChild(call.delegation)
        if child.terminus is not None:
            found.append(ChildTerminus(call.call_id, child.terminus))
    return tuple(found)


def children_running(state: RunSnapshot) -> ChildrenRunning:
    """What a quiet parent hands its host: every child that is still running."""
    assert state.open_batch is not None
    children = []
    for call in executing_delegations(state.open_batch):
        assert call.delegation is not None
        child = call.delegation
        children.append(ChildRun(call.call_id, call.tool, call.arguments, child.thread_id, child.run_id))
    return ChildrenRunning(state.run_id, tuple(children))


__all__ = ["children_running", "ended_children", "start_child"]
