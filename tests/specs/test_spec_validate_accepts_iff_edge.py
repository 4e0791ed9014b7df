"""The spec cannot drift: commit validation accepts a call or Run change exactly where
the spec has an edge (with the edge's conditions), a batch is finalized exactly when
every call is terminal, and a first commit is accepted only as the spec's activation.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator

import attrs
import pytest

from hand_built_runs import (
    REACH,
    RUN,
    THREAD,
    TICKET_NEW,
    Candidate,
    candidates,
    cause,
    commit_on,
    reach,
    run_in,
    statuses_of,
    tool_messages,
)
from runkernel.kernel.edges import (
    CALL_EDGES,
    AttemptRule,
    CallPhase,
    RunPhase,
    call_phase,
    run_phase,
)
from runkernel.kernel.rules import Rejection, Rule
from runkernel.kernel.state import (
    ActiveToolBatch,
    Awaiting,
    CallAwaiting,
    CallCompleted,
    CallIndeterminate,
    CallRequested,
    Ended,
    Message,
    ResumeTicket,
    Running,
    ThreadCommit,
    ToolCall,
    ToolUse,
    Wait,
)
from runkernel.kernel.validate import NO_TICKETS_SEEN, Accepted, validate_commit
from runkernel.kernel.values import AWAITING_END_CAUSES, EndCauseKind, Role, WaitKind
from runkernel.specs.machines import RunMachine, ToolCallMachine, spec_edges
from runkernel.testing import Builder


# --- validate_commit accepts exactly the spec's call edges ----------------------------

CALL_PHASES = [p for p in CallPhase if p is not CallPhase.FINALIZED]
SPEC_CALL_EDGES = {(e.source, e.target) for e in spec_edges(ToolCallMachine)}


@pytest.mark.parametrize(
    ("source", "target"),
    list(itertools.product(CALL_PHASES, CALL_PHASES)),
    ids=lambda p: str(p.value),
)
def test_commit_validation_accepts_a_call_change_iff_the_spec_has_the_edge(
    source: CallPhase, target: CallPhase
) -> None:
    is_edge = (source.value, target.value) in SPEC_CALL_EDGES
    accepted: list[tuple[Candidate, int]] = []
    refused_rules: set[str] = set()
    tried = 0
    for variant in range(len(REACH[source])):
        chain = reach([source], [variant])
        before = chain.snapshot
        assert before.batch is not None
        old = before.batch.calls[0].status
        for status in statuses_of(target, old.attempt):
            if status == old:
                continue  # no change is no transition
            for candidate in candidates(before, "c1", status):
                tried += 1
                verdict = chain.judge(candidate.commit)
                if isinstance(verdict, Accepted):
                    accepted.append((candidate, old.attempt))
                else:
                    refused_rules.add(verdict.rule.value)
    if not is_edge:
        assert not accepted, (
            f"{source.value} -> {target.value} is not a spec edge, but validation accepted "
            f"{accepted[0][0]}"
        )
        if tried:  # in the context that suits it best, the change itself is what is refused
            assert refused_rules & {Rule.CALL_EDGE.value, Rule.TERMINAL_IMMUTABLE.value}, refused_rules
        return
    assert accepted, f"{source.value} -> {target.value} is a spec edge, but no commit was accepted"
    rule = CALL_EDGES[(source, target)]
    # the edge's conditions: exactly the allowed kinds, attempts as the table says
    statuses = [c.status for c, _ in accepted]
    if target is CallPhase.AWAITING:
        assert {s.wait.kind for s in statuses if isinstance(s, CallAwaiting)} == set(rule.waits)
    if target is CallPhase.COMPLETED:
        assert {s.result.kind for s in statuses if isinstance(s, CallCompleted)} == set(rule.results)
    if target is CallPhase.INDETERMINATE:
        assert {s.reason for s in statuses if isinstance(s, CallIndeterminate)} == set(rule.reasons)
    for candidate, before_attempt in accepted:
        expected = {
            AttemptRule.FIRST: 1,
            AttemptRule.INCREMENT: before_attempt + 1,
            AttemptRule.UNCHANGED: before_attempt,
            AttemptRule.ZERO: 0,
        }[rule.attempt] if rule.attempt else candidate.status.attempt
        assert candidate.status.attempt == expected, candidate
        if rule.needs_run_end:
            assert candidate.context.startswith("end:"), candidate
        if rule.needs_resume:
            assert candidate.context.startswith("resume"), candidate
        if target is CallPhase.AWAITING:
            assert candidate.context == "await", "a call waits only with its Run"
    if not rule.needs_run_end:
        assert any(not c.context.startswith("end:") for c, _ in accepted)


def _reachable_pairs() -> list[tuple[CallPhase, CallPhase]]:
    in_progress = {CallPhase.REQUESTED, CallPhase.EXECUTING, CallPhase.AWAITING}
    return [
        (first, second)
        for first, second in itertools.product(CALL_PHASES, CALL_PHASES)
        if first not in in_progress or second is CallPhase.REQUESTED
    ]


@pytest.mark.parametrize(("first", "second"), _reachable_pairs(), ids=lambda p: str(p.value))
def test_finalization_is_accepted_iff_every_call_is_terminal(first: CallPhase, second: CallPhase) -> None:
    chain = reach([first, second])
    run = chain.snapshot
    assert run.batch is not None
    final = attrs.evolve(run.batch, finalized=True)
    all_terminal = all(call_phase(c.status) in (CallPhase.COMPLETED, CallPhase.INDETERMINATE) for c in final.calls)
    verdict = chain.judge(commit_on(run, Running(), final, tool_messages(final)))
    assert isinstance(verdict, Accepted) == all_terminal, verdict
    if not all_terminal and isinstance(run.state, Running):
        assert isinstance(verdict, Rejection) and verdict.rule is Rule.FINALIZE
    if all_terminal:
        # Finalized is an edge from each terminal phase of the spec
        for call in final.calls:
            assert (call_phase(call.status).value, "Finalized") in SPEC_CALL_EDGES


# --- validate_commit accepts exactly the spec's Run edges ------------------------------

SPEC_RUN_EDGES = {(e.source, e.target) for e in spec_edges(RunMachine)}


def run_candidates(chain: Builder) -> Iterator[Candidate]:
    run = chain.snapshot
    assert run.batch is not None
    old = run.batch.calls[0].status
    yield Candidate("empty", old, commit_on(run, run.state, run.batch))
    yield Candidate("plain", old, commit_on(run, Running(), run.batch))
    for phase in CALL_PHASES:
        for status in statuses_of(phase, old.attempt):
            yield from candidates(run, "c1", status)


@pytest.mark.parametrize(
    ("source", "target"), list(itertools.product(RunPhase, RunPhase)), ids=lambda p: str(p.value)
)
def test_commit_validation_accepts_a_run_change_iff_the_spec_has_the_edge(
    source: RunPhase, target: RunPhase
) -> None:
    chain = run_in(source)
    accepted = []
    for candidate in run_candidates(chain):
        if run_phase(candidate.commit.disposition) is not target:
            continue
        verdict = chain.judge(candidate.commit)
        if isinstance(verdict, Accepted):
            accepted.append(candidate)
        elif source is RunPhase.ENDED:
            assert verdict.rule is Rule.AFTER_ENDED
    is_edge = (source.value, target.value) in SPEC_RUN_EDGES
    assert bool(accepted) == is_edge, (source, target, accepted[:1])
    if source is not RunPhase.ENDED and target is RunPhase.ENDED:
        causes = {c.commit.disposition.cause.kind for c in accepted if isinstance(c.commit.disposition, Ended)}
        # outcome_unknown also needs a call whose outcome is unknown, which this context
        # (one Requested or Awaiting call, closed as run_ended) never has; see
        # test_decide_units.py for the runs that may end so
        expected = AWAITING_END_CAUSES if source is RunPhase.AWAITING else frozenset(EndCauseKind)
        assert causes == expected - {EndCauseKind.OUTCOME_UNKNOWN}


@pytest.mark.parametrize("target", list(RunPhase), ids=lambda p: str(p.value))
def test_a_first_commit_is_accepted_only_when_running(target: RunPhase) -> None:
    call = ToolCall("c1", "tool", {}, "op1", CallRequested())
    use = (ToolUse("c1", "tool", {}),)
    commits: list[ThreadCommit] = []
    if target is RunPhase.RUNNING:
        commits.append(ThreadCommit(THREAD, RUN, 0, 0, Running(), None, (Message(Role.USER, "go"),)))
        commits.append(
            ThreadCommit(
                THREAD, RUN, 0, 1, Running(), ActiveToolBatch("b1", 1, False, (call,)),
                (Message(Role.USER, "go"), Message(Role.ASSISTANT, "t", tool_calls=use)),
            )
        )
    elif target is RunPhase.AWAITING:
        waiting = attrs.evolve(call, status=CallAwaiting(0, Wait(WaitKind.APPROVAL, TICKET_NEW)))
        commits.append(
            ThreadCommit(
                THREAD, RUN, 0, 1, Awaiting(ResumeTicket(TICKET_NEW, WaitKind.APPROVAL, "c1")),
                ActiveToolBatch("b1", 1, False, (waiting,)),
                (Message(Role.USER, "go"), Message(Role.ASSISTANT, "t", tool_calls=use)),
            )
        )
    else:
        for kind in EndCauseKind:
            commits.append(
                ThreadCommit(THREAD, RUN, 0, 1, Ended(cause(kind)), None, (Message(Role.ASSISTANT, "done"),))
            )
    is_edge = (None, target.value) in SPEC_RUN_EDGES
    for commit in commits:
        verdict = validate_commit(None, None, commit, ticket_seen=NO_TICKETS_SEEN)
        assert isinstance(verdict, Accepted) == is_edge, verdict
        if not is_edge:
            assert isinstance(verdict, Rejection) and verdict.rule is Rule.FIRST_COMMIT
