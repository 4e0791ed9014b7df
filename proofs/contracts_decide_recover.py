"""CrossHair contracts on ``decide`` and ``recover`` (PEP 316 docstring style): every
decision, on a Run with or without an open batch, has the properties of
``decision_properties.py``; activation and resume acceptance (I14) are checked against
the spec.

CrossHair evaluates ``pre:``/``post:`` conditions in this module's namespace, so every
name a condition uses is imported here, even where nothing else uses it. The rules the
contracts keep and how their int parameters decode are in ``contract_builders.py``.
"""

from __future__ import annotations

from contract_builders import (
    BATCH,
    END_CAUSES,
    EXPIRES_AT,
    RUN,
    THREAD,
    TICKETS,
    WAIT_KINDS,
    batch_of,
    decode_policies,
    decode_snapshot,
    history_of,
    make_payload,
    make_run_state,
    small,
    snapshot_of,
)
from decision_properties import commits_of, failed_properties, no_restart_unless_replay
from runkernel.kernel.decide import check_resume, decide
from runkernel.kernel.protocol import (
    Activate,
    Allow,
    Approve,
    Block,
    DeadlinePassed,
    DelegationResult,
    Deny,
    EndRequest,
    ExternalResult,
    GateVerdict,
    InferenceResult,
    Input,
    OperationStatus,
    ProposedCall,
    ProvideInput,
    RequestInference,
    RequireWait,
    ResumeCommand,
    ResumePayload,
    StatusReport,
    Supply,
    TimerFired,
    ToolDelegated,
    ToolFailure,
    ToolFinished,
    ToolOutcome,
    ToolOutcomeLost,
    ToolOutput,
    ToolScheduled,
)
from runkernel.kernel.recover import recover
from runkernel.kernel.rules import Rejection
from runkernel.kernel.state import (
    Awaiting,
    CallCompleted,
    CallIndeterminate,
    EndCause,
    Message,
    Running,
    RunSnapshot,
    RunState,
    ThreadHead,
    ToolResult,
    TypedError,
)
from runkernel.kernel.validate import NO_TICKETS_SEEN, Accepted, validate_commit
from runkernel.kernel.values import EndCauseKind, IndeterminateReason, ResultKind, Role, WaitKind


# --- decide --------------------------------------------------------------------------


PAYLOADS: tuple[ResumePayload, ...] = (
    Approve(), Deny("no"), ProvideInput(42), ExternalResult("ext"), DelegationResult("child"), TimerFired(),
)
#: The payloads each wait kind accepts, as indexes into PAYLOADS.
PAYLOADS_FOR: dict[WaitKind, tuple[int, ...]] = {
    WaitKind.APPROVAL: (0, 1),
    WaitKind.INPUT: (2,),
    WaitKind.EXTERNAL: (3,),
    WaitKind.DELEGATION: (4,),
    WaitKind.SCHEDULED: (5,),
}


def decode_input(snapshot: RunSnapshot, kind: int, target: int, attempt: int, variant: int, ticket: int) -> Input:
    """One input for ``decide``; ``kind`` (0..10) selects its type. The other ints pick
    values that fit the snapshot when they are 0 (the call in progress, its attempt, the
    awaited ticket, a matching wait kind and payload) and other values otherwise, so
    both the accepted and the rejected branches of ``decide`` are reachable."""
    current = snapshot.open_batch.first_open_call() if snapshot.open_batch else None
    awaited = snapshot.state.ticket if isinstance(snapshot.state, Awaiting) else None
    target, attempt, ticket, variant = small(target, 2), small(attempt, 4), small(ticket, 4), small(variant, 6)
    call_id = current.call_id if current is not None and target == 0 else ("c1" if target else "c0")
    attempt = current.status.attempt if current is not None and attempt == 0 else attempt
    ticket_id = awaited.ticket_id if awaited is not None and ticket == 0 else TICKETS[ticket]
    if kind == 0:
        return GateVerdict(call_id, Allow())
    if kind == 1:
        return GateVerdict(call_id, Block("policy"))
    if kind == 2:
        return GateVerdict(call_id, Supply("cached"))
    if kind == 3:
        expires = EXPIRES_AT if variant == 0 else None
        return GateVerdict(call_id, RequireWait(WAIT_KINDS[variant % 5], ticket_id, expires_at=expires))
    if kind == 4:
        outcome: ToolOutcome
        if variant == 0:
            outcome = ToolOutput("ok")
        elif variant == 1:
            outcome = ToolFailure("bad", retryable=True)
        elif variant == 2:
            outcome = ToolFailure("bad", retryable=False)
        elif variant == 3:
            outcome = ToolDelegated(ticket_id)
        elif variant == 4:
            outcome = ToolScheduled(ticket_id, EXPIRES_AT)
        else:
            outcome = ToolOutcomeLost()
        return ToolFinished(call_id, attempt, outcome)
    if kind == 5:
        statuses = (OperationStatus.DONE, OperationStatus.FAILED, OperationStatus.RUNNING, OperationStatus.NOT_FOUND, OperationStatus.UNKNOWN)
        return StatusReport(call_id, attempt, statuses[variant % len(statuses)], "value")
    if kind == 6:
        if awaited is not None and variant < 2:
            allowed = PAYLOADS_FOR[awaited.wait]
            payload = PAYLOADS[allowed[variant % len(allowed)]]
            return ResumeCommand(RUN, ticket_id, awaited.wait, payload)
        return ResumeCommand(RUN, ticket_id, WAIT_KINDS[attempt % 5], PAYLOADS[variant])
    if kind == 7:
        return DeadlinePassed(ticket_id, "2026-07-01T00:00:00Z" if variant % 2 == 0 else "2026-01-01T00:00:00Z")
    if kind == 8:
        cause = END_CAUSES[variant]
        return EndRequest(EndCause(cause, TypedError("E", "boom") if cause is EndCauseKind.FAILED else None))
    if kind == 9:
        return InferenceResult("text", end=None if variant == 0 else END_CAUSES[variant % 4])
    return InferenceResult("tools", (ProposedCall("c9", "tool0", {}, "op-9"),), "b-2" if variant else BATCH)


def check_decide(
    kind: int, target: int, attempt: int, variant: int, ticket: int,
    two: bool, s0: int, a0: int, v0: int, s1: int, a1: int, v1: int,
    mode: int, max_attempts: int, retries: int, end_on_indeterminate: bool, max_steps: int,
) -> tuple[str, ...]:
    """decide on a Run with an open batch of one or two calls, for every kind of input
    and policy. Properties (the body returns the names of those that fail):

    * decide never raises (a KernelBug: it built a commit validation rejects);
    * a Rejection leaves the snapshot unchanged (compared with a fresh build);
    * a Decision without a commit leaves the state unchanged;
    * every commit of a Decision is accepted by validate_commit, in order, and leads to
      the Decision's state;
    * attempts never decrease, terminal results never change, Executing never goes back
      to Requested, inference is requested only with no open batch.

    pre: 0 <= kind <= 10
    post: __return__ == ()
    """
    snapshot = decode_snapshot(two, s0, a0, v0, s1, a1, v1)
    policies = decode_policies(mode, max_attempts, retries, end_on_indeterminate, max_steps)
    result = decide(snapshot, decode_input(snapshot, kind, target, attempt, variant, ticket), policies, history_of(snapshot))
    unchanged = snapshot == decode_snapshot(two, s0, a0, v0, s1, a1, v1)
    if isinstance(result, Rejection):
        return () if unchanged else ("rejection_leaves_snapshot_unchanged",)
    return failed_properties(snapshot, result) + (() if unchanged else ("snapshot_unchanged",))


def check_decide_activation(user: bool, assistant: bool, tool: bool, expected_version: int) -> tuple[str, ...]:
    """decide on RunActivation (no snapshot yet): never raises; a bad input (an
    assistant or tool message in the activation) is a Rejection; otherwise the one
    commit is the Run's first, accepted by validate_commit, Running at step 0, and the
    next Step's inference is requested after it.

    pre: 0 <= expected_version <= 2
    post: __return__ == ()
    """
    messages: list[Message] = []
    if user:
        messages.append(Message(Role.USER, "task"))
    if assistant:
        messages.append(Message(Role.ASSISTANT, "earlier answer"))
    if tool:
        messages.append(Message(Role.TOOL, "result", call_id="c0"))
    result = decide(None, Activate(THREAD, RUN, expected_version, tuple(messages)))
    if isinstance(result, Rejection):
        return () if assistant or tool else ("legal_activation_rejected",)
    failed: tuple[str, ...] = ("bad_activation_accepted",) if assistant or tool else ()
    commits = commits_of(result.effects)
    head = ThreadHead(THREAD, expected_version, None) if expected_version else None
    verdict = validate_commit(head, None, commits[0], ticket_seen=NO_TICKETS_SEEN) if len(commits) == 1 else None
    if not isinstance(verdict, Accepted) or verdict.run != result.state:
        failed += ("first_commit_accepted",)
    if not (isinstance(result.state.state, Running) and result.state.step == 0 and result.state.batch is None):
        failed += ("running_at_step_0",)
    if not any(isinstance(e, RequestInference) and e.step == 1 for e in result.effects):
        failed += ("next_step_requested",)
    return failed


def settled_snapshot(shape: int, cause: int, step: int) -> RunSnapshot:
    """A Run without an open batch: shape 0 no batch, 1 a finalized batch, 2 Ended with
    no batch, 3 Ended with a finalized batch. ``cause`` % 6 is the end cause, 1 + step % 3
    the step."""
    batch = None
    if shape == 1 or shape == 3:
        batch = batch_of((CallCompleted(1, ToolResult(ResultKind.OUTPUT, "out")), CallIndeterminate(1, IndeterminateReason.OUTCOME_UNKNOWN)), finalized=True)
    state: RunState = Running()
    if shape >= 2:
        state = make_run_state(2, small(cause, 6))
    return snapshot_of(batch, state, step=1 + small(step, 3))


def check_decide_settled(shape: int, kind: int, variant: int, cause: int, step: int, max_steps: int) -> tuple[str, ...]:
    """decide on a Run without an open batch (Running with no batch or a finalized one,
    or Ended): inference results, end requests, resumes and stray tool inputs. Same
    properties as check_decide, and an Ended Run rejects everything.

    pre: 0 <= shape <= 3
    pre: 0 <= kind <= 10
    post: __return__ == ()
    """
    snapshot = settled_snapshot(shape, cause, step)
    policies = decode_policies(2, 0, 0, False, max_steps)
    result = decide(snapshot, decode_input(snapshot, kind, 0, 0, variant, 0), policies, history_of(snapshot))
    unchanged = snapshot == settled_snapshot(shape, cause, step)
    if isinstance(result, Rejection):
        return () if unchanged else ("rejection_leaves_snapshot_unchanged",)
    ended = ("ended_run_accepted_an_input",) if shape >= 2 else ()
    return failed_properties(snapshot, result) + ended + (() if unchanged else ("snapshot_unchanged",))


def expected_resume_ok(snapshot: RunSnapshot, command: ResumeCommand) -> bool:
    """I14 word for word (docs/concepts.md, Invariants), for commands not applied before."""
    if not isinstance(snapshot.state, Awaiting):
        return False
    ticket = snapshot.state.ticket
    allowed = {
        WaitKind.APPROVAL: (Approve, Deny),
        WaitKind.INPUT: (ProvideInput,),
        WaitKind.EXTERNAL: (ExternalResult,),
        WaitKind.DELEGATION: (DelegationResult,),
        WaitKind.SCHEDULED: (TimerFired,),
    }[ticket.wait]
    return (
        command.ticket_id == ticket.ticket_id
        and command.kind is ticket.wait
        and isinstance(command.payload, allowed)
        and command.run_id == snapshot.run_id
    )


def check_resume_acceptance(ticket: int, kind: int, payload: int, two: bool, s0: int, a0: int, v0: int, s1: int, a1: int, v1: int) -> tuple[bool, bool]:
    """I14: check_resume accepts a command iff the Run is Awaiting and ticket id, wait
    kind and payload type all match (tickets ``tk-c0``/``tk-c1``/``tk-new`` were never
    applied; ``tk-old`` was, and is answered "already applied" or "stale"). Returns
    (accepted, expected).

    pre: 0 <= ticket <= 3 and 0 <= kind <= 4 and 0 <= payload <= 5
    post: __return__[0] == __return__[1]
    """
    snapshot = decode_snapshot(two, s0, a0, v0, s1, a1, v1)
    command = ResumeCommand(RUN, TICKETS[ticket], WAIT_KINDS[kind], make_payload(payload, "v"))
    verdict = check_resume(snapshot, command, history_of(snapshot))
    return verdict is None, expected_resume_ok(snapshot, command)


# --- recover -------------------------------------------------------------------------


def check_recover_open_batch(
    two: bool, s0: int, a0: int, v0: int, s1: int, a1: int, v1: int,
    mode: int, max_attempts: int, end_on_indeterminate: bool, max_steps: int,
) -> tuple[str, ...]:
    """recover on a Run with an open batch of one or two calls, under every policy.
    Properties (the body returns the names of those that fail): recover never raises;
    it is deterministic (the same decision twice, I11); every commit it emits is
    accepted by validate_commit; it never turns Executing into Requested, never
    requests inference while a batch is open, keeps terminal calls unchanged, never
    lowers an attempt, and never restarts a call it found Executing unless the tool's
    policy is replay (I9).

    post: __return__ == ()
    """
    snapshot = decode_snapshot(two, s0, a0, v0, s1, a1, v1)
    policies = decode_policies(mode, max_attempts, 0, end_on_indeterminate, max_steps)
    first = recover(snapshot, policies)
    second = recover(decode_snapshot(two, s0, a0, v0, s1, a1, v1), policies)
    failed = failed_properties(snapshot, first.decision)
    if first != second:
        failed += ("deterministic",)
    if not no_restart_unless_replay(snapshot, policies, first.decision):
        failed += ("no_restart_unless_replay",)
    return failed


def check_recover_settled(shape: int, cause: int, step: int, max_steps: int) -> tuple[str, ...]:
    """recover on a Run without an open batch: Running continues with the next Step (or
    ends at the step limit); Ended only redelivers its terminus and commits nothing.
    Same properties as check_recover_open_batch.

    pre: 0 <= shape <= 3
    post: __return__ == ()
    """
    snapshot = settled_snapshot(shape, cause, step)
    policies = decode_policies(2, 0, 0, False, max_steps)
    first = recover(snapshot, policies)
    failed = failed_properties(snapshot, first.decision)
    if first != recover(settled_snapshot(shape, cause, step), policies):
        failed += ("deterministic",)
    if shape >= 2 and (commits_of(first.decision.effects) or first.decision.state != snapshot):
        failed += ("ended_run_reopened",)
    return failed
