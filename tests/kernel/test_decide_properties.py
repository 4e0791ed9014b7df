"""Property tests of ``decide``, driven by the random host in ``kernel_driver.py`` (drawn
through ``strategies.py``): every commit is legal and moves along the spec's edges, a
rejection changes nothing, a resume commits exactly when it matches the awaited ticket.

Run with the ``ci`` profile by default; ``HYPOTHESIS_PROFILE=deep`` explores more.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator

from hypothesis import assume, given, note
from hypothesis import strategies as st

from driver_history import Crash, History, Step
from runkernel.kernel.decide import decide
from runkernel.kernel.history import NO_HISTORY
from runkernel.kernel.protocol import PAYLOADS_BY_WAIT, Commit, Decision, ResumeCommand
from runkernel.kernel.rules import Rejection
from runkernel.kernel.state import Awaiting, Running, RunSnapshot
from runkernel.specs.checker import Verdict, check_commits
from spec_assertions import assert_spec_edges, assert_spec_state
from strategies import any_input, fuzz_input, histories, resume_commands


def decided_steps(history: History) -> Iterator[Step]:
    """Steps where ``decide`` (not ``recover``) acted on a committed state."""
    for step in history.steps:
        if step.before is not None and not isinstance(step.action, Crash):
            yield step


# --- every commit is legal, every state is a spec state ----------------------------------


@given(histories())
def test_every_commit_the_driver_makes_is_legal(history: History) -> None:
    """Drawing the history already ran decide/recover: any exception (KernelBug) fails here."""
    finding = check_commits(history.commits)
    assert finding.verdict is Verdict.LEGAL, finding.report("driver")
    assert finding.commits == len(history.commits)
    assert finding.threads == len(history.threads)
    for thread in history.threads:
        versions = [c.version for c in thread]
        assert versions == list(range(1, len(thread) + 1))


@given(histories())
def test_decide_and_recover_yield_only_spec_states_and_edges(history: History) -> None:
    for step in history.steps:
        decision = step.decision
        if decision is None:
            continue
        assert_spec_state(decision.state)
        commits = [e.commit for e in decision.effects if isinstance(e, Commit)]
        assert len(commits) <= 1, "one decision commits at most once"
        if commits:
            assert_spec_edges(step.before, commits[0])
            assert decision.state.version == commits[0].version
        else:
            assert decision.state == step.before, "a decision without a commit changed state"


@given(histories())
def test_a_run_never_commits_more_inference_results_than_its_step_limit(history: History) -> None:
    for step in history.steps:
        commit = step.commit
        limit = step.policies.max_steps
        if commit is not None and limit is not None:
            assert commit.step <= limit, f"step {commit.step} committed under max_steps={limit}"


@given(histories(), st.data())
def test_decide_never_raises_on_any_input_it_can_be_given(history: History, data: st.DataObject) -> None:
    """Odd ids and values get a typed rejection (or cannot be built at all), never a crash."""
    chosen = data.draw(st.none() | st.sampled_from(history.states()))
    state, facts = chosen if chosen is not None else (None, NO_HISTORY)
    pristine = copy.deepcopy(state)
    event = data.draw(fuzz_input(state, facts))
    outcome = decide(state, event, history.steps[0].policies, facts)
    assert isinstance(outcome, (Decision, Rejection))
    assert state == pristine


# --- rejections change nothing -------------------------------------------------------------


@given(histories())
def test_a_rejection_leaves_the_state_unchanged(history: History) -> None:
    rejected = [s for s in decided_steps(history) if isinstance(s.outcome, Rejection)]
    for step in rejected:
        assert step.before is not None and not isinstance(step.action, Crash)
        before = copy.deepcopy(step.before)
        again = decide(step.before, step.action, step.policies, step.history)
        assert again == step.outcome, "decide is not deterministic"
        assert step.before == before, "decide changed the snapshot it refused to act on"


@given(histories(), st.data())
def test_a_refused_input_does_not_change_what_a_valid_one_does(history: History, data: st.DataObject) -> None:
    valid = [s for s in decided_steps(history) if isinstance(s.outcome, Decision)]
    assume(valid)
    step = data.draw(st.sampled_from(valid))
    assert step.before is not None and not isinstance(step.action, Crash)
    state = step.before
    pristine = copy.deepcopy(state)
    bad = data.draw(any_input(state, step.history))
    outcome = decide(state, bad, step.policies, step.history)
    note(f"other input {bad!r} -> {outcome!r}")
    assert state == pristine
    if isinstance(outcome, Rejection):
        assert decide(state, step.action, step.policies, step.history) == step.outcome
        assert decide(pristine, step.action, step.policies, step.history) == step.outcome


def resume_should_commit(state: RunSnapshot, command: ResumeCommand) -> bool:
    """I14: Awaiting, same Run, ticket, wait kind and payload type match, not applied yet."""
    run = state.state
    return (
        isinstance(run, Awaiting)
        and command.run_id == state.run_id
        and command.ticket_id == run.ticket.ticket_id
        and command.kind is run.ticket.wait
        and isinstance(command.payload, PAYLOADS_BY_WAIT[run.ticket.wait])
    )


@given(histories(), st.data())
def test_a_resume_commits_iff_the_run_awaits_that_ticket_kind_and_payload(
    history: History, data: st.DataObject
) -> None:
    for step in decided_steps(history):
        if isinstance(step.action, ResumeCommand):
            assert step.before is not None
            committed = isinstance(step.outcome, Decision) and step.outcome.commit is not None
            assert committed == resume_should_commit(step.before, step.action), step
    awaiting = [
        (s.before, s.history)
        for s in decided_steps(history)
        if s.before is not None and isinstance(s.before.state, Awaiting)
    ]
    for state, facts in data.draw(st.lists(st.sampled_from(awaiting), max_size=5)) if awaiting else []:
        command = data.draw(resume_commands(state, facts))
        outcome = decide(state, command, history=facts)
        committed = isinstance(outcome, Decision) and outcome.commit is not None
        assert committed == resume_should_commit(state, command), (command, outcome)
        if committed:
            assert isinstance(outcome, Decision) and outcome.commit is not None
            events = [e for e in outcome.commit.events if e.type == "resumed"]
            assert len(events) == 1 and events[0].data["digest"] == command.digest()
            assert isinstance(outcome.state.state, Running)
