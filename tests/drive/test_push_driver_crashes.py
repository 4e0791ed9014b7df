"""The push-mode driver crashed at every boundary it passes, through both shells.

Each scenario is first played without a crash to count its boundaries (before a write,
after a write but before the acknowledgement, after a tool's effect but before its
report). Then, for every boundary, the host's driver dies there and a fresh driver picks
the Run up from the store alone. The fresh driver's first action must be the one
``recover`` authorizes for the committed state. Every trial must end the Run as the
crash-free play does, with every exported trace legal under the checker, every attempt handed out only
after its Executing{n} was committed, and no executor start of a reconnect or
indeterminate call after the first (the tools' downstream record says so, not the
driver).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pytest
from attrs import frozen
from hypothesis import given
from hypothesis import strategies as st

from push_host import POLICIES, SHELLS, Reply, World, make_shell, play
from runkernel.adapters.drive.actions import (
    DEFAULT_MAX_STEPS,
    Action,
    CheckStatus,
    Fence,
    ChildrenRunning,
    Done,
    Infer,
    RunCall,
    RunCalls,
    WaitFor,
)
from runkernel.adapters.drive.inbox import submit_resume
from runkernel.adapters.stores.memory import MemoryStore
from runkernel.kernel.policies import Policies
from runkernel.kernel.protocol import (
    Approve,
    DeliverTerminus,
    Deny,
    Execute,
    NotifyWait,
    QueryStatus,
    RequestInference,
    ResumeCommand,
    ResumePayload,
    RunGate,
)
from runkernel.kernel.recover import recover
from runkernel.kernel.state import Message
from runkernel.kernel.values import EndCauseKind, Role
from runkernel.specs.checker import Verdict, check_commits
from runkernel.testing import Boundary, CountingIds, CrashAtEncounters, CrashingStore, Position, SimulatedCrash

DONE = Reply("all done", end=EndCauseKind.COMPLETED)


@frozen
class Scenario:
    name: str
    script: Mapping[int, Reply]
    answer: ResumePayload | None = None


SCENARIOS = (
    Scenario("text_only", {1: DONE}),
    Scenario("text_then_end", {1: Reply("thinking"), 2: DONE}),
    Scenario("one_batch", {1: Reply("t", (("replay", 1), ("reconnect", 2), ("indeterminate", 3))), 2: DONE}),
    Scenario("retry", {1: Reply("t", (("flaky", 1),)), 2: DONE}),
    Scenario("approval_approved", {1: Reply("t", (("replay", 1), ("pay", 2))), 2: DONE}, Approve()),
    Scenario("approval_denied", {1: Reply("t", (("pay", 1), ("reconnect", 2))), 2: DONE}, Deny("no")),
    Scenario(
        "two_batches",
        {1: Reply("a", (("reconnect", 1),)), 2: Reply("b", (("indeterminate", 2), ("pay", 3))), 3: DONE},
        Approve(),
    ),
)


def authorized(store: CrashingStore) -> tuple[object, ...] | None:
    """What ``recover`` lets a fresh driver hand out first, when nothing is queued and no
    gate stands in between (None: not predictable from recovery alone)."""
    state = store.run("r1")
    if state is None or store.pending_commands("r1"):
        return None
    policies = Policies(tools=dict(POLICIES), max_steps=DEFAULT_MAX_STEPS)
    for effect in recover(state, policies).decision.effects:
        match effect:
            case Execute():
                return ("run", effect.call_id, effect.operation_id, effect.attempt)
            case QueryStatus():
                return ("status", effect.call_id, effect.operation_id, effect.attempt)
            case RequestInference():
                return ("infer", effect.step)
            case NotifyWait():
                return ("wait", effect.ticket.ticket_id)
            case DeliverTerminus():
                return ("done",)
            case RunGate():
                return None
    return None


def handed(action: Action) -> tuple[object, ...]:
    match action:
        case RunCall():
            return ("run", action.call_id, action.operation_id, action.attempt)
        case RunCalls():  # a group: its first call is the first start recovery plans
            first = action.calls[0]
            return ("run", first.call_id, first.operation_id, first.attempt)
        case CheckStatus():
            return ("status", action.call_id, action.operation_id, action.attempt)
        case Infer():
            return ("infer", action.step)
        case WaitFor():
            return ("wait", action.ticket.ticket_id)
        case ChildrenRunning():
            return ("quiet", tuple(child.run_id for child in action.children))
        case Done():
            return ("done",)
        case Fence():  # handed out only to a driver given fences=: none here
            return ("fence", action.call_id, action.operation_id)


@frozen
class Trial:
    done: Done
    messages: tuple[Message, ...]
    crashes: int
    world: World
    store: CrashingStore
    boundaries: int
    fired: tuple[tuple[Boundary, Position], ...]


def play_with_crashes(kind: str, scenario: Scenario, targets: Sequence[int]) -> Trial:
    plan = CrashAtEncounters(tuple(targets))  # the simulator's plan: both drivers crash by one rule
    store = CrashingStore(MemoryStore(), plan)
    world = World(scenario.script, crash=plan, store=store)
    crashes = 0
    while True:
        driver = make_shell(kind, store, ids=CountingIds(f"d{crashes}"))
        try:
            action: Action
            if store.run("r1") is None:
                action = driver.start(["go"], thread_id="t1", run_id="r1")
            else:
                expected = authorized(store)
                action = driver.pick_up("r1")
                assert expected is None or handed(action) == expected, (
                    f"picked up with {action}, recovery authorizes {expected}"
                )
            while True:
                action = play(driver, action, world)
                if isinstance(action, Done):
                    messages = tuple(store.messages("t1"))
                    return Trial(action, messages, crashes, world, store, plan.seen, tuple(plan.fired))
                assert isinstance(action, WaitFor) and scenario.answer is not None
                if not store.pending_commands("r1"):
                    command = ResumeCommand("r1", action.ticket.ticket_id, action.ticket.wait, scenario.answer)
                    assert isinstance(submit_resume(store, command), int)
                action = driver.next_action()
        except SimulatedCrash:
            crashes += 1
            assert crashes <= len(targets), "a crash nobody planned"


def boundaries(kind: str, scenario: Scenario) -> tuple[int, Trial]:
    """How many boundaries the crash-free play passes, and that play."""
    baseline = play_with_crashes(kind, scenario, ())
    return baseline.boundaries, baseline


def problems(trial: Trial, baseline: Trial) -> list[str]:
    found = []
    finding = check_commits(trial.store.commits("t1"))
    if finding.verdict is not Verdict.LEGAL:
        found.append(f"trace: {finding}")
    if trial.done.cause != baseline.done.cause or trial.done.final != baseline.done.final:
        found.append(f"ended {trial.done} instead of {baseline.done}")
    repeated = trial.world.repeated_starts()
    if repeated:
        found.append(f"non-replay executors started again: {repeated}")
    for op, attempts in trial.world.starts.items():
        if attempts != sorted(set(attempts)):
            found.append(f"attempts of {op} not strictly rising: {attempts}")
    if len(trial.messages) != len(baseline.messages):
        found.append(f"{len(trial.messages)} messages instead of {len(baseline.messages)}")
    for got, want in zip(trial.messages, baseline.messages):
        indeterminate = got.role is Role.TOOL and isinstance(got.content, dict) and got.content.get("kind") == "indeterminate"
        if (got.role, got.content) != (want.role, want.content) and not indeterminate:
            found.append(f"message differs from the crash-free play: {got} vs {want}")
    return found


@pytest.mark.parametrize("kind", SHELLS)
@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda s: s.name)
def test_a_crash_at_every_boundary_is_picked_up(kind: str, scenario: Scenario) -> None:
    total, baseline = boundaries(kind, scenario)
    assert problems(baseline, baseline) == []
    assert baseline.crashes == 0 and total >= 2
    crashes = 0
    for target in range(total):
        trial = play_with_crashes(kind, scenario, (target,))
        assert trial.crashes == 1, f"boundary {target} of {total} was never reached again"
        crashes += trial.crashes
        found = problems(trial, baseline)
        assert found == [], f"crash at boundary {target}: {found}"
    print(f"push driver [{kind}] {scenario.name}: {total} boundaries, {crashes} crashes, {crashes} pick-ups, 0 problems")


@pytest.mark.parametrize("kind", SHELLS)
@pytest.mark.parametrize("scenario", SCENARIOS[2::2], ids=lambda s: s.name)
def test_a_second_crash_during_the_pick_up_is_picked_up(kind: str, scenario: Scenario) -> None:
    total, baseline = boundaries(kind, scenario)
    trials = 0
    for first in range(0, total, 2):
        targets = (first, first + 1, first + 3)
        trial = play_with_crashes(kind, scenario, targets)
        trials += 1
        assert problems(trial, baseline) == [], f"crashes at {targets}"
    print(f"push driver [{kind}] {scenario.name}: {trials} trials with up to 3 crashes each, 0 problems")


def test_the_sweep_reaches_every_kind_of_boundary() -> None:
    fired: set[tuple[Boundary, Position]] = set()
    for scenario in SCENARIOS:
        total, _ = boundaries("sync", scenario)
        for target in range(total):
            fired.update(play_with_crashes("sync", scenario, (target,)).fired)
    boundary_kinds = {boundary.value for boundary, _ in fired}
    positions = {position.value for _, position in fired}
    print(f"push driver sweep: boundary kinds {sorted(boundary_kinds)}, positions {sorted(positions)}")
    assert boundary_kinds == {b.value for b in Boundary}
    assert {p.value for p in Position} - {Position.PROGRESS.value} <= positions


TOOL_NAMES = ("replay", "reconnect", "indeterminate", "flaky", "pay")


@st.composite
def scenarios(draw: st.DrawFn) -> Scenario:
    """One to three steps of one to four calls each, then the final text."""
    steps = draw(st.integers(1, 3))
    script: dict[int, Reply] = {}
    for step in range(1, steps + 1):
        tools = draw(st.lists(st.sampled_from(TOOL_NAMES), min_size=0 if step > 1 else 1, max_size=4))
        script[step] = Reply(f"step {step}", tuple((tool, n) for n, tool in enumerate(tools)))
    script[steps + 1] = DONE
    answers: list[ResumePayload] = [Approve(), Deny("no")]
    answer = draw(st.sampled_from(answers))
    return Scenario("drawn", script, answer)


@given(scenario=scenarios(), data=st.data(), kind=st.sampled_from(SHELLS))
def test_drawn_scenarios_survive_drawn_crashes(scenario: Scenario, data: st.DataObject, kind: str) -> None:
    total, baseline = boundaries(kind, scenario)
    assert problems(baseline, baseline) == []
    targets = data.draw(st.lists(st.integers(0, total + 4), min_size=1, max_size=3, unique=True))
    trial = play_with_crashes(kind, scenario, sorted(targets))
    assert problems(trial, baseline) == [], f"crashes at {sorted(targets)} of {total} boundaries"
