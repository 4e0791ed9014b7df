"""``decide(state, input)``: the pure driver of one Run.

Given the latest committed snapshot and one input, it returns the next state and the
effects to carry out, or a Rejection that changes nothing. The store judges every
commit it emits; with ``self_check`` (tests, simulator, model checker) ``decide``
judges them too before they leave, and an illegal one raises ``KernelBug``.

Why this module is long: it is the kernel's one transition table. Each input kind that
acts on a Running Run (an inference result, a tool's outcome, a status report, an end
request, a child's end) has its handler here, next to the dispatch, so the whole of
"what may happen next" reads in one place beside the spec's input table
(``tests/specs/test_spec_decide_input_table.py``). What several handlers share already lives
apart: commit building (``planning``), the gate (``gate``), resumes and deadlines
(``resume``), delegations (``delegation``) and the effect plan (``effects_plan``).
"""

from __future__ import annotations

from typing import assert_never

import attrs

from runkernel.kernel.delegation import executing_delegations, running_group
from runkernel.kernel.effects_plan import next_step_effects
from runkernel.kernel.gate import gate
from runkernel.kernel.history import NO_HISTORY, History
from runkernel.kernel.planning import (
    KernelBug,
    build_commit,
    check_decision,
    end_run,
    execute_effect,
    redeliver,
    replace_status,
    settle,
    suspend,
)
from runkernel.kernel.policies import Policies
from runkernel.kernel.protocol import (
    Activate,
    Block,
    ChildEnded,
    Commit,
    DeadlinePassed,
    Decision,
    EndRequest,
    GateVerdict,
    Hook,
    InferenceResult,
    Input,
    OperationStatus,
    QueryStatus,
    RequireWait,
    ResumeCommand,
    RunGate,
    RunHook,
    StatusReport,
    Supply,
    ToolDelegated,
    ToolFailure,
    ToolFinished,
    ToolOutcomeLost,
    ToolOutput,
    ToolScheduled,
)
from runkernel.kernel.resume import check_resume, deadline, resume
from runkernel.kernel.rules import Rejection, Rule
from runkernel.kernel.state import (
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
    Running,
    RunSnapshot,
    ThreadCommit,
    ThreadHead,
    ToolCall,
    ToolResult,
    ToolUse,
    Wait,
    has_unknown_outcome,
    is_concurrent_delegation,
)
from runkernel.kernel.validate import NO_TICKETS_SEEN, validate_commit
from runkernel.kernel.values import (
    EndCauseKind,
    IndeterminateReason,
    JsonValue,
    ResultKind,
    Role,
    WaitKind,
    json_problem,
)


def decide(
    state: RunSnapshot | None,
    event: Input,
    policies: Policies = Policies(),
    history: History = NO_HISTORY,
    *,
    self_check: bool = False,
) -> Decision | Rejection:
    """The next committed state and effects for ``event``, or a typed rejection.

    ``history`` answers what the Run committed before its snapshot (used tickets,
    closed batches, applied resumes); the caller keeps it up to date with each
    commit's keys (``Accepted.keys``) or reads it from its store. ``self_check``
    judges every emitted commit with ``validate_commit`` (raising ``KernelBug``).
    """
    outcome = _decide(state, event, policies, history)
    if self_check and state is not None and isinstance(outcome, Decision):
        return check_decision(state, history, outcome)
    return outcome


def _decide(
    state: RunSnapshot | None, event: Input, policies: Policies, history: History
) -> Decision | Rejection:
    problem = json_problem(_carried_values(event))
    if problem is not None and not isinstance(event, ResumeCommand):
        return Rejection(Rule.UNEXPECTED_INPUT, f"{type(event).__name__} carries a value that is not JSON: {problem}")
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
        return resume(state, event, policies, history)
    if isinstance(state.state, Ended):
        return Rejection(
            Rule.RUN_ENDED,
            f"can't handle {type(event).__name__}: run {state.run_id!r} is Ended "
            f"({state.state.cause.kind.value})",
        )
    match event:
        case InferenceResult():
            return _inference(state, event, policies, history)
        case GateVerdict():
            return gate(state, event, policies, history)
        case ToolFinished():
            return _tool_finished(state, event, policies, history)
        case StatusReport():
            return _status(state, event, policies)
        case DeadlinePassed():
            return deadline(state, event, policies)
        case EndRequest():
            return _end_request(state, event)
        case ChildEnded():
            return _child_ended(state, event, policies)
        case _:
            assert_never(event)



def _carried_values(event: Input) -> list[JsonValue]:
    """The JSON values an input would put into committed state."""
    match event:
        case Activate():
            return [[m.content, [u.arguments for u in m.tool_calls or ()]] for m in event.messages]
        case InferenceResult():
            staged = [] if event.staged is None else [event.staged.value]
            return [event.content, [c.arguments for c in event.calls], staged]
        case GateVerdict():
            verdict = event.verdict
            if isinstance(verdict, Block):
                return [verdict.reason]
            if isinstance(verdict, Supply):
                return [verdict.value]
            if isinstance(verdict, RequireWait):
                return [verdict.request]
            return []
        case ToolFinished():
            outcome = event.outcome
            if isinstance(outcome, ToolOutput):
                return [outcome.value, event.reaction]
            if isinstance(outcome, ToolFailure):
                return [outcome.error, event.reaction]
            return [event.reaction]
        case StatusReport():
            return [event.value]
        case EndRequest():
            error = event.cause.error
            termini = [t.terminus for t in event.child_termini]
            return termini if error is None else [error.type, error.message, termini]
        case ChildEnded():
            return [event.terminus]
        case ResumeCommand() | DeadlinePassed():
            return []  # resume commands are checked whole, with their digest
        case _:
            assert_never(event)


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
        app=event.app,
        parent=event.parent,
        app_version=event.app_version,
    )
    head = (
        ThreadHead(event.thread_id, event.expected_version, None)
        if event.expected_version
        else None
    )
    # an activation commits Running, never a ticket: no other Run's tickets matter
    verdict = validate_commit(head, None, commit, ticket_seen=NO_TICKETS_SEEN)
    if isinstance(verdict, Rejection):
        return verdict  # the commit holds the input's messages as given: refuse the input
    return Decision(verdict.run, (Commit(commit),) + next_step_effects(verdict.run))


def _inference(
    state: RunSnapshot, event: InferenceResult, policies: Policies, history: History
) -> Decision | Rejection:
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
            if end is EndCauseKind.OUTCOME_UNKNOWN:
                return Rejection(
                    Rule.EDGE_CONDITION, "outcome_unknown ends a run on an Indeterminate call, not on text"
                )
            decision = end_run(
                state, None, EndCause(end), messages=(message,), step=step, staged=event.staged
            )
            return Decision(
                decision.state,
                (RunHook(Hook.AFTER_INFERENCE), RunHook(Hook.STEP_END)) + decision.effects,
            )
        commit, after = build_commit(
            state, disposition=Running(), batch=state.batch, messages=(message,), step=step,
            staged=event.staged,
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
    if history.batch_closed(event.batch_id) or (
        state.batch is not None and state.batch.batch_id == event.batch_id
    ):
        return Rejection(Rule.BATCH_IDENTITY, f"batch id {event.batch_id!r} was already used")
    try:
        calls = tuple(
            ToolCall(
                c.call_id, c.tool, c.arguments, c.operation_id, CallRequested(),
                policy=policies.for_tool(c.tool),  # fixed here for every later attempt (I11)
            )
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
        state, disposition=Running(), batch=batch, messages=(message,), step=step,
        staged=event.staged,
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


def _child_ended(state: RunSnapshot, event: ChildEnded, policies: Policies) -> Decision | Rejection:
    batch = state.open_batch
    call = batch.call(event.call_id) if batch is not None else None
    if (
        batch is None
        or call is None
        or not is_concurrent_delegation(call)
        or not isinstance(call.status, CallExecuting)
        or call.status.attempt != event.attempt
    ):
        return Rejection(
            Rule.UNEXPECTED_INPUT,
            f"call {event.call_id!r} is not a concurrent delegation Executing attempt {event.attempt}",
        )
    result = ToolResult(ResultKind.OUTPUT, event.terminus)  # the child's terminus (I15)
    return settle(state, replace_status(batch, call, CallCompleted(event.attempt, result)), policies)


def _executing_call(state: RunSnapshot, call_id: str, attempt: int, policies: Policies) -> ToolCall | Rejection:
    """The call in progress, if it is Executing exactly this attempt: the first open
    call, or any Executing member of the current group of concurrent calls (they end in
    any order)."""
    batch = state.open_batch
    running = running_group(batch, policies) if batch is not None else ()
    member = next((c for c in running if c.call_id == call_id), None)
    call = member if member is not None else _current_call(state, call_id)
    if isinstance(call, Rejection):
        return call
    if not isinstance(call.status, CallExecuting) or call.status.attempt != attempt:
        return Rejection(Rule.UNEXPECTED_INPUT, f"call {call_id!r} is not Executing attempt {attempt}")
    return call


def _tool_finished(
    state: RunSnapshot, event: ToolFinished, policies: Policies, history: History
) -> Decision | Rejection:
    call = _executing_call(state, event.call_id, event.attempt, policies)
    if isinstance(call, Rejection):
        return call
    batch = state.open_batch
    assert batch is not None
    attempt = event.attempt
    outcome = event.outcome
    if isinstance(outcome, ToolScheduled) and call.policy_or(policies.for_tool(call.tool)).concurrent:
        return Rejection(
            Rule.EDGE_CONDITION,
            f"call {call.call_id!r} cannot schedule a wait: its tool {call.tool!r} is declared concurrent, "
            "and a concurrent call never moves Executing -> Awaiting",
        )
    after_tool = (RunHook(Hook.AFTER_TOOL, call.call_id),)
    # the reaction is committed with the terminal result, never with a retry or a wait
    ends = attrs.evolve(call, reaction=event.reaction)
    decision: Decision | Rejection
    match outcome:
        case ToolOutput():
            status: CallStatus = CallCompleted(attempt, ToolResult(ResultKind.OUTPUT, outcome.value))
            decision = settle(state, replace_status(batch, ends, status), policies)
        case ToolFailure():
            retry = call.policy_or(policies.for_tool(call.tool)).retry
            if outcome.retryable and attempt < retry.max_attempts:
                failed = Event(
                    "attempt_failed",
                    {"call_id": call.call_id, "attempt": attempt, "error": outcome.error},
                )
                decision = settle(
                    state,
                    replace_status(batch, call, CallExecuting(attempt + 1)),
                    policies,
                    events=(failed,),
                    follow_up=(execute_effect(call, attempt + 1, state.input_for(call.call_id)),),
                )
            else:
                status = CallCompleted(attempt, ToolResult(ResultKind.ERROR, outcome.error))
                decision = settle(state, replace_status(batch, ends, status), policies)
        case ToolDelegated():
            child = call.delegation
            if child is None or child.concurrent:
                return Rejection(
                    Rule.EDGE_CONDITION,
                    f"call {call.call_id!r} cannot delegate: its tool {call.tool!r} is not declared a "
                    "sequential delegation (ToolPolicy(sequential_delegation=True)), so no child is fixed",
                )
            wait = Wait(WaitKind.DELEGATION, outcome.ticket_id, child=child.run_id)
            decision = suspend(state, batch, call, CallAwaiting(attempt, wait), policies, history)
        case ToolScheduled():
            wait = Wait(WaitKind.SCHEDULED, outcome.ticket_id, due_at=outcome.due_at)
            decision = suspend(state, batch, call, CallAwaiting(attempt, wait), policies, history)
        case ToolOutcomeLost():
            status = CallIndeterminate(attempt, IndeterminateReason.OUTCOME_UNKNOWN)
            decision = settle(state, replace_status(batch, ends, status), policies)
        case _:
            assert_never(outcome)
    if isinstance(decision, Rejection):
        return decision
    return Decision(decision.state, after_tool + decision.effects)


def _status(state: RunSnapshot, event: StatusReport, policies: Policies) -> Decision | Rejection:
    call = _executing_call(state, event.call_id, event.attempt, policies)
    if isinstance(call, Rejection):
        return call
    batch = state.open_batch
    assert batch is not None
    attempt = event.attempt
    match event.status:
        case OperationStatus.DONE:
            status: CallStatus = CallCompleted(attempt, ToolResult(ResultKind.OUTPUT, event.value))
            return settle(state, replace_status(batch, call, status), policies)
        case OperationStatus.FAILED:
            status = CallCompleted(attempt, ToolResult(ResultKind.ERROR, event.value))
            return settle(state, replace_status(batch, call, status), policies)
        case OperationStatus.RUNNING:
            query = QueryStatus(call.call_id, call.tool, call.operation_id, attempt)
            return Decision(state, (query,))
        case OperationStatus.NOT_FOUND:
            new = replace_status(batch, call, CallExecuting(attempt + 1))
            again = execute_effect(call, attempt + 1, state.input_for(call.call_id))
            return settle(state, new, policies, follow_up=(again,))
        case OperationStatus.UNKNOWN:
            status = CallIndeterminate(attempt, IndeterminateReason.OUTCOME_UNKNOWN)
            return settle(state, replace_status(batch, call, status), policies)
        case _:
            assert_never(event.status)



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
    if event.cause.kind is EndCauseKind.OUTCOME_UNKNOWN and (
        state.batch is None or not has_unknown_outcome(state.batch)
    ):
        return Rejection(
            Rule.EDGE_CONDITION,
            "the host ends a run as outcome_unknown only when one of its calls is Indeterminate",
        )
    batch = state.batch
    if batch is not None and batch.is_open:
        termini = {t.call_id: t.terminus for t in event.child_termini}
        for running in executing_delegations(batch):
            assert isinstance(running.status, CallExecuting)
            if running.call_id in termini:  # the child's end is already committed
                result = ToolResult(ResultKind.OUTPUT, termini[running.call_id])
                batch = replace_status(batch, running, CallCompleted(running.status.attempt, result))
    # end_run sends a cancel to every child still running
    return end_run(state, batch, event.cause)


__all__ = [
    "KernelBug",
    "build_commit",
    "check_resume",
    "decide",
    "end_run",
    "execute_effect",
    "redeliver",
    "settle",
]
