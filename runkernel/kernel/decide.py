"""``decide(state, input)``: the pure driver of one Run.

Given the latest committed snapshot and one input, it returns the next state and the
effects to carry out, or a Rejection that changes nothing. Every commit it emits is
checked by ``validate_commit`` before it leaves: an illegal commit here is a kernel
bug and raises ``KernelBug`` instead of reaching a store.
"""

from __future__ import annotations

import hmac
from collections.abc import Sequence
from typing import assert_never

import attrs

from runkernel.kernel.effects_plan import (
    close_batch,
    next_step_effects,
    publish_messages,
)
from runkernel.kernel.policies import IndeterminateChoice, Policies
from runkernel.kernel.protocol import (
    PAYLOADS_BY_WAIT,
    Activate,
    Allow,
    Approve,
    Block,
    Commit,
    DeadlinePassed,
    Decision,
    DelegationResult,
    Deny,
    DeliverTerminus,
    Effect,
    EndRequest,
    Execute,
    ExternalResult,
    GateVerdict,
    Hook,
    InferenceResult,
    Input,
    NotifyWait,
    OperationStatus,
    ProvideInput,
    PublishResults,
    QueryStatus,
    RequestInference,
    RequireWait,
    ResumeCommand,
    ResumePayload,
    RunGate,
    RunHook,
    StatusReport,
    Supply,
    TimerFired,
    ToolDelegated,
    ToolFailure,
    ToolFinished,
    ToolOutcomeLost,
    ToolOutput,
    ToolScheduled,
)
from runkernel.kernel.rules import Rejection, Rule
from runkernel.kernel.state import (
    RESUMED_EVENT,
    ActiveToolBatch,
    Awaiting,
    CallAwaiting,
    CallCompleted,
    CallExecuting,
    CallIndeterminate,
    CallRequested,
    CallStatus,
    EndCause,
    Ended,
    Event,
    Message,
    ResumeTicket,
    RunDisposition,
    RunSnapshot,
    Running,
    ThreadCommit,
    ThreadHead,
    ToolCall,
    ToolResult,
    ToolUse,
    Wait,
)
from runkernel.kernel.validate import validate_commit
from runkernel.kernel.values import (
    EndCauseKind,
    IndeterminateReason,
    JsonValue,
    ResultKind,
    Role,
    WaitKind,
)


class KernelBug(AssertionError):
    """``decide`` or ``recover`` built a commit that commit validation rejects."""


def decide(
    state: RunSnapshot | None, event: Input, policies: Policies = Policies()
) -> Decision | Rejection:
    """The next committed state and effects for ``event``, or a typed rejection."""
    if isinstance(event, Activate):
        if state is not None:
            return Rejection(Rule.UNEXPECTED_INPUT, f"run {state.run_id!r} is already activated")
        return _activate(event)
    if state is None:
        return Rejection(
            Rule.UNEXPECTED_INPUT,
            f"can't handle {type(event).__name__} before the run's first commit",
        )
    if isinstance(event, ResumeCommand):
        return _resume(state, event, policies)
    if isinstance(state.state, Ended):
        return Rejection(
            Rule.RUN_ENDED,
            f"can't handle {type(event).__name__}: run {state.run_id!r} is Ended "
            f"({state.state.cause.kind.value})",
        )
    match event:
        case InferenceResult():
            return _inference(state, event, policies)
        case GateVerdict():
            return _gate(state, event, policies)
        case ToolFinished():
            return _tool_finished(state, event, policies)
        case StatusReport():
            return _status(state, event, policies)
        case DeadlinePassed():
            return _deadline(state, event, policies)
        case EndRequest():
            return _end_request(state, event)
        case _:
            assert_never(event)


# --- commit building ------------------------------------------------------------------


def build_commit(
    prev: RunSnapshot,
    *,
    disposition: RunDisposition,
    batch: ActiveToolBatch | None,
    messages: Sequence[Message] = (),
    events: Sequence[Event] = (),
    step: int | None = None,
) -> tuple[ThreadCommit, RunSnapshot]:
    """A commit on top of ``prev``, validated; raises KernelBug if it is illegal."""
    commit = ThreadCommit(
        thread_id=prev.thread_id,
        run_id=prev.run_id,
        expected_version=prev.version,
        step=prev.step if step is None else step,
        disposition=disposition,
        batch=batch,
        messages=tuple(messages),
        events=tuple(events),
    )
    verdict = validate_commit(ThreadHead(prev.thread_id, prev.version, prev.run_id), prev, commit)
    if isinstance(verdict, Rejection):
        raise KernelBug(f"kernel built an illegal commit: {verdict}")
    return commit, verdict.run


def settle(
    prev: RunSnapshot,
    batch: ActiveToolBatch,
    policies: Policies,
    *,
    disposition: RunDisposition | None = None,
    events: Sequence[Event] = (),
    follow_up: Sequence[Effect] = (),
) -> Decision:
    """Commit ``batch`` (one call just moved) and plan what comes next.

    An Indeterminate call ends the Run when the host chose so; a batch whose calls are
    all terminal is finalized and published in the same commit; otherwise the next
    Requested call goes to the gate.
    """
    # Only a Running run may end here: the commit that applies a resume must say Running.
    may_end = isinstance(prev.state, Running)
    if (
        may_end
        and policies.on_indeterminate is IndeterminateChoice.END_RUN
        and any(
            isinstance(c.status, CallIndeterminate) and not isinstance(p.status, CallIndeterminate)
            for c, p in zip(batch.calls, prev.batch.calls if prev.batch else ())
        )
    ):
        return end_run(prev, batch, EndCause(EndCauseKind.OUTCOME_UNKNOWN), events=events)
    if batch.all_terminal():
        at_limit = policies.max_steps is not None and prev.step >= policies.max_steps
        if at_limit and may_end:
            return end_run(prev, batch, EndCause(EndCauseKind.STEP_LIMIT), events=events)
        final = attrs.evolve(batch, finalized=True)
        commit, after = build_commit(
            prev,
            disposition=Running(),
            batch=final,
            messages=publish_messages(final),
            events=events,
        )
        # At the step limit the next commit ends the run; recover() plans it.
        upcoming = () if at_limit else next_step_effects(after)
        return Decision(
            after, (Commit(commit), PublishResults(final), RunHook(Hook.STEP_END)) + upcoming
        )
    commit, after = build_commit(
        prev, disposition=disposition or Running(), batch=batch, events=events
    )
    effects: tuple[Effect, ...] = (Commit(commit),) + tuple(follow_up)
    if not follow_up:
        next_call = batch.first_open_call()
        if next_call is not None and isinstance(next_call.status, CallRequested):
            effects += (RunGate(next_call),)
    return Decision(after, effects)


def end_run(
    prev: RunSnapshot,
    batch: ActiveToolBatch | None,
    cause: EndCause,
    *,
    messages: Sequence[Message] = (),
    events: Sequence[Event] = (),
    step: int | None = None,
) -> Decision:
    """End the Run, closing every open call and publishing one result per call."""
    published: tuple[Message, ...] = ()
    if batch is not None and batch.is_open:
        batch = close_batch(batch)
        published = publish_messages(batch)
    commit, after = build_commit(
        prev,
        disposition=Ended(cause),
        batch=batch,
        messages=tuple(messages) + published,
        events=events,
        step=step,
    )
    effects: tuple[Effect, ...] = (Commit(commit),)
    if published and batch is not None:
        effects += (PublishResults(batch),)
    return Decision(after, effects + (DeliverTerminus(cause),))


def _replace(batch: ActiveToolBatch, call: ToolCall, status: CallStatus) -> ActiveToolBatch:
    return batch.replace_call(attrs.evolve(call, status=status))


def execute_effect(call: ToolCall, attempt: int, resume_value: JsonValue = None) -> Execute:
    return Execute(call.call_id, call.tool, call.arguments, call.operation_id, attempt, resume_value)


# --- handlers ---------------------------------------------------------------------


def _activate(event: Activate) -> Decision | Rejection:
    commit = ThreadCommit(
        thread_id=event.thread_id,
        run_id=event.run_id,
        expected_version=event.expected_version,
        step=0,
        disposition=Running(),
        batch=None,
        messages=event.messages,
        events=(Event("activated"),),
    )
    head = (
        ThreadHead(event.thread_id, event.expected_version, None)
        if event.expected_version
        else None
    )
    verdict = validate_commit(head, None, commit)
    if isinstance(verdict, Rejection):
        return verdict  # the commit holds the input's messages as given: refuse the input
    return Decision(verdict.run, (Commit(commit),) + next_step_effects(verdict.run))


def _inference(state: RunSnapshot, event: InferenceResult, policies: Policies) -> Decision | Rejection:
    if not isinstance(state.state, Running) or state.open_batch is not None:
        return Rejection(
            Rule.INFERENCE_OPEN_BATCH,
            f"can't accept an inference result for run {state.run_id!r}: "
            + ("batch is still open" if state.open_batch else "run is not Running"),
        )
    if policies.max_steps is not None and state.step >= policies.max_steps:
        return Rejection(
            Rule.UNEXPECTED_INPUT,
            f"run {state.run_id!r} is at its step limit ({policies.max_steps}); recover() ends it",
        )
    step = state.step + 1
    if not event.calls:
        message = Message(Role.ASSISTANT, event.content)
        end = event.end
        if end is None and policies.max_steps is not None and step >= policies.max_steps:
            end = EndCauseKind.STEP_LIMIT
        if end is not None:
            if end is EndCauseKind.FAILED:
                return Rejection(
                    Rule.UNEXPECTED_INPUT, "a failure ends a run through EndRequest with its error"
                )
            decision = end_run(state, None, EndCause(end), messages=(message,), step=step)
            return Decision(
                decision.state,
                (RunHook(Hook.AFTER_INFERENCE), RunHook(Hook.STEP_END)) + decision.effects,
            )
        commit, after = build_commit(
            state, disposition=Running(), batch=state.batch, messages=(message,), step=step
        )
        return Decision(
            after,
            (RunHook(Hook.AFTER_INFERENCE), RunHook(Hook.STEP_END), Commit(commit))
            + next_step_effects(after),
        )
    if event.batch_id is None or event.end is not None:
        return Rejection(
            Rule.BATCH_NEW, "a tool-call result needs a batch id and cannot end the run"
        )
    if event.batch_id in state.closed_batch_ids or (
        state.batch is not None and state.batch.batch_id == event.batch_id
    ):
        return Rejection(Rule.BATCH_IDENTITY, f"batch id {event.batch_id!r} was already used")
    try:
        calls = tuple(
            ToolCall(c.call_id, c.tool, c.arguments, c.operation_id, CallRequested())
            for c in event.calls
        )
        batch = ActiveToolBatch(event.batch_id, step, False, calls)
    except ValueError as error:
        return Rejection(Rule.BATCH_NEW, str(error))
    message = Message(
        Role.ASSISTANT,
        event.content,
        tool_calls=tuple(ToolUse(c.call_id, c.tool, c.arguments) for c in event.calls),
    )
    commit, after = build_commit(
        state, disposition=Running(), batch=batch, messages=(message,), step=step
    )
    return Decision(
        after, (RunHook(Hook.AFTER_INFERENCE), Commit(commit), RunGate(batch.calls[0]))
    )


def _current_call(state: RunSnapshot, call_id: str) -> ToolCall | Rejection:
    batch = state.open_batch
    current = batch.first_open_call() if batch else None
    if current is None or current.call_id != call_id:
        return Rejection(
            Rule.CALL_ORDER,
            f"call {call_id!r} is not the call in progress "
            f"({current.call_id if current else 'none'!r})",
        )
    return current


def _gate(state: RunSnapshot, event: GateVerdict, policies: Policies) -> Decision | Rejection:
    call = _current_call(state, event.call_id)
    if isinstance(call, Rejection):
        return call
    if not isinstance(call.status, CallRequested) or not isinstance(state.state, Running):
        return Rejection(
            Rule.UNEXPECTED_INPUT, f"can't gate call {call.call_id!r}: it is not Requested"
        )
    batch = state.open_batch
    assert batch is not None
    verdict = event.verdict
    match verdict:
        case Allow():
            new = _replace(batch, call, CallExecuting(1))
            return settle(state, new, policies, follow_up=(execute_effect(call, 1),))
        case Block():
            result = ToolResult(ResultKind.BLOCKED, verdict.reason)
            return settle(state, _replace(batch, call, CallCompleted(0, result)), policies)
        case Supply():
            result = ToolResult(ResultKind.SUPPLIED, verdict.value)
            return settle(state, _replace(batch, call, CallCompleted(0, result)), policies)
        case RequireWait():
            if verdict.kind in (WaitKind.DELEGATION,):
                return Rejection(
                    Rule.EDGE_CONDITION, "a gate cannot start a delegation wait; tools delegate"
                )
            wait = Wait(
                verdict.kind, verdict.ticket_id, due_at=verdict.due_at, expires_at=verdict.expires_at
            )
            return _suspend(state, batch, call, CallAwaiting(0, wait), policies)
        case _:
            assert_never(verdict)


def _suspend(
    state: RunSnapshot,
    batch: ActiveToolBatch,
    call: ToolCall,
    status: CallAwaiting,
    policies: Policies,
) -> Decision | Rejection:
    ticket_id = status.wait.correlation
    if ticket_id in state.tickets_used:
        return Rejection(Rule.TICKET_REUSED, f"ticket {ticket_id!r} was already used")
    ticket = ResumeTicket(ticket_id, status.wait.kind, call.call_id)
    return settle(
        state,
        _replace(batch, call, status),
        policies,
        disposition=Awaiting(ticket),
        follow_up=(NotifyWait(ticket, status.wait),),
    )


def _tool_finished(state: RunSnapshot, event: ToolFinished, policies: Policies) -> Decision | Rejection:
    call = _current_call(state, event.call_id)
    if isinstance(call, Rejection):
        return call
    if not isinstance(call.status, CallExecuting) or call.status.attempt != event.attempt:
        return Rejection(
            Rule.UNEXPECTED_INPUT,
            f"call {call.call_id!r} is not Executing attempt {event.attempt}",
        )
    batch = state.open_batch
    assert batch is not None
    attempt = event.attempt
    outcome = event.outcome
    after_tool = (RunHook(Hook.AFTER_TOOL, call.call_id),)
    decision: Decision | Rejection
    match outcome:
        case ToolOutput():
            status: CallStatus = CallCompleted(attempt, ToolResult(ResultKind.OUTPUT, outcome.value))
            decision = settle(state, _replace(batch, call, status), policies)
        case ToolFailure():
            retry = policies.for_tool(call.tool).retry
            if outcome.retryable and attempt < retry.max_attempts:
                failed = Event(
                    "attempt_failed",
                    {"call_id": call.call_id, "attempt": attempt, "error": outcome.error},
                )
                decision = settle(
                    state,
                    _replace(batch, call, CallExecuting(attempt + 1)),
                    policies,
                    events=(failed,),
                    follow_up=(execute_effect(call, attempt + 1),),
                )
            else:
                status = CallCompleted(attempt, ToolResult(ResultKind.ERROR, outcome.error))
                decision = settle(state, _replace(batch, call, status), policies)
        case ToolDelegated():
            wait = Wait(WaitKind.DELEGATION, outcome.ticket_id, child=outcome.child)
            decision = _suspend(state, batch, call, CallAwaiting(attempt, wait), policies)
        case ToolScheduled():
            wait = Wait(WaitKind.SCHEDULED, outcome.ticket_id, due_at=outcome.due_at)
            decision = _suspend(state, batch, call, CallAwaiting(attempt, wait), policies)
        case ToolOutcomeLost():
            status = CallIndeterminate(attempt, IndeterminateReason.OUTCOME_UNKNOWN)
            decision = settle(state, _replace(batch, call, status), policies)
        case _:
            assert_never(outcome)
    if isinstance(decision, Rejection):
        return decision
    return Decision(decision.state, after_tool + decision.effects)


def _status(state: RunSnapshot, event: StatusReport, policies: Policies) -> Decision | Rejection:
    call = _current_call(state, event.call_id)
    if isinstance(call, Rejection):
        return call
    if not isinstance(call.status, CallExecuting) or call.status.attempt != event.attempt:
        return Rejection(
            Rule.UNEXPECTED_INPUT, f"call {call.call_id!r} is not Executing attempt {event.attempt}"
        )
    batch = state.open_batch
    assert batch is not None
    attempt = event.attempt
    match event.status:
        case OperationStatus.DONE:
            status: CallStatus = CallCompleted(attempt, ToolResult(ResultKind.OUTPUT, event.value))
            return settle(state, _replace(batch, call, status), policies)
        case OperationStatus.FAILED:
            status = CallCompleted(attempt, ToolResult(ResultKind.ERROR, event.value))
            return settle(state, _replace(batch, call, status), policies)
        case OperationStatus.RUNNING:
            if event.park_ticket_id is not None and event.due_at is not None:
                wait = Wait(WaitKind.SCHEDULED, event.park_ticket_id, due_at=event.due_at)
                return _suspend(state, batch, call, CallAwaiting(attempt, wait), policies)
            query = QueryStatus(call.call_id, call.tool, call.operation_id, attempt)
            return Decision(state, (query,))
        case OperationStatus.NOT_FOUND:
            new = _replace(batch, call, CallExecuting(attempt + 1))
            return settle(state, new, policies, follow_up=(execute_effect(call, attempt + 1),))
        case OperationStatus.UNKNOWN:
            status = CallIndeterminate(attempt, IndeterminateReason.OUTCOME_UNKNOWN)
            return settle(state, _replace(batch, call, status), policies)
        case _:
            assert_never(event.status)


def _applied_before(state: RunSnapshot, command: ResumeCommand) -> Rejection | None:
    digest = command.digest()
    for applied in state.resumes_applied:
        if hmac.compare_digest(applied.ticket_id.encode(), command.ticket_id.encode()):
            if hmac.compare_digest(applied.digest.encode(), digest.encode()):
                return Rejection(
                    Rule.ALREADY_APPLIED, f"this command for ticket {command.ticket_id!r} was already applied"
                )
            return Rejection(
                Rule.STALE_COMMAND,
                f"ticket {command.ticket_id!r} was already resumed by a different command",
            )
    return None


def check_resume(state: RunSnapshot, command: ResumeCommand) -> Rejection | None:
    """Pre-validate a resume against committed facts (I14), without applying it."""
    if command.run_id != state.run_id:
        return Rejection(
            Rule.WRONG_RUN, f"command for run {command.run_id!r} sent to run {state.run_id!r}"
        )
    try:
        command.digest()
    except (TypeError, ValueError) as error:  # not JSON, or not valid Unicode
        return Rejection(Rule.PAYLOAD_TYPE, f"the command has no canonical JSON form: {error}")
    earlier = _applied_before(state, command)
    if earlier is not None:
        return earlier
    if isinstance(state.state, Ended):
        return Rejection(
            Rule.RUN_ENDED, f"run {state.run_id!r} is Ended ({state.state.cause.kind.value})"
        )
    if not isinstance(state.state, Awaiting):
        if command.ticket_id in state.tickets_used:
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
            f"a {ticket.wait.value!r} wait does not take a {type(command.payload).__name__} payload",
        )
    return None


def _resume(state: RunSnapshot, command: ResumeCommand, policies: Policies) -> Decision | Rejection:
    refused = check_resume(state, command)
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
    match payload:
        case Approve() | TimerFired():
            new = _replace(batch, call, CallExecuting(attempt + 1))
            return settle(
                state, new, policies, events=(resumed,), follow_up=(execute_effect(call, attempt + 1),)
            )
        case ProvideInput():
            new = _replace(batch, call, CallExecuting(attempt + 1))
            effect = execute_effect(call, attempt + 1, payload.value)
            return settle(state, new, policies, events=(resumed,), follow_up=(effect,))
        case Deny():
            status: CallStatus = CallCompleted(attempt, ToolResult(ResultKind.DENIED, payload.reason))
            return settle(state, _replace(batch, call, status), policies, events=(resumed,))
        case ExternalResult() | DelegationResult():
            status = CallCompleted(attempt, ToolResult(ResultKind.EXTERNAL, payload.value))
            return settle(state, _replace(batch, call, status), policies, events=(resumed,))
        case _:
            assert_never(payload)


def _deadline(state: RunSnapshot, event: DeadlinePassed, policies: Policies) -> Decision | Rejection:
    if not isinstance(state.state, Awaiting):
        return Rejection(Rule.RUN_NOT_AWAITING, f"run {state.run_id!r} is not Awaiting")
    ticket = state.state.ticket
    if not hmac.compare_digest(ticket.ticket_id.encode(), event.ticket_id.encode()):
        return Rejection(Rule.TICKET_MISMATCH, "the ticket id does not match the committed ticket")
    batch = state.open_batch
    call = batch.call(ticket.call_id) if batch else None
    assert call is not None and isinstance(call.status, CallAwaiting)
    expires_at = call.status.wait.expires_at
    if ticket.wait is not WaitKind.APPROVAL or expires_at is None or event.now < expires_at:
        return Rejection(
            Rule.NOT_EXPIRED, f"ticket {ticket.ticket_id!r} has no approval deadline before {event.now}"
        )
    deny = Deny({"expired_at": expires_at})
    command = ResumeCommand(state.run_id, ticket.ticket_id, ticket.wait, deny)
    return _apply_resume(state, ticket, deny, command.to_json(), command.digest(), policies)


def _end_request(state: RunSnapshot, event: EndRequest) -> Decision | Rejection:
    if isinstance(state.state, Awaiting) and event.cause.kind not in (
        EndCauseKind.CANCELLED,
        EndCauseKind.STOPPED,
        EndCauseKind.FAILED,
    ):
        return Rejection(
            Rule.AWAITING_END,
            f"an Awaiting run ends only by cancel, stop or failure, not {event.cause.kind.value!r}",
        )
    return end_run(state, state.batch, event.cause)


def redeliver(state: RunSnapshot) -> Decision:
    """What an Ended Run does when asked to continue: redeliver its terminus, nothing else."""
    assert isinstance(state.state, Ended)
    return Decision(state, (DeliverTerminus(state.state.cause, redelivery=True),))


__all__ = [
    "KernelBug",
    "build_commit",
    "check_resume",
    "decide",
    "end_run",
    "execute_effect",
    "redeliver",
    "settle",
    "RequestInference",
    "QueryStatus",
]
