"""Groups of a batch (Step and ToolBatch): terminal-only child delegations and
concurrent ordinary calls, how calls are grouped and gated, and a delegation's derived
child identity and terminus. Pure helpers for ``decide`` and ``recover``.
"""

from __future__ import annotations

from collections.abc import Sequence

import attrs

from runkernel.kernel.policies import GroupKind, Policies, policy_group
from runkernel.kernel.protocol import StartChild
from runkernel.kernel.state import (
    ActiveToolBatch,
    CallExecuting,
    CallRequested,
    Delegation,
    EndCause,
    ParentCall,
    ToolCall,
    is_concurrent_delegation,
    is_terminal,
)
from runkernel.kernel.values import JsonValue


#: The concurrency rule next to the two machines (``runkernel spec``): which calls of a
#: batch may be in progress together (I8) and what a concurrent delegation is (I15).
CONCURRENCY_RULE: tuple[str, ...] = (
    "Ordinary calls run one at a time, in call order: a call starts only when every earlier call is terminal.",
    "Consecutive calls of tools declared terminal-only delegations (committed policy `delegation: "
    "terminal_only`) form a group; so do consecutive calls whose committed policy says `concurrent: true` "
    "(concurrent ordinary calls). The two kinds never share a group. A group is reached when every call "
    "before it is terminal; a call after the group starts when every call of the group is terminal.",
    "Gate round: while no member of the group is Executing, the gate is asked for each Requested member in "
    "call order. An Allow is not committed: it is held for the round (after a crash the gate is asked again "
    "from the first Requested member). A Block or Supply completes its member at once (Requested -> "
    "Completed). A wait ends the round: the member waits like an ordinary call (Run Awaiting) and the allows "
    "held so far are dropped. When every Requested member of the round is allowed, they all start in one "
    "commit (Requested -> Executing{1}, a delegation's child fixed) and only then are their executors "
    "started (a delegation's child activated).",
    "A member resumed from its wait to Executing runs alone, like an ordinary call: no other member of its "
    "group leaves Requested until it is terminal; then a new gate round starts. A denied or externally "
    "completed member is terminal at once and a new gate round starts.",
    "Only the members of one group may be Executing together; an ordinary call is never started alongside "
    "another started call. While a member of a group is Executing, no member of the group waits (the Run is "
    "Running and cannot become Awaiting) and no other member leaves Requested except when the Run ends.",
    "A concurrent ordinary call never delegates and never moves Executing -> Awaiting; it ends on its own "
    "commit (or several end in one), retries under its own policy (Executing -> Executing) while its "
    "siblings run, and results are published in call order when every call of the batch is terminal.",
    "Recovery of a group of concurrent ordinary calls is per call, in one recovery commit: each Executing "
    "member is replayed, reconnected or made Indeterminate by its own committed policy.",
    "Each delegation's child has a Thread and Run id derived from the parent Run id and the call's operation "
    "id, fixed in the call's `delegation` by its Executing commit; the child's activation names its parent "
    "(thread, Run, call) and happens only after that commit; a child is activated once.",
    "A concurrent delegation completes (Executing -> Completed, result kind output) with its child's terminus "
    "{thread_id, run_id, cause, final}; results are published in call order when the batch is finalized.",
    "If the parent ends first (cancel, stop, failure), a call whose child's terminus is committed completes "
    "with it, the others become Indeterminate(outcome_unknown) and their children are sent a cancel.",
    "Recovery of a concurrent delegation found Executing{n} reconnects against the store: child Ended -> "
    "Completed with its terminus; child Running or Awaiting -> the parent stays quiet; child never "
    "activated -> activate it (same attempt n, same identity).",
)


def child_identity(parent_run_id: str, operation_id: str, *, concurrent: bool) -> Delegation:
    """The child's Thread and Run ids, derived from the parent Run id and the call's
    operation id (unique within the Run), so every attempt and recovery names the same
    child."""
    base = f"{parent_run_id}.{operation_id}"  # no "/": an export names a file by its Thread id
    return Delegation(thread_id=f"{base}.thread", run_id=f"{base}.run", concurrent=concurrent)


def terminus(child_thread_id: str, child_run_id: str, cause: EndCause, final: JsonValue) -> JsonValue:
    """A child Run's terminus: the concurrent delegation's result value (I15)."""
    cause_json: dict[str, JsonValue] = {"kind": cause.kind.value}
    if cause.error is not None:
        cause_json["error"] = {"type": cause.error.type, "message": cause.error.message}
    return {"thread_id": child_thread_id, "run_id": child_run_id, "cause": cause_json, "final": final}


def group_of(call: ToolCall, policies: Policies) -> GroupKind | None:
    """The kind of group the call's committed policy puts it in (None: ordinary)."""
    return policy_group(call.policy_or(policies.for_tool(call.tool)))


def is_group_call(call: ToolCall, policies: Policies) -> bool:
    """Whether the call's committed policy puts it in a group (a terminal-only
    delegation or a concurrent ordinary call)."""
    return group_of(call, policies) is not None


def is_delegation_member(call: ToolCall, policies: Policies) -> bool:
    """Whether the call's committed policy declares a terminal-only delegation."""
    return group_of(call, policies) is GroupKind.DELEGATIONS


def executing_delegations(batch: ActiveToolBatch) -> tuple[ToolCall, ...]:
    """The concurrent delegations of ``batch`` whose child may be running."""
    return tuple(
        c for c in batch.calls if isinstance(c.status, CallExecuting) and is_concurrent_delegation(c)
    )


def group_span(calls: Sequence[ToolCall], index: int, policies: Policies) -> range:
    """The indices of the group that holds ``calls[index]`` (empty if it is ordinary):
    the consecutive calls of its kind around it."""
    kind = group_of(calls[index], policies)
    if kind is None:
        return range(index, index)
    first = index
    while first > 0 and group_of(calls[first - 1], policies) is kind:
        first -= 1
    last = index + 1
    while last < len(calls) and group_of(calls[last], policies) is kind:
        last += 1
    return range(first, last)


def running_group(batch: ActiveToolBatch, policies: Policies) -> tuple[ToolCall, ...]:
    """The Executing members of the current group of concurrent ordinary calls (the
    group that holds the first open call), in call order; empty otherwise."""
    index = _first_open(batch.calls)
    if index is None or group_of(batch.calls[index], policies) is not GroupKind.CONCURRENT:
        return ()
    return tuple(
        c for c in (batch.calls[i] for i in group_span(batch.calls, index, policies))
        if isinstance(c.status, CallExecuting)
    )


def gate_round(batch: ActiveToolBatch, policies: Policies) -> tuple[ToolCall, ...]:
    """The Requested members of the current group, in call order, while it is in its gate
    round (no member in progress); empty when the current call is not a group's."""
    calls = batch.calls
    index = _first_open(calls)
    if index is None:
        return ()
    span = group_span(calls, index, policies)
    members = [calls[i] for i in span]
    if not members or any(not is_terminal(c.status) and not isinstance(c.status, CallRequested) for c in members):
        return ()
    return tuple(c for c in members if isinstance(c.status, CallRequested))


def begin_attempt(call: ToolCall, attempt: int, run_id: str, policies: Policies) -> ToolCall:
    """``call`` Executing ``attempt``. A sequential delegation's child is fixed by the
    call's first Executing commit (every delegation's child, sequential ones
    too, has an identity derived from the parent Run id and the operation id)."""
    status = CallExecuting(attempt)
    if call.delegation is None and call.policy_or(policies.for_tool(call.tool)).sequential_delegation:
        child = child_identity(run_id, call.operation_id, concurrent=False)
        return attrs.evolve(call, status=status, delegation=child)
    return attrs.evolve(call, status=status)


def _first_open(calls: Sequence[ToolCall]) -> int | None:
    for index, call in enumerate(calls):
        if not is_terminal(call.status):
            return index
    return None


def start_member(
    thread_id: str, run_id: str, batch: ActiveToolBatch, call: ToolCall, attempt: int, resume_value: JsonValue = None
) -> tuple[ActiveToolBatch, StartChild]:
    """``batch`` with the group member ``call`` of the parent Run ``run_id`` Executing
    ``attempt`` with its child fixed, and the child's activation (its executor), to
    carry out after that commit."""
    child = child_identity(run_id, call.operation_id, concurrent=True)
    parent = ParentCall(thread_id, run_id, call.call_id)
    started = batch.replace_call(attrs.evolve(call, status=CallExecuting(attempt), delegation=child))
    return started, StartChild(call.call_id, attempt, child, parent, call.arguments, resume_value)


def next_to_gate(batch: ActiveToolBatch, policies: Policies) -> ToolCall | None:
    """The Requested call that may go to the gate now, starting a fresh round: the first
    open call, unless it belongs to a group with a member in progress (a member resumed
    from its wait runs alone; a started group runs to its end)."""
    open_call = batch.first_open_call()
    if open_call is None or not isinstance(open_call.status, CallRequested):
        return None
    if is_group_call(open_call, policies):
        round_ = gate_round(batch, policies)
        return round_[0] if round_ else None
    return open_call


def gate_target(batch: ActiveToolBatch, policies: Policies, allowed: Sequence[str]) -> ToolCall | None:
    """The call whose gate answer may come next, given the members ``allowed`` so far in
    this round (see ``CONCURRENCY_RULE``), or None if ``allowed`` is not this round's."""
    if not allowed:
        return next_to_gate(batch, policies)
    round_ = gate_round(batch, policies)
    if len(round_) <= len(allowed) or tuple(c.call_id for c in round_[: len(allowed)]) != tuple(allowed):
        return None
    return round_[len(allowed)]
