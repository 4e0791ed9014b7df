"""The store's shorter path (``judge_commit``: a kernel-made commit judged by the edge
``decide`` named) reaches the full judge's verdict (``validate_commit``) on every commit:
the random kernel driver's, every catalogued trace mutation under the claim of the commit
it mutates and under every other claim, and legal commits with deliberately wrong claims.

The verdict is compared whole: an acceptance's head, snapshot and history keys, or a
rejection's rule and message.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import attrs
from hypothesis import given
from hypothesis import strategies as st

from driver_history import History
from runkernel.kernel.codec import commit_from_json, commit_to_json
from runkernel.kernel.decide import decide
from runkernel.kernel.history import NO_HISTORY, RunHistory
from runkernel.kernel.policies import Policies
from runkernel.kernel.protocol import (
    Activate,
    Allow,
    GateVerdict,
    InferenceResult,
    Input,
    ProposedCall,
    ToolFinished,
    ToolOutput,
)
from runkernel.kernel.rules import Rejection, Rule
from runkernel.kernel.state import (
    EdgeKind,
    ForkedFrom,
    Message,
    NamedEdge,
    RunSnapshot,
    ThreadCommit,
    ThreadHead,
)
from runkernel.kernel.validate import Accepted, validate_commit
from runkernel.kernel.validate_edge import by_named_edge, judge_commit
from runkernel.kernel.values import Role
from strategies import histories
from trace_mutations import MUTATIONS, Context


def claims_for(commit: ThreadCommit) -> list[NamedEdge | None]:
    """Every claim a commit could carry: its own, none, each kind, each call index and
    the indexes just outside the batch."""
    calls = len(commit.batch.calls) if commit.batch is not None else 0
    claims: list[NamedEdge | None] = [commit.edge, None, NamedEdge(EdgeKind.TEXT_STEP), NamedEdge(EdgeKind.NEW_BATCH)]
    claims += [NamedEdge(EdgeKind.CALL_MOVE, index) for index in range(-1, calls + 1)]
    return claims


class Judges:
    """Both judges side by side over a sequence of commits of several Threads, with the
    state a store keeps: each Thread's head, each Run's snapshot and history, and the
    tickets used anywhere."""

    def __init__(self) -> None:
        self.heads: dict[str, ThreadHead] = {}
        self.runs: dict[str, RunSnapshot] = {}
        self.histories: dict[str, RunHistory] = {}
        self.tickets: set[str] = set()
        self.by_edge = 0  # acceptances the shorter path reached on its own

    def verdicts(self, commit: ThreadCommit) -> tuple[Accepted | Rejection, list[Accepted | Rejection]]:
        head = self.heads.get(commit.thread_id)
        run = self.runs.get(commit.run_id)
        history = self.histories.get(commit.run_id, NO_HISTORY)
        full = validate_commit(head, run, commit, history, ticket_seen=self.tickets.__contains__)
        named: list[Accepted | Rejection] = []
        for claim in claims_for(commit):
            claimed = attrs.evolve(commit, edge=claim)
            named.append(judge_commit(head, run, claimed, history, ticket_seen=self.tickets.__contains__))
            if run is not None and by_named_edge(head, run, claimed, history) is not None:
                self.by_edge += 1
        return full, named

    def judge(self, commit: ThreadCommit) -> Accepted | Rejection:
        """The full verdict, after requiring the shorter path's verdict equal to it
        under every claim; an acceptance is applied."""
        full, named = self.verdicts(commit)
        for claim, verdict in zip(claims_for(commit), named):
            assert verdict == full, f"claim {claim}: named-edge verdict {verdict} differs from the full judge's {full}"
        if isinstance(full, Accepted):
            self.heads[commit.thread_id] = full.head
            self.runs[commit.run_id] = full.run
            self.histories[commit.run_id] = self.histories.get(commit.run_id, NO_HISTORY).plus(full.keys)
            if full.keys.ticket is not None:
                self.tickets.add(full.keys.ticket)
        return full


def judge_all(commits: Sequence[ThreadCommit]) -> Judges:
    """Judge ``commits`` in order until the first rejection."""
    judges = Judges()
    for commit in commits:
        if isinstance(judges.judge(commit), Rejection):
            break
    return judges


@given(histories())
def test_the_kernel_drivers_commits_get_the_full_judges_verdict_by_their_named_edge(history: History) -> None:
    judges = Judges()
    for commit in history.commits:
        verdict = judges.judge(commit)
        assert isinstance(verdict, Accepted), verdict  # the kernel's commits are legal


@given(history=histories(max_threads=2, max_runs=3), data=st.data())
def test_every_catalogued_mutation_gets_the_full_judges_verdict_under_every_claim(
    history: History, data: st.DataObject
) -> None:
    context = Context.of(history.commits)
    for name, mutation in MUTATIONS.items():
        sites = list(mutation(context))
        if not sites:
            continue
        site = data.draw(st.sampled_from(sites), label=name)
        mutated = list(_claimed(site.mutate(context.lines), history.commits))
        judge_all(mutated)


def _claimed(lines: list[dict[str, Any]], originals: Sequence[ThreadCommit]) -> Iterator[ThreadCommit]:
    """The mutated lines as commits, each carrying the claim of the kernel commit at its
    position (a mutated kernel commit still claims its edge; ``claims_for`` adds the rest)."""
    for index, line in enumerate(lines):
        commit = commit_from_json(line)
        edge = originals[index].edge if index < len(originals) else None
        yield attrs.evolve(commit, edge=edge)


def test_a_tool_steps_commits_are_accepted_by_their_named_edge() -> None:
    """Not vacuous: the shorter path itself accepts each commit of a tool step (new
    batch, first attempt, output with finalization) and of a text step."""
    policies = Policies()
    decision = decide(None, Activate("t", "r", 0, (Message(Role.USER, "hi"),)), policies)
    assert not isinstance(decision, Rejection)
    state = decision.state
    inputs: list[Input] = [
        InferenceResult("", (ProposedCall("c", "tool", {"n": 1}, "op"),), "b"),
        GateVerdict("c", Allow()),
        ToolFinished("c", 1, ToolOutput("done")),
        InferenceResult("text, no end", ()),
    ]
    kinds: list[EdgeKind] = []
    for event in inputs:
        decision = decide(state, event, policies)
        assert not isinstance(decision, Rejection)
        commit = decision.commit
        assert commit is not None and commit.edge is not None
        head = ThreadHead(state.thread_id, state.version, state.run_id)
        accepted = by_named_edge(head, state, commit, NO_HISTORY)
        assert accepted is not None
        assert accepted == validate_commit(head, state, commit, ticket_seen=lambda _: False)
        kinds.append(commit.edge.kind)
        state = decision.state
    assert kinds == [EdgeKind.NEW_BATCH, EdgeKind.CALL_MOVE, EdgeKind.CALL_MOVE, EdgeKind.TEXT_STEP]


def test_a_later_commit_naming_a_fork_source_is_refused_under_every_claim() -> None:
    """Only a fork's first commit names its source: a later one that does is refused
    under ``fork-carries-source-state`` by the full judge, and by the named edge too
    (which once accepted it: its plain-step check looked at parent and app_version
    only)."""
    policies = Policies()
    decision = decide(None, Activate("t", "r", 0, (Message(Role.USER, "hi"),)), policies)
    assert not isinstance(decision, Rejection)
    state = decision.state
    inputs: list[Input] = [
        InferenceResult("", (ProposedCall("c", "tool", {"n": 1}, "op"),), "b"),
        GateVerdict("c", Allow()),
        ToolFinished("c", 1, ToolOutput("done")),
        InferenceResult("text, no end", ()),
    ]
    assert decision.commit is not None
    judges = Judges()
    assert isinstance(judges.judge(decision.commit), Accepted)
    for event in inputs:
        decision = decide(state, event, policies)
        assert not isinstance(decision, Rejection) and decision.commit is not None
        commit = decision.commit
        naming = attrs.evolve(commit, forked_from=ForkedFrom("elsewhere", "r0", 1))
        refused = judges.judge(naming)  # every claim's verdict equals the full judge's
        assert isinstance(refused, Rejection) and refused.rule is Rule.FORK, refused
        assert isinstance(judges.judge(commit), Accepted)
        state = decision.state


def test_a_commit_read_from_a_trace_names_no_edge() -> None:
    """check-trace and foreign runtimes are judged in full: the claim is never encoded."""
    decision = decide(None, Activate("t", "r", 0, (Message(Role.USER, "hi"),)), Policies())
    assert not isinstance(decision, Rejection)
    event = InferenceResult("", (ProposedCall("c", "tool", {}, "op"),), "b")
    made = decide(decision.state, event, Policies())
    assert not isinstance(made, Rejection) and made.commit is not None
    assert made.commit.edge is not None
    assert commit_from_json(commit_to_json(made.commit)).edge is None
