"""Committed Run states for the spec-equivalence tests, grown with
``runkernel.testing.Builder``: activated and given a batch through ``decide``
(``activated``, then ``Builder.propose``), then moved call by call by hand-made commits that
``validate_commit`` accepts (the judge's edges, which no single ``decide`` takes): a Run
whose batch holds a call in each phase (``reach``) or in a given Run phase (``run_in``),
and every commit in which a call could take a status (``candidates``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

import attrs

from runkernel.kernel.edges import CallPhase, RunPhase
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
    ResumeTicket,
    RunDisposition,
    Running,
    RunSnapshot,
    ThreadCommit,
    ToolResult,
    TypedError,
    Wait,
)
from runkernel.kernel.validate_resume import payload_for, resumed_event
from runkernel.kernel.values import EndCauseKind, IndeterminateReason, ResultKind, Role, WaitKind
from runkernel.testing import Builder


# --- building committed states by hand ------------------------------------------------

THREAD, RUN = "thread-1", "run-1"
TICKET_OLD, TICKET_NEW = "ticket-old", "ticket-new"
FAILURE = TypedError("ToolCrashed", "gave up")


def cause(kind: EndCauseKind) -> EndCause:
    return EndCause(kind, FAILURE if kind is EndCauseKind.FAILED else None)


def commit_on(
    run: RunSnapshot,
    disposition: RunDisposition,
    batch: ActiveToolBatch | None,
    messages: Sequence[Message] = (),
    events: Sequence[Event] = (),
) -> ThreadCommit:
    return ThreadCommit(
        THREAD, RUN, run.version, run.step, disposition, batch, tuple(messages), tuple(events)
    )


def activated() -> Builder:
    return Builder(THREAD).start(RUN)


def move(chain: Builder, call_id: str, status: CallStatus, disposition: RunDisposition | None = None) -> Builder:
    """A hand-made commit moving one call of the batch to ``status``."""
    run = chain.snapshot
    assert run.batch is not None
    old = run.batch.call(call_id)
    assert old is not None
    batch = run.batch.replace_call(attrs.evolve(old, status=status))
    return chain.commit(commit_on(run, disposition or Running(), batch))


def gate_wait(chain: Builder, call_id: str) -> Builder:
    wait = Wait(WaitKind.APPROVAL, TICKET_OLD)
    ticket = ResumeTicket(TICKET_OLD, WaitKind.APPROVAL, call_id)
    return move(chain, call_id, CallAwaiting(0, wait), Awaiting(ticket))


def tool_wait(chain: Builder, call_id: str) -> Builder:
    chain = move(chain, call_id, CallExecuting(1))
    wait = Wait(WaitKind.DELEGATION, TICKET_OLD, child="child-run")
    ticket = ResumeTicket(TICKET_OLD, WaitKind.DELEGATION, call_id)
    return move(chain, call_id, CallAwaiting(1, wait), Awaiting(ticket))


#: Ways to bring one call from Requested into each phase through legal commits.
REACH: dict[CallPhase, list[Callable[[Builder, str], Builder]]] = {
    CallPhase.REQUESTED: [lambda chain, _call: chain],
    CallPhase.EXECUTING: [lambda chain, call: move(chain, call, CallExecuting(1))],
    CallPhase.AWAITING: [gate_wait, tool_wait],
    CallPhase.COMPLETED: [
        lambda chain, call: move(chain, call, CallCompleted(0, ToolResult(ResultKind.BLOCKED, "no")))
    ],
    CallPhase.INDETERMINATE: [
        lambda chain, call: move(
            move(chain, call, CallExecuting(1)),
            call,
            CallIndeterminate(1, IndeterminateReason.OUTCOME_UNKNOWN),
        )
    ],
}


def reach(phases: Sequence[CallPhase], variant: Sequence[int] | None = None) -> Builder:
    """A Run whose batch holds one call per phase, reached call by call, in order."""
    chain = activated().propose(*("tool",) * len(phases))
    for index, phase in enumerate(phases):
        how = REACH[phase][variant[index] if variant else 0]
        chain = how(chain, f"c{index + 1}")
    return chain


def statuses_of(phase: CallPhase, attempt: int) -> list[CallStatus]:
    """Every status of ``phase`` with a plausible attempt and every kind it can carry."""
    attempts = sorted({0, 1, attempt, attempt + 1})
    if phase is CallPhase.REQUESTED:
        return [CallRequested()]
    if phase is CallPhase.EXECUTING:
        return [CallExecuting(a) for a in attempts if a >= 1]
    if phase is CallPhase.AWAITING:
        return [CallAwaiting(a, Wait(k, TICKET_NEW)) for a in attempts for k in WaitKind]
    if phase is CallPhase.COMPLETED:
        return [CallCompleted(a, ToolResult(k, "value")) for a in attempts for k in ResultKind]
    if phase is CallPhase.INDETERMINATE:
        return [CallIndeterminate(a, r) for a in attempts for r in IndeterminateReason]
    raise AssertionError(f"{phase} is not a call status")


def tool_messages(batch: ActiveToolBatch) -> tuple[Message, ...]:
    return tuple(Message(Role.TOOL, {"result": c.call_id}, call_id=c.call_id) for c in batch.calls)


def resumed(run: RunSnapshot, moved: CallStatus) -> Event:
    """The resumed event whose payload fits moving the ticket's call to ``moved``
    (outside Awaiting: one naming an old ticket, which no commit may carry)."""
    ticket = run.state.ticket if isinstance(run.state, Awaiting) else ResumeTicket(TICKET_OLD, WaitKind.APPROVAL, "c1")
    return resumed_event(run.run_id, ticket, payload_for(ticket.wait, moved))


@dataclass(frozen=True)
class Candidate:
    context: str
    status: CallStatus
    commit: ThreadCommit


def candidates(run: RunSnapshot, call_id: str, status: CallStatus) -> Iterator[Candidate]:
    """Every context in which ``call_id`` could take ``status`` in the next commit."""
    assert run.batch is not None
    old = run.batch.call(call_id)
    assert old is not None
    batch = run.batch.replace_call(attrs.evolve(old, status=status))
    final = attrs.evolve(batch, finalized=True)
    yield Candidate("running", status, commit_on(run, Running(), batch))
    yield Candidate("resume", status, commit_on(run, Running(), batch, events=(resumed(run, status),)))
    yield Candidate("finalize", status, commit_on(run, Running(), final, tool_messages(final)))
    yield Candidate(
        "resume+finalize",
        status,
        commit_on(run, Running(), final, tool_messages(final), events=(resumed(run, status),)),
    )
    if isinstance(status, CallAwaiting):
        ticket = ResumeTicket(status.wait.correlation, status.wait.kind, call_id)
        yield Candidate("await", status, commit_on(run, Awaiting(ticket), batch))
    for kind in EndCauseKind:
        yield Candidate(
            f"end:{kind.value}", status, commit_on(run, Ended(cause(kind)), final, tool_messages(final))
        )


def run_in(phase: RunPhase) -> Builder:
    if phase is RunPhase.RUNNING:
        return reach([CallPhase.REQUESTED])
    if phase is RunPhase.AWAITING:
        return reach([CallPhase.AWAITING])
    chain = reach([CallPhase.REQUESTED])
    run = chain.snapshot
    assert run.batch is not None
    closed = attrs.evolve(
        run.batch,
        finalized=True,
        calls=(attrs.evolve(run.batch.calls[0], status=CallIndeterminate(0, IndeterminateReason.RUN_ENDED)),),
    )
    return chain.commit(commit_on(run, Ended(cause(EndCauseKind.CANCELLED)), closed, tool_messages(closed)))
