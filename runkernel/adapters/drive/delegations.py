"""Store-side facts of concurrent delegations, for whoever wakes a quiet parent (a worker).

Children name their parent: a child Run's activation commit carries ``parent`` (thread,
Run, call), and the store keeps it on the child's row. A parent is quiet while its only
open work is Executing concurrent delegations; it should be driven again once one of
their children has ended. Workers need none of this: ``Store.runs_with_work`` finds such
a parent by itself (``runkernel.adapters.stores.work``); these helpers are for hosts and tests
that ask about one Run.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable

from attrs import frozen

from runkernel.adapters.drive.inbox import submit_end
from runkernel.adapters.stores.serial import inbox_to_input
from runkernel.adapters.stores.contract import Store
from runkernel.kernel.codec import TraceFormatError
from runkernel.kernel.delegation import executing_delegations, next_to_gate, terminus
from runkernel.kernel.policies import Policies
from runkernel.kernel.protocol import Activate, EndRequest, StartChild
from runkernel.kernel.state import ActiveToolBatch, Delegation, EndCause, Ended, Message, ParentCall
from runkernel.kernel.values import EndCauseKind, JsonValue, Role


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


# --- what the driver reads of a child ---------------------------------------------------


@frozen
class ChildFound:
    """What the store holds of a delegation's child Run: whether it was ever activated,
    and once it has ended its committed terminus (None while it runs)."""

    activated: bool
    terminus: JsonValue = None


def child_activation(
    effect: StartChild, head_version: int, app: str | None, app_version: str | None = None
) -> Activate:
    """The activation of a concurrent delegation's child: its derived identity, the call's
    arguments as its first user message (then the input answer its gate wait committed,
    if any), the parent call it answers to, and ``app`` (the
    parent's, so a worker of that app drives the child) at ``app_version`` (the code
    that activates it)."""
    messages: tuple[Message, ...] = (Message(Role.USER, effect.arguments),)
    if effect.resume_value is not None:
        messages += (Message(Role.USER, effect.resume_value),)  # the member's input answer
    return Activate(
        effect.child.thread_id, effect.child.run_id, head_version, messages, app, effect.parent, app_version
    )


def find_child(store: Store, child: Delegation) -> ChildFound:
    """The child Run as the store holds it now (recovery's reconnect against the store)."""
    snapshot = store.run(child.run_id)
    if snapshot is None:
        return ChildFound(activated=False)
    if not isinstance(snapshot.state, Ended):
        return ChildFound(activated=True)
    final: JsonValue = None
    for message in store.messages(child.thread_id):
        if message.role is Role.ASSISTANT:
            final = message.content
    return ChildFound(True, terminus(child.thread_id, child.run_id, snapshot.state.cause, final))


def is_quiet(batch: ActiveToolBatch, policies: Policies, running: Collection[str]) -> bool:
    """Whether a Run's only open work is concurrent delegations whose children were found
    running (``running``: their call ids): nothing to do until one of them ends."""
    executing = executing_delegations(batch)
    return (
        bool(executing)
        and next_to_gate(batch, policies) is None
        and all(call.call_id in running for call in executing)
    )


def cancel_child(store: Store, child_run_id: str) -> None:
    """Send a running child the cancel its parent's end owes it, once: a child with an
    end request already queued (sent before a crash, then owed again on recovery of its
    Ended parent) gets no second one; a child that ended or was never activated is
    refused by its inbox and needs none."""
    for entry in store.pending_commands(child_run_id):
        if isinstance(_command_of(entry.body), EndRequest):
            return
    submit_end(store, child_run_id, EndRequest(EndCause(EndCauseKind.CANCELLED)))


def cancel_if_parent_ended(store: Store, run_id: str) -> bool:
    """At a child's pick-up: if the parent it was activated for has ended, queue the
    cancel the parent's end owed it (a crash right after the parent's end commit, before
    its cancels, would otherwise leave the child running for nobody). True if owed."""
    parent = store.parent_of(run_id)
    if parent is None:
        return False
    own, ended = store.run(run_id), store.run(parent.run_id)
    if own is None or isinstance(own.state, Ended) or ended is None or not isinstance(ended.state, Ended):
        return False
    cancel_child(store, run_id)
    return True


def _command_of(body: JsonValue) -> object:
    try:
        return inbox_to_input(body)
    except TraceFormatError:
        return None
