"""What the stateful test (``runtime_harness.py``) draws: model scripts for its Runs,
resume payloads, crash boundaries, commands and end causes, and how a rule picks among
ranked candidates.
"""

from __future__ import annotations

from typing import TypeAlias, TypeVar

from hypothesis import strategies as st

from runkernel.kernel.policies import RecoveryMode
from runkernel.kernel.protocol import (
    PAYLOADS_BY_WAIT,
    Approve,
    DelegationResult,
    Deny,
    ExternalResult,
    ProvideInput,
    ResumePayload,
    TimerFired,
)
from runkernel.kernel.state import EndCause, TypedError
from runkernel.kernel.values import EndCauseKind, WaitKind
from runkernel.testing import DELEGATE, FAIL, LOST, OK, RETRY, SCHEDULE, Boundary, StepScript
from runtime_harness_world import DELEGATE_TOOL, GATE_ANSWERS, TOOL_SPECS


# --- scripts -------------------------------------------------------------------------

BEHAVIOURS = (OK, FAIL, RETRY, LOST, DELEGATE, SCHEDULE)


def tool_step(calls: list[tuple[str, list[str], str]]) -> StepScript:
    return StepScript(
        "calling tools",
        tuple((tool, {"n": n, "replies": replies, "gate": gate}) for n, (tool, replies, gate) in enumerate(calls)),
    )


#: A tool: each recovery mode equally likely, then one of its variants.
TOOLS = st.sampled_from(RecoveryMode).flatmap(
    lambda mode: st.sampled_from([spec.name for spec in TOOL_SPECS if spec.mode is mode])
)
#: Behaviour of one attempt: ``ok`` half the time (``one_of`` would merge repeated
#: alternatives, so weights are repeated elements of ``sampled_from``).
ATTEMPTS = st.sampled_from((OK,) * 8 + tuple(b for b in BEHAVIOURS if b != OK))
#: Gate answers, mostly ``permit``.
GATES = st.sampled_from(("permit",) * 24 + tuple(g for g in GATE_ANSWERS if g != "permit"))
CALLS = st.tuples(TOOLS, st.lists(ATTEMPTS, min_size=1, max_size=3), GATES)
TOOL_STEPS = st.lists(CALLS, min_size=1, max_size=3).map(tool_step)
TEXT_CONTINUE = StepScript("thinking")
TEXT_END = StepScript("all done", end=EndCauseKind.COMPLETED)

#: What a delegation's child Run does, named in the call's arguments (``"child"``), which
#: are its activation message: end at once, call a tool first, wait for input (the child
#: is Awaiting while its parent is quiet), or think for a step first.
CHILD_SCRIPTS: dict[str, tuple[StepScript, ...]] = {
    "end": (StepScript("child done", end=EndCauseKind.COMPLETED),),
    "tool": (StepScript("child calling", (("replay", {"n": 0, "replies": [OK], "gate": "permit"}),)), TEXT_END),
    "input": (StepScript("child asking", (("replay", {"n": 0, "replies": [OK], "gate": "hold:input"}),)), TEXT_END),
    "steps": (TEXT_CONTINUE, TEXT_END),
}
CHILDREN = st.sampled_from(("end", "end", "tool", "tool", "input", "steps"))
#: Any member of a group may be held, refused or supplied by the gate: the gate round asks
#: every member before any starts, and a held one waits alone (``CONCURRENCY_RULE``).
MEMBER_GATES = st.sampled_from(("permit",) * 6 + ("hold:approval", "refuse", "provide"))


def delegation_step(
    first: tuple[str, str], second: tuple[str, str], ordinary: tuple[str, list[str], str]
) -> StepScript:
    tool, replies, gate = ordinary
    return StepScript(
        "delegating",
        (
            (DELEGATE_TOOL, {"n": 0, "child": first[0], "gate": first[1]}),
            (DELEGATE_TOOL, {"n": 1, "child": second[0], "gate": second[1]}),
            (tool, {"n": 2, "replies": replies, "gate": gate}),
        ),
    )


#: A batch of two terminal-only delegations (a group) and an ordinary call after it.
DELEGATION_STEPS = st.builds(
    delegation_step, st.tuples(CHILDREN, MEMBER_GATES), st.tuples(CHILDREN, MEMBER_GATES), CALLS
)
#: One to four steps, mostly tool batches; past its script the model ends the Run
#: with a text result (``ScriptedModel``), so every script ends with a text step.
_STEP_KINDS: dict[str, st.SearchStrategy[StepScript]] = {
    "tools": TOOL_STEPS,
    "delegations": DELEGATION_STEPS,
    "continue": st.just(TEXT_CONTINUE),
    "end": st.just(TEXT_END),
}
STEPS = st.sampled_from(["tools", "tools", "tools", "delegations", "continue", "end"]).flatmap(_STEP_KINDS.__getitem__)
SCRIPTS = st.lists(STEPS, min_size=1, max_size=4).map(tuple)

#: One payload of the type each wait kind takes.
PAYLOAD_FOR_WAIT: dict[WaitKind, ResumePayload] = {
    WaitKind.APPROVAL: Approve(),
    WaitKind.INPUT: ProvideInput("42"),
    WaitKind.EXTERNAL: ExternalResult({"answer": "from outside"}),
    WaitKind.DELEGATION: DelegationResult("child result"),
    WaitKind.SCHEDULED: TimerFired(),
}


def valid_payload(kind: WaitKind, choice: int) -> ResumePayload:
    """A payload of the type ``kind`` needs; ``choice`` varies it (approve or deny...)."""
    if kind is WaitKind.APPROVAL:
        return Approve() if choice % 2 == 0 else Deny(f"operator said no ({choice})")
    if kind is WaitKind.INPUT:
        return ProvideInput(f"input {choice}")
    if kind is WaitKind.EXTERNAL:
        return ExternalResult({"answer": choice})
    if kind is WaitKind.DELEGATION:
        return DelegationResult(f"child answered {choice}")
    return TimerFired()


def wrong_payload(kind: WaitKind) -> ResumePayload:
    """A payload that ``kind`` never takes."""
    for other in WaitKind:
        payload = PAYLOAD_FOR_WAIT[other]
        if not isinstance(payload, PAYLOADS_BY_WAIT[kind]):
            return payload
    raise AssertionError("every wait kind refuses some payload")


#: Crash kinds; a tool effect counts twice (it is where recovery policies matter).
BOUNDARIES = st.sampled_from(
    (Boundary.BEFORE_WRITE, Boundary.AFTER_WRITE, Boundary.AFTER_EFFECT, Boundary.AFTER_EFFECT)
)
BAD_COMMANDS = ("forged", "wrong_kind", "wrong_payload", "other_run", "repeat", "stale")
#: One to four resumes for a Run: (kind, straight into the inbox?).
COMMANDS = st.lists(
    st.tuples(st.sampled_from(("valid", "valid") + BAD_COMMANDS), st.booleans()), min_size=1, max_size=4
)
END_CAUSES = (
    EndCause(EndCauseKind.CANCELLED),
    EndCause(EndCauseKind.STOPPED),
    EndCause(EndCauseKind.FAILED, TypedError("OperatorFailure", "failed on purpose")),
    EndCause(EndCauseKind.COMPLETED),
)

Versions: TypeAlias = dict[str, int]
T = TypeVar("T")

#: ``pick`` values below this choose among the best-ranked candidates only.
FAVOURITE = 5


def choose(ranked: list[tuple[int, T]], pick: int) -> T | None:
    """The ``pick``-th candidate: among the best-ranked ones for most picks (0-4 of
    0-7), among all of them, best first, for the others."""
    if not ranked:
        return None
    ranked = sorted(ranked, key=lambda item: item[0])
    best = [item for item in ranked if item[0] == ranked[0][0]]
    pool = best if pick < FAVOURITE else ranked
    return pool[pick % len(pool)][1]
