"""Resume commands and approval deadlines: pre-validation (I14) and application.

A command commits only if the Run is Awaiting and ticket (compared in constant time),
wait kind and payload type all match; a repeat is "already applied", a different
command for an applied ticket is "stale".
"""

from __future__ import annotations

import hmac

import attrs
from typing import assert_never

from runkernel.kernel.delegation import begin_attempt, is_delegation_member, start_member
from runkernel.kernel.history import NO_HISTORY, History
from runkernel.kernel.planning import execute_effect, replace_status, settle
from runkernel.kernel.policies import Policies
from runkernel.kernel.protocol import (
    PAYLOADS_BY_WAIT,
    Approve,
    DeadlinePassed,
    Decision,
    DelegationResult,
    Deny,
    ExternalResult,
    ProvideInput,
    ResumeCommand,
    ResumePayload,
    TimerFired,
)
from runkernel.kernel.rules import Rejection, Rule
from runkernel.kernel.state import (
    RESUMED_EVENT,
    Awaiting,
    CallAwaiting,
    CallCompleted,
    CallStatus,
    Ended,
    Event,
    ResumeTicket,
    RunSnapshot,
    ToolResult,
)
from runkernel.kernel.values import (
    JsonValue,
    ResultKind,
    WaitKind,
    instant,
    ijson_problem,
    resume_value_problem,
)


def _applied_before(history: History, command: ResumeCommand) -> Rejection | None:
    applied = history.applied_digest(command.ticket_id)
    if applied is None:
        return None
    if hmac.compare_digest(applied.encode(), command.digest().encode()):
        return Rejection(
            Rule.ALREADY_APPLIED, f"this command for ticket {command.ticket_id!r} was already applied"
        )
    return Rejection(
        Rule.STALE_COMMAND,
        f"ticket {command.ticket_id!r} was already resumed by a different command",
    )


def payload_problem(payload: ResumePayload) -> str | None:
    """Why a resume payload's value cannot be committed (None when it can): nested
    deeper, larger, or with integers or strings outside what a trace line may hold
    (``resume_value_problem``); what ``runkernel resume`` refuses before it queues."""
    for value in attrs.astuple(payload, recurse=False):
        problem = resume_value_problem(value)
        if problem is not None:
            return f"the resume value cannot be committed: {problem}"
    return None


def check_resume(
    state: RunSnapshot, command: ResumeCommand, history: History = NO_HISTORY
) -> Rejection | None:
    """Pre-validate a resume against committed facts (I14) and the Run's ``history``,
    without applying it."""
    if command.run_id != state.run_id:
        return Rejection(
            Rule.WRONG_RUN, f"command for run {command.run_id!r} sent to run {state.run_id!r}"
        )
    problem = payload_problem(command.payload)  # before to_json, which recurses
    if problem is not None:
        return Rejection(Rule.PAYLOAD_TYPE, problem)
    problem = ijson_problem(command.to_json())
    if problem is not None:
        return Rejection(Rule.PAYLOAD_TYPE, f"the command is not I-JSON (RFC 7493): {problem}")
    earlier = _applied_before(history, command)
    if earlier is not None:
        return earlier
    if isinstance(state.state, Ended):
        return Rejection(
            Rule.RUN_ENDED, f"run {state.run_id!r} is Ended ({state.state.cause.kind.value})"
        )
    if not isinstance(state.state, Awaiting):
        if history.ticket_used(command.ticket_id):
            return Rejection(
                Rule.STALE_COMMAND, f"ticket {command.ticket_id!r} is no longer awaited"
            )
        return Rejection(Rule.RUN_NOT_AWAITING, f"run {state.run_id!r} is Running, not Awaiting")
    ticket = state.state.ticket
    if not hmac.compare_digest(ticket.ticket_id.encode(), command.ticket_id.encode()):
        return Rejection(Rule.TICKET_MISMATCH, "the ticket id does not match the committed ticket")
    if command.kind is not ticket.wait:
        return Rejection(
            Rule.WAIT_KIND_MISMATCH,
            f"the run waits for {ticket.wait.value!r}, the command is {command.kind.value!r}",
        )
    if not isinstance(command.payload, PAYLOADS_BY_WAIT[ticket.wait]):
        return Rejection(
            Rule.PAYLOAD_TYPE,
            f"the ticket waits for {ticket.wait.value!r}, which does not take a {type(command.payload).__name__} payload",
        )
    return None


def resume(
    state: RunSnapshot, command: ResumeCommand, policies: Policies, history: History = NO_HISTORY
) -> Decision | Rejection:
    refused = check_resume(state, command, history)
    if refused is not None:
        return refused
    assert isinstance(state.state, Awaiting)
    return _apply_resume(state, state.state.ticket, command.payload, command.to_json(), command.digest(), policies)


def _apply_resume(
    state: RunSnapshot,
    ticket: ResumeTicket,
    payload: ResumePayload,
    command_json: JsonValue,
    digest: str,
    policies: Policies,
) -> Decision:
    batch = state.open_batch
    assert batch is not None
    call = batch.call(ticket.call_id)
    assert call is not None and isinstance(call.status, CallAwaiting)
    attempt = call.status.attempt
    resumed = Event(
        RESUMED_EVENT,
        {"ticket_id": ticket.ticket_id, "call_id": call.call_id, "command": command_json, "digest": digest},
    )
    if isinstance(payload, (Approve, TimerFired, ProvideInput)) and is_delegation_member(call, policies):
        # a delegation resumed from its gate wait runs alone, like an ordinary call (a
        # concurrent ordinary call resumed runs alone too, by the ordinary path below)
        answer = payload.value if isinstance(payload, ProvideInput) else None
        new, start = start_member(state.thread_id, state.run_id, batch, call, attempt + 1, answer)
        return settle(state, new, policies, events=(resumed,), follow_up=(start,))
    match payload:
        case Approve() | TimerFired():
            new = batch.replace_call(begin_attempt(call, attempt + 1, state.run_id, policies))
            return settle(
                state, new, policies, events=(resumed,), follow_up=(execute_effect(call, attempt + 1, state.input_for(call.call_id)),)
            )
        case ProvideInput():
            new = batch.replace_call(begin_attempt(call, attempt + 1, state.run_id, policies))
            effect = execute_effect(call, attempt + 1, payload.value)
            return settle(state, new, policies, events=(resumed,), follow_up=(effect,))
        case Deny():
            status: CallStatus = CallCompleted(attempt, ToolResult(ResultKind.DENIED, payload.reason))
            return settle(state, replace_status(batch, call, status), policies, events=(resumed,))
        case ExternalResult() | DelegationResult():
            status = CallCompleted(attempt, ToolResult(ResultKind.EXTERNAL, payload.value))
            return settle(state, replace_status(batch, call, status), policies, events=(resumed,))
        case _:
            assert_never(payload)


def has_passed(deadline_at: str | None, now: str) -> bool:
    """True when ``now`` is at or after the deadline; a missing or unreadable deadline
    never passes."""
    if deadline_at is None:
        return False
    try:
        return instant(now) >= instant(deadline_at)
    except ValueError:
        return False


def deadline(state: RunSnapshot, event: DeadlinePassed, policies: Policies) -> Decision | Rejection:
    if not isinstance(state.state, Awaiting):
        return Rejection(Rule.RUN_NOT_AWAITING, f"run {state.run_id!r} is not Awaiting")
    ticket = state.state.ticket
    if not hmac.compare_digest(ticket.ticket_id.encode(), event.ticket_id.encode()):
        return Rejection(Rule.TICKET_MISMATCH, "the ticket id does not match the committed ticket")
    batch = state.open_batch
    call = batch.call(ticket.call_id) if batch else None
    assert call is not None and isinstance(call.status, CallAwaiting)
    expires_at = call.status.wait.expires_at
    if ticket.wait is not WaitKind.APPROVAL or not has_passed(expires_at, event.now):
        return Rejection(
            Rule.NOT_EXPIRED, f"ticket {ticket.ticket_id!r} has no approval deadline before {event.now}"
        )
    deny = Deny({"expired_at": expires_at})
    command = ResumeCommand(state.run_id, ticket.ticket_id, ticket.wait, deny)
    return _apply_resume(state, ticket, deny, command.to_json(), command.digest(), policies)


