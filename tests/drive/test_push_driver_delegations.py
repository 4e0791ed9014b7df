"""Terminal-only child delegations under the push-mode driver (Step and
ToolBatch: grouping, identity, terminus, the parent ending first, the quiet parent,
recovery), through both shells. (A child that ends while its parent is down, and a
parent cancelled through its inbox, run over every host in test_concurrent_delegations.py.)

The host here is one process that drives the parent and, whenever the parent is quiet
(``ChildrenRunning``), each child Run with a driver of its own. A crash kills the whole
process: every driver is thrown away and the host starts again from the store alone.
Every trace of the store (the parent's Thread and the children's together) must be legal
under the checker, which checks I15 across Threads.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pytest
from attrs import frozen

from push_children import (
    PARENT,
    SCRIPTS,
    TOOLS,
    TWO_AND_ONE,
    DelegatingWorld,
    DelegationStore,
    child_driver,
    drive_child,
    finalized_batch,
    judged_legal,
    parent_batch,
    quiet_parent,
)
from push_host import SHELLS, Reply, World, make_shell, play_until_quiet
from runkernel.adapters.drive.actions import Action, ChildrenRunning, Done, HostProtocolError, WaitFor
from runkernel.adapters.stores.memory import MemoryStore
from runkernel.kernel.protocol import Approve
from runkernel.kernel.state import CallCompleted, CallExecuting, CallIndeterminate, Ended, Message
from runkernel.kernel.values import EndCauseKind, IndeterminateReason, JsonValue, Role
from runkernel.testing import Boundary, CountingIds, CrashAtEncounters, Position, SimulatedCrash


# --- the whole host, with crashes ------------------------------------------------------


@frozen
class Trial:
    done: Done
    store: DelegationStore
    world: World
    crashes: int
    boundaries: int
    fired: tuple[tuple[Boundary, Position], ...]


def host(kind: str, script: Mapping[int, Reply], targets: Sequence[int] = ()) -> Trial:
    """Start the parent, drive every child whenever the parent is quiet, until the parent
    ends; after each crash, start again from the store alone."""
    plan = CrashAtEncounters(tuple(targets))
    store = DelegationStore(plan)
    world = DelegatingWorld(script, crash=plan, store=store)
    crashes = 0
    while True:
        driver = make_shell(kind, store, ids=CountingIds(f"d{crashes}"), tools=TOOLS)
        try:
            action: Action
            if store.run(PARENT) is None:
                action = driver.start(["go"], thread_id="t1", run_id=PARENT)
            else:
                action = driver.pick_up(PARENT)
            while True:
                action = play_until_quiet(driver, action, world)
                if isinstance(action, Done):
                    return Trial(action, store, world, crashes, plan.seen, tuple(plan.fired))
                assert isinstance(action, ChildrenRunning), f"the parent waits: {action}"
                for child in action.children:
                    drive_child(kind, store, world, child.run_id)
                action = driver.next_action()
        except SimulatedCrash:
            crashes += 1
            assert crashes <= len(targets), "a crash nobody planned"


def problems(trial: Trial, baseline: Trial) -> list[str]:
    found = []
    report = judged_legal(trial.store)
    if report:
        found.append(f"trace: {report}")
    if (trial.done.cause, trial.done.final) != (baseline.done.cause, baseline.done.final):
        found.append(f"ended {trial.done} instead of {baseline.done}")
    activations = trial.store.activations
    if len(set(activations)) != len(activations):
        found.append(f"children activated more than once: {activations}")
    if len(activations) != len(baseline.store.activations):
        found.append(f"{len(activations)} children instead of {len(baseline.store.activations)}")
    repeated = trial.world.repeated_starts()
    if repeated:
        found.append(f"non-replay executors started again: {repeated}")
    got = [(m.role, without_ids(m.content)) for m in trial.store.messages("t1")]
    want = [(m.role, without_ids(m.content)) for m in baseline.store.messages("t1")]
    if len(got) != len(want):
        found.append(f"{len(got)} parent messages instead of {len(want)}")
    for (role, content), expected in zip(got, want):
        indeterminate = role is Role.TOOL and isinstance(content, dict) and content.get("kind") == "indeterminate"
        if (role, content) != expected and not indeterminate:
            found.append(f"parent message differs from the crash-free play: {content} vs {expected[1]}")
    return found


def without_ids(content: JsonValue) -> JsonValue:
    """A tool message without its child's ids, which derive from operation ids a crash
    before the batch commit mints again (the checker ties them to the call, I15)."""
    if isinstance(content, dict) and isinstance(content.get("value"), dict):
        value = {k: v for k, v in content["value"].items() if k not in ("thread_id", "run_id")}
        return {**content, "value": value}
    return content


@pytest.mark.parametrize("kind", SHELLS)
@pytest.mark.parametrize("name", SCRIPTS)
def test_a_batch_with_two_delegations_and_ordinary_calls_ends_with_the_children_termini(kind: str, name: str) -> None:
    trial = host(kind, SCRIPTS[name])
    assert trial.done.cause.kind is EndCauseKind.COMPLETED and trial.crashes == 0
    assert judged_legal(trial.store) == ""
    finalized = finalized_batch(trial.store)
    delegated = [c for c in finalized.calls if c.tool == "research"]
    assert len(trial.store.activations) == 2
    for call in delegated:
        assert isinstance(call.status, CallCompleted) and call.delegation is not None
        topic = call.arguments["topic"] if isinstance(call.arguments, dict) else None
        assert call.status.result.value == {
            "thread_id": call.delegation.thread_id,
            "run_id": call.delegation.run_id,
            "cause": {"kind": "completed"},
            "final": f"child answer for {topic}",
        }
    # results are published in call order, the ordinary calls' among them
    tool_messages = [m.call_id for m in trial.store.messages("t1") if m.role is Role.TOOL]
    assert tool_messages == [c.call_id for c in finalized.calls]
    # a delegation's executor is its child's activation: the host ran only the ordinary calls
    assert sorted(trial.world.tool_of.values()) == sorted(c.tool for c in finalized.calls if c.tool != "research")


@pytest.mark.parametrize("kind", SHELLS)
@pytest.mark.parametrize("name", SCRIPTS)
def test_a_crash_at_every_boundary_of_a_delegating_batch_is_picked_up(kind: str, name: str) -> None:
    baseline = host(kind, SCRIPTS[name])
    assert problems(baseline, baseline) == []
    total = baseline.boundaries
    fired: set[Position] = set()
    for target in range(total):
        trial = host(kind, SCRIPTS[name], (target,))
        assert trial.crashes == 1, f"boundary {target} of {total} was never reached again"
        fired.update(position for _, position in trial.fired)
        found = problems(trial, baseline)
        assert found == [], f"crash at boundary {target}: {found}"
    # the sweep crashed the children's activations and ends, not only the parent's commits
    assert {Position.ACTIVATION, Position.CALL_START, Position.CALL_RESULT, Position.END} <= fired
    print(
        f"push driver delegations [{kind}] {name}: {total} boundaries, {total} crashes, "
        f"{total} pick-ups, 0 problems, positions {sorted(p.value for p in fired)}"
    )


@pytest.mark.parametrize("kind", SHELLS)
def test_crashes_during_the_pick_ups_of_parent_and_children_are_picked_up(kind: str) -> None:
    baseline = host(kind, TWO_AND_ONE)
    trials = 0
    for first in range(0, baseline.boundaries, 2):
        targets = (first, first + 1, first + 3)
        trial = host(kind, TWO_AND_ONE, targets)
        trials += 1
        assert problems(trial, baseline) == [], f"crashes at {targets}"
    print(f"push driver delegations [{kind}]: {trials} trials with up to 3 crashes each, 0 problems")


# --- the quiet parent, one situation at a time ------------------------------------------


@pytest.mark.parametrize("kind", SHELLS)
def test_the_quiet_parent_names_its_running_children_which_name_their_parent_and_app(kind: str) -> None:
    store = MemoryStore()
    driver, quiet, _ = quiet_parent(kind, store, app="research-app")
    state = parent_batch(store)
    assert state.batch is not None
    first, second, ordinary = state.batch.calls
    assert [type(c.status) for c in state.batch.calls] == [CallExecuting, CallExecuting, type(ordinary.status)]
    assert not isinstance(ordinary.status, CallExecuting)  # an ordinary call waits for the group
    assert [c.call_id for c in quiet.children] == [first.call_id, second.call_id]
    for child, call in zip(quiet.children, (first, second)):
        assert call.delegation is not None and (child.thread_id, child.run_id) == (
            call.delegation.thread_id,
            call.delegation.run_id,
        )
        assert child.arguments == call.arguments and child.tool == "research"
        activation = next(iter(store.commits(child.thread_id)))
        assert activation.parent is not None and activation.parent.call_id == call.call_id
        assert activation.app == "research-app"  # a worker of the parent's app drives it
    # asking again while the children run changes nothing and hands the same action
    version = parent_batch(store).version
    assert driver.next_action() == quiet
    assert parent_batch(store).version == version
    assert judged_legal(store) == ""


@pytest.mark.parametrize("kind", SHELLS)
def test_the_quiet_parent_refuses_every_answer_but_asking_again_or_ending(kind: str) -> None:
    store = MemoryStore()
    driver, quiet, _ = quiet_parent(kind, store)
    version = parent_batch(store).version
    child = quiet.children[0]
    with pytest.raises(HostProtocolError, match="ChildrenRunning expects next_action"):
        driver.call_returned(child.call_id, {"not": "the terminus"})
    with pytest.raises(HostProtocolError, match="ChildrenRunning expects next_action"):
        driver.resume(Approve())
    with pytest.raises(HostProtocolError, match="ChildrenRunning expects next_action"):
        driver.inferred("more", [])
    assert parent_batch(store).version == version  # nothing committed
    assert driver.next_action() == quiet  # the same action stands


def cancelled_parent(store: MemoryStore, done: Action, world: World, kind: str) -> None:
    """The end of a parent cancelled after its first child ended: the ended child's
    terminus is kept, the running one's call is Indeterminate and it is sent a cancel."""
    assert isinstance(done, Done) and done.cause.kind is EndCauseKind.CANCELLED
    state = parent_batch(store)
    assert isinstance(state.state, Ended) and state.batch is not None and state.batch.finalized
    first, second, ordinary = state.batch.calls
    assert isinstance(first.status, CallCompleted) and first.delegation is not None
    assert first.status.result.value["run_id"] == first.delegation.run_id
    assert second.status == CallIndeterminate(1, IndeterminateReason.OUTCOME_UNKNOWN)
    assert ordinary.status == CallIndeterminate(0, IndeterminateReason.RUN_ENDED)
    assert second.delegation is not None and len(store.pending_commands(second.delegation.run_id)) == 1
    child = child_driver(kind, store, second.delegation.run_id)
    ended = child.pick_up(second.delegation.run_id)
    assert isinstance(ended, Done) and ended.cause.kind is EndCauseKind.CANCELLED
    assert judged_legal(store) == ""


@pytest.mark.parametrize("kind", SHELLS)
def test_a_parent_cancelled_by_its_host_while_children_run_cancels_them(kind: str) -> None:
    store = MemoryStore()
    driver, quiet, world = quiet_parent(kind, store)
    drive_child(kind, store, world, quiet.children[0].run_id)
    cancelled_parent(store, driver.cancel(), world, kind)


@pytest.mark.parametrize("kind", SHELLS)
def test_a_parent_that_ends_after_every_child_ended_keeps_every_terminus(kind: str) -> None:
    store = MemoryStore()
    driver, quiet, world = quiet_parent(kind, store)
    for child in quiet.children:
        drive_child(kind, store, world, child.run_id)
    done = driver.end(EndCauseKind.STOPPED)  # before the driver looked at the children again
    assert isinstance(done, Done) and done.cause.kind is EndCauseKind.STOPPED
    state = parent_batch(store)
    assert state.batch is not None
    assert [type(c.status) for c in state.batch.calls] == [CallCompleted, CallCompleted, CallIndeterminate]
    assert all(not store.pending_commands(c.run_id) for c in quiet.children)  # nothing to cancel
    assert judged_legal(store) == ""


def test_no_wait_is_handed_while_children_run() -> None:
    """The quiet parent is Running, never Awaiting: its action is not a ``WaitFor``."""
    store = MemoryStore()
    _, quiet, _ = quiet_parent("sync", store)
    assert not isinstance(quiet, WaitFor)
    state = parent_batch(store)
    assert not isinstance(state.state, Ended) and type(state.state).__name__ == "Running"
    assert [m.role for m in store.messages(quiet.children[0].thread_id)] == [Role.USER]
    assert store.messages(quiet.children[0].thread_id)[0] == Message(Role.USER, {"topic": "a"})
