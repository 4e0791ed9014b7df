"""A hand-written legal trace, fed through ``decide`` and ``recover`` input by input with
``runkernel.testing.Builder``: it offers a place for every mutation of the catalogue in
``trace_mutations.py``; ``propose_tools`` is the inference result of its tool steps.
"""

from __future__ import annotations

from runkernel.kernel.policies import (
    Policies,
    RecoveryMode,
    RetryPolicy,
    ToolPolicy,
    ToolRecoveryPolicy,
)
from runkernel.kernel.protocol import (
    Allow,
    Approve,
    Block,
    DelegationResult,
    EndRequest,
    GateVerdict,
    InferenceResult,
    OperationStatus,
    ProposedCall,
    RequireWait,
    ResumeCommand,
    StatusReport,
    ToolDelegated,
    ToolFailure,
    ToolFinished,
    ToolOutput,
)
from runkernel.kernel.state import EndCause, ThreadCommit
from runkernel.kernel.values import EndCauseKind, WaitKind
from runkernel.testing import Builder


def propose_tools(batch_id: str, *calls: tuple[str, str]) -> InferenceResult:
    proposed = tuple(ProposedCall(call_id, tool, {"call": call_id}, f"op-{call_id}") for call_id, tool in calls)
    return InferenceResult("using tools", calls=proposed, batch_id=batch_id)


SCRIPT_POLICIES = Policies(
    tools={
        "search": ToolPolicy(ToolRecoveryPolicy(RecoveryMode.REPLAY, 2), RetryPolicy(2)),
        "send_email": ToolPolicy(ToolRecoveryPolicy(RecoveryMode.RECONNECT)),
        "charge_card": ToolPolicy(ToolRecoveryPolicy(RecoveryMode.INDETERMINATE)),
        "ask_agent": ToolPolicy(ToolRecoveryPolicy(RecoveryMode.RECONNECT), sequential_delegation=True),
    }
)


def scripted_trace() -> tuple[ThreadCommit, ...]:
    """A hand-written trace that offers a place for every mutation of the catalogue."""
    a = Builder("thread-a", SCRIPT_POLICIES).start("run-a1").feed(
        propose_tools("b1", ("c1", "search"), ("c2", "send_email"), ("c3", "charge_card")),
        GateVerdict("c1", Allow()),
        ToolFinished("c1", 1, ToolFailure("flaky", retryable=True)),
        ToolFinished("c1", 2, ToolOutput("found")),
        GateVerdict("c2", RequireWait(WaitKind.APPROVAL, "ticket-1", expires_at="2030-01-01T00:00:00Z")),
        ResumeCommand("run-a1", "ticket-1", WaitKind.APPROVAL, Approve()),
    ).crash().feed(
        StatusReport("c2", 1, OperationStatus.DONE, "sent"),
        GateVerdict("c3", Allow()),
        ToolFinished("c3", 1, ToolOutput("charged")),
        InferenceResult("thinking"),
        propose_tools("b2", ("c4", "search"), ("c5", "search")),
        GateVerdict("c4", RequireWait(WaitKind.INPUT, "ticket-2")),
        EndRequest(EndCause(EndCauseKind.CANCELLED)),
    )
    a_first = len(a.commits)
    a = a.start("run-a2").feed(
        propose_tools("b3", ("c6", "ask_agent"), ("c7", "charge_card")),
        GateVerdict("c6", Allow()),
        ToolFinished("c6", 1, ToolDelegated("ticket-3")),
        ResumeCommand("run-a2", "ticket-3", WaitKind.DELEGATION, DelegationResult("child says hi")),
        GateVerdict("c7", Block("over budget")),
        InferenceResult("done", end=EndCauseKind.COMPLETED),
    )
    b = Builder("thread-b", SCRIPT_POLICIES).start("run-b1").feed(
        propose_tools("b4", ("c8", "charge_card"), ("c9", "search")),
        GateVerdict("c8", Allow()),
    ).crash().feed(
        GateVerdict("c9", Allow()),
        EndRequest(EndCause(EndCauseKind.STOPPED)),
    )
    # interleave: thread b's commits between the two runs of thread a
    return a.commits[:a_first] + b.commits + a.commits[a_first:]
