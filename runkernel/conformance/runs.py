"""Legal commit sequences for the store contract, made by driving the kernel itself, so
the suite never hands a store a commit the kernel would not make."""

from __future__ import annotations

from attrs import frozen

from runkernel.kernel.decide import decide
from runkernel.kernel.delegation import terminus
from runkernel.kernel.policies import Policies, ToolPolicy
from runkernel.kernel.protocol import (
    Activate,
    Allow,
    ChildEnded,
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
from runkernel.kernel.state import EndCause, Message, ParentCall, RunSnapshot, ThreadCommit
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
    expected_version: int = 0,
) -> tuple[list[ThreadCommit], RunSnapshot]:
    """A run whose single call waits (for approval, unless ``kind`` says) under
    ``ticket_id``; an approval may have a deadline, a scheduled wait a due time. A later
    Run of a Thread starts at the Thread's ``expected_version``."""
    decision = activate(thread_id, run_id, expected_version, app=app)
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


#: the tools of ``delegating_run``: one terminal-only delegation, one ordinary tool
DELEGATING_POLICIES = Policies(tools={"research": ToolPolicy(terminal_only_delegation=True), "fetch": ToolPolicy()})


@frozen
class DelegatingRun:
    """A parent whose batch holds two concurrent delegations (``d1``, ``d2``) and an
    ordinary call (``o3``), and its two children, as commits in the order a store gets
    them: ``opened`` (activation, batch: not quiet, the group is still to start),
    ``quiet`` (d1 and d2 start together: the parent waits only for its children), each child's
    ``activations`` and ``child_ends`` (index 0 for d1), ``second_done`` (d2 Completed
    with its child's terminus: quiet again, for d1 alone) and ``first_done`` (d1
    Completed: o3 may start, so the parent is no longer quiet)."""

    thread_id: str
    run_id: str
    opened: tuple[ThreadCommit, ...]
    quiet: ThreadCommit
    children: tuple[str, str]
    parents: tuple[ParentCall, ParentCall]
    activations: tuple[ThreadCommit, ThreadCommit]
    child_ends: tuple[ThreadCommit, ThreadCommit]
    second_done: ThreadCommit
    first_done: ThreadCommit


def delegating_run(thread_id: str, run_id: str, *, app: str | None = None) -> DelegatingRun:
    """The commits of a parent with two concurrent delegations and its children (see
    ``DelegatingRun``); the children are activated with the parent's ``app``."""
    policies = DELEGATING_POLICIES
    made: list[ThreadCommit] = []

    def commit(decision: Decision) -> Decision:
        assert decision.commit is not None
        made.append(decision.commit)
        return decision

    decision = commit(activate(thread_id, run_id, app=app))
    calls = tuple(
        ProposedCall(call_id, tool, {"topic": call_id}, f"{run_id}-op-{call_id}")
        for call_id, tool in (("d1", "research"), ("d2", "research"), ("o3", "fetch"))
    )
    decision = commit(step(decision.state, InferenceResult("", calls, f"{run_id}-b1"), policies))
    held = step(decision.state, GateVerdict("d1", Allow()), policies)
    assert held.commit is None  # an Allow in a group's gate round is held, not committed
    decision = commit(step(held.state, GateVerdict("d2", Allow(), allowed=("d1",)), policies))
    parent = decision.state
    assert parent.batch is not None
    delegations = [c.delegation for c in parent.batch.calls[:2]]
    activations, ends, termini = [], [], []
    for call_id, child in zip(("d1", "d2"), delegations, strict=True):
        assert child is not None
        parent_call = ParentCall(thread_id, run_id, call_id)
        opened = step(
            None, Activate(child.thread_id, child.run_id, 0, (Message(Role.USER, {"topic": call_id}),), app, parent_call)
        )
        ended = step(opened.state, InferenceResult(f"answer {call_id}", end=EndCauseKind.COMPLETED))
        assert opened.commit is not None and ended.commit is not None
        activations.append(opened.commit)
        ends.append(ended.commit)
        termini.append(terminus(child.thread_id, child.run_id, EndCause(EndCauseKind.COMPLETED), f"answer {call_id}"))
    decision = commit(step(decision.state, ChildEnded("d2", 1, termini[1]), policies))
    decision = commit(step(decision.state, ChildEnded("d1", 1, termini[0]), policies))
    children = tuple(c.run_id for c in delegations if c is not None)
    assert len(children) == 2
    return DelegatingRun(
        thread_id,
        run_id,
        tuple(made[:2]),
        made[2],
        (children[0], children[1]),
        (ParentCall(thread_id, run_id, "d1"), ParentCall(thread_id, run_id, "d2")),
        (activations[0], activations[1]),
        (ends[0], ends[1]),
        made[3],
        made[4],
    )
