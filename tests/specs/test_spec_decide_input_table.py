"""The spec cannot drift: ``decide`` refuses every input the spec has no edge for in the
Run's phase, fires every edge an input may fire, ends an Awaiting Run only by cancel,
stop or failure; recovery classifies each committed frontier by its row.
"""

from __future__ import annotations

from typing import get_args

import pytest

from hand_built_runs import RUN, THREAD, TICKET_NEW, TICKET_OLD, activated, cause, reach, run_in
from runkernel.kernel.decide import decide
from runkernel.kernel.edges import CallPhase, RunPhase, run_phase
from runkernel.kernel.policies import IndeterminateChoice, Policies, ToolPolicy
from runkernel.kernel.protocol import (
    Activate,
    Allow,
    Approve,
    Block,
    ChildEnded,
    DeadlinePassed,
    Decision,
    Deny,
    EndRequest,
    GateVerdict,
    InferenceResult,
    Input,
    OperationStatus,
    ProposedCall,
    RequireWait,
    ResumeCommand,
    StatusReport,
    Supply,
    ToolDelegated,
    ToolFailure,
    ToolFinished,
    ToolOutcomeLost,
    ToolOutput,
)
from runkernel.kernel.history import NO_HISTORY, RunHistory, commit_keys
from runkernel.kernel.recover import RecoveryRow, classify
from runkernel.kernel.rules import Rejection, Rule
from runkernel.kernel.state import Message, RunSnapshot
from runkernel.kernel.values import AWAITING_END_CAUSES, EndCauseKind, Role, WaitKind
from runkernel.specs.machines import RunMachine, spec_edges


# --- decide refuses every input the spec has no edge for ------------------------------

#: The Run machine events an input of each kind may fire (None: it never commits).
INPUT_EVENTS: dict[type, frozenset[str]] = {
    Activate: frozenset({"run_activation"}),
    InferenceResult: frozenset({"commit_progress", "commit_end_cause"}),
    GateVerdict: frozenset({"commit_progress", "commit_resume_ticket", "commit_end_cause"}),
    ToolFinished: frozenset({"commit_progress", "commit_resume_ticket", "commit_end_cause"}),
    StatusReport: frozenset({"commit_progress", "commit_end_cause"}),
    ResumeCommand: frozenset({"validated_resume_command"}),
    DeadlinePassed: frozenset({"validated_resume_command"}),
    EndRequest: frozenset({"commit_end_cause", "cancel_stop_or_failure"}),
    ChildEnded: frozenset({"commit_progress", "commit_end_cause"}),
}

EXPIRES, LATER = "2030-01-01T00:00:00Z", "2031-01-01T00:00:00Z"
APPROVE = ResumeCommand(RUN, TICKET_OLD, WaitKind.APPROVAL, Approve())


#: A committed state reached through ``decide`` and the Run's history facts with it.
Reached = tuple[RunSnapshot | None, RunHistory]


def _d(reached: Reached, event: Input, policies: Policies = Policies()) -> Reached:
    state, history = reached
    decision = decide(state, event, policies, history=history)
    assert isinstance(decision, Decision), decision
    commit = decision.commit
    return decision.state, history if commit is None else history.plus(commit_keys(state, commit))


def decide_states() -> dict[str, tuple[RunPhase | None, RunSnapshot | None, RunHistory]]:
    """Concrete committed states of every Run phase, reached through ``decide``."""
    idle = _d((None, NO_HISTORY), Activate(THREAD, RUN, 0, (Message(Role.USER, "go"),)))
    requested = _d(
        idle, InferenceResult("t", calls=(ProposedCall("c1", "tool", {}, "op1"),), batch_id="b1")
    )
    executing = _d(requested, GateVerdict("c1", Allow()))
    delegating = Policies(tools={"tool": ToolPolicy(terminal_only_delegation=True)})
    delegated = _d(
        _d(idle, InferenceResult("t", calls=(ProposedCall("c1", "tool", {}, "op1"),), batch_id="b1"), delegating),
        GateVerdict("c1", Allow()),
        delegating,
    )
    sequential = Policies(tools={"tool": ToolPolicy(sequential_delegation=True)})
    handing_over = _d(  # a sequential delegation Executing, its child fixed: it may delegate
        _d(idle, InferenceResult("t", calls=(ProposedCall("c1", "tool", {}, "op1"),), batch_id="b1"), sequential),
        GateVerdict("c1", Allow()),
        sequential,
    )
    awaiting = _d(requested, GateVerdict("c1", RequireWait(WaitKind.APPROVAL, TICKET_OLD, expires_at=EXPIRES)))
    resumed_then_ended = _d(_d(awaiting, APPROVE), EndRequest(cause(EndCauseKind.CANCELLED)))
    reached: dict[str, tuple[RunPhase | None, Reached]] = {
        "none": (None, (None, NO_HISTORY)),
        "running-idle": (RunPhase.RUNNING, idle),
        "running-requested": (RunPhase.RUNNING, requested),
        "running-executing": (RunPhase.RUNNING, executing),
        "running-delegating": (RunPhase.RUNNING, delegated),
        "running-sequential-delegation": (RunPhase.RUNNING, handing_over),
        "awaiting": (RunPhase.AWAITING, awaiting),
        "ended-while-awaiting": (RunPhase.ENDED, _d(awaiting, EndRequest(cause(EndCauseKind.STOPPED)))),
        "ended-after-resume": (RunPhase.ENDED, resumed_then_ended),
    }
    return {name: (phase, state, history) for name, (phase, (state, history)) in reached.items()}


def inputs_of(kind: type, state: RunSnapshot | None) -> list[Input]:
    """Concrete inputs of ``kind``, each one legal in some phase."""
    version = state.version if state else 0
    go = (Message(Role.USER, "go"),)
    if kind is Activate:
        return [Activate(THREAD, RUN, version, go)]
    if kind is InferenceResult:
        return [
            InferenceResult("text"),
            InferenceResult("done", end=EndCauseKind.COMPLETED),
            InferenceResult("t", calls=(ProposedCall("c9", "tool", {}, "op9"),), batch_id="b9"),
        ]
    if kind is GateVerdict:
        return [
            GateVerdict("c1", verdict)
            for verdict in (Allow(), Block("no"), Supply(1), RequireWait(WaitKind.INPUT, TICKET_NEW))
        ]
    if kind is ToolFinished:
        return [
            ToolFinished("c1", 1, outcome)
            for outcome in (ToolOutput(1), ToolFailure("e"), ToolOutcomeLost(), ToolDelegated(TICKET_NEW))
        ]
    if kind is StatusReport:
        reports: list[Input] = [StatusReport("c1", 1, s, "v") for s in OperationStatus]
        return reports
    if kind is ResumeCommand:
        return [APPROVE, ResumeCommand(RUN, TICKET_OLD, WaitKind.APPROVAL, Deny("no"))]
    if kind is DeadlinePassed:
        return [DeadlinePassed(TICKET_OLD, LATER)]
    if kind is EndRequest:
        return [EndRequest(cause(k)) for k in EndCauseKind]
    if kind is ChildEnded:
        return [ChildEnded("c1", 1, {"thread_id": "ct", "run_id": "cr", "cause": {"kind": "completed"}, "final": None})]
    raise AssertionError(kind)


def _sources(events: frozenset[str]) -> set[RunPhase | None]:
    return {
        RunPhase(e.source) if e.source else None
        for e in spec_edges(RunMachine)
        if e.event in events
    }


def _event_of(source: RunPhase | None, target: RunPhase) -> str | None:
    for edge in spec_edges(RunMachine):
        if edge.source == (source.value if source else None) and edge.target == target.value:
            return edge.event
    return None


def test_input_event_table_covers_every_input_kind() -> None:
    assert set(INPUT_EVENTS) == set(get_args(Input))
    events = {e.event for e in spec_edges(RunMachine) if e.event}
    assert set().union(*INPUT_EVENTS.values()) == events, "every Run edge has an input that fires it"


#: Default policies, and policies under which a call's end can also end the Run.
DECIDE_POLICIES = (Policies(), Policies(max_steps=1, on_indeterminate=IndeterminateChoice.END_RUN))


def expected_refusal(name: str, event: Input) -> Rule:
    """The rule an Ended Run refuses ``event`` with."""
    if isinstance(event, Activate):
        return Rule.UNEXPECTED_INPUT
    if isinstance(event, ResumeCommand) and name == "ended-after-resume":
        return Rule.ALREADY_APPLIED if event == APPROVE else Rule.STALE_COMMAND
    return Rule.RUN_ENDED


@pytest.mark.parametrize("kind", list(INPUT_EVENTS), ids=lambda k: str(k.__name__))
def test_decide_refuses_inputs_the_spec_has_no_edge_for(kind: type) -> None:
    allowed = _sources(INPUT_EVENTS[kind])
    fired: set[str] = set()
    for policies in DECIDE_POLICIES:
        for name, (phase, state, history) in decide_states().items():
            for event in inputs_of(kind, state):
                outcome = decide(state, event, policies, history)
                if phase not in allowed:
                    assert isinstance(outcome, Rejection), f"{name}: {event} accepted"
                    if phase is RunPhase.ENDED:
                        assert outcome.rule is expected_refusal(name, event), (name, event, outcome)
                    continue
                if isinstance(outcome, Rejection):
                    continue
                commit = outcome.commit
                if commit is None:
                    continue
                event_id = _event_of(phase, run_phase(commit.disposition))
                assert event_id in INPUT_EVENTS[kind], (name, event, event_id)
                fired.add(event_id)
    assert fired == INPUT_EVENTS[kind], f"{kind.__name__} never fired {INPUT_EVENTS[kind] - fired}"


def test_decide_ends_an_awaiting_run_only_by_cancel_stop_or_failure() -> None:
    _, awaiting, history = decide_states()["awaiting"]
    ended = set()
    for kind in EndCauseKind:
        outcome = decide(awaiting, EndRequest(cause(kind)), history=history)
        if isinstance(outcome, Decision):
            ended.add(kind)
        else:
            assert outcome.rule is Rule.AWAITING_END
    assert ended == AWAITING_END_CAUSES


def test_recovery_classifies_each_frontier_by_its_row() -> None:
    expected = {
        RecoveryRow.RUNNING_NO_OPEN_BATCH: activated().snapshot,
        RecoveryRow.CALL_REQUESTED: reach([CallPhase.REQUESTED]).snapshot,
        RecoveryRow.CALL_EXECUTING: reach([CallPhase.COMPLETED, CallPhase.EXECUTING]).snapshot,
        RecoveryRow.CALL_AWAITING: reach([CallPhase.AWAITING]).snapshot,
        RecoveryRow.PARTLY_TERMINAL: reach([CallPhase.COMPLETED, CallPhase.REQUESTED]).snapshot,
        RecoveryRow.ENDED: run_in(RunPhase.ENDED).snapshot,
    }
    assert {row: classify(state) for row, state in expected.items()} == {row: row for row in expected}
