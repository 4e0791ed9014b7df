"""A hand-written legal trace, fed through ``decide`` and ``recover`` input by input: it
offers a place for every mutation of the catalogue in ``trace_mutations.py``, and its
``Script`` builds the states of the kernel regression tests.
"""

from __future__ import annotations

from runkernel.kernel.decide import decide
from runkernel.kernel.policies import (
    Policies,
    RecoveryMode,
    RetryPolicy,
    ToolPolicy,
    ToolRecoveryPolicy,
)
from runkernel.kernel.protocol import (
    Activate,
    Allow,
    Approve,
    Block,
    Decision,
    DelegationResult,
    EndRequest,
    GateVerdict,
    InferenceResult,
    Input,
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
from runkernel.kernel.recover import recover
from runkernel.kernel.state import EndCause, Message, RunSnapshot, ThreadCommit
from runkernel.kernel.values import EndCauseKind, Role, WaitKind


class Script:
    """Feeds scripted inputs to one Run of a Thread and keeps every commit."""

    def __init__(self, thread_id: str, policies: Policies, version: int = 0) -> None:
        self.thread_id = thread_id
        self.policies = policies
        self.version = version
        self.state: RunSnapshot | None = None
        self.commits: list[ThreadCommit] = []

    def _take(self, decision: Decision) -> None:
        if decision.commit is not None:
            self.commits.append(decision.commit)
        self.state = decision.state
        self.version = decision.state.version

    def start(self, run_id: str) -> Script:
        self.state = None
        return self.feed(Activate(self.thread_id, run_id, self.version, (Message(Role.USER, "go"),)))

    def feed(self, *events: Input) -> Script:
        for event in events:
            outcome = decide(self.state, event, self.policies, self_check=True)
            assert isinstance(outcome, Decision), f"{event} refused: {outcome}"
            self._take(outcome)
        return self

    def crash(self) -> Script:
        assert self.state is not None
        self._take(recover(self.state, self.policies).decision)
        return self


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
    a = Script("thread-a", SCRIPT_POLICIES)
    a.start("run-a1").feed(
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
    a.start("run-a2").feed(
        propose_tools("b3", ("c6", "ask_agent"), ("c7", "charge_card")),
        GateVerdict("c6", Allow()),
        ToolFinished("c6", 1, ToolDelegated("ticket-3")),
        ResumeCommand("run-a2", "ticket-3", WaitKind.DELEGATION, DelegationResult("child says hi")),
        GateVerdict("c7", Block("over budget")),
        InferenceResult("done", end=EndCauseKind.COMPLETED),
    )
    b = Script("thread-b", SCRIPT_POLICIES)
    b.start("run-b1").feed(
        propose_tools("b4", ("c8", "charge_card"), ("c9", "search")),
        GateVerdict("c8", Allow()),
    ).crash().feed(
        GateVerdict("c9", Allow()),
        EndRequest(EndCause(EndCauseKind.STOPPED)),
    )
    # interleave: thread b's commits between the two runs of thread a
    return tuple(a.commits[:a_first] + b.commits + a.commits[a_first:])
