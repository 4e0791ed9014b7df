"""Commit validation builds a rule's message only when the rule fails (issue 8, item 6)."""

from __future__ import annotations

from runkernel.kernel.decide import decide
from runkernel.kernel.history import RunHistory
from runkernel.kernel.protocol import (
    Activate,
    Allow,
    Decision,
    GateVerdict,
    InferenceResult,
    Input,
    ProposedCall,
    ToolFinished,
    ToolOutput,
)
from runkernel.kernel.rules import Rejection, Rule
from runkernel.kernel.state import Message, RunSnapshot, ThreadCommit, ThreadHead
from runkernel.kernel.validate import NO_TICKETS_SEEN, Accepted, validate_commit
from runkernel.kernel.validate_calls import require
from runkernel.kernel.values import EndCauseKind, Role


class Loud(str):
    """An id that counts how often it is formatted into text."""

    formatted = 0

    def __repr__(self) -> str:
        Loud.formatted += 1
        return super().__repr__()

    def __format__(self, spec: str) -> str:
        Loud.formatted += 1
        return super().__format__(spec)


def _commits() -> list[tuple[RunSnapshot | None, ThreadCommit]]:
    """A Run with two tool steps and a final answer, built with ids that count their
    formatting. (Resume commits are not here: their checks still format eagerly.)"""
    out: list[tuple[RunSnapshot | None, ThreadCommit]] = []
    state: RunSnapshot | None = None
    history = RunHistory()

    def feed(event: Input) -> None:
        nonlocal state, history
        decision = decide(state, event, history=history)
        assert isinstance(decision, Decision) and decision.commit is not None
        out.append((state, decision.commit))
        state = decision.state

    feed(Activate(Loud("thread"), Loud("run"), 0, (Message(Role.USER, "go"),)))
    for n in (1, 2):
        call = ProposedCall(Loud(f"call-{n}"), Loud("tool"), {"n": n}, Loud(f"op-{n}"))
        feed(InferenceResult("use it", (call,), Loud(f"batch-{n}")))
        feed(GateVerdict(call.call_id, Allow()))
        feed(ToolFinished(call.call_id, 1, ToolOutput("ok")))
    feed(InferenceResult("done", end=EndCauseKind.COMPLETED))
    return out


def test_validating_legal_commits_formats_no_message() -> None:
    commits = _commits()
    history = RunHistory()
    Loud.formatted = 0
    for prev, commit in commits:
        head = None if prev is None else ThreadHead(prev.thread_id, prev.version, prev.run_id)
        verdict = validate_commit(head, prev, commit, history, ticket_seen=NO_TICKETS_SEEN)
        assert isinstance(verdict, Accepted), verdict
        history = history.plus(verdict.keys)
    assert Loud.formatted == 0, f"{Loud.formatted} ids formatted while every rule passed"
    # a failing rule does build its message, naming the id
    prev, commit = commits[1]
    assert prev is not None
    reused = validate_commit(ThreadHead(prev.thread_id, prev.version, prev.run_id), prev, commit, history, ticket_seen=NO_TICKETS_SEEN)
    assert isinstance(reused, Rejection) and reused.rule is Rule.BATCH_IDENTITY
    assert Loud.formatted > 0 and "batch-1" in reused.message


def test_require_calls_the_message_only_on_failure() -> None:
    called: list[int] = []

    def message() -> str:
        called.append(1)
        return "broken"

    require(True, Rule.STEP, message)
    assert called == []
    try:
        require(False, Rule.STEP, message)
    except Exception as error:  # Illegal
        assert "broken" in str(getattr(error, "rejection", error))
    assert called == [1]
