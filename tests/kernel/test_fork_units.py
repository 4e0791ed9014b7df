"""The fork rules one by one: ``fork_point``'s refusals, the ids a fork takes, and what
the judge refuses on a fork's first line alone (rule by rule) and on a later line."""

from __future__ import annotations

import attrs
import pytest

from runkernel.kernel.decide import decide
from runkernel.kernel.fork import ForkIds, ForkPoint, ForkRefusal, ForkRefusalKind, fork_commit, fork_point
from runkernel.kernel.policies import Policies, ToolPolicy
from runkernel.kernel.protocol import (
    Activate,
    Allow,
    GateVerdict,
    InferenceResult,
    Input,
    ProposedCall,
    RequireWait,
    ToolFinished,
    ToolScheduled,
    ToolOutput,
)
from runkernel.kernel.rules import Rejection, Rule
from runkernel.kernel.state import (
    Awaiting,
    CallAwaiting,
    CallExecuting,
    CallIndeterminate,
    CallRequested,
    CallStatus,
    ForkedFrom,
    Message,
    ParentCall,
    ResumeTicket,
    Running,
    RunSnapshot,
    ThreadCommit,
    ThreadHead,
    Wait,
)
from runkernel.kernel.validate import NO_TICKETS_SEEN, successor, validate_commit
from runkernel.kernel.values import IndeterminateReason, Role, WaitKind
from runkernel.specs.checker import Verdict, check_commits

POLICIES = Policies(tools={"search": ToolPolicy.replay(), "send": ToolPolicy.indeterminate()})


def _commits(*, wait: bool = False) -> list[ThreadCommit]:
    """A Run asking for search and send; search allowed (Executing), then send held
    for approval when ``wait``."""
    commits: list[ThreadCommit] = []
    state: RunSnapshot | None = None
    inputs: list[Input] = [
        Activate("t", "r", 0, (Message(Role.USER, "go"),)),
        InferenceResult("x", calls=(ProposedCall("c1", "search", {}, "op-1"), ProposedCall("c2", "send", {}, "op-2")), batch_id="b"),
        GateVerdict("c1", Allow()),
    ]
    for event in inputs:
        decision = decide(state, event, POLICIES)
        assert not isinstance(decision, Rejection) and decision.commit is not None
        commits.append(decision.commit)
        state = decision.state
    if wait:
        assert state is not None
        for event in (ToolFinished("c1", 1, ToolOutput("ok")), GateVerdict("c2", RequireWait(WaitKind.APPROVAL, "tk-source"))):
            decision = decide(state, event, POLICIES)
            assert not isinstance(decision, Rejection) and decision.commit is not None
            commits.append(decision.commit)
            state = decision.state
    return commits


IDS = ForkIds("t2", "r2", ["new-1", "new-2"], "tk-new")


def _alone(commit: ThreadCommit) -> Rejection | None:
    verdict = validate_commit(None, None, commit, ticket_seen=NO_TICKETS_SEEN)
    return verdict if isinstance(verdict, Rejection) else None


def test_fork_point_refuses_a_version_the_thread_has_not_and_one_of_another_run() -> None:
    commits = _commits()
    missing = fork_point(commits, "r", 9)
    assert isinstance(missing, ForkRefusal) and missing.kind is ForkRefusalKind.NO_SUCH_VERSION
    other = fork_point(commits, "someone-else", 2)
    assert isinstance(other, ForkRefusal) and other.kind is ForkRefusalKind.OTHER_RUN


def test_a_replay_call_executing_at_n_is_requested_again_under_a_new_operation_id() -> None:
    commits = _commits()
    point = fork_point(commits, "r", len(commits))
    assert isinstance(point, ForkPoint)
    made = fork_commit(point, IDS)
    assert isinstance(made, ThreadCommit) and made.batch is not None
    assert [(c.operation_id, c.status.attempt) for c in made.batch.calls] == [("new-1", 0), ("new-2", 0)]
    assert made.forked_from == ForkedFrom("t", "r", len(commits)) and made.messages == tuple(
        m for c in commits for m in c.messages
    )
    assert _alone(made) is None


def test_too_few_or_reused_operation_ids_and_a_reused_ticket_are_refused() -> None:
    commits = _commits(wait=True)
    point = fork_point(commits, "r", len(commits))
    assert isinstance(point, ForkPoint) and isinstance(point.run.state, Awaiting)
    for ids in (attrs.evolve(IDS, operation_ids=[]), attrs.evolve(IDS, operation_ids=["op-2"]), attrs.evolve(IDS, ticket_id="tk-source")):
        refused = fork_commit(point, ids)
        assert isinstance(refused, ForkRefusal) and refused.kind is ForkRefusalKind.IDS
    made = fork_commit(point, IDS)
    assert isinstance(made, ThreadCommit) and isinstance(made.disposition, Awaiting)
    assert made.disposition.ticket.ticket_id == "tk-new" and _alone(made) is None


def _scheduled(tool_call: str) -> list[ThreadCommit]:
    """A Run whose call ``tool_call`` started and asked to be run again later (a durable
    backoff: Awaiting a scheduled wait with attempt 1); the other call still Executing
    or Requested."""
    commits = _commits()
    state = successor(None, commits[0])
    for commit in commits[1:]:
        state = successor(state, commit)
    later = ToolScheduled("tk-later", "2030-01-01T00:00:00Z")
    events: list[Input] = (
        [ToolFinished("c1", 1, ToolOutput("ok")), GateVerdict("c2", Allow()), ToolFinished("c2", 1, later)]
        if tool_call == "c2"
        else [ToolFinished("c1", 1, later)]
    )
    for event in events:
        decision = decide(state, event, POLICIES)
        assert not isinstance(decision, Rejection) and decision.commit is not None, decision
        commits.append(decision.commit)
        state = decision.state
    return commits


def test_a_call_waiting_on_a_run_its_tool_asked_for_had_started_and_is_never_started_again_unless_replay() -> None:
    """The tool of ``send`` (indeterminate) ran and scheduled itself: its attempt started,
    so the fork refuses it like an Executing call (or closes it Indeterminate when
    abandoned); ``search`` (replay) in the same position becomes the fork's own call."""
    commits = _scheduled("c2")
    point = fork_point(commits, "r", len(commits))
    assert isinstance(point, ForkPoint) and point.run.open_batch is not None
    assert isinstance(point.run.open_batch.calls[1].status, CallAwaiting)
    refused = fork_commit(point, IDS)
    assert isinstance(refused, ForkRefusal) and refused.kind is ForkRefusalKind.OPEN_CALLS
    assert "c2" in refused.calls
    abandoned = fork_commit(point, IDS, abandon_open_calls=True)
    assert isinstance(abandoned, ThreadCommit) and abandoned.batch is not None
    assert abandoned.batch.calls[1].status == CallIndeterminate(1, IndeterminateReason.OUTCOME_UNKNOWN)
    assert isinstance(abandoned.disposition, Running) and _alone(abandoned) is None
    assert check_commits(commits + [abandoned]).verdict is Verdict.LEGAL

    commits = _scheduled("c1")
    point = fork_point(commits, "r", len(commits))
    assert isinstance(point, ForkPoint) and isinstance(point.run.state, Awaiting)
    made = fork_commit(point, IDS)
    assert isinstance(made, ThreadCommit) and made.batch is not None
    assert made.batch.calls[0].status == CallRequested() and made.batch.calls[0].operation_id == "new-1"
    assert isinstance(made.disposition, Running) and _alone(made) is None
    assert check_commits(commits + [made]).verdict is Verdict.LEGAL
    assert _alone(_with_first_call(made, CallAwaiting(1, Wait(WaitKind.SCHEDULED, "tk-new", due_at="2030-01-01T00:00:00Z")))) is not None


def _made() -> ThreadCommit:
    commits = _commits()
    point = fork_point(commits, "r", len(commits))
    assert isinstance(point, ForkPoint)
    made = fork_commit(point, IDS)
    assert isinstance(made, ThreadCommit) and made.batch is not None
    return made


def _with_first_call(made: ThreadCommit, status: CallStatus) -> ThreadCommit:
    assert made.batch is not None
    first = made.batch.calls[0].with_status(status)
    return attrs.evolve(made, batch=attrs.evolve(made.batch, calls=(first, *made.batch.calls[1:])))


@pytest.mark.parametrize(
    ("name", "rule"),
    [
        ("an Executing call", Rule.FORK),
        ("an Awaiting call whose attempt started", Rule.FORK),
        ("an Awaiting disposition without its call", Rule.CALL_WAITS_WITH_RUN),
        ("a batch that is not the last tool-use message's", Rule.FORK),
        ("a batch of another step", Rule.FORK),
        ("a step beyond its assistant messages", Rule.STEP),
        ("a parent", Rule.FORK),
    ],
)
def test_a_forks_first_line_judged_alone_is_refused_by_its_rule(name: str, rule: Rule) -> None:
    made = _made()
    uses = made.messages[-1].tool_calls
    assert made.batch is not None and uses is not None
    bad = {
        "an Executing call": lambda: _with_first_call(made, CallExecuting(1)),
        "an Awaiting call whose attempt started": lambda: _with_first_call(
            made, CallAwaiting(1, Wait(WaitKind.EXTERNAL, "tk-new"))
        ),
        "an Awaiting disposition without its call": lambda: attrs.evolve(
            made, disposition=Awaiting(ResumeTicket("tk", WaitKind.APPROVAL, "c1"))
        ),
        "a batch that is not the last tool-use message's": lambda: attrs.evolve(
            made, messages=(*made.messages[:-1], attrs.evolve(made.messages[-1], tool_calls=uses[:1]))
        ),
        "a batch of another step": lambda: attrs.evolve(made, batch=attrs.evolve(made.batch, step=2)),
        "a step beyond its assistant messages": lambda: attrs.evolve(made, step=5),
        "a parent": lambda: attrs.evolve(made, parent=ParentCall("pt", "pr", "pc")),
    }[name]()
    refused = _alone(bad)
    assert refused is not None and refused.rule is rule, refused


def test_only_a_first_commit_names_a_fork_source() -> None:
    commits = _commits()
    state: RunSnapshot | None = None
    for commit in commits[:-1]:
        state = successor(state, commit)
    assert state is not None
    later = attrs.evolve(commits[-1], forked_from=ForkedFrom("x", "y", 1))
    verdict = validate_commit(ThreadHead("t", state.version, "r"), state, later, ticket_seen=NO_TICKETS_SEEN)
    assert isinstance(verdict, Rejection) and verdict.rule is Rule.FORK
    assert isinstance(state.state, Running)


def test_a_fork_waiting_on_its_sources_ticket_is_refused_with_the_source_in_the_trace() -> None:
    commits = _commits(wait=True)
    point = fork_point(commits, "r", len(commits))
    assert isinstance(point, ForkPoint)
    made = fork_commit(point, IDS)
    assert isinstance(made, ThreadCommit) and made.batch is not None and isinstance(made.disposition, Awaiting)
    waiting = next(c for c in made.batch.calls if isinstance(c.status, CallAwaiting))
    assert isinstance(waiting.status, CallAwaiting)
    reused_wait = attrs.evolve(waiting.status.wait, correlation="tk-source")
    reused = attrs.evolve(
        made,
        disposition=Awaiting(attrs.evolve(made.disposition.ticket, ticket_id="tk-source")),
        batch=made.batch.replace_call(waiting.with_status(CallAwaiting(waiting.status.attempt, reused_wait))),
    )
    assert _alone(reused) is None  # alone, nothing says the ticket was used
    finding = check_commits(commits + [reused])
    assert finding.verdict is Verdict.ILLEGAL and finding.rule == Rule.TICKET_REUSED.value, finding
