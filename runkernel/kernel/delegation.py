"""Terminal-only child delegations (DESIGN.md, Step and ToolBatch): grouping, the
child's derived identity, and its terminus. Pure helpers for ``decide`` and ``recover``.
"""

from __future__ import annotations

from runkernel.kernel.policies import Policies
from runkernel.kernel.state import (
    ActiveToolBatch,
    CallExecuting,
    CallRequested,
    Delegation,
    EndCause,
    ToolCall,
    is_concurrent_delegation,
    is_terminal,
)
from runkernel.kernel.values import JsonValue


#: The concurrency rule next to the two machines (``runkernel spec``): which calls of a
#: batch may be in progress together (I8) and what a concurrent delegation is (I15).
CONCURRENCY_RULE: tuple[str, ...] = (
    "Ordinary calls run one at a time, in call order: a call starts only when every earlier call is terminal.",
    "Consecutive calls of tools declared terminal-only delegations form a group. The group starts when every "
    "call before it is terminal; its calls start in order without waiting for each other; a call after the "
    "group starts when every call of the group is terminal.",
    "Only concurrent delegations may be Executing together; an ordinary call is never started alongside "
    "another started call. While a concurrent delegation is Executing the Run is Running and cannot become "
    "Awaiting (a delegation the gate holds waits like an ordinary call, before its group starts).",
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


def is_group_call(call: ToolCall, policies: Policies) -> bool:
    """Whether the call's committed policy declares a terminal-only delegation."""
    return call.policy_or(policies.for_tool(call.tool)).terminal_only_delegation


def executing_delegations(batch: ActiveToolBatch) -> tuple[ToolCall, ...]:
    """The concurrent delegations of ``batch`` whose child may be running."""
    return tuple(
        c for c in batch.calls if isinstance(c.status, CallExecuting) and is_concurrent_delegation(c)
    )


def next_to_gate(batch: ActiveToolBatch, policies: Policies) -> ToolCall | None:
    """The Requested call that may go to the gate now: the first open call, or while a
    group of concurrent delegations runs, its next member (calls of a group start in
    order without waiting for each other; a call after the group waits for all of it)."""
    calls = batch.calls
    start = 0
    while start < len(calls) and is_terminal(calls[start].status):
        start += 1
    if start == len(calls):
        return None
    if isinstance(calls[start].status, CallRequested):
        return calls[start]
    if not is_concurrent_delegation(calls[start]):
        return None
    index = start
    while index < len(calls) and not isinstance(calls[index].status, CallRequested):
        index += 1
    if index == len(calls):
        return None
    if all(is_group_call(c, policies) for c in calls[start : index + 1]):
        return calls[index]
    return None
