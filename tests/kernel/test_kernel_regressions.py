"""Regression tests: minimal reproductions of kernel bugs the property tests found."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from runkernel.kernel.decide import decide
from runkernel.kernel.policies import Policies
from runkernel.kernel.protocol import (
    Activate,
    Approve,
    DeadlinePassed,
    Decision,
    Deny,
    GateVerdict,
    InferenceResult,
    Input,
    RequestInference,
    RequireWait,
    ResumeCommand,
    ToolDelegated,
    ToolScheduled,
)
from runkernel.kernel.recover import recover
from runkernel.kernel.rules import Rejection, Rule
from runkernel.kernel.state import Awaiting, Ended, Message, Running, RunSnapshot
from runkernel.kernel.values import EndCauseKind, Role, WaitKind
from runkernel.testing import Builder
from scripted_trace import propose_tools


# --- regressions: minimal reproductions of kernel bugs the properties found ----------------


def _awaiting_at_step_limit() -> tuple[RunSnapshot, Policies]:
    limited = Policies(max_steps=1)
    state = Builder("thread-r", limited).start("run-r").feed(
        propose_tools("b1", ("c1", "search")),
        GateVerdict("c1", RequireWait(WaitKind.APPROVAL, "ticket-r")),
    ).state
    assert state is not None and isinstance(state.state, Awaiting)
    return state, limited


def test_an_activation_with_non_user_messages_is_refused_not_a_kernel_bug() -> None:
    for message in (
        Message(Role.ASSISTANT, "hi"),
        Message(Role.TOOL, "result", call_id="c1"),
    ):
        outcome = decide(None, Activate("thread-r", "run-r", 0, (Message(Role.USER, "go"), message)))
        assert isinstance(outcome, Rejection), outcome
    assert isinstance(decide(None, Activate("thread-r", "run-r", 0, (Message(Role.USER, "go"),))), Decision)


def test_no_inference_is_accepted_past_the_step_limit() -> None:
    state, limited = _awaiting_at_step_limit()
    resumed = decide(state, ResumeCommand("run-r", "ticket-r", WaitKind.APPROVAL, Deny("no")), limited)
    assert isinstance(resumed, Decision) and isinstance(resumed.state.state, Running)
    assert resumed.state.step == 1 and resumed.state.open_batch is None
    assert not any(isinstance(e, RequestInference) for e in resumed.effects)
    for result in (InferenceResult("more"), propose_tools("b2", ("c2", "search"))):
        outcome = decide(resumed.state, result, limited)
        assert isinstance(outcome, Rejection), outcome
    ended = recover(resumed.state, limited).decision.state
    assert isinstance(ended.state, Ended) and ended.state.cause.kind is EndCauseKind.STEP_LIMIT


@pytest.mark.parametrize(
    "command",
    [
        ResumeCommand("run-r", "ticket-r", WaitKind.APPROVAL, Deny("\ud800")),
        ResumeCommand("run-r", "ticket-r", WaitKind.APPROVAL, Deny({"not": {"json"}})),
        ResumeCommand("run-r", "ticket-\udfff", WaitKind.APPROVAL, Approve()),
    ],
    ids=["lone-surrogate", "not-json", "surrogate-ticket"],
)
def test_a_resume_command_without_canonical_json_is_refused(command: ResumeCommand) -> None:
    state, limited = _awaiting_at_step_limit()
    outcome = decide(state, command, limited)
    assert isinstance(outcome, Rejection) and outcome.rule is Rule.PAYLOAD_TYPE, outcome


@pytest.mark.parametrize(
    "build",
    [
        lambda: RequireWait(WaitKind.APPROVAL, ""),
        lambda: RequireWait(WaitKind.APPROVAL, "\ud800"),
        lambda: ToolDelegated(""),
        lambda: ToolScheduled("", "2030-01-01T00:00:00Z"),
        lambda: DeadlinePassed("\ud800", "2030-01-01T00:00:00Z"),
        lambda: Activate("", "run", 0, ()),
        lambda: Activate("thread", "", 0, ()),
        lambda: Activate("thread", "run", -1, ()),
    ],
    ids=[
        "wait-empty", "wait-surrogate", "delegated-empty", "scheduled-empty",
        "deadline-surrogate", "activate-thread", "activate-run", "activate-version",
    ],
)
def test_inputs_with_ids_the_kernel_cannot_commit_cannot_be_built(build: Callable[[], Input]) -> None:
    with pytest.raises(ValueError):
        build()
