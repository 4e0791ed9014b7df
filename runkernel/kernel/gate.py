"""The permission and Plugin gate's answers (``GateVerdict``), for an ordinary call and
for a member of a group (terminal-only delegations, or concurrent ordinary calls) in its
gate round (``CONCURRENCY_RULE``).
"""

from __future__ import annotations

from typing import assert_never

from runkernel.kernel.delegation import (
    begin_attempt,
    gate_round,
    gate_target,
    is_delegation_member,
    is_group_call,
    start_member,
)
from runkernel.kernel.history import History
from runkernel.kernel.planning import execute_effect, replace_status, settle, suspend
from runkernel.kernel.policies import Policies
from runkernel.kernel.protocol import (
    Allow,
    Block,
    Decision,
    Effect,
    GateVerdict,
    RequireWait,
    RunGate,
    Supply,
)
from runkernel.kernel.rules import Rejection, Rule
from runkernel.kernel.state import (
    ActiveToolBatch,
    CallAwaiting,
    CallCompleted,
    Running,
    RunSnapshot,
    ToolCall,
    ToolResult,
    Wait,
)
from runkernel.kernel.values import ResultKind, WaitKind, request_problem


def gate(
    state: RunSnapshot, event: GateVerdict, policies: Policies, history: History
) -> Decision | Rejection:
    """The gate's answer for the call due: an ordinary call, or a member of a group's
    gate round (``CONCURRENCY_RULE``)."""
    batch = state.open_batch
    call = gate_target(batch, policies, event.allowed) if batch is not None else None
    if call is None or call.call_id != event.call_id or not isinstance(state.state, Running):
        after = f" after the allowed members {list(event.allowed)}" if event.allowed else ""
        return Rejection(
            Rule.CALL_ORDER,
            f"call {event.call_id!r} is not the call whose gate answer is due{after} "
            f"({call.call_id if call is not None else 'none'!r})",
        )
    assert batch is not None
    verdict = event.verdict
    match verdict:
        case Allow():
            if is_group_call(call, policies):
                return _allow_member(state, batch, call, event.allowed, policies)
            new = batch.replace_call(begin_attempt(call, 1, state.run_id, policies))
            return settle(state, new, policies, follow_up=(execute_effect(call, 1),))
        case Block():
            result = ToolResult(ResultKind.BLOCKED, verdict.reason)
            return _complete_at_gate(state, batch, call, CallCompleted(0, result), event.allowed, policies)
        case Supply():
            result = ToolResult(ResultKind.SUPPLIED, verdict.value)
            return _complete_at_gate(state, batch, call, CallCompleted(0, result), event.allowed, policies)
        case RequireWait():
            if verdict.kind in (WaitKind.DELEGATION,):
                return Rejection(
                    Rule.EDGE_CONDITION, "a gate cannot start a delegation wait; tools delegate"
                )
            problem = request_problem(verdict.request)
            if problem is not None:
                return Rejection(Rule.UNEXPECTED_INPUT, f"the hold's request cannot be committed: {problem}")
            wait = Wait(
                verdict.kind,
                verdict.ticket_id,
                due_at=verdict.due_at,
                expires_at=verdict.expires_at,
                request=verdict.request,
            )
            # a wait ends a group's gate round: the allows held so far are dropped
            return suspend(state, batch, call, CallAwaiting(0, wait), policies, history)
        case _:
            assert_never(verdict)


def _allow_member(
    state: RunSnapshot, batch: ActiveToolBatch, call: ToolCall, allowed: tuple[str, ...], policies: Policies
) -> Decision:
    """An Allow in a group's gate round commits nothing until every Requested member is
    allowed; then they all start in one commit, so no crash leaves a started group with
    a member still to gate (which might then have to wait)."""
    held = allowed + (call.call_id,)
    rest = gate_round(batch, policies)[len(held):]
    if rest:
        return Decision(state, (RunGate(rest[0], held),))
    return _start_group(state, batch, held, policies)


def _complete_at_gate(
    state: RunSnapshot,
    batch: ActiveToolBatch,
    call: ToolCall,
    status: CallCompleted,
    allowed: tuple[str, ...],
    policies: Policies,
) -> Decision:
    """A blocked or supplied call is terminal at once; in a gate round the round goes on
    with the allows it holds, and the last member's answer starts the allowed ones."""
    new = replace_status(batch, call, status)
    if not is_group_call(call, policies):
        return settle(state, new, policies)
    rest = gate_round(batch, policies)[len(allowed) + 1 :]
    if rest:
        return settle(state, new, policies, follow_up=(RunGate(rest[0], allowed),))
    if allowed:
        return _start_group(state, new, allowed, policies)
    return settle(state, new, policies)


def _start_group(
    state: RunSnapshot, batch: ActiveToolBatch, members: tuple[str, ...], policies: Policies
) -> Decision:
    """Executing{1} for every allowed member (a delegation's child fixed), in one commit;
    then their executors, in call order (a delegation's child activation, a concurrent
    call's Execute): the group runs concurrently, each started only after that commit."""
    follow: list[Effect] = []
    for call_id in members:
        call = batch.call(call_id)
        assert call is not None
        if is_delegation_member(call, policies):
            batch, start = start_member(state.thread_id, state.run_id, batch, call, 1)
            follow.append(start)
        else:
            batch = batch.replace_call(begin_attempt(call, 1, state.run_id, policies))
            follow.append(execute_effect(call, 1))
    return settle(state, batch, policies, follow_up=tuple(follow))
