"""The one test-data builder, and the store contract's runs built with it.

``Builder`` grows one Thread's committed facts input by input through ``decide`` (each
commit judged as it is built), ``crash()`` continues as ``recover`` says, and
``commit()`` takes a hand-made commit that ``validate_commit`` accepts, for the states
only the judge reaches (a commit no ``decide`` would build). Every test, proof and
benchmark builds its data with it, through ``runkernel.testing`` (which re-exports
it): it lives here because the store contract suite builds its runs with it, and no
library module imports ``runkernel.testing`` (the layers, tests/proofs/test_layers.py).

``text_run``, ``tool_run``, ``awaiting_run`` and ``delegating_run`` are the suite's
fixed runs, for tests of a store's own specifics too.
"""

from __future__ import annotations

from collections.abc import Sequence

import attrs
from attrs import frozen

from runkernel.kernel.decide import decide
from runkernel.kernel.delegation import terminus
from runkernel.kernel.history import NO_HISTORY, RunHistory, commit_keys
from runkernel.kernel.policies import Policies, ToolPolicy
from runkernel.kernel.protocol import (
    Activate,
    Allow,
    ChildEnded,
    Decision,
    Effect,
    GateVerdict,
    InferenceResult,
    Input,
    ProposedCall,
    RequireWait,
    ToolFinished,
    ToolOutput,
)
from runkernel.kernel.recover import recover
from runkernel.kernel.rules import Rejection
from runkernel.kernel.state import (
    EndCause,
    Ended,
    Message,
    ParentCall,
    RunSnapshot,
    ThreadCommit,
    ThreadHead,
)
from runkernel.kernel.validate import NO_TICKETS_SEEN, Accepted, validate_commit
from runkernel.kernel.values import EndCauseKind, JsonValue, Role, WaitKind


def step(
    state: RunSnapshot | None, event: Input, policies: Policies = Policies(), history: RunHistory = NO_HISTORY
) -> Decision:
    """``decide()`` that must accept (with its self-check: an illegal commit raises
    ``KernelBug``); a rejection fails the calling test with the rule it broke."""
    verdict = decide(state, event, policies, history, self_check=True)
    assert not isinstance(verdict, Rejection), f"{type(event).__name__} refused: {verdict}"
    return verdict


def activate(thread_id: str, run_id: str, expected_version: int = 0, app: str | None = None) -> Decision:
    """The activation of ``run_id`` in ``thread_id`` with one user message."""
    return step(None, Activate(thread_id, run_id, expected_version, (Message(Role.USER, "task"),), app))


@frozen
class Builder:
    """One Thread's commits and its current Run's committed state, built input by
    input. A value: each method returns a new Builder, so one set-up branches into
    several tests (``b = Builder("t1").start("r1"); b.feed(x)``, ``b.feed(y)``).

    ``state`` is the current Run's latest state (after the last decision, committed or
    not: an Allow held in a gate round commits nothing), ``history`` that Run's
    committed history, ``head`` the Thread's, ``commits`` every commit in order and
    ``effects`` those of the last decision."""

    thread_id: str
    policies: Policies = Policies()
    head: ThreadHead | None = None
    state: RunSnapshot | None = None
    history: RunHistory = NO_HISTORY
    commits: tuple[ThreadCommit, ...] = ()
    effects: tuple[Effect, ...] = ()

    @property
    def version(self) -> int:
        """The Thread's version (0 before its first commit)."""
        return 0 if self.head is None else self.head.version

    @property
    def snapshot(self) -> RunSnapshot:
        """``state``, which must exist (the current Run was started)."""
        assert self.state is not None, "no Run yet: start() one"
        return self.state

    def start(
        self,
        run_id: str,
        messages: Sequence[Message | str] = ("go",),
        *,
        app: str | None = None,
        parent: ParentCall | None = None,
        app_version: str | None = None,
    ) -> Builder:
        """Activate a new Run of the Thread at its version (user messages given as text
        or ``Message``), of ``app`` at ``app_version``; it becomes the current Run."""
        opened = tuple(Message(Role.USER, m) if isinstance(m, str) else m for m in messages)
        fresh = attrs.evolve(self, state=None, history=NO_HISTORY)
        return fresh.feed(Activate(self.thread_id, run_id, self.version, opened, app, parent, app_version))

    def feed(self, *inputs: Input) -> Builder:
        """``decide`` each input in turn; each must be accepted."""
        built = self
        for event in inputs:
            decision = step(built.state, event, built.policies, built.history)
            built = built._took(decision)
        return built

    def propose(self, *tools: str, first: int = 1, text: str = "using tools", batch_id: str = "b1") -> Builder:
        """Feed an inference result opening a batch of one Requested call per tool, in
        order: call ids ``c{n}``, operations ``op{n}`` and arguments ``{"i": n}``, with
        ``n`` counting from ``first``."""
        calls = tuple(ProposedCall(f"c{n}", tool, {"i": n}, f"op{n}") for n, tool in enumerate(tools, start=first))
        return self.feed(InferenceResult(text, calls, batch_id))

    def crash(self) -> Builder:
        """What a fresh host does after a crash: ``recover`` from the committed state."""
        decision = recover(self.snapshot, self.policies, self_check=True, history=self.history).decision
        return self._took(decision)

    def refused(self, event: Input) -> Rejection:
        """The rejection ``decide`` must give ``event`` here (nothing changes)."""
        verdict = decide(self.state, event, self.policies, self.history)
        assert isinstance(verdict, Rejection), f"{type(event).__name__} was accepted"
        return verdict

    def judge(self, commit: ThreadCommit) -> Accepted | Rejection:
        """``validate_commit``'s verdict on ``commit`` as the next commit of the Thread."""
        return validate_commit(self.head, self.state, commit, self.history, ticket_seen=NO_TICKETS_SEEN)

    def commit(self, commit: ThreadCommit) -> Builder:
        """Append a hand-made commit, which ``validate_commit`` must accept. Only for
        states no ``decide`` builds (the judge's own edges); everything else is fed."""
        verdict = self.judge(commit)
        assert isinstance(verdict, Accepted), f"hand-made commit refused: {verdict}"
        return attrs.evolve(
            self,
            head=verdict.head,
            state=verdict.run,
            history=self.history.plus(verdict.keys),
            commits=self.commits + (commit,),
            effects=(),
        )

    def _took(self, decision: Decision) -> Builder:
        commit = decision.commit
        if commit is None:
            return attrs.evolve(self, state=decision.state, effects=decision.effects)
        active = None if isinstance(commit.disposition, Ended) else commit.run_id
        # a Run's first commit starts its history afresh
        prev = self.state if self.state is not None and self.state.run_id == commit.run_id else None
        return attrs.evolve(
            self,
            head=ThreadHead(commit.thread_id, commit.version, active),
            state=decision.state,
            history=self.history.plus(commit_keys(prev, commit)),
            commits=self.commits + (commit,),
            effects=decision.effects,
        )


def _thread(thread_id: str, expected_version: int, policies: Policies = Policies()) -> Builder:
    """A builder for a Thread whose next commit is at ``expected_version``."""
    head = ThreadHead(thread_id, expected_version, None) if expected_version else None
    return Builder(thread_id, policies, head)


def text_run(
    thread_id: str,
    run_id: str,
    steps: int,
    expected_version: int = 0,
    app: str | None = None,
    *,
    app_version: str | None = None,
) -> list[ThreadCommit]:
    """Activation (of ``app`` at ``app_version``), ``steps - 1`` text steps that
    continue, and a final text that ends it."""
    run = _thread(thread_id, expected_version).start(run_id, ("task",), app=app, app_version=app_version)
    for index in range(1, steps + 1):
        end = EndCauseKind.COMPLETED if index == steps else None
        run = run.feed(InferenceResult(f"text {index}", end=end))
    return list(run.commits)


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
    request: JsonValue = None,
) -> tuple[list[ThreadCommit], RunSnapshot]:
    """A run whose single call waits (for approval, unless ``kind`` says) under
    ``ticket_id``; an approval may have a deadline, a scheduled wait a due time, and the
    hold a ``request`` (committed with the wait). A later Run of a Thread starts at the
    Thread's ``expected_version``."""
    call = ProposedCall(f"{run_id}-c1", "pay", {"amount": 1}, f"{run_id}-op1")
    wait = RequireWait(kind, ticket_id, request, expires_at=expires_at, due_at=due_at)
    run = _thread(thread_id, expected_version).start(run_id, ("task",), app=app).feed(
        InferenceResult("paying", (call,), f"{run_id}-b1"),
        GateVerdict(call.call_id, wait),
    )
    return list(run.commits), run.snapshot


def tool_run(thread_id: str, run_id: str) -> list[ThreadCommit]:
    """A run with one tool call that completes, then a text answer that ends it."""
    call = ProposedCall(f"{run_id}-c1", "lookup", {"q": "x"}, f"{run_id}-op1")
    run = Builder(thread_id).start(run_id, ("task",)).feed(
        InferenceResult("looking up", (call,), f"{run_id}-b1"),
        GateVerdict(call.call_id, Allow()),
        ToolFinished(call.call_id, 1, ToolOutput("found")),
        InferenceResult("the answer", end=EndCauseKind.COMPLETED),
    )
    return list(run.commits)


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
    calls = tuple(
        ProposedCall(call_id, tool, {"topic": call_id}, f"{run_id}-op-{call_id}")
        for call_id, tool in (("d1", "research"), ("d2", "research"), ("o3", "fetch"))
    )
    parent = Builder(thread_id, DELEGATING_POLICIES).start(run_id, ("task",), app=app)
    parent = parent.feed(InferenceResult("", calls, f"{run_id}-b1"), GateVerdict("d1", Allow()))
    assert len(parent.commits) == 2  # an Allow in a group's gate round is held, not committed
    parent = parent.feed(GateVerdict("d2", Allow(), allowed=("d1",)))
    assert parent.snapshot.batch is not None
    delegations = [c.delegation for c in parent.snapshot.batch.calls[:2]]
    activations, ends, termini = [], [], []
    for call_id, child in zip(("d1", "d2"), delegations, strict=True):
        assert child is not None
        parent_call = ParentCall(thread_id, run_id, call_id)
        ran = Builder(child.thread_id).start(child.run_id, (Message(Role.USER, {"topic": call_id}),), app=app,
                                             parent=parent_call)
        ran = ran.feed(InferenceResult(f"answer {call_id}", end=EndCauseKind.COMPLETED))
        activations.append(ran.commits[0])
        ends.append(ran.commits[1])
        termini.append(terminus(child.thread_id, child.run_id, EndCause(EndCauseKind.COMPLETED), f"answer {call_id}"))
    parent = parent.feed(ChildEnded("d2", 1, termini[1]), ChildEnded("d1", 1, termini[0]))
    made = parent.commits
    children = tuple(c.run_id for c in delegations if c is not None)
    assert len(children) == 2
    return DelegatingRun(
        thread_id,
        run_id,
        made[:2],
        made[2],
        (children[0], children[1]),
        (ParentCall(thread_id, run_id, "d1"), ParentCall(thread_id, run_id, "d2")),
        (activations[0], activations[1]),
        (ends[0], ends[1]),
        made[3],
        made[4],
    )


__all__ = [
    "DELEGATING_POLICIES",
    "Builder",
    "DelegatingRun",
    "activate",
    "awaiting_run",
    "delegating_run",
    "step",
    "text_run",
    "tool_run",
]
