"""Unit tests of decide and recover on small hand-built states, one rule each."""

from __future__ import annotations

from collections.abc import Callable

import attrs
import pytest

from runkernel.kernel.decide import KernelBug, decide
from runkernel.kernel.history import RunHistory, commit_keys
from runkernel.kernel.effects_plan import close_batch
from runkernel.kernel.policies import (
    IndeterminateChoice,
    Policies,
    RecoveryMode,
    RetryPolicy,
    ToolPolicy,
    ToolRecoveryPolicy,
)
from runkernel.kernel.protocol import (
    Allow,
    Approve,
    Commit,
    DeadlinePassed,
    Deny,
    EndRequest,
    Execute,
    ExternalResult,
    GateVerdict,
    InferenceResult,
    Input,
    OperationStatus,
    ProvideInput,
    QueryStatus,
    RequestInference,
    RequireWait,
    ResumeCommand,
    RunGate,
    StatusReport,
    TimerFired,
    ToolDelegated,
    ToolFailure,
    ToolFinished,
    ToolOutcomeLost,
    ToolOutput,
)
from runkernel.kernel.recover import RecoveryRow, recover
from runkernel.kernel.rules import Rejection, Rule
from runkernel.kernel.state import (
    RESUMED_EVENT,
    Awaiting,
    CallAwaiting,
    CallCompleted,
    CallExecuting,
    CallIndeterminate,
    CallRequested,
    EndCause,
    Ended,
    Event,
    Message,
    Running,
    RunSnapshot,
    ThreadCommit,
    ThreadHead,
    ToolResult,
    TypedError,
)
from runkernel.kernel.delegation import child_identity
from runkernel.kernel.validate import NO_TICKETS_SEEN, validate_commit
from runkernel.kernel.values import (
    EndCauseKind,
    IndeterminateReason,
    ResultKind,
    Role,
    WaitKind,
)
from runkernel.testing import Builder, activate, step

POLICIES = Policies(
    tools={
        "fetch": ToolPolicy(ToolRecoveryPolicy(RecoveryMode.REPLAY, 2), RetryPolicy(2)),
        "job": ToolPolicy(ToolRecoveryPolicy(RecoveryMode.RECONNECT)),
        "pay": ToolPolicy(ToolRecoveryPolicy(RecoveryMode.INDETERMINATE)),
        "ask": ToolPolicy(ToolRecoveryPolicy(RecoveryMode.INDETERMINATE), sequential_delegation=True),
    }
)


#: Run ``r`` of Thread ``t``, activated: ``ACTIVE.propose(...)`` opens its batch (calls from ``c0``)
ACTIVE = Builder("t", POLICIES).start("r", ("task",))


def executing(*tools: str) -> RunSnapshot:
    return step(ACTIVE.propose(*tools, first=0).snapshot, GateVerdict("c0", Allow()), POLICIES).state


def awaiting(kind: WaitKind, *tools: str, ticket: str = "tk-0001") -> RunSnapshot:
    return step(ACTIVE.propose(*tools, first=0).snapshot, GateVerdict("c0", RequireWait(kind, ticket)), POLICIES).state


def effects_of(state: RunSnapshot, event: object) -> tuple[object, ...]:
    verdict = decide(state, event, POLICIES)  # type: ignore[arg-type]
    assert not isinstance(verdict, Rejection), str(verdict)
    return verdict.effects


# --- resume validation (I14) ----------------------------------------------------------


def test_a_resume_with_the_wrong_wait_kind_is_rejected() -> None:
    state = awaiting(WaitKind.APPROVAL, "pay")
    verdict = decide(state, ResumeCommand("r", "tk-0001", WaitKind.INPUT, ProvideInput("x")), POLICIES)
    assert isinstance(verdict, Rejection) and verdict.rule is Rule.WAIT_KIND_MISMATCH


def test_a_resume_with_the_wrong_payload_type_is_rejected() -> None:
    state = awaiting(WaitKind.APPROVAL, "pay")
    verdict = decide(state, ResumeCommand("r", "tk-0001", WaitKind.APPROVAL, TimerFired()), POLICIES)
    assert isinstance(verdict, Rejection) and verdict.rule is Rule.PAYLOAD_TYPE


def test_a_resume_for_another_ticket_or_run_is_rejected() -> None:
    state = awaiting(WaitKind.APPROVAL, "pay")
    forged = decide(state, ResumeCommand("r", "tk-9999", WaitKind.APPROVAL, Approve()), POLICIES)
    assert isinstance(forged, Rejection) and forged.rule is Rule.TICKET_MISMATCH
    elsewhere = decide(state, ResumeCommand("other", "tk-0001", WaitKind.APPROVAL, Approve()), POLICIES)
    assert isinstance(elsewhere, Rejection) and elsewhere.rule is Rule.WRONG_RUN


#: Ticket ids that a sloppy comparison (case-folded, trimmed, by prefix) would take for
#: NEAR_TICKET; the kernel compares exact strings, so each is another ticket.
NEAR_TICKET = "4f0c8a9d2b7e41c6a3d5e8f90b1c2d3e"
NEAR_MISSES = {
    "upper-case": NEAR_TICKET.upper(),
    "one-letter-upper": NEAR_TICKET.replace("f", "F", 1),
    "leading-space": " " + NEAR_TICKET,
    "trailing-newline": NEAR_TICKET + "\n",
    "prefix": NEAR_TICKET[:16],
    "extended": NEAR_TICKET + "0",
    "shared-prefix": NEAR_TICKET[:-1] + "f",
}
NEAR_INPUTS: dict[str, Callable[[str], Input]] = {
    "resume": lambda ticket_id: ResumeCommand("r", ticket_id, WaitKind.APPROVAL, Approve()),
    "deadline": lambda ticket_id: DeadlinePassed(ticket_id, "2030-01-01T00:00:00Z"),
}


@pytest.mark.parametrize("near_miss", list(NEAR_MISSES.values()), ids=list(NEAR_MISSES))
@pytest.mark.parametrize("make", list(NEAR_INPUTS.values()), ids=list(NEAR_INPUTS))
def test_decide_refuses_a_ticket_id_that_only_nearly_matches(near_miss: str, make: Callable[[str], Input]) -> None:
    # an approval whose deadline has passed, so that both a resume and the deadline apply
    state = step(
        ACTIVE.propose("pay", first=0).snapshot,
        GateVerdict("c0", RequireWait(WaitKind.APPROVAL, NEAR_TICKET, expires_at="2000-01-01T00:00:00Z")),
        POLICIES,
    ).state
    exact = decide(state, make(NEAR_TICKET), POLICIES)
    assert not isinstance(exact, Rejection) and exact.commit is not None, exact
    verdict = decide(state, make(near_miss), POLICIES)
    # a typed rejection: no commit, no effect, the Run stays Awaiting its ticket
    assert isinstance(verdict, Rejection), f"{near_miss!r} was taken for {NEAR_TICKET!r}: {verdict}"
    assert verdict.rule is Rule.TICKET_MISMATCH
    assert isinstance(state.state, Awaiting) and state.state.ticket.ticket_id == NEAR_TICKET


def test_a_resume_while_running_is_rejected() -> None:
    verdict = decide(executing("pay"), ResumeCommand("r", "tk-0001", WaitKind.APPROVAL, Approve()), POLICIES)
    assert isinstance(verdict, Rejection) and verdict.rule is Rule.RUN_NOT_AWAITING


def test_approve_moves_the_call_to_its_first_attempt_and_executes_after_the_commit() -> None:
    state = awaiting(WaitKind.APPROVAL, "pay")
    verdict = decide(state, ResumeCommand("r", "tk-0001", WaitKind.APPROVAL, Approve()), POLICIES)
    assert not isinstance(verdict, Rejection)
    kinds = [type(e) for e in verdict.effects]
    assert kinds.index(Commit) < kinds.index(Execute)
    assert verdict.state.batch is not None
    assert verdict.state.batch.calls[0].status == CallExecuting(1)
    assert isinstance(verdict.state.state, Running)
    assert verdict.commit is not None
    history = RunHistory(tickets=frozenset({"tk-0001"})).plus(commit_keys(state, verdict.commit))
    repeat = decide(verdict.state, ResumeCommand("r", "tk-0001", WaitKind.APPROVAL, Approve()), POLICIES, history)
    assert isinstance(repeat, Rejection) and repeat.rule is Rule.ALREADY_APPLIED
    stale = decide(verdict.state, ResumeCommand("r", "tk-0001", WaitKind.APPROVAL, Deny()), POLICIES, history)
    assert isinstance(stale, Rejection) and stale.rule is Rule.STALE_COMMAND


@pytest.mark.parametrize(
    "kind, payload, result",
    [
        (WaitKind.APPROVAL, Deny("no"), ResultKind.DENIED),
        (WaitKind.EXTERNAL, ExternalResult({"a": 1}), ResultKind.EXTERNAL),
    ],
)
def test_deny_and_external_answers_complete_the_call(kind: WaitKind, payload: object, result: ResultKind) -> None:
    state = awaiting(kind, "pay")
    verdict = decide(state, ResumeCommand("r", "tk-0001", kind, payload), POLICIES)  # type: ignore[arg-type]
    assert not isinstance(verdict, Rejection)
    assert verdict.state.batch is not None
    status = verdict.state.batch.calls[0].status
    assert isinstance(status, CallCompleted) and status.result.kind is result
    assert verdict.state.batch.finalized


def test_an_expired_approval_becomes_a_deny_and_an_unexpired_one_does_not() -> None:
    state = step(
        ACTIVE.propose("pay", first=0).snapshot,
        GateVerdict("c0", RequireWait(WaitKind.APPROVAL, "tk-0001", expires_at="2026-01-02T00:00:00.000000Z")),
        POLICIES,
    ).state
    early = decide(state, DeadlinePassed("tk-0001", "2026-01-01T00:00:00.000000Z"), POLICIES)
    assert isinstance(early, Rejection) and early.rule is Rule.NOT_EXPIRED
    late = decide(state, DeadlinePassed("tk-0001", "2026-01-03T00:00:00.000000Z"), POLICIES)
    assert not isinstance(late, Rejection)
    assert late.state.batch is not None
    status = late.state.batch.calls[0].status
    assert isinstance(status, CallCompleted) and status.result.kind is ResultKind.DENIED


# --- ending a run (I13) -------------------------------------------------------------------


def test_cancelling_an_awaiting_run_closes_the_waiting_call() -> None:
    state = awaiting(WaitKind.APPROVAL, "pay", "fetch")
    verdict = decide(state, EndRequest(EndCause(EndCauseKind.CANCELLED)), POLICIES)
    assert not isinstance(verdict, Rejection)
    batch = verdict.state.batch
    assert batch is not None and batch.finalized
    assert batch.calls[0].status == CallIndeterminate(0, IndeterminateReason.RUN_ENDED)
    assert batch.calls[1].status == CallIndeterminate(0, IndeterminateReason.RUN_ENDED)
    commit = verdict.commit
    assert commit is not None and [m.call_id for m in commit.messages] == ["c0", "c1"]


def test_an_awaiting_run_cannot_end_as_completed() -> None:
    state = awaiting(WaitKind.APPROVAL, "pay")
    verdict = decide(state, EndRequest(EndCause(EndCauseKind.COMPLETED)), POLICIES)
    assert isinstance(verdict, Rejection) and verdict.rule is Rule.AWAITING_END


def test_ending_a_run_with_an_executing_call_marks_it_outcome_unknown() -> None:
    failure = EndCause(EndCauseKind.FAILED, TypedError("Boom", "host failure"))
    verdict = decide(executing("pay", "fetch"), EndRequest(failure), POLICIES)
    assert not isinstance(verdict, Rejection)
    assert verdict.state.batch is not None
    statuses = [c.status for c in verdict.state.batch.calls]
    assert statuses == [
        CallIndeterminate(1, IndeterminateReason.OUTCOME_UNKNOWN),
        CallIndeterminate(0, IndeterminateReason.RUN_ENDED),
    ]


def test_close_batch_keeps_terminal_results() -> None:
    state = step(executing("fetch", "pay"), ToolFinished("c0", 1, ToolOutput("kept")), POLICIES).state
    assert state.batch is not None
    closed = close_batch(state.batch)
    assert closed.calls[0].status == state.batch.calls[0].status


def test_nothing_is_decided_after_ended() -> None:
    ended = step(executing("pay"), EndRequest(EndCause(EndCauseKind.STOPPED)), POLICIES).state
    for event in (EndRequest(EndCause(EndCauseKind.CANCELLED)), InferenceResult("late")):
        verdict = decide(ended, event, POLICIES)
        assert isinstance(verdict, Rejection) and verdict.rule is Rule.RUN_ENDED


# --- tool outcomes ----------------------------------------------------------------------


def test_retryable_errors_use_the_retry_policy_then_complete_as_error() -> None:
    state = executing("fetch")
    first = step(state, ToolFinished("c0", 1, ToolFailure("flaky", retryable=True)), POLICIES)
    assert first.state.batch is not None and first.state.batch.calls[0].status == CallExecuting(2)
    commit = first.commit
    assert commit is not None and [e.type for e in commit.events] == ["attempt_failed"]
    second = step(first.state, ToolFinished("c0", 2, ToolFailure("flaky", retryable=True)), POLICIES)
    assert second.state.batch is not None
    status = second.state.batch.calls[0].status
    assert isinstance(status, CallCompleted) and status.result.kind is ResultKind.ERROR


def test_a_lost_outcome_can_end_the_run_when_the_host_says_so() -> None:
    policies = attrs.evolve(POLICIES, on_indeterminate=IndeterminateChoice.END_RUN)
    verdict = decide(executing("pay", "fetch"), ToolFinished("c0", 1, ToolOutcomeLost()), policies)
    assert not isinstance(verdict, Rejection)
    assert isinstance(verdict.state.state, Ended)
    assert verdict.state.state.cause.kind is EndCauseKind.OUTCOME_UNKNOWN


def test_a_delegation_waits_with_its_own_ticket_and_child() -> None:
    started = executing("ask")
    assert started.batch is not None
    child = started.batch.calls[0].delegation  # fixed by the Executing commit, derived
    assert child == child_identity("r", "op0", concurrent=False)
    verdict = decide(started, ToolFinished("c0", 1, ToolDelegated("tk-child")), POLICIES)
    assert not isinstance(verdict, Rejection)
    assert isinstance(verdict.state.state, Awaiting)
    assert verdict.state.batch is not None
    status = verdict.state.batch.calls[0].status
    assert isinstance(status, CallAwaiting) and status.attempt == 1 and status.wait.child == child.run_id
    assert verdict.state.batch.calls[0].delegation == child


def test_a_tool_not_declared_a_delegation_cannot_delegate() -> None:
    started = executing("pay")
    assert started.batch is not None and started.batch.calls[0].delegation is None
    verdict = decide(started, ToolFinished("c0", 1, ToolDelegated("tk-child")), POLICIES)
    assert isinstance(verdict, Rejection) and verdict.rule is Rule.EDGE_CONDITION
    assert "not declared a sequential delegation" in verdict.message


def test_an_outcome_for_the_wrong_call_or_attempt_is_rejected() -> None:
    state = executing("fetch", "pay")
    wrong_call = decide(state, ToolFinished("c1", 1, ToolOutput("x")), POLICIES)
    assert isinstance(wrong_call, Rejection) and wrong_call.rule is Rule.CALL_ORDER
    wrong_attempt = decide(state, ToolFinished("c0", 2, ToolOutput("x")), POLICIES)
    assert isinstance(wrong_attempt, Rejection) and wrong_attempt.rule is Rule.UNEXPECTED_INPUT


def test_inference_is_refused_while_a_batch_is_open() -> None:
    verdict = decide(ACTIVE.propose("pay", first=0).snapshot, InferenceResult("too early"), POLICIES)
    assert isinstance(verdict, Rejection) and verdict.rule is Rule.INFERENCE_OPEN_BATCH


# --- recovery (the table) --------------------------------------------------------


def test_recovery_replays_with_the_next_attempt_and_stops_at_the_maximum() -> None:
    state = executing("fetch")
    plan = recover(state, POLICIES)
    assert plan.row is RecoveryRow.CALL_EXECUTING
    assert plan.decision.state.batch is not None
    assert plan.decision.state.batch.calls[0].status == CallExecuting(2)
    execute = [e for e in plan.decision.effects if isinstance(e, Execute)]
    assert [(e.attempt, e.operation_id) for e in execute] == [(2, "op0")]
    exhausted = recover(plan.decision.state, POLICIES)
    assert exhausted.decision.state.batch is not None
    assert exhausted.decision.state.batch.calls[0].status == CallIndeterminate(
        2, IndeterminateReason.ATTEMPTS_EXHAUSTED
    )


def test_recovery_of_a_reconnect_call_asks_status_without_executing() -> None:
    state = executing("job")
    plan = recover(state, POLICIES)
    assert plan.decision.effects == (QueryStatus("c0", "job", "op0", 1),)
    not_found = step(state, StatusReport("c0", 1, OperationStatus.NOT_FOUND), POLICIES)
    assert any(isinstance(e, Execute) and e.attempt == 2 for e in not_found.effects)
    unknown = step(state, StatusReport("c0", 1, OperationStatus.UNKNOWN), POLICIES)
    assert unknown.state.batch is not None
    assert unknown.state.batch.calls[0].status == CallIndeterminate(1, IndeterminateReason.OUTCOME_UNKNOWN)


def test_recovery_never_reexecutes_an_indeterminate_policy_call() -> None:
    plan = recover(executing("pay"), POLICIES)
    assert not any(isinstance(e, Execute) for e in plan.decision.effects)
    assert plan.decision.state.batch is not None
    assert plan.decision.state.batch.calls[0].status == CallIndeterminate(1, IndeterminateReason.OUTCOME_UNKNOWN)


def test_recovery_keeps_terminal_results_of_the_batch() -> None:
    state = step(executing("fetch", "pay"), ToolFinished("c0", 1, ToolOutput("kept")), POLICIES).state
    state = step(state, GateVerdict("c1", Allow()), POLICIES).state
    assert state.batch is not None
    before = state.batch.calls[0]
    plan = recover(state, POLICIES)
    assert plan.decision.state.batch is not None
    assert plan.decision.state.batch.calls[0] == before
    assert isinstance(plan.decision.state.batch.calls[1].status, CallIndeterminate)


def test_recovery_never_turns_executing_into_requested() -> None:
    for tools in (("fetch",), ("job",), ("pay",), ("fetch", "pay")):
        plan = recover(executing(*tools), POLICIES)
        assert plan.decision.state.batch is not None
        assert not isinstance(plan.decision.state.batch.calls[0].status, CallRequested)


def test_recovery_rows_match_the_committed_frontier() -> None:
    fresh = activate("t", "r").state
    assert recover(fresh, POLICIES).row is RecoveryRow.RUNNING_NO_OPEN_BATCH
    assert isinstance(recover(fresh, POLICIES).decision.effects[-1], RequestInference)
    requested = ACTIVE.propose("pay", first=0).snapshot
    assert recover(requested, POLICIES).row is RecoveryRow.CALL_REQUESTED
    assert isinstance(recover(requested, POLICIES).decision.effects[0], RunGate)
    assert recover(executing("pay"), POLICIES).row is RecoveryRow.CALL_EXECUTING
    assert recover(awaiting(WaitKind.INPUT, "pay"), POLICIES).row is RecoveryRow.CALL_AWAITING
    partly = step(executing("fetch", "pay"), ToolFinished("c0", 1, ToolOutput("x")), POLICIES).state
    assert recover(partly, POLICIES).row is RecoveryRow.PARTLY_TERMINAL
    ended = step(fresh, EndRequest(EndCause(EndCauseKind.CANCELLED)), POLICIES).state
    assert recover(ended, POLICIES).row is RecoveryRow.ENDED


def test_the_step_limit_ends_the_run_instead_of_inferring() -> None:
    limited = attrs.evolve(POLICIES, max_steps=1)
    state = step(executing("pay"), ToolFinished("c0", 1, ToolOutput("x")), limited).state
    assert isinstance(state.state, Ended) and state.state.cause.kind is EndCauseKind.STEP_LIMIT


def test_kernel_bug_is_raised_for_an_illegal_commit_it_would_build() -> None:
    from runkernel.kernel.decide import build_commit
    from runkernel.kernel.planning import check_decision
    from runkernel.kernel.protocol import Decision

    state = executing("pay")
    assert state.batch is not None
    broken = state.batch.replace_call(attrs.evolve(state.batch.calls[0], status=CallRequested()))
    commit, after = build_commit(state, disposition=Running(), batch=broken)
    with pytest.raises(KernelBug):
        check_decision(state, RunHistory(), Decision(after, (Commit(commit),)))


def test_a_first_commit_carries_at_most_one_inference_result() -> None:
    from runkernel.kernel.state import Message, ThreadCommit
    from runkernel.kernel.validate import validate_commit
    from runkernel.kernel.values import Role

    two = ThreadCommit(
        "t",
        "r",
        0,
        2,
        Running(),
        None,
        (Message(Role.USER, "task"), Message(Role.ASSISTANT, "first"), Message(Role.ASSISTANT, "second")),
    )
    verdict = validate_commit(None, None, two, ticket_seen=NO_TICKETS_SEEN)
    assert isinstance(verdict, Rejection) and verdict.rule is Rule.FIRST_COMMIT


def test_a_reconnect_operation_still_running_is_asked_again_never_restarted() -> None:
    state = executing("job")
    verdict = decide(state, StatusReport("c0", 1, OperationStatus.RUNNING), POLICIES)
    assert not isinstance(verdict, Rejection)
    assert verdict.effects == (QueryStatus("c0", "job", "op0", 1),)
    assert verdict.state == state


def _answered_input() -> RunSnapshot:
    state = awaiting(WaitKind.INPUT, "fetch")
    return step(state, ResumeCommand("r", "tk-0001", WaitKind.INPUT, ProvideInput("the answer")), POLICIES).state


def test_the_operators_input_reaches_a_retried_attempt() -> None:
    retried = step(_answered_input(), ToolFinished("c0", 1, ToolFailure("flaky", retryable=True)), POLICIES)
    executes = [e for e in retried.effects if isinstance(e, Execute)]
    assert [(e.attempt, e.resume_value) for e in executes] == [(2, "the answer")]


def test_the_operators_input_reaches_a_replay_on_recovery() -> None:
    plan = recover(_answered_input(), POLICIES)
    executes = [e for e in plan.decision.effects if isinstance(e, Execute)]
    assert [(e.attempt, e.resume_value) for e in executes] == [(2, "the answer")]


def test_the_operators_input_is_part_of_the_committed_snapshot() -> None:
    state = _answered_input()
    assert state.input_for("c0") == "the answer"
    assert state.input_for("c1") is None


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), {1: "not a string key"}, {"a": {1, 2}}])
def test_values_that_are_not_json_are_refused_not_committed(bad: object) -> None:
    external = awaiting(WaitKind.EXTERNAL, "pay")
    refused = decide(external, ResumeCommand("r", "tk-0001", WaitKind.EXTERNAL, ExternalResult(bad)), POLICIES)
    assert isinstance(refused, Rejection) and refused.rule is Rule.PAYLOAD_TYPE
    output = decide(executing("pay"), ToolFinished("c0", 1, ToolOutput(bad)), POLICIES)
    assert isinstance(output, Rejection) and output.rule is Rule.UNEXPECTED_INPUT


@pytest.mark.parametrize(
    "expires_at, now, expired",
    [
        ("2025-11-30T13:00:00+05:00", "2025-11-30T11:57:00.000000Z", True),
        ("2025-11-30T11:00:00Z", "2025-11-30T11:00:00.500000Z", True),
        ("2025-11-30T11:00:00.500000Z", "2025-11-30T11:00:00Z", False),
        ("2025-11-30T12:00:00+01:00", "2025-11-30T10:59:59Z", False),
    ],
)
def test_deadlines_compare_instants_not_strings(expires_at: str, now: str, expired: bool) -> None:
    state = step(
        ACTIVE.propose("pay", first=0).snapshot,
        GateVerdict("c0", RequireWait(WaitKind.APPROVAL, "tk-0001", expires_at=expires_at)),
        POLICIES,
    ).state
    verdict = decide(state, DeadlinePassed("tk-0001", now), POLICIES)
    assert isinstance(verdict, Rejection) is not expired


@pytest.mark.parametrize("bad", ["tomorrow", "2025-11-30T11:00:00", ""])
def test_a_deadline_must_be_an_instant_with_a_zone(bad: str) -> None:
    with pytest.raises(ValueError):
        RequireWait(WaitKind.APPROVAL, "tk-0001", expires_at=bad)
    with pytest.raises(ValueError):
        DeadlinePassed("tk-0001", bad)


def test_outcome_unknown_ends_only_a_run_with_an_indeterminate_call() -> None:
    text = decide(activate("t", "r").state, InferenceResult("bye", end=EndCauseKind.OUTCOME_UNKNOWN), POLICIES)
    assert isinstance(text, Rejection) and text.rule is Rule.EDGE_CONDITION
    request = decide(executing("fetch"), EndRequest(EndCause(EndCauseKind.OUTCOME_UNKNOWN)), POLICIES)
    assert isinstance(request, Rejection) and request.rule is Rule.EDGE_CONDITION
    lost = step(executing("pay", "fetch"), ToolFinished("c0", 1, ToolOutcomeLost()), POLICIES).state
    allowed = decide(lost, EndRequest(EndCause(EndCauseKind.OUTCOME_UNKNOWN)), POLICIES)
    assert not isinstance(allowed, Rejection)


def test_validation_refuses_outcome_unknown_without_an_indeterminate_call() -> None:
    from runkernel.kernel.planning import end_run

    from runkernel.kernel.planning import check_decision

    requested = ACTIVE.propose("fetch", first=0).snapshot
    decision = end_run(requested, requested.batch, EndCause(EndCauseKind.OUTCOME_UNKNOWN))
    with pytest.raises(KernelBug):
        check_decision(requested, RunHistory(), decision)


@pytest.mark.parametrize(
    "kind, result",
    [
        (WaitKind.APPROVAL, ResultKind.EXTERNAL),
        (WaitKind.EXTERNAL, ResultKind.DENIED),
        (WaitKind.INPUT, ResultKind.DENIED),  # a deny answers only an approval
        (WaitKind.SCHEDULED, ResultKind.EXTERNAL),  # a timer only resumes
    ],
)
def test_a_wait_completes_only_with_the_result_its_kind_allows(kind: WaitKind, result: ResultKind) -> None:
    state = awaiting(kind, "pay")
    assert state.batch is not None
    done = attrs.evolve(state.batch.calls[0], status=CallCompleted(0, ToolResult(result, "x")))
    batch = attrs.evolve(state.batch, finalized=True, calls=(done,))
    resumed = Event(RESUMED_EVENT, {"ticket_id": "tk-0001", "call_id": "c0"})
    commit = ThreadCommit(
        "t", "r", state.version, state.step, Running(), batch, (Message(Role.TOOL, "x", call_id="c0"),), (resumed,)
    )
    verdict = validate_commit(ThreadHead("t", state.version, "r"), state, commit, ticket_seen=NO_TICKETS_SEEN)
    assert isinstance(verdict, Rejection) and verdict.rule is Rule.EDGE_CONDITION, verdict
