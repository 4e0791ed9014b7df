"""CrossHair contracts on ``validate_commit`` (PEP 316 docstring style): it accepts the
identity commit, a legal first commit and a matching resume, and rejects a changed
terminal result, Executing -> Requested, a foreign resume and any call change that is
not an edge of the Tool-call machine.

CrossHair evaluates ``pre:``/``post:`` conditions in this module's namespace, so every
name a condition uses is imported here, even where nothing else uses it. The rules the
contracts keep and how their int parameters decode are in ``contract_builders.py``.
"""

from __future__ import annotations

from contract_builders import (
    AWAITING,
    BATCH,
    COMPLETED,
    EXPIRES_AT,
    RUN,
    THREAD,
    TICKETS,
    batch_of,
    commit_on,
    decode_snapshot,
    decode_status,
    head_of,
    history_of,
    make_call,
    publish,
    resumed_event,
    small,
    snapshot_of,
    with_status,
)

from runkernel.kernel.edges import CALL_EDGES, AttemptRule, call_phase
from runkernel.kernel.effects_plan import closed_status
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
    ResumeTicket,
    Running,
    RunSnapshot,
    RunState,
    ThreadCommit,
    ToolResult,
    ToolUse,
    Wait,
    is_terminal,
)
from runkernel.kernel.history import NO_KEYS
from runkernel.kernel.validate import NO_TICKETS_SEEN, Accepted, validate_commit
from runkernel.kernel.edges import RESULTS_BY_WAIT
from runkernel.kernel.values import (
    EndCauseKind,
    IndeterminateReason,
    ResultKind,
    Role,
    WaitKind,
)

# --- validate_commit -------------------------------------------------------------------


def running_snapshot(two: bool, s0: int, a0: int, v0: int, s1: int, a1: int, v1: int) -> RunSnapshot:
    """A Running Run with an open batch: an Awaiting status decodes as Completed."""
    def no_wait(code: int) -> int:
        code = small(code, 5)
        return COMPLETED if code == AWAITING else code

    return decode_snapshot(two, no_wait(s0), a0, v0, no_wait(s1), a1, v1)


def identity_snapshot(shape: int, two: bool, s0: int, a0: int, v0: int, s1: int, a1: int, v1: int) -> RunSnapshot:
    """shape 0: Running with an open batch; 1: with the batch finalized (calls closed as
    a Run end would); 2: with no batch."""
    if shape == 2:
        return snapshot_of(None)
    open_batch = running_snapshot(two, s0, a0, v0, s1, a1, v1).batch
    assert open_batch is not None
    if shape == 0:
        return snapshot_of(open_batch)
    closed = tuple(closed_status(c.status) for c in open_batch.calls)
    return snapshot_of(batch_of(closed, finalized=True))


def check_validate_accepts_identity(shape: int, two: bool, s0: int, a0: int, v0: int, s1: int, a1: int, v1: int) -> tuple[bool, bool]:
    """validate_commit accepts the identity commit (Running -> Running, nothing changed)
    of a Running Run, and the new snapshot differs only by its version.

    pre: 0 <= shape <= 2
    post: __return__ == (True, True)
    """
    before = identity_snapshot(shape, two, s0, a0, v0, s1, a1, v1)
    verdict = validate_commit(head_of(before), before, commit_on(before, before.batch), history_of(before), ticket_seen=NO_TICKETS_SEEN)
    if not isinstance(verdict, Accepted):
        return False, False
    after = verdict.run
    same = (
        after.version == before.version + 1
        and (after.state, after.batch, after.step) == (before.state, before.batch, before.step)
        and verdict.keys == NO_KEYS
    )
    return True, same


def check_validate_first_commit(assistants: int, with_batch: bool, step: int, user: bool) -> bool:
    """A Run's first commit is step 0 (the activation) or step 1 (with the first
    inference result): validate_commit accepts it only then, with as many assistant
    messages as its step, and a new batch only at step 1. Returns whether it accepted.

    Fails on the kernel of 2026-11-30: ``_check_first`` only checks ``step ==
    len(assistants)``, so a first commit at step 2 with two assistant messages is
    accepted (``runkernel check-trace`` calls such a trace legal).

    pre: 0 <= assistants <= 2
    pre: 0 <= step <= 3
    post: (not __return__) or (step == assistants and step <= 1)
    """
    assistants, step = small(assistants, 3), small(step, 4)  # concrete (see ``small``)
    messages: list[Message] = [Message(Role.USER, "task")] if user else []
    for index in range(assistants):
        uses = (ToolUse("c0", "tool0", {"x": 0}),) if with_batch and index == 0 else None
        messages.append(Message(Role.ASSISTANT, f"answer {index}", tool_calls=uses))
    batch = ActiveToolBatch(BATCH, max(step, 1), False, (make_call(0, CallRequested()),)) if with_batch else None
    commit = ThreadCommit(THREAD, RUN, 0, step, Running(), batch, tuple(messages), (Event("activated"),))
    return isinstance(validate_commit(None, None, commit, ticket_seen=NO_TICKETS_SEEN), Accepted)


def changed_terminal(status: CallStatus, change: int) -> CallStatus:
    """Another status for a terminal call: 0 other value or reason, 1 other result kind
    or reason, 2 the other terminal kind, 3 attempt + 1, 4 Requested, 5 Executing,
    6 Awaiting."""
    attempt = status.attempt
    if change <= 1 and isinstance(status, CallIndeterminate):
        reason = (
            IndeterminateReason.ATTEMPTS_EXHAUSTED
            if status.reason is not IndeterminateReason.ATTEMPTS_EXHAUSTED
            else IndeterminateReason.OUTCOME_UNKNOWN
        )
        return CallIndeterminate(attempt, reason)
    if change == 0 and isinstance(status, CallCompleted):
        return CallCompleted(attempt, ToolResult(status.result.kind, "other"))
    if change == 1 and isinstance(status, CallCompleted):
        kind = ResultKind.ERROR if status.result.kind is not ResultKind.ERROR else ResultKind.OUTPUT
        return CallCompleted(attempt, ToolResult(kind, status.result.value))
    if change == 2:
        if isinstance(status, CallCompleted):
            return CallIndeterminate(max(attempt, 1), IndeterminateReason.OUTCOME_UNKNOWN)
        return CallCompleted(attempt, ToolResult(ResultKind.OUTPUT, "out"))
    if change == 3:
        if isinstance(status, CallCompleted):
            return CallCompleted(attempt + 1, status.result)
        assert isinstance(status, CallIndeterminate)
        return CallIndeterminate(attempt + 1, status.reason)
    if change == 4:
        return CallRequested()
    if change == 5:
        return CallExecuting(attempt + 1)
    return CallAwaiting(attempt, Wait(WaitKind.SCHEDULED, "tk-new", due_at=EXPIRES_AT))


def check_validate_rejects_terminal_change(
    which: int, change: int, ending: bool, two: bool, s0: int, a0: int, v0: int, s1: int, a1: int, v1: int
) -> Rule | None:
    """A commit that changes a terminal call's status or result is rejected as
    terminal-result-immutable (I7), also in the commit that ends the Run. Apart from
    that change the commit is the identity commit (accepted, see
    check_validate_accepts_identity) or a legal end of the Run. Returns the rule of the
    rejection (None if accepted).

    Change 7 keeps the result equal in Python but not in JSON: a committed value 1
    becomes True. (1 -> 1.0 is not a change: validate compares JSON numbers by value,
    on purpose, see ``_same_json``.)

    pre: 0 <= which <= 1
    pre: 0 <= change <= 7
    post: __return__ is Rule.TERMINAL_IMMUTABLE
    """
    # make call ``which`` terminal: decode its code as Completed or Indeterminate
    if which == 1:
        two, s0, s1 = True, COMPLETED + small(s0, 2), COMPLETED + small(s1, 2)
    else:
        s0 = COMPLETED + small(s0, 2)
    snapshot = running_snapshot(two, s0, a0, v0, s1, a1, v1)
    batch = snapshot.batch
    assert batch is not None and is_terminal(batch.calls[which].status)
    status = batch.calls[which].status
    if change >= 7:
        kind = status.result.kind if isinstance(status, CallCompleted) else ResultKind.OUTPUT
        batch = with_status(batch, which, CallCompleted(status.attempt, ToolResult(kind, 1)))
        snapshot = snapshot_of(batch)
        changed = with_status(batch, which, CallCompleted(status.attempt, ToolResult(kind, True)))
    else:
        changed = with_status(batch, which, changed_terminal(status, change))
    if ending:
        # close every other call as a Run end does; the changed one stays as changed
        closed = batch_of(
            [c.status if i == which else closed_status(c.status) for i, c in enumerate(changed.calls)],
            finalized=True,
        )
        commit = commit_on(snapshot, closed, Ended(EndCause(EndCauseKind.STOPPED)), publish(closed))
    else:
        commit = commit_on(snapshot, changed)
    verdict = validate_commit(head_of(snapshot), snapshot, commit, history_of(snapshot), ticket_seen=NO_TICKETS_SEEN)
    return verdict.rule if isinstance(verdict, Rejection) else None


def check_validate_rejects_executing_to_requested(attempt: int, two: bool, ending: bool) -> Rule | None:
    """Executing -> Requested is never an edge: validate_commit rejects it (call-edge),
    whatever the rest of the commit. Returns the rule of the rejection.

    pre: attempt >= 1
    post: __return__ is Rule.CALL_EDGE
    """
    statuses: list[CallStatus] = [CallExecuting(attempt)]
    if two:
        statuses.append(CallRequested())
    snapshot = snapshot_of(batch_of(statuses))
    back = batch_of([CallRequested()] * len(statuses))
    if ending:
        final = batch_of([CallRequested()] * len(statuses), finalized=True)
        commit = commit_on(snapshot, final, Ended(EndCause(EndCauseKind.STOPPED)), publish(final))
    else:
        commit = commit_on(snapshot, back)
    verdict = validate_commit(head_of(snapshot), snapshot, commit, history_of(snapshot), ticket_seen=NO_TICKETS_SEEN)
    return verdict.rule if isinstance(verdict, Rejection) else None


def awaiting_snapshot(two: bool, attempt: int, variant: int) -> RunSnapshot:
    """An Awaiting Run: c0 awaits, or (two calls) c0 is Completed and c1 awaits; the
    wait is ``decode_status(AWAITING, attempt, variant)`` (10 kinds of wait)."""
    if two:
        return decode_snapshot(True, COMPLETED, 1, 0, AWAITING, attempt, variant)
    return decode_snapshot(False, AWAITING, attempt, variant, 0, 0, 0)


def resume_commit(snapshot: RunSnapshot, ticket_id: str, outcome: bool) -> ThreadCommit:
    """The commit that applies a resume of the awaiting call: it moves to Executing{n+1}
    (outcome False, and always for input and timer waits) or is completed with the result
    its wait kind allows, denied or external (outcome True)."""
    assert isinstance(snapshot.state, Awaiting) and snapshot.batch is not None
    ticket = snapshot.state.ticket
    call = snapshot.batch.call(ticket.call_id)
    assert call is not None and isinstance(call.status, CallAwaiting)
    status: CallStatus
    completions = sorted(RESULTS_BY_WAIT[ticket.wait], key=lambda k: k.value)
    if not outcome or not completions:
        status = CallExecuting(call.status.attempt + 1)
    else:
        status = CallCompleted(call.status.attempt, ToolResult(completions[0], "answer"))
    index = snapshot.batch.calls.index(call)
    batch = with_status(snapshot.batch, index, status)
    messages: tuple[Message, ...] = ()
    if batch.all_terminal():
        batch = batch_of([c.status for c in batch.calls], finalized=True)
        messages = publish(batch)
    return commit_on(snapshot, batch, Running(), messages, (resumed_event(ticket_id, call.call_id, ticket.wait, status),))


def check_validate_rejects_foreign_resume(other: int, outcome: bool, two: bool, attempt: int, variant: int) -> Rule | None:
    """A resume commit whose 'resumed' event names another ticket (the other call's,
    an old applied one, a fresh one) is rejected (resume-matches-ticket). Returns the
    rule of the rejection.

    pre: 0 <= other <= 3
    pre: TICKETS[other] != ("tk-c1" if two else "tk-c0")
    post: __return__ is Rule.RESUME
    """
    snapshot = awaiting_snapshot(two, attempt, variant)
    verdict = validate_commit(head_of(snapshot), snapshot, resume_commit(snapshot, TICKETS[other], outcome), history_of(snapshot), ticket_seen=NO_TICKETS_SEEN)
    return verdict.rule if isinstance(verdict, Rejection) else None


def check_validate_accepts_matching_resume(outcome: bool, two: bool, attempt: int, variant: int) -> bool:
    """The same resume commit naming the committed ticket is accepted and the Run is
    Running again (the control for check_validate_rejects_foreign_resume).

    post: __return__
    """
    snapshot = awaiting_snapshot(two, attempt, variant)
    assert isinstance(snapshot.state, Awaiting)
    verdict = validate_commit(head_of(snapshot), snapshot, resume_commit(snapshot, snapshot.state.ticket.ticket_id, outcome), history_of(snapshot), ticket_seen=NO_TICKETS_SEEN)
    return isinstance(verdict, Accepted) and isinstance(verdict.run.state, Running)


def attempt_rule_holds(rule: AttemptRule | None, before: int, after: int) -> bool:
    if rule is AttemptRule.FIRST:
        return after == 1
    if rule is AttemptRule.INCREMENT:
        return after == before + 1
    if rule is AttemptRule.UNCHANGED:
        return after == before
    if rule is AttemptRule.ZERO:
        return after == 0
    return True


def edge_legal(old: CallStatus, new: CallStatus) -> bool:
    """``old`` -> ``new`` is no change, or an edge of CALL_TABLE with its attempt rule."""
    if old == new:
        return True
    rule = CALL_EDGES.get((call_phase(old), call_phase(new)))
    return rule is not None and attempt_rule_holds(rule.attempt, old.attempt, new.attempt)


def check_validate_single_call_edges(old: int, old_attempt: int, old_variant: int, new: int, new_attempt: int, new_variant: int, ending: bool) -> bool:
    """I1 and I6 for one call: whatever a commit does to the call of a one-call batch
    (with the Run's disposition, ticket, resume event, finalization and publication
    made to fit), validate_commit accepts it only if it is an edge of the Tool-call
    machine that moves the attempt as the edge says. Returns True if it holds. The new
    status also ranges over Indeterminate(run_ended) (``new`` 5), which only a Run's end
    produces.

    post: __return__
    """
    before = decode_status(0, old, old_attempt, old_variant)
    after_status: CallStatus
    if small(new, 6) == 5:
        after_status = CallIndeterminate(small(new_attempt, 2), IndeterminateReason.RUN_ENDED)
    else:
        after_status = decode_status(0, new, new_attempt, new_variant)
    snapshot = snapshot_of(batch_of((before,)))
    state: RunState = Running()
    events: tuple[Event, ...] = ()
    if isinstance(after_status, CallAwaiting):
        wait = after_status.wait
        if isinstance(snapshot.state, Awaiting):
            wait = Wait(wait.kind, "tk-next", wait.child, wait.due_at, wait.expires_at)  # a new wait, a new ticket
            after_status = CallAwaiting(after_status.attempt, wait)
        state = Awaiting(ResumeTicket(wait.correlation, wait.kind, "c0"))
    elif isinstance(snapshot.state, Awaiting):
        events = (resumed_event(snapshot.state.ticket.ticket_id, "c0", snapshot.state.ticket.wait, after_status),)
    if ending:
        state = Ended(EndCause(EndCauseKind.STOPPED))
        events = ()
    after = batch_of((after_status,))
    messages: tuple[Message, ...] = ()
    if after.all_terminal():
        after = batch_of((after_status,), finalized=True)
        messages = publish(after)
    verdict = validate_commit(head_of(snapshot), snapshot, commit_on(snapshot, after, state, messages, events), history_of(snapshot), ticket_seen=NO_TICKETS_SEEN)
    return not isinstance(verdict, Accepted) or edge_legal(before, after_status)
