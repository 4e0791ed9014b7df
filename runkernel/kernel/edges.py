"""The two transition tables, declared once.

Everything else enumerates these tables: commit validation classifies each change by
looking it up here, ``runkernel.specs`` proves them equal to the python-statemachine
declarations, and the spec export prints them. A pair of phases that is not a key of
a table is not an edge of the machine.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from typing import assert_never

from attrs import frozen

from runkernel.kernel.state import (
    Awaiting,
    CallAwaiting,
    CallCompleted,
    CallExecuting,
    CallIndeterminate,
    CallRequested,
    CallStatus,
    Ended,
    Running,
    RunState,
)
from runkernel.kernel.values import IndeterminateReason, ResultKind, WaitKind


class RunPhase(enum.Enum):
    """States of the Run machine."""

    RUNNING = "Running"
    AWAITING = "Awaiting"
    ENDED = "Ended"


class CallPhase(enum.Enum):
    """States of the Tool-call machine (Finalized is the batch barrier)."""

    REQUESTED = "Requested"
    EXECUTING = "Executing"
    AWAITING = "Awaiting"
    COMPLETED = "Completed"
    INDETERMINATE = "Indeterminate"
    FINALIZED = "Finalized"


class RunEdge(enum.Enum):
    """Edges of the Run machine; values are the spec's event ids."""

    ACTIVATE = "run_activation"
    PROGRESS = "commit_progress"
    SUSPEND = "commit_resume_ticket"
    RESUME = "validated_resume_command"
    END = "commit_end_cause"
    ABORT_WAIT = "cancel_stop_or_failure"


class CallEdge(enum.Enum):
    """Edges of the Tool-call machine; values are the spec's event ids."""

    CREATE = "complete_batch_committed"
    FIRST_ATTEMPT = "first_attempt_committed"
    RETRY = "retry_under_fixed_policy"
    GATE_WAIT = "gate_or_external_input"
    TOOL_WAIT = "delegation_or_scheduled_wait"
    RESUME = "matching_typed_resume"
    BLOCK_OR_SUPPLY = "immediate_block_or_supplied_result"
    TOOL_OUTPUT = "tool_output_committed"
    DENY_OR_EXTERNAL = "deny_or_externally_completed"
    RUN_ENDED_FIRST = "run_ended_first"
    OUTCOME_UNSAFE = "outcome_cannot_be_determined_safely"
    OWNER_ENDED = "owning_run_ended"
    FINALIZE = "every_call_terminal"


class AttemptRule(enum.Enum):
    """How an edge moves the attempt counter (invariant I6)."""

    FIRST = "becomes 1"
    INCREMENT = "+1"
    UNCHANGED = "unchanged"
    ZERO = "stays 0"


@frozen
class RunEdgeRule:
    """One edge of the Run machine. ``source`` None is the ``[*]``."""

    edge: RunEdge
    source: RunPhase | None
    target: RunPhase
    label: str


@frozen
class CallEdgeRule:
    """One edge of the Tool-call machine with the conditions of its table (docs/spec.md)."""

    edge: CallEdge
    source: CallPhase | None
    target: CallPhase
    label: str
    when: str
    attempt: AttemptRule | None = None
    waits: frozenset[WaitKind] = frozenset()
    results: frozenset[ResultKind] = frozenset()
    reasons: frozenset[IndeterminateReason] = frozenset()
    needs_run_end: bool = False
    needs_resume: bool = False


#: The Run machine's edges, declared once: validation, the spec and its export read them.
RUN_TABLE: tuple[RunEdgeRule, ...] = (
    RunEdgeRule(RunEdge.ACTIVATE, None, RunPhase.RUNNING, "RunActivation"),
    RunEdgeRule(
        RunEdge.PROGRESS, RunPhase.RUNNING, RunPhase.RUNNING, "committed Step or ToolBatch progress"
    ),
    RunEdgeRule(RunEdge.SUSPEND, RunPhase.RUNNING, RunPhase.AWAITING, "commit ResumeTicket"),
    RunEdgeRule(RunEdge.RESUME, RunPhase.AWAITING, RunPhase.RUNNING, "validated ResumeCommand"),
    RunEdgeRule(RunEdge.END, RunPhase.RUNNING, RunPhase.ENDED, "commit EndCause"),
    RunEdgeRule(RunEdge.ABORT_WAIT, RunPhase.AWAITING, RunPhase.ENDED, "cancel, stop or failure"),
)

#: Run phases with an edge to the final ``[*]``.
RUN_FINAL_PHASES = frozenset({RunPhase.ENDED})

_W = WaitKind
_R = ResultKind
_I = IndeterminateReason

#: The Tool-call machine's edges with their conditions, declared once.
CALL_TABLE: tuple[CallEdgeRule, ...] = (
    CallEdgeRule(
        CallEdge.CREATE, None, CallPhase.REQUESTED, "complete batch committed",
        "the assistant tool-use message and the complete batch are committed",
        attempt=AttemptRule.ZERO,
    ),
    CallEdgeRule(
        CallEdge.FIRST_ATTEMPT, CallPhase.REQUESTED, CallPhase.EXECUTING,
        "first executor attempt committed", "first executor attempt committed",
        attempt=AttemptRule.FIRST,
    ),
    CallEdgeRule(
        CallEdge.RETRY, CallPhase.EXECUTING, CallPhase.EXECUTING, "retry under a fixed policy",
        "retry under the fixed retry policy, or replay on recovery",
        attempt=AttemptRule.INCREMENT,
    ),
    CallEdgeRule(
        CallEdge.GATE_WAIT, CallPhase.REQUESTED, CallPhase.AWAITING, "gate or external input",
        "gate or external input; the Run enters Awaiting in the same commit",
        attempt=AttemptRule.ZERO,
        waits=frozenset({_W.APPROVAL, _W.INPUT, _W.EXTERNAL, _W.SCHEDULED}),
    ),
    CallEdgeRule(
        CallEdge.TOOL_WAIT, CallPhase.EXECUTING, CallPhase.AWAITING,
        "delegation or scheduled wait",
        "the tool delegates or schedules a wait; the Run enters Awaiting in the same commit",
        attempt=AttemptRule.UNCHANGED,
        waits=frozenset({_W.DELEGATION, _W.SCHEDULED}),
    ),
    CallEdgeRule(
        CallEdge.RESUME, CallPhase.AWAITING, CallPhase.EXECUTING, "matching typed resume",
        "a matching typed resume is committed", attempt=AttemptRule.INCREMENT,
        needs_resume=True,
    ),
    CallEdgeRule(
        CallEdge.BLOCK_OR_SUPPLY, CallPhase.REQUESTED, CallPhase.COMPLETED,
        "immediate block or supplied result", "immediate block or supplied result",
        attempt=AttemptRule.ZERO, results=frozenset({_R.BLOCKED, _R.SUPPLIED}),
    ),
    CallEdgeRule(
        CallEdge.TOOL_OUTPUT, CallPhase.EXECUTING, CallPhase.COMPLETED, "ToolOutput committed",
        "ToolOutput committed", attempt=AttemptRule.UNCHANGED,
        results=frozenset({_R.OUTPUT, _R.ERROR}),
    ),
    CallEdgeRule(
        CallEdge.DENY_OR_EXTERNAL, CallPhase.AWAITING, CallPhase.COMPLETED,
        "deny or externally completed",
        "deny or external completion (a supplied answer), committed as the resume",
        attempt=AttemptRule.UNCHANGED, results=frozenset({_R.DENIED, _R.EXTERNAL}),
        needs_resume=True,
    ),
    CallEdgeRule(
        CallEdge.RUN_ENDED_FIRST, CallPhase.REQUESTED, CallPhase.INDETERMINATE,
        "Run ended first", "the Run ends first", attempt=AttemptRule.ZERO,
        reasons=frozenset({_I.RUN_ENDED}), needs_run_end=True,
    ),
    CallEdgeRule(
        CallEdge.OUTCOME_UNSAFE, CallPhase.EXECUTING, CallPhase.INDETERMINATE,
        "outcome cannot be determined safely", "outcome cannot be determined safely",
        attempt=AttemptRule.UNCHANGED,
        reasons=frozenset({_I.OUTCOME_UNKNOWN, _I.ATTEMPTS_EXHAUSTED}),
    ),
    CallEdgeRule(
        CallEdge.OWNER_ENDED, CallPhase.AWAITING, CallPhase.INDETERMINATE, "owning Run ended",
        "the owning Run ends (run_ended if no attempt started, else outcome_unknown)",
        attempt=AttemptRule.UNCHANGED,
        reasons=frozenset({_I.RUN_ENDED, _I.OUTCOME_UNKNOWN}), needs_run_end=True,
    ),
    CallEdgeRule(
        CallEdge.FINALIZE, CallPhase.COMPLETED, CallPhase.FINALIZED, "every call terminal",
        "every call of the batch is terminal; the batch is marked finalized",
    ),
    CallEdgeRule(
        CallEdge.FINALIZE, CallPhase.INDETERMINATE, CallPhase.FINALIZED, "every call terminal",
        "every call of the batch is terminal; the batch is marked finalized",
    ),
)

#: ``RUN_TABLE`` by (source, target) phase.
RUN_EDGES: Mapping[tuple[RunPhase | None, RunPhase], RunEdgeRule] = {
    (rule.source, rule.target): rule for rule in RUN_TABLE
}
#: ``CALL_TABLE`` by (source, target) phase.
CALL_EDGES: Mapping[tuple[CallPhase | None, CallPhase], CallEdgeRule] = {
    (rule.source, rule.target): rule for rule in CALL_TABLE
}

TERMINAL_PHASES = frozenset({CallPhase.COMPLETED, CallPhase.INDETERMINATE})


# --- the resume payload table (Resume) -----------------------------------


@frozen
class ResumePayloadRule:
    """One row of the resume payload table: which waits a payload answers and which
    edge the resume commit may then apply to the ticket's call.

    ``fields`` are the payload's fields in normal form (a deny always carries
    ``reason``); ``completes_as`` is the result kind of Awaiting->Completed, whose value
    must be the payload's ``value_field``; ``executes`` allows Awaiting->Executing{n+1}.
    """

    payload: str
    waits: frozenset[WaitKind]
    executes: bool
    completes_as: ResultKind | None = None
    value_field: str | None = None

    @property
    def fields(self) -> tuple[str, ...]:
        return (self.value_field,) if self.value_field is not None else ()


RESUME_PAYLOAD_TABLE: tuple[ResumePayloadRule, ...] = (
    ResumePayloadRule("approve", frozenset({_W.APPROVAL}), executes=True),
    ResumePayloadRule(
        "deny", frozenset({_W.APPROVAL}), executes=False, completes_as=_R.DENIED, value_field="reason"
    ),
    ResumePayloadRule(
        "input", frozenset({_W.INPUT}), executes=True, completes_as=_R.EXTERNAL, value_field="value"
    ),
    ResumePayloadRule(
        "external", frozenset({_W.EXTERNAL}), executes=True, completes_as=_R.EXTERNAL, value_field="value"
    ),
    ResumePayloadRule(
        "delegation", frozenset({_W.DELEGATION}), executes=True, completes_as=_R.EXTERNAL, value_field="value"
    ),
    ResumePayloadRule("timer", frozenset({_W.SCHEDULED}), executes=True),
)

RESUME_PAYLOADS: Mapping[str, ResumePayloadRule] = {rule.payload: rule for rule in RESUME_PAYLOAD_TABLE}

#: How each wait kind may complete without running the executor again, read off the
#: payload table: a deny answers an approval; an input, external or delegation answer
#: may be the result; a timer only resumes.
RESULTS_BY_WAIT: Mapping[WaitKind, frozenset[ResultKind]] = {
    wait: frozenset(
        rule.completes_as
        for rule in RESUME_PAYLOAD_TABLE
        if wait in rule.waits and rule.completes_as is not None
    )
    for wait in WaitKind
}


def run_phase(state: RunState) -> RunPhase:
    """The Run machine state of a committed RunState."""
    match state:
        case Running():
            return RunPhase.RUNNING
        case Awaiting():
            return RunPhase.AWAITING
        case Ended():
            return RunPhase.ENDED
        case _:
            assert_never(state)


def call_phase(status: CallStatus) -> CallPhase:
    """The Tool-call machine state of a call status (Finalized is a batch property)."""
    match status:
        case CallRequested():
            return CallPhase.REQUESTED
        case CallExecuting():
            return CallPhase.EXECUTING
        case CallAwaiting():
            return CallPhase.AWAITING
        case CallCompleted():
            return CallPhase.COMPLETED
        case CallIndeterminate():
            return CallPhase.INDETERMINATE
        case _:
            assert_never(status)
