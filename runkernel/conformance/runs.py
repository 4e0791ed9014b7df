"""Legal commit sequences for the store contract, made by driving the kernel itself, so
the suite never hands a store a commit the kernel would not make."""

from __future__ import annotations

from runkernel.kernel.decide import decide
from runkernel.kernel.policies import Policies
from runkernel.kernel.protocol import (
    Activate,
    Allow,
    Decision,
    GateVerdict,
    InferenceResult,
    Input,
    ProposedCall,
    RequireWait,
    ToolFinished,
    ToolOutput,
)
from runkernel.kernel.rules import Rejection
from runkernel.kernel.state import Message, RunSnapshot, ThreadCommit
from runkernel.kernel.values import EndCauseKind, Role, WaitKind


def step(state: RunSnapshot | None, event: Input, policies: Policies = Policies()) -> Decision:
    """``decide()`` that must accept."""
    verdict = decide(state, event, policies, self_check=True)
    assert not isinstance(verdict, Rejection), str(verdict)
    return verdict


def activate(thread_id: str, run_id: str, expected_version: int = 0, app: str | None = None) -> Decision:
    """The activation of ``run_id`` in ``thread_id`` with one user message."""
    return step(None, Activate(thread_id, run_id, expected_version, (Message(Role.USER, "task"),), app))


def text_run(
    thread_id: str, run_id: str, steps: int, expected_version: int = 0, app: str | None = None
) -> list[ThreadCommit]:
    """Activation, ``steps - 1`` text steps that continue, and a final text that ends it."""
    decision = activate(thread_id, run_id, expected_version, app)
    commits = [decision.commit]
    for index in range(1, steps + 1):
        end = EndCauseKind.COMPLETED if index == steps else None
        decision = step(decision.state, InferenceResult(f"text {index}", end=end))
        commits.append(decision.commit)
    return [c for c in commits if c is not None]


def awaiting_run(
    thread_id: str,
    run_id: str,
    ticket_id: str,
    *,
    app: str | None = None,
    expires_at: str | None = None,
    kind: WaitKind = WaitKind.APPROVAL,
    due_at: str | None = None,
) -> tuple[list[ThreadCommit], RunSnapshot]:
    """A run whose single call waits (for approval, unless ``kind`` says) under
    ``ticket_id``; an approval may have a deadline, a scheduled wait a due time."""
    decision = activate(thread_id, run_id, app=app)
    commits = [decision.commit]
    call = ProposedCall(f"{run_id}-c1", "pay", {"amount": 1}, f"{run_id}-op1")
    decision = step(decision.state, InferenceResult("paying", (call,), f"{run_id}-b1"))
    commits.append(decision.commit)
    wait = RequireWait(kind, ticket_id, expires_at=expires_at, due_at=due_at)
    decision = step(decision.state, GateVerdict(call.call_id, wait))
    commits.append(decision.commit)
    return [c for c in commits if c is not None], decision.state


def tool_run(thread_id: str, run_id: str) -> list[ThreadCommit]:
    """A run with one tool call that completes, then a text answer that ends it."""
    decision = activate(thread_id, run_id)
    commits = [decision.commit]
    call = ProposedCall(f"{run_id}-c1", "lookup", {"q": "x"}, f"{run_id}-op1")
    for event in (
        InferenceResult("looking up", (call,), f"{run_id}-b1"),
        GateVerdict(call.call_id, Allow()),
        ToolFinished(call.call_id, 1, ToolOutput("found")),
        InferenceResult("the answer", end=EndCauseKind.COMPLETED),
    ):
        decision = step(decision.state, event)
        commits.append(decision.commit)
    return [c for c in commits if c is not None]
