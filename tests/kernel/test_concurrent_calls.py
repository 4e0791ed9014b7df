"""Concurrent ordinary calls (Step and ToolBatch, "Concurrent ordinary calls"; I8 amended):
a tool declared ``concurrent`` joins the consecutive concurrent calls of its batch in a
group, gated member by member before the group starts, started in one commit, ended in
any order, retried and recovered by each call's own policy, closed by the Run's end.
"""

from __future__ import annotations

import json

import attrs
import pytest

from runkernel.kernel.codec import commit_from_json, commit_to_json
from runkernel.kernel.policies import IndeterminateChoice, Policies, ToolPolicy
from runkernel.kernel.protocol import (
    Allow,
    Approve,
    Block,
    Commit,
    EndRequest,
    Execute,
    GateVerdict,
    OperationStatus,
    QueryStatus,
    RequireWait,
    ResumeCommand,
    RunGate,
    StatusReport,
    ToolFailure,
    ToolFinished,
    ToolOutput,
    ToolScheduled,
)
from runkernel.kernel.rules import Rejection, Rule
from runkernel.kernel.state import (
    ActiveToolBatch,
    Awaiting,
    CallAwaiting,
    ResumeTicket,
    Wait,
    CallCompleted,
    CallExecuting,
    CallIndeterminate,
    CallRequested,
    CallStatus,
    Delegation,
    EdgeKind,
    EndCause,
    Ended,
    Running,
    ThreadCommit,
    ToolResult,
)
from runkernel.kernel.validate_edge import by_named_edge
from runkernel.kernel.values import EndCauseKind, IndeterminateReason, ResultKind, Role, WaitKind
from runkernel.specs.checker import Verdict, check_lines
from runkernel.testing import Builder

GROUP = Policies(
    tools={
        "read": ToolPolicy.replay(3, retries=1, concurrent=True),
        "lookup": ToolPolicy.reconnect(concurrent=True),
        "charge": ToolPolicy.indeterminate(concurrent=True),
        "alone": ToolPolicy.replay(),
        "research": ToolPolicy(terminal_only_delegation=True),
    }
)


def _statuses(chain: Builder) -> list[CallStatus]:
    batch = chain.snapshot.batch
    assert batch is not None
    return [c.status for c in batch.calls]


def _gated(chain: Builder, *call_ids: str) -> Builder:
    """Allow each call of a gate round in order (the allows are held, not committed)."""
    held: tuple[str, ...] = ()
    for call_id in call_ids:
        chain = chain.feed(GateVerdict(call_id, Allow(), held))
        held += (call_id,)
    return chain


def _started() -> Builder:
    return _gated(Builder("t1", GROUP).start("r1").propose("read", "lookup", "charge"), "c1", "c2", "c3")


def test_each_constructor_declares_a_concurrent_tool_and_a_delegation_cannot_be_one() -> None:
    assert ToolPolicy.replay(concurrent=True).concurrent
    assert ToolPolicy.reconnect(concurrent=True).concurrent
    assert ToolPolicy.indeterminate(concurrent=True).concurrent
    assert not ToolPolicy.replay().concurrent
    with pytest.raises(ValueError, match="never delegates"):
        ToolPolicy(terminal_only_delegation=True, concurrent=True)
    with pytest.raises(ValueError, match="never delegates"):
        ToolPolicy(sequential_delegation=True, concurrent=True)


def test_the_gate_is_asked_member_by_member_and_the_group_starts_in_one_commit() -> None:
    chain = Builder("t1", GROUP).start("r1").propose("read", "lookup", "charge")
    assert [e.call.call_id for e in chain.effects if isinstance(e, RunGate)] == ["c1"]
    held = chain.feed(GateVerdict("c1", Allow()))
    assert held.commits == chain.commits  # an allow is held, not committed
    assert [type(e) for e in held.effects] == [RunGate]
    started = _gated(chain, "c1", "c2", "c3")
    assert len(started.commits) == len(chain.commits) + 1
    assert _statuses(started) == [CallExecuting(1)] * 3
    executes = [e for e in started.effects if isinstance(e, Execute)]
    assert isinstance(started.effects[0], Commit)  # every executor after its Executing commit (I5)
    assert [(e.call_id, e.attempt) for e in executes] == [("c1", 1), ("c2", 1), ("c3", 1)]


def test_members_end_in_any_order_and_are_published_in_call_order_once_all_are_terminal() -> None:
    chain = _started().feed(ToolFinished("c3", 1, ToolOutput("charged")))
    assert _statuses(chain)[2] == CallCompleted(1, ToolResult(ResultKind.OUTPUT, "charged"))
    assert _statuses(chain)[:2] == [CallExecuting(1)] * 2
    assert not [m for m in chain.commits[-1].messages if m.role is Role.TOOL]
    assert not [e for e in chain.effects if isinstance(e, RunGate)]  # nothing else starts meanwhile
    chain = chain.feed(ToolFinished("c1", 1, ToolOutput("read")))
    chain = chain.feed(StatusReport("c2", 1, OperationStatus.DONE, "found"))
    last = chain.commits[-1]
    assert last.batch is not None and last.batch.finalized
    assert [m.call_id for m in last.messages if m.role is Role.TOOL] == ["c1", "c2", "c3"]


def test_a_member_retries_under_its_own_policy_while_its_siblings_run() -> None:
    chain = _started().feed(ToolFinished("c1", 1, ToolFailure("flaky", retryable=True)))
    assert _statuses(chain) == [CallExecuting(2), CallExecuting(1), CallExecuting(1)]
    assert [e for e in chain.effects if isinstance(e, Execute)] == [
        Execute("c1", "read", {"i": 1}, "op1", 2)
    ]
    # the indeterminate member has no retries left: its failure completes it
    chain = chain.feed(ToolFinished("c3", 1, ToolFailure("declined", retryable=True)))
    assert isinstance(_statuses(chain)[2], CallCompleted)


def test_a_member_the_gate_holds_leaves_the_group_and_runs_alone_before_it() -> None:
    chain = Builder("t1", GROUP).start("r1").propose("read", "lookup", "charge")
    chain = chain.feed(
        GateVerdict("c1", Allow()),
        GateVerdict("c2", RequireWait(WaitKind.APPROVAL, "ticket-1"), ("c1",)),
    )
    assert isinstance(chain.snapshot.state, Awaiting)
    assert _statuses(chain)[0] == CallRequested()  # the allow held for c1 was dropped
    chain = chain.feed(ResumeCommand("r1", "ticket-1", WaitKind.APPROVAL, Approve()))
    assert _statuses(chain) == [CallRequested(), CallExecuting(1), CallRequested()]
    chain = chain.feed(ToolFinished("c2", 1, ToolOutput("ok")))
    assert [e.call.call_id for e in chain.effects if isinstance(e, RunGate)] == ["c1"]  # a new gate round
    chain = _gated(chain, "c1", "c3")
    assert _statuses(chain)[0] == CallExecuting(1) and _statuses(chain)[2] == CallExecuting(1)


def test_a_blocked_member_is_terminal_at_once_and_the_others_start_together() -> None:
    chain = Builder("t1", GROUP).start("r1").propose("read", "lookup", "charge")
    chain = chain.feed(
        GateVerdict("c1", Allow()), GateVerdict("c2", Block("no"), ("c1",)), GateVerdict("c3", Allow(), ("c1",))
    )
    assert _statuses(chain)[0] == CallExecuting(1) and _statuses(chain)[2] == CallExecuting(1)
    assert isinstance(_statuses(chain)[1], CallCompleted)


def test_recovery_settles_each_member_by_its_own_policy_in_one_commit() -> None:
    started = _started()
    recovered = started.crash()
    assert len(recovered.commits) == len(started.commits) + 1
    assert _statuses(recovered) == [
        CallExecuting(2),  # replay
        CallExecuting(1),  # reconnect: its status is asked, nothing started
        CallIndeterminate(1, IndeterminateReason.OUTCOME_UNKNOWN),
    ]
    assert isinstance(recovered.effects[0], Commit)
    assert recovered.effects[1:] == (
        Execute("c1", "read", {"i": 1}, "op1", 2),
        QueryStatus("c2", "lookup", "op2", 1),
    )
    # a second crash at once: the replayed member again, the reconnect asked again
    again = recovered.crash()
    assert _statuses(again)[0] == CallExecuting(3)


def test_recovery_of_members_that_only_reconnect_commits_nothing() -> None:
    policies = Policies(tools={"lookup": ToolPolicy.reconnect(concurrent=True)})
    chain = _gated(Builder("t1", policies).start("r1").propose("lookup", "lookup"), "c1", "c2")
    recovered = chain.crash()
    assert recovered.commits == chain.commits
    assert recovered.effects == (QueryStatus("c1", "lookup", "op1", 1), QueryStatus("c2", "lookup", "op2", 1))


def test_recovery_ends_the_run_in_its_one_commit_when_the_host_ends_on_indeterminate() -> None:
    policies = attrs.evolve(GROUP, on_indeterminate=IndeterminateChoice.END_RUN)
    chain = _gated(Builder("t1", policies).start("r1").propose("read", "charge"), "c1", "c2")
    recovered = chain.crash()
    assert isinstance(recovered.snapshot.state, Ended)
    assert _statuses(recovered) == [
        CallIndeterminate(1, IndeterminateReason.OUTCOME_UNKNOWN),  # never replayed: the Run ends
        CallIndeterminate(1, IndeterminateReason.OUTCOME_UNKNOWN),
    ]
    assert not [e for e in recovered.effects if isinstance(e, Execute)]


def test_the_runs_end_closes_every_open_member_at_once() -> None:
    chain = _started().feed(ToolFinished("c2", 1, ToolOutput("x")))
    chain = chain.feed(EndRequest(EndCause(EndCauseKind.CANCELLED)))
    assert isinstance(chain.snapshot.state, Ended)
    assert _statuses(chain)[0] == CallIndeterminate(1, IndeterminateReason.OUTCOME_UNKNOWN)
    assert _statuses(chain)[2] == CallIndeterminate(1, IndeterminateReason.OUTCOME_UNKNOWN)
    assert [m.call_id for m in chain.commits[-1].messages if m.role is Role.TOOL] == ["c1", "c2", "c3"]


def test_a_concurrent_call_never_schedules_a_wait() -> None:
    refusal = _started().refused(ToolFinished("c1", 1, ToolScheduled("ticket-9", "2030-01-01T00:00:00Z")))
    assert refusal.rule is Rule.EDGE_CONDITION


def test_concurrent_calls_and_terminal_only_delegations_form_separate_groups() -> None:
    chain = Builder("t1", GROUP).start("r1").propose("research", "research", "read", "read")
    chain = _gated(chain, "c1", "c2")
    statuses = _statuses(chain)
    assert statuses[:2] == [CallExecuting(1)] * 2 and statuses[2:] == [CallRequested()] * 2
    # starting a concurrent call beside the running delegations is illegal
    assert chain.snapshot.batch is not None
    early = chain.snapshot.batch.replace_call(chain.snapshot.batch.calls[2].with_status(CallExecuting(1)))
    verdict = chain.judge(_next(chain, early))
    assert isinstance(verdict, Rejection) and verdict.rule is Rule.CALL_ORDER


def test_ordinary_calls_next_to_a_group_still_run_one_at_a_time() -> None:
    chain = Builder("t1", GROUP).start("r1").propose("alone", "read", "read", "alone")
    assert [e.call.call_id for e in chain.effects if isinstance(e, RunGate)] == ["c1"]
    chain = chain.feed(GateVerdict("c1", Allow()), ToolFinished("c1", 1, ToolOutput(1)))
    chain = _gated(chain, "c2", "c3").feed(ToolFinished("c3", 1, ToolOutput(3)))
    assert _statuses(chain)[3] == CallRequested()
    chain = chain.feed(ToolFinished("c2", 1, ToolOutput(2)))
    assert [e.call.call_id for e in chain.effects if isinstance(e, RunGate)] == ["c4"]


# --- the judge ---------------------------------------------------------------------


def _next(chain: Builder, batch: ActiveToolBatch) -> ThreadCommit:
    last = chain.commits[-1]
    assert chain.state is not None
    return attrs.evolve(
        last, expected_version=chain.version, batch=batch, messages=(), events=(), disposition=Running(), edge=None
    )


def _requested() -> Builder:
    return Builder("t1", GROUP).start("r1").propose("read", "lookup", "charge")


def test_the_judge_refuses_a_member_started_while_another_is_still_requested() -> None:
    chain = _requested()
    assert chain.snapshot.batch is not None
    batch = chain.snapshot.batch
    one = batch.replace_call(batch.calls[0].with_status(CallExecuting(1)))
    verdict = chain.judge(_next(chain, one))
    assert isinstance(verdict, Rejection) and verdict.rule is Rule.GROUP_GATE


def test_the_judge_refuses_a_member_leaving_requested_while_another_runs() -> None:
    chain = Builder("t1", GROUP).start("r1").propose("read", "lookup", "charge")
    chain = chain.feed(GateVerdict("c1", RequireWait(WaitKind.APPROVAL, "ticket-1")))
    chain = chain.feed(ResumeCommand("r1", "ticket-1", WaitKind.APPROVAL, Approve()))
    assert chain.snapshot.batch is not None
    batch = chain.snapshot.batch
    late = batch.replace_call(batch.calls[1].with_status(CallExecuting(1)))
    verdict = chain.judge(_next(chain, late))
    assert isinstance(verdict, Rejection) and verdict.rule is Rule.GROUP_GATE


def test_the_judge_refuses_a_concurrent_call_that_waits_or_delegates() -> None:
    chain = _started()
    assert chain.snapshot.batch is not None
    batch = chain.snapshot.batch
    waiting = batch.replace_call(batch.calls[0].with_status(CallAwaiting(1, Wait(WaitKind.SCHEDULED, "ticket-2"))))
    commit = attrs.evolve(
        _next(chain, waiting), disposition=Awaiting(ResumeTicket("ticket-2", WaitKind.SCHEDULED, "c1"))
    )
    verdict = chain.judge(commit)
    assert isinstance(verdict, Rejection) and verdict.rule is Rule.EDGE_CONDITION
    child = Delegation("t.child", "r.child", concurrent=True)
    delegating = batch.replace_call(attrs.evolve(batch.calls[0], status=CallExecuting(2), delegation=child))
    verdict = chain.judge(_next(chain, delegating))
    assert isinstance(verdict, Rejection)


def test_two_calls_without_the_field_started_together_stay_illegal_at_their_line() -> None:
    """A trace whose policies do not say ``concurrent`` is sequential: the line that starts
    two calls together is reported, under I8's rule."""
    chain = _gated(Builder("t1", GROUP).start("r1").propose("read", "read"), "c1", "c2")
    lines = [commit_to_json(c) for c in chain.commits]
    assert check_lines([json.dumps(line).encode() for line in lines]).verdict is Verdict.LEGAL
    for call in lines[-1]["batch"]["calls"] + lines[-2]["batch"]["calls"]:
        del call["policy"]["concurrent"]
    finding = check_lines([json.dumps(line).encode() for line in lines])
    assert (finding.verdict, finding.line, finding.rule) == (Verdict.ILLEGAL, len(lines), Rule.CALL_ORDER.value)


def test_the_field_round_trips_through_a_trace_line() -> None:
    chain = _started()
    line = commit_to_json(chain.commits[-1])
    policies = [c["policy"] for c in line["batch"]["calls"]]
    assert all(p["concurrent"] is True for p in policies)
    assert commit_from_json(json.loads(json.dumps(line))) == chain.commits[-1]
    plain = commit_to_json(Builder("t1", GROUP).start("r1").propose("alone").commits[-1])
    assert "concurrent" not in plain["batch"]["calls"][0]["policy"]


def test_the_named_edge_judge_leaves_every_group_commit_to_the_full_judge() -> None:
    """A member's own move is never taken by the shorter path (several calls moving in one
    commit are never named at all): the verdict is always the full judge's."""
    chain = _started().feed(
        ToolFinished("c1", 1, ToolFailure("flaky", retryable=True)), ToolFinished("c2", 1, ToolOutput(2))
    ).crash()
    replay = Builder("t1", GROUP)
    moves = 0
    for commit in chain.commits:
        if commit.edge is not None and commit.edge.kind is EdgeKind.CALL_MOVE:
            assert replay.state is not None
            assert by_named_edge(replay.head, replay.state, commit, replay.history) is None
            moves += 1
        replay = replay.commit(commit)
    assert moves == 2  # c1's retry and c2's end each moved one member
    assert replay.state == chain.state
