"""CrossHair contracts over the kernel's pure functions (PEP 316 docstring style).

Every ``check_*`` function below is a contract: it builds kernel values from a few
small primitive parameters (ints standing for enums and statuses, bools), calls one
kernel function, and states what must hold with ``pre:`` and ``post:`` predicates.
``proofs/crosshair_check.py`` runs CrossHair on them with an explicit iteration budget
and fails on any counterexample, on any precondition that cannot be met and on any
contract that nothing checked.

Rules kept here (see /work/shared/NOTES.md, "CrossHair"):

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

from runkernel.kernel.decide import check_resume, decide
from runkernel.kernel.edges import (  # some names are used only in post: conditions
    CALL_EDGES,
    TERMINAL_PHASES,  # noqa: F401
    AttemptRule,
    CallPhase,
    RunPhase,
    call_phase,
    run_phase,
)
from runkernel.kernel.effects_plan import closed_status
from runkernel.kernel.policies import (
    IndeterminateChoice,
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
    Commit,
    DeadlinePassed,
    Decision,
    DelegationResult,
    Deny,
    EndRequest,
    Execute,
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
from runkernel.kernel.rules import Rejection, Rule
from runkernel.kernel.state import (
    RESUMED_EVENT,
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
    RunSnapshot,
    RunState,
    Running,
    ThreadCommit,
    ThreadHead,
    ToolCall,
    ToolResult,
    ToolUse,
    TypedError,
    Wait,
    is_terminal,
)
from runkernel.kernel.validate import Accepted, validate_commit
from runkernel.kernel.validate_calls import Illegal, check_order
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
    closed = frozenset({BATCH}) if batch is not None and batch.finalized else frozenset()
    return RunSnapshot(
        thread_id=THREAD,
        run_id=RUN,
        version=VERSION,
        step=step,
        state=state,
        batch=batch,
        tickets_used=frozenset(tickets),
        resumes_applied=(AppliedResume(OLD_TICKET, OLD_DIGEST),),
        closed_batch_ids=closed,
    )


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
    return batch.replace_call(ToolCall(call.call_id, call.tool, call.arguments, call.operation_id, status))


def publish(batch: ActiveToolBatch) -> tuple[Message, ...]:
    return tuple(Message(Role.TOOL, "result", call_id=c.call_id) for c in batch.calls)


def resumed_event(ticket_id: str, call_id: str) -> Event:
    return Event(
        RESUMED_EVENT,
        {"ticket_id": ticket_id, "call_id": call_id, "command": {}, "digest": "d" * 64},
    )


# --- properties of a decision (decide and recover) ---------------------------------------


def commits_of(effects: Sequence[object]) -> list[ThreadCommit]:
    return [effect.commit for effect in effects if isinstance(effect, Commit)]


def commits_chain_accepted(before: RunSnapshot, decision: Decision) -> bool:
    """Every commit of ``decision`` is accepted by validate_commit, one after the other,
    and leads to the decision's state (no commit: the state is unchanged)."""
    snapshot = before
    for commit in commits_of(decision.effects):
        verdict = validate_commit(head_of(snapshot), snapshot, commit)
        if not isinstance(verdict, Accepted):
            return False
        snapshot = verdict.run
    return snapshot == decision.state


def same_batch_pairs(before: RunSnapshot, commit: ThreadCommit) -> list[tuple[ToolCall, ToolCall]]:
    """(committed call, the same call in ``commit``) for the snapshot's batch."""
    if before.batch is None or commit.batch is None:
        return []
    if commit.batch.batch_id != before.batch.batch_id:
        return []
    return list(zip(before.batch.calls, commit.batch.calls))


def terminal_calls_kept(before: RunSnapshot, decision: Decision) -> bool:
    """I7: a committed terminal status (and its result) never changes."""
    return all(
        new.status == old.status
        for commit in commits_of(decision.effects)
        for old, new in same_batch_pairs(before, commit)
        if is_terminal(old.status)
    )


def attempts_never_decrease(before: RunSnapshot, decision: Decision) -> bool:
    return all(
        new.status.attempt >= old.status.attempt
        for commit in commits_of(decision.effects)
        for old, new in same_batch_pairs(before, commit)
    )


def executing_never_requested(before: RunSnapshot, decision: Decision) -> bool:
    return not any(
        isinstance(old.status, CallExecuting) and isinstance(new.status, CallRequested)
        for commit in commits_of(decision.effects)
        for old, new in same_batch_pairs(before, commit)
    )


def inference_only_without_open_batch(before: RunSnapshot, decision: Decision) -> bool:
    """I8: at every RequestInference effect the state committed so far is Running with
    no open batch."""
    open_batch = before.open_batch
    running = isinstance(before.state, Running)
    for effect in decision.effects:
        if isinstance(effect, Commit):
            batch = effect.commit.batch
            open_batch = batch if batch is not None and batch.is_open else None
            running = isinstance(effect.commit.disposition, Running)
        if isinstance(effect, RequestInference) and (open_batch is not None or not running):
            return False
    return True


def no_restart_unless_replay(before: RunSnapshot, policies: Policies, decision: Decision) -> bool:
    """I9: recovery never starts the executor again for a call it finds Executing
    unless that tool's policy is replay."""
    if before.batch is None:
        return True
    for effect in decision.effects:
        if isinstance(effect, Execute):
            call = before.batch.call(effect.call_id)
            if call is not None and isinstance(call.status, CallExecuting):
                if policies.for_tool(call.tool).recovery.mode is not RecoveryMode.REPLAY:
                    return False
    return True


def failed_properties(before: RunSnapshot, decision: Decision) -> tuple[str, ...]:
    """The names of the decision properties that do not hold."""
    checks = (
        ("commits_accepted_by_validate_commit", commits_chain_accepted(before, decision)),
        ("attempts_never_decrease", attempts_never_decrease(before, decision)),
        ("terminal_results_never_change", terminal_calls_kept(before, decision)),
        ("executing_never_back_to_requested", executing_never_requested(before, decision)),
        ("inference_only_without_open_batch", inference_only_without_open_batch(before, decision)),
    )
    return tuple(name for name, holds in checks if not holds)


# --- small helpers: confirmed over all paths ------------------------------------------


def check_is_terminal(code: int, attempt: int, variant: int) -> bool:
    """is_terminal holds exactly for Completed and Indeterminate.

    pre: status_ok(code, attempt, variant)
    post: __return__ == (code == 3 or code == 4)
    """
    return is_terminal(make_status(0, code, attempt, variant))


def check_closed_status(code: int, attempt: int, variant: int) -> CallStatus:
    """closed_status (what a call becomes when its Run ends) always returns a terminal
    status, keeps terminal ones and the attempt, and says run_ended exactly for a call
    that never started.

    pre: status_ok(code, attempt, variant)
    post: is_terminal(__return__)
    post: (not terminal_code(code)) or __return__ == make_status(0, code, attempt, variant)
    post: __return__.attempt == attempt
    post: terminal_code(code) or __return__ == CallIndeterminate(attempt, IndeterminateReason.RUN_ENDED if attempt == 0 else IndeterminateReason.OUTCOME_UNKNOWN)
    """
    return closed_status(make_status(0, code, attempt, variant))


def check_call_phase(code: int, attempt: int, variant: int) -> CallPhase:
    """call_phase is total, never Finalized (a batch property), and agrees with
    is_terminal.

    pre: status_ok(code, attempt, variant)
    post: __return__ is (CallPhase.REQUESTED, CallPhase.EXECUTING, CallPhase.AWAITING, CallPhase.COMPLETED, CallPhase.INDETERMINATE)[code]
    post: (__return__ in TERMINAL_PHASES) == is_terminal(make_status(0, code, attempt, variant))
    """
    return call_phase(make_status(0, code, attempt, variant))


def make_run_state(code: int, variant: int) -> RunState:
    """0 Running, 1 Awaiting (wait kind by variant), 2 Ended (cause by variant)."""
    if code == 0:
        return Running()
    if code == 1:
        return Awaiting(ResumeTicket("tk-c0", WAIT_KINDS[variant % 5], "c0"))
    cause = END_CAUSES[variant]
    error = TypedError("E", "boom") if cause is EndCauseKind.FAILED else None
    return Ended(EndCause(cause, error))


def check_run_phase(code: int, variant: int) -> RunPhase:
    """run_phase is total and names the state's machine phase.

    pre: 0 <= code <= 2
    pre: 0 <= variant <= 5
    post: __return__ is (RunPhase.RUNNING, RunPhase.AWAITING, RunPhase.ENDED)[code]
    """
    return run_phase(make_run_state(code, variant))


def order_spec(codes: Sequence[int]) -> bool:
    """The order predicate as DESIGN.md words it (I8): terminal calls, then at most one
    in progress, then Requested calls."""
    index = 0
    while index < len(codes) and terminal_code(codes[index]):
        index += 1
    if index < len(codes) and (codes[index] == EXECUTING or codes[index] == AWAITING):
        index += 1
    return all(code == REQUESTED for code in codes[index:])


def canonical_status(index: int, code: int) -> CallStatus:
    return make_status(index, code, 1 if code == EXECUTING or code == INDETERMINATE else 0, 0)


def check_order_predicate(s0: int, s1: int, s2: int) -> bool:
    """validate's call-order check (``check_order``) accepts three calls exactly when
    they follow the spec's order. (Shorter batches are prefixes: every prefix of an
    ordered sequence is ordered, and the check reads calls left to right.)

    pre: 0 <= s0 <= 4 and 0 <= s1 <= 4 and 0 <= s2 <= 4
    post: __return__ == order_spec((s0, s1, s2))
    """
    calls = (make_call(0, canonical_status(0, s0)), make_call(1, canonical_status(1, s1)), make_call(2, canonical_status(2, s2)))
    try:
        check_order(calls)
    except Illegal:
        return False
    return True


def check_first_open_call(s0: int, s1: int) -> ToolCall | None:
    """first_open_call is None iff every call is terminal, else the first call that is
    not terminal; all_terminal agrees.

    pre: 0 <= s0 <= 4 and 0 <= s1 <= 4
    post: (__return__ is None) == batch_of((canonical_status(0, s0), canonical_status(1, s1))).all_terminal()
    post: (__return__ is None) == (terminal_code(s0) and terminal_code(s1))
    post: __return__ is None or __return__.call_id == ("c1" if terminal_code(s0) else "c0")
    """
    return batch_of((canonical_status(0, s0), canonical_status(1, s1))).first_open_call()


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


def json_value(value: int, reordered: bool) -> JsonValue:
    """A few JSON values; ``reordered`` builds the same value with its object keys
    inserted in another order."""
    if value == 0:
        return None
    if value == 1:
        return 7
    if value == 2:
        return "é"
    if value == 3:
        return {"b": [2], "a": {"y": 1, "x": 0}} if reordered else {"a": {"x": 0, "y": 1}, "b": [2]}
    return [1, {"k": "v"}]


def check_digest_equal(payload: int, value: int) -> tuple[str, str]:
    """Equal ResumeCommands, built separately (object keys inserted in another order),
    have equal digests: 64 hex digits of SHA-256 over the canonical command.

    pre: 0 <= payload <= 5 and 0 <= value <= 4
    post: __return__[0] == __return__[1] and len(__return__[0]) == 64 and all(ch in "0123456789abcdef" for ch in __return__[0])
    """
    kinds = (WaitKind.APPROVAL, WaitKind.APPROVAL, WaitKind.INPUT, WaitKind.EXTERNAL, WaitKind.DELEGATION, WaitKind.SCHEDULED)
    one = ResumeCommand(RUN, "tk-é", kinds[payload], make_payload(payload, json_value(value, False)))
    two = ResumeCommand(RUN, "tk-é", kinds[payload], make_payload(payload, json_value(value, True)))
    assert one == two
    return one.digest(), two.digest()


#: Pairwise different commands: another ticket, wait kind, payload type or value.
DISTINCT_COMMANDS = (
    ResumeCommand(RUN, "tk-c0", WaitKind.APPROVAL, Approve()),
    ResumeCommand(RUN, "tk-c1", WaitKind.APPROVAL, Approve()),
    ResumeCommand(RUN, "tk-c0", WaitKind.APPROVAL, Deny(None)),
    ResumeCommand(RUN, "tk-c0", WaitKind.APPROVAL, Deny("no")),
    ResumeCommand(RUN, "tk-c0", WaitKind.INPUT, ProvideInput("no")),
    ResumeCommand(RUN, "tk-c0", WaitKind.EXTERNAL, ExternalResult("no")),
    ResumeCommand("run-2", "tk-c0", WaitKind.APPROVAL, Approve()),
)


def check_digest_distinct(first: int, second: int) -> bool:
    """Different commands (another run, ticket, wait kind, payload type or value) have
    different digests, so a repeat is told apart from a stale command. Returns whether
    the digests are equal.

    pre: 0 <= first <= 6 and 0 <= second <= 6
    post: __return__ == (first == second)
    """
    return DISTINCT_COMMANDS[first].digest() == DISTINCT_COMMANDS[second].digest()


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
    verdict = validate_commit(head_of(before), before, commit_on(before, before.batch))
    if not isinstance(verdict, Accepted):
        return False, False
    after = verdict.run
    same = (
        after.version == before.version + 1
        and (after.state, after.batch, after.step) == (before.state, before.batch, before.step)
        and after.tickets_used == before.tickets_used
        and after.resumes_applied == before.resumes_applied
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
    return isinstance(validate_commit(None, None, commit), Accepted)


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
    verdict = validate_commit(head_of(snapshot), snapshot, commit)
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
    verdict = validate_commit(head_of(snapshot), snapshot, commit)
    return verdict.rule if isinstance(verdict, Rejection) else None


def awaiting_snapshot(two: bool, attempt: int, variant: int) -> RunSnapshot:
    """An Awaiting Run: c0 awaits, or (two calls) c0 is Completed and c1 awaits; the
    wait is ``decode_status(AWAITING, attempt, variant)`` (10 kinds of wait)."""
    if two:
        return decode_snapshot(True, COMPLETED, 1, 0, AWAITING, attempt, variant)
    return decode_snapshot(False, AWAITING, attempt, variant, 0, 0, 0)


def resume_commit(snapshot: RunSnapshot, ticket_id: str, outcome: bool) -> ThreadCommit:
    """The commit that applies a resume of the awaiting call: it moves to Executing{n+1}
    (outcome False) or is completed as denied / external (outcome True)."""
    assert isinstance(snapshot.state, Awaiting) and snapshot.batch is not None
    ticket = snapshot.state.ticket
    call = snapshot.batch.call(ticket.call_id)
    assert call is not None and isinstance(call.status, CallAwaiting)
    status: CallStatus
    if not outcome:
        status = CallExecuting(call.status.attempt + 1)
    else:
        kind = ResultKind.DENIED if ticket.wait is WaitKind.APPROVAL else ResultKind.EXTERNAL
        status = CallCompleted(call.status.attempt, ToolResult(kind, "answer"))
    index = snapshot.batch.calls.index(call)
    batch = with_status(snapshot.batch, index, status)
    messages: tuple[Message, ...] = ()
    if batch.all_terminal():
        batch = batch_of([c.status for c in batch.calls], finalized=True)
        messages = publish(batch)
    return commit_on(snapshot, batch, Running(), messages, (resumed_event(ticket_id, call.call_id),))


def check_validate_rejects_foreign_resume(other: int, outcome: bool, two: bool, attempt: int, variant: int) -> Rule | None:
    """A resume commit whose 'resumed' event names another ticket (the other call's,
    an old applied one, a fresh one) is rejected (resume-matches-ticket). Returns the
    rule of the rejection.

    pre: 0 <= other <= 3
    pre: TICKETS[other] != ("tk-c1" if two else "tk-c0")
    post: __return__ is Rule.RESUME
    """
    snapshot = awaiting_snapshot(two, attempt, variant)
    verdict = validate_commit(head_of(snapshot), snapshot, resume_commit(snapshot, TICKETS[other], outcome))
    return verdict.rule if isinstance(verdict, Rejection) else None


def check_validate_accepts_matching_resume(outcome: bool, two: bool, attempt: int, variant: int) -> bool:
    """The same resume commit naming the committed ticket is accepted and the Run is
    Running again (the control for check_validate_rejects_foreign_resume).

    post: __return__
    """
    snapshot = awaiting_snapshot(two, attempt, variant)
    assert isinstance(snapshot.state, Awaiting)
    verdict = validate_commit(head_of(snapshot), snapshot, resume_commit(snapshot, snapshot.state.ticket.ticket_id, outcome))
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
        events = (resumed_event(snapshot.state.ticket.ticket_id, "c0"),)
    if ending:
        state = Ended(EndCause(EndCauseKind.STOPPED))
        events = ()
    after = batch_of((after_status,))
    messages: tuple[Message, ...] = ()
    if after.all_terminal():
        after = batch_of((after_status,), finalized=True)
        messages = publish(after)
    verdict = validate_commit(head_of(snapshot), snapshot, commit_on(snapshot, after, state, messages, events))
    return not isinstance(verdict, Accepted) or edge_legal(before, after_status)


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
            outcome = ToolDelegated(ticket_id, "child-run")
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
    result = decide(snapshot, decode_input(snapshot, kind, target, attempt, variant, ticket), policies)
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
    verdict = validate_commit(head, None, commits[0]) if len(commits) == 1 else None
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
    result = decide(snapshot, decode_input(snapshot, kind, 0, 0, variant, 0), policies)
    unchanged = snapshot == settled_snapshot(shape, cause, step)
    if isinstance(result, Rejection):
        return () if unchanged else ("rejection_leaves_snapshot_unchanged",)
    ended = ("ended_run_accepted_an_input",) if shape >= 2 else ()
    return failed_properties(snapshot, result) + ended + (() if unchanged else ("snapshot_unchanged",))


def expected_resume_ok(snapshot: RunSnapshot, command: ResumeCommand) -> bool:
    """I14 as DESIGN.md words it, for commands not applied before."""
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
    verdict = check_resume(snapshot, command)
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
