"""Builders for the CrossHair contracts over the kernel's pure functions (PEP 316 docstring style).

The contracts are in ``contracts_helpers.py`` (small helpers), ``contracts_validate.py``
(``validate_commit``) and ``contracts_decide_recover.py`` (``decide`` and ``recover``);
the properties every decision must have are in ``decision_properties.py``. Every
``check_*`` function there is a contract: it builds kernel values from a few small
primitive parameters (ints standing for enums and statuses, bools) with the builders
below, calls one kernel function, and states what must hold with ``pre:`` and ``post:``
predicates. ``proofs/crosshair_check.py`` runs CrossHair on every contracts module with
an explicit iteration budget and fails on any counterexample, on any precondition that
cannot be met and on any contract that nothing checked.

Rules the contracts keep (each learnt from a contract that checked nothing or never ended):

* no ``inv:`` on the kernel's slotted attrs classes (it checks nothing), only
  predicates in ``pre:``/``post:`` of plain functions;
* every input is bounded. The small helpers bound their parameters with ``pre:``
  ranges. The contracts on ``decide``, ``validate_commit`` and ``recover`` take many
  parameters; each symbolic branch of a precondition costs CrossHair an iteration
  (with a dozen ``0 <= x <= k`` ranges it never got past them: "Unable to meet
  precondition"), so their builders *decode* any int into a bounded, well-formed,
  concrete choice (``small(code, 5)``, ``1 + small(attempt, 3)``, calls after one in
  progress are Requested, ...; see ``small`` for why concrete) and only the few
  choices that select what is checked stay in ``pre:``. The state they build is
  always one a runtime can commit, so a counterexample is a kernel bug, not a state
  no one can reach;
* ``decide`` and ``recover`` are checked against several properties at once: the body
  returns the names of the properties that failed, and the postcondition is
  ``__return__ == ()``. One exploration then serves every property (separate
  ``post:`` lines would each re-explore the kernel), and a counterexample names the
  properties it breaks ("... which returns ('attempts_never_decrease',)");
* every "rejects" contract has a matching "accepts" contract on the same builders (the
  identity commit, the matching resume), so a validator that rejected everything
  would fail here instead of passing vacuously.

How ints decode
---------------

A call status is ``(code, attempt, variant)``, read modulo the ranges below
(``decode_status``; ``make_status`` takes them exactly):

====  =============  =========  ===============================================
code  status         attempt    variant
====  =============  =========  ===============================================
0     Requested      0          unused
1     Executing      1..3       unused
2     Awaiting       0..3       wait kind: attempt 0 is a gate wait (approval,
                                input, external, scheduled), attempt >= 1 a tool
                                wait (delegation, scheduled)
3     Completed      0..3       result kind (attempt 0: supplied, blocked, denied,
                                external; else output, error, denied, external)
4     Indeterminate  1..3       reason (outcome_unknown or attempts_exhausted)
====  =============  =========  ===============================================

A batch holds one or two calls ``c0``/``c1`` (tools ``tool0``/``tool1``) of step 1; the
second call is Requested unless the first is terminal (calls progress in order, I8).
The Run is Awaiting exactly when a call is Awaiting (the ticket targets it, its id is
the wait's correlation ``tk-c0``/``tk-c1``), Running otherwise. Every snapshot also
remembers one earlier, already applied resume (ticket ``tk-old``), so the "already
applied" and "stale" answers are reachable.
"""

from __future__ import annotations

from collections.abc import Sequence

import attrs

from runkernel.kernel.history import RunHistory
from runkernel.kernel.policies import (
    IndeterminateChoice,
    Policies,
    RecoveryMode,
    RetryPolicy,
    ToolPolicy,
    ToolRecoveryPolicy,
)
from runkernel.kernel.protocol import (
    Approve,
    DelegationResult,
    Deny,
    ExternalResult,
    ProvideInput,
    ResumeCommand,
    ResumePayload,
    TimerFired,
)
from runkernel.kernel.state import (
    ActiveToolBatch,
    AppliedResume,
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
    ThreadHead,
    ToolCall,
    ToolResult,
    TypedError,
    Wait,
    is_terminal,
)
from runkernel.kernel.validate_resume import payload_for
from runkernel.kernel.validate_resume import resumed_event as legal_resumed_event
from runkernel.kernel.values import (
    EndCauseKind,
    IndeterminateReason,
    JsonValue,
    ResultKind,
    Role,
    WaitKind,
)

THREAD = "th-1"
RUN = "run-1"
BATCH = "b-1"
VERSION = 4
OLD_TICKET = "tk-old"
EXPIRES_AT = "2026-06-01T00:00:00Z"

REQUESTED, EXECUTING, AWAITING, COMPLETED, INDETERMINATE = 0, 1, 2, 3, 4

WAIT_KINDS = (WaitKind.APPROVAL, WaitKind.INPUT, WaitKind.DELEGATION, WaitKind.SCHEDULED, WaitKind.EXTERNAL)
END_CAUSES = (
    EndCauseKind.COMPLETED,
    EndCauseKind.STEP_LIMIT,
    EndCauseKind.CANCELLED,
    EndCauseKind.STOPPED,
    EndCauseKind.FAILED,
    EndCauseKind.OUTCOME_UNKNOWN,
)
TICKETS = ("tk-c0", "tk-c1", OLD_TICKET, "tk-new")

#: The earlier resume every snapshot remembers (ticket ``tk-old``, an approval).
OLD_COMMAND = ResumeCommand(RUN, OLD_TICKET, WaitKind.APPROVAL, Approve())
OLD_DIGEST = OLD_COMMAND.digest()


# --- builders (no contracts of their own) ---------------------------------------------


def terminal_code(code: int) -> bool:
    return code == COMPLETED or code == INDETERMINATE


def wait_kind(attempt: int, variant: int) -> WaitKind:
    """The wait of an Awaiting call: gate waits at attempt 0, tool waits after."""
    if attempt == 0:
        if variant == 0:
            return WaitKind.APPROVAL
        if variant == 1:
            return WaitKind.INPUT
        if variant == 2:
            return WaitKind.EXTERNAL
        return WaitKind.SCHEDULED
    if variant % 2 == 0:
        return WaitKind.DELEGATION
    return WaitKind.SCHEDULED


def ticket_for(index: int) -> str:
    return "tk-c0" if index == 0 else "tk-c1"


def make_wait(index: int, attempt: int, variant: int) -> Wait:
    kind = wait_kind(attempt, variant)
    if kind is WaitKind.APPROVAL:
        return Wait(kind, ticket_for(index), expires_at=EXPIRES_AT)
    if kind is WaitKind.DELEGATION:
        return Wait(kind, ticket_for(index), child="child-run")
    if kind is WaitKind.SCHEDULED:
        return Wait(kind, ticket_for(index), due_at=EXPIRES_AT)
    return Wait(kind, ticket_for(index))


def result_kind(attempt: int, variant: int) -> ResultKind:
    if variant == 2:
        return ResultKind.DENIED
    if variant == 3:
        return ResultKind.EXTERNAL
    if attempt == 0:
        return ResultKind.SUPPLIED if variant == 0 else ResultKind.BLOCKED
    return ResultKind.OUTPUT if variant == 0 else ResultKind.ERROR


def status_ok(code: int, attempt: int, variant: int) -> bool:
    """``(code, attempt, variant)`` names a status exactly, without decoding."""
    if not (0 <= code <= 4 and 0 <= attempt <= 3 and 0 <= variant <= 3):
        return False
    if code == REQUESTED:
        return attempt == 0
    if code == EXECUTING or code == INDETERMINATE:
        return attempt >= 1
    return True


def make_status(index: int, code: int, attempt: int, variant: int) -> CallStatus:
    """The status ``(code, attempt, variant)`` names exactly (see ``status_ok``)."""
    if code == REQUESTED:
        return CallRequested()
    if code == EXECUTING:
        return CallExecuting(attempt)
    if code == AWAITING:
        return CallAwaiting(attempt, make_wait(index, attempt, variant))
    if code == COMPLETED:
        return CallCompleted(attempt, ToolResult(result_kind(attempt, variant), "out"))
    reason = (
        IndeterminateReason.OUTCOME_UNKNOWN
        if variant % 2 == 0
        else IndeterminateReason.ATTEMPTS_EXHAUSTED
    )
    return CallIndeterminate(attempt, reason)


def small(value: int, size: int) -> int:
    """``value % size`` as a *concrete* int: under CrossHair this branches once per
    possible result instead of handing the kernel a symbolic int.

    The kernel formats ids, attempts and steps into its rejection messages eagerly
    (``_require(cond, rule, f"...")``), and formatting a symbolic int realizes it: the
    solver pins it to one model value and the search stops varying it (a planted
    Executing{2} bug went unfound in 100+ iterations that way). With concrete values
    CrossHair enumerates the decoders' choices as a path tree, never repeats a
    combination, and "confirmed over all paths" means every combination was checked.
    """
    rest = value % size
    for candidate in range(size - 1):
        if rest == candidate:
            return candidate
    return size - 1


def decode_status(index: int, code: int, attempt: int, variant: int) -> CallStatus:
    """Any three ints name a well-formed status (read modulo the table's ranges)."""
    code = small(code, 5)
    if code == REQUESTED:
        return CallRequested()
    if code == EXECUTING:
        return CallExecuting(1 + small(attempt, 3))
    if code == INDETERMINATE:
        return make_status(index, code, 1 + small(attempt, 3), small(variant, 2))
    if code == AWAITING:
        attempt = small(attempt, 4)
        return make_status(index, code, attempt, small(variant, 4 if attempt == 0 else 2))
    return make_status(index, code, small(attempt, 4), small(variant, 4))


def make_call(index: int, status: CallStatus) -> ToolCall:
    return ToolCall(f"c{index}", f"tool{index}", {"x": index}, f"op-{index}", status)


def batch_of(statuses: Sequence[CallStatus], finalized: bool = False) -> ActiveToolBatch:
    return ActiveToolBatch(
        BATCH, 1, finalized, tuple(make_call(i, status) for i, status in enumerate(statuses))
    )


def decode_batch(two: bool, s0: int, a0: int, v0: int, s1: int, a1: int, v1: int) -> ActiveToolBatch:
    """An open batch of one or two calls in order: c1 waits its turn unless c0 is terminal."""
    first = decode_status(0, s0, a0, v0)
    if not two:
        return batch_of((first,))
    second = decode_status(1, s1, a1, v1) if is_terminal(first) else CallRequested()
    return batch_of((first, second))


def snapshot_of(batch: ActiveToolBatch | None, state: RunState | None = None, step: int = 1) -> RunSnapshot:
    """A committed snapshot around ``batch``: Awaiting iff a call awaits (I2)."""
    tickets = {OLD_TICKET}
    if state is None:
        state = Running()
        if batch is not None:
            for call in batch.calls:
                if isinstance(call.status, CallAwaiting):
                    wait = call.status.wait
                    state = Awaiting(ResumeTicket(wait.correlation, wait.kind, call.call_id))
                    tickets.add(wait.correlation)
    return RunSnapshot(
        thread_id=THREAD,
        run_id=RUN,
        version=VERSION,
        step=step,
        state=state,
        batch=batch,
    )


def history_of(snapshot: RunSnapshot) -> RunHistory:
    """The history ``snapshot_of``'s Runs committed: ticket ``tk-old`` (resumed by
    ``OLD_COMMAND``), the ticket of each awaiting call, and the batch if it is finalized."""
    batch = snapshot.batch
    tickets = {OLD_TICKET}
    if batch is not None:
        tickets |= {c.status.wait.correlation for c in batch.calls if isinstance(c.status, CallAwaiting)}
    closed = frozenset({BATCH}) if batch is not None and batch.finalized else frozenset()
    return RunHistory(frozenset(tickets), closed, (AppliedResume(OLD_TICKET, OLD_DIGEST),))


def decode_snapshot(two: bool, s0: int, a0: int, v0: int, s1: int, a1: int, v1: int) -> RunSnapshot:
    """A Run with an open batch (any ints name a well-formed one)."""
    return snapshot_of(decode_batch(two, s0, a0, v0, s1, a1, v1))


def decode_policies(mode: int, max_attempts: int, retries: int, end_on_indeterminate: bool, max_steps: int) -> Policies:
    """mode % 3: replay, reconnect, indeterminate; 1 + max_attempts % 3; 1 + retries % 2;
    max_steps % 3 where 0 means no limit."""
    recovery_mode = (RecoveryMode.REPLAY, RecoveryMode.RECONNECT, RecoveryMode.INDETERMINATE)[small(mode, 3)]
    policy = ToolPolicy(ToolRecoveryPolicy(recovery_mode, 1 + small(max_attempts, 3)), RetryPolicy(1 + small(retries, 2)))
    limit = small(max_steps, 3)
    return Policies(
        tools={"tool0": policy, "tool1": policy},
        max_steps=limit if limit > 0 else None,
        on_indeterminate=(
            IndeterminateChoice.END_RUN if end_on_indeterminate else IndeterminateChoice.PUBLISH
        ),
    )


def head_of(snapshot: RunSnapshot) -> ThreadHead:
    active = None if isinstance(snapshot.state, Ended) else snapshot.run_id
    return ThreadHead(snapshot.thread_id, snapshot.version, active)


def commit_on(
    snapshot: RunSnapshot,
    batch: ActiveToolBatch | None,
    state: RunState | None = None,
    messages: Sequence[Message] = (),
    events: Sequence[Event] = (),
) -> ThreadCommit:
    """A commit on top of ``snapshot``: same step, no inference result."""
    return ThreadCommit(
        thread_id=snapshot.thread_id,
        run_id=snapshot.run_id,
        expected_version=snapshot.version,
        step=snapshot.step,
        disposition=snapshot.state if state is None else state,
        batch=batch,
        messages=tuple(messages),
        events=tuple(events),
    )


def with_status(batch: ActiveToolBatch, index: int, status: CallStatus) -> ActiveToolBatch:
    call = batch.calls[index]
    return batch.replace_call(attrs.evolve(call, status=status))


def publish(batch: ActiveToolBatch) -> tuple[Message, ...]:
    return tuple(Message(Role.TOOL, "result", call_id=c.call_id) for c in batch.calls)


def resumed_event(ticket_id: str, call_id: str, wait: WaitKind, moved: CallStatus) -> Event:
    """The resumed event of RUN for ``ticket_id``, whose payload fits moving the call to ``moved``."""
    return legal_resumed_event(RUN, ResumeTicket(ticket_id, wait, call_id), payload_for(wait, moved))


def make_run_state(code: int, variant: int) -> RunState:
    """0 Running, 1 Awaiting (wait kind by variant), 2 Ended (cause by variant)."""
    if code == 0:
        return Running()
    if code == 1:
        return Awaiting(ResumeTicket("tk-c0", WAIT_KINDS[variant % 5], "c0"))
    cause = END_CAUSES[variant]
    error = TypedError("E", "boom") if cause is EndCauseKind.FAILED else None
    return Ended(EndCause(cause, error))


def make_payload(payload: int, value: JsonValue) -> ResumePayload:
    if payload == 0:
        return Approve()
    if payload == 1:
        return Deny(value)
    if payload == 2:
        return ProvideInput(value)
    if payload == 3:
        return ExternalResult(value)
    if payload == 4:
        return DelegationResult(value)
    return TimerFired()
