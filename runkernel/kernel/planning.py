"""Building commits for ``decide`` and ``recover``: one commit, and what comes after it
(the next gate, finalization and publication, the end of the Run).

Commits are judged once, by the store that writes them. With ``self_check`` (tests,
simulator, model checker) ``check_decision`` also judges every commit of a decision
before it leaves: an illegal one is a kernel bug and raises ``KernelBug``, and so is a
commit whose named edge (``name_edge``) the store would reach another verdict by.
"""

from __future__ import annotations

from collections.abc import Sequence

from runkernel.errors import KernelBug as KernelBug
from runkernel.kernel.delegation import executing_delegations, next_to_gate
from runkernel.kernel.effects_plan import (
    close_batch,
    next_step_effects,
    publish_messages,
)
from runkernel.kernel.history import NO_KEYS, History, HistoryKeys
from runkernel.kernel.policies import IndeterminateChoice, Policies
from runkernel.kernel.protocol import (
    CancelChild,
    Commit,
    Decision,
    DeliverTerminus,
    Effect,
    Execute,
    Hook,
    NotifyWait,
    PublishResults,
    RunGate,
    RunHook,
)
from runkernel.kernel.rules import Rejection, Rule
from runkernel.kernel.state import (
    ActiveToolBatch,
    Awaiting,
    CallAwaiting,
    CallIndeterminate,
    CallStatus,
    EndCause,
    Ended,
    EdgeKind,
    Event,
    Message,
    NamedEdge,
    RunDisposition,
    Running,
    RunSnapshot,
    Staged,
    ThreadCommit,
    ResumeTicket,
    ThreadHead,
    ToolCall,
    is_concurrent_delegation,
)
from runkernel.kernel.validate import NO_TICKETS_SEEN, successor, validate_commit
from runkernel.kernel.validate_edge import by_named_edge
from runkernel.kernel.values import (
    EndCauseKind,
    JsonValue,
    Role,
)


# --- commit building ------------------------------------------------------------------


def build_commit(
    prev: RunSnapshot,
    *,
    disposition: RunDisposition,
    batch: ActiveToolBatch | None,
    messages: Sequence[Message] = (),
    events: Sequence[Event] = (),
    step: int | None = None,
    staged: Staged | None = None,
) -> tuple[ThreadCommit, RunSnapshot]:
    """A commit on top of ``prev`` and the snapshot it produces (judged by the store, or
    by ``check_decision`` when the caller asks for the self-check)."""
    commit = ThreadCommit(
        thread_id=prev.thread_id,
        run_id=prev.run_id,
        expected_version=prev.version,
        step=prev.step if step is None else step,
        disposition=disposition,
        batch=batch,
        messages=tuple(messages),
        events=tuple(events),
        staged=staged,
        edge=name_edge(prev, disposition, batch, messages),
    )
    return commit, successor(prev, commit)


_TEXT_STEP = NamedEdge(EdgeKind.TEXT_STEP)
_NEW_BATCH = NamedEdge(EdgeKind.NEW_BATCH)


def name_edge(
    prev: RunSnapshot, disposition: RunDisposition, batch: ActiveToolBatch | None, messages: Sequence[Message]
) -> NamedEdge | None:
    """The edge a commit built on ``prev`` takes, when it is one the store may judge it
    by (``validate_edge.py``): a text step, a new batch, or one call's move (the kernel
    moves a call by building a new call object and keeps every other call object, so
    the moved call is the one that is not its former self). None otherwise."""
    if type(disposition) is not Running or type(prev.state) is not Running:
        return None
    if len(messages) == 1 and messages[0].role is Role.ASSISTANT:
        return _NEW_BATCH if messages[0].tool_calls else _TEXT_STEP
    before = prev.batch
    if before is None or batch is None or before.finalized or batch.batch_id != before.batch_id:
        return None
    moved = [index for index, (old, new) in enumerate(zip(before.calls, batch.calls)) if old is not new]
    return NamedEdge(EdgeKind.CALL_MOVE, moved[0]) if len(moved) == 1 else None


def check_decision(prev: RunSnapshot, history: History, decision: Decision) -> Decision:
    """``decide``'s and ``recover``'s self-check: every commit of ``decision`` is legal
    on top of the one before (against ``history`` too) and they lead to its state.
    Raises KernelBug otherwise; returns ``decision`` unchanged."""
    state, facts = prev, history
    for effect in decision.effects:
        if not isinstance(effect, Commit):
            continue
        head = ThreadHead(state.thread_id, state.version, state.run_id)
        # the kernel sees one Run: a ticket reused from another Run is the store's to refuse
        verdict = validate_commit(head, state, effect.commit, facts, ticket_seen=NO_TICKETS_SEEN)
        if isinstance(verdict, Rejection):
            raise KernelBug(f"kernel built an illegal commit: {verdict}")
        named = by_named_edge(head, state, effect.commit, facts)
        if named is not None and named != verdict:
            raise KernelBug(f"the verdict by the named edge {effect.commit.edge} is not the full judge's")
        state, facts = verdict.run, _grown(facts, verdict.keys)
    if state != decision.state:
        raise KernelBug("the decision's state is not what its commits produce")
    return decision


def _grown(history: History, keys: HistoryKeys) -> History:
    """``history`` and one commit's keys, without copying it."""
    return history if keys == NO_KEYS else _Plus(history, keys)


class _Plus:
    def __init__(self, base: History, keys: HistoryKeys) -> None:
        self.base, self.keys = base, keys

    def ticket_used(self, ticket_id: str) -> bool:
        return self.keys.ticket == ticket_id or self.base.ticket_used(ticket_id)

    def batch_closed(self, batch_id: str) -> bool:
        return self.keys.closed_batch == batch_id or self.base.batch_closed(batch_id)

    def applied_digest(self, ticket_id: str) -> str | None:
        resume = self.keys.resume
        if resume is not None and resume.ticket_id == ticket_id:
            return resume.digest
        return self.base.applied_digest(ticket_id)


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
        final = batch.finalize()
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
        next_call = next_to_gate(batch, policies)
        if next_call is not None:
            effects += (RunGate(next_call),)
    return Decision(after, effects)


def suspend(
    state: RunSnapshot,
    batch: ActiveToolBatch,
    call: ToolCall,
    status: CallAwaiting,
    policies: Policies,
    history: History,
) -> Decision | Rejection:
    """Commit ``call`` Awaiting with the Run Awaiting its one ticket (never reused)."""
    ticket_id = status.wait.correlation
    if history.ticket_used(ticket_id):
        return Rejection(Rule.TICKET_REUSED, f"ticket {ticket_id!r} was already used")
    ticket = ResumeTicket(ticket_id, status.wait.kind, call.call_id)
    return settle(
        state,
        replace_status(batch, call, status),
        policies,
        disposition=Awaiting(ticket),
        follow_up=(NotifyWait(ticket, status.wait),),
    )


def end_run(
    prev: RunSnapshot,
    batch: ActiveToolBatch | None,
    cause: EndCause,
    *,
    messages: Sequence[Message] = (),
    events: Sequence[Event] = (),
    step: int | None = None,
    staged: Staged | None = None,
) -> Decision:
    """End the Run, closing every open call and publishing one result per call; the
    child of every concurrent delegation still Executing is sent a cancel."""
    published: tuple[Message, ...] = ()
    cancels: tuple[Effect, ...] = ()
    if batch is not None and batch.is_open:
        cancels = tuple(
            CancelChild(c.delegation) for c in executing_delegations(batch) if c.delegation is not None
        )
        batch = close_batch(batch)
        published = publish_messages(batch)
    commit, after = build_commit(
        prev,
        disposition=Ended(cause),
        batch=batch,
        messages=tuple(messages) + published,
        events=events,
        step=step,
        staged=staged,
    )
    effects: tuple[Effect, ...] = (Commit(commit),)
    if published and batch is not None:
        effects += (PublishResults(batch),)
    return Decision(after, effects + cancels + (DeliverTerminus(cause),))


def replace_status(batch: ActiveToolBatch, call: ToolCall, status: CallStatus) -> ActiveToolBatch:
    """``batch`` with ``call`` moved to ``status``."""
    return batch.replace_call(call.with_status(status))


def execute_effect(call: ToolCall, attempt: int, resume_value: JsonValue = None) -> Execute:
    """The Execute effect for attempt ``attempt`` of ``call``; ``resume_value`` is the
    operator's committed input answer, which every attempt after it receives too."""
    return Execute(call.call_id, call.tool, call.arguments, call.operation_id, attempt, resume_value)



def redeliver(state: RunSnapshot) -> Decision:
    """What an Ended Run does when asked to continue: commit nothing, redeliver its
    terminus, and send again the cancels its end owed to children still running (a
    crash may have fallen between the end commit and those cancels; a cancel to a
    child that has ended since is refused by its inbox, so sending it again is safe)."""
    assert isinstance(state.state, Ended)
    owed: tuple[Effect, ...] = ()
    if state.batch is not None:
        owed = tuple(
            CancelChild(c.delegation)
            for c in state.batch.calls
            if c.delegation is not None and is_concurrent_delegation(c) and isinstance(c.status, CallIndeterminate)
        )
    return Decision(state, owed + (DeliverTerminus(state.state.cause, redelivery=True),))


