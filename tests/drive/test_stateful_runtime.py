"""Stateful crash-injection tests of the reference runtime, on the memory and SQLite stores.

The machine lives in ``runtime_harness.py``: drawn Runs (text, tool batches over every
recovery policy, every tool behaviour and gate answer, batches of two terminal-only
delegations and an ordinary call), hooks that stage state, hand request-only context
and react to tool results, single effects, crashes at every boundary kind, failing
store writes and checkpoint writes, recoveries with fresh runtimes, child Runs driven
while their parent is down, parents ended while their children run, and good and bad
commands through ``submit_resume``/``submit_end`` and the raw inbox; I1-I15 are checked
after every step, and every example's export (parents and children together) is judged
as ``check-trace`` judges it.

Settings come from the loaded Hypothesis profile (``HYPOTHESIS_PROFILE``, default
``ci``); only the number of steps (and SQLite's share of examples) is set here. Before
the drawn examples, each run plays the seed programs (``runtime_harness_seeds.py``): one
fixed sequence of rules per staged-hook and concurrent-delegation scenario, which must
reach it, so every scenario is reached in every run by construction, not by the luck of
the draws. Each run prints in how many seeded and drawn examples each scenario
occurred (``pytest -s`` shows it).

Mutant testing: the memory machine is the detector for runtime bugs such as running a
tool before Executing is committed (I5) or re-running a non-replay tool on recovery
(I9). It exits non-zero on such a bug; the ``mutant`` profile (conftest.py) skips
shrinking so the first failure is reported at once:

    HYPOTHESIS_PROFILE=mutant python -m pytest tests/drive/test_stateful_runtime.py -k Memory -x -p no:cacheprovider
"""

from __future__ import annotations

import collections

import pytest
from hypothesis import settings
from hypothesis.stateful import run_state_machine_as_test

from runkernel.adapters.drive.inbox import submit_end
from runkernel.adapters.stores.memory import MemoryStore
from runkernel.adapters.drive.ports import ToolRegistry
from runkernel.adapters.drive.runtime import MAX_STATUS_POLLS, Drive, Runtime
from runkernel.kernel.policies import RecoveryMode
from runkernel.kernel.protocol import EndRequest, OperationStatus
from runkernel.kernel.state import Delegation, EndCause, Ended, Message
from runkernel.kernel.values import EndCauseKind, Role
from runkernel.testing import (
    Boundary,
    CountingIds,
    CrashAt,
    CrashingStore,
    Position,
    ScriptedModel,
    ScriptedTool,
    SimulatedCrash,
    StepScript,
    World,
)
from runtime_harness import MemoryMachine, RuntimeMachine, SqliteMachine
from runtime_harness_seeds import SEEDS, play_seed
from runtime_harness_state import SCENARIO_TALLY, SCENARIOS


def _settings(*, share: int, steps: int) -> settings:
    base = settings()  # the loaded profile (HYPOTHESIS_PROFILE, registered in conftest.py)
    return settings(base, max_examples=max(1, base.max_examples // share), stateful_step_count=steps)


def _play_seeds(machine: type[RuntimeMachine]) -> collections.Counter[str]:
    """Play every seed program on a fresh ``machine``; each must reach its scenario."""
    tally: collections.Counter[str] = collections.Counter()
    for scenario, program in SEEDS.items():
        seen = play_seed(machine(), program)
        assert scenario in seen, f"the seed program of {scenario!r} no longer reaches it (it reached {sorted(seen)})"
        tally.update(seen)
    return tally


def _run_counted(machine: type[RuntimeMachine], budget: settings) -> collections.Counter[str]:
    """Play the seed programs, then run the machine under ``budget``, and say in how many
    examples each staged-hook and concurrent-delegation scenario occurred (printed:
    ``pytest -s`` shows it)."""
    seeded = _play_seeds(machine)
    SCENARIO_TALLY.clear()
    run_state_machine_as_test(machine, settings=budget)
    drawn = collections.Counter(SCENARIO_TALLY)
    print(
        f"\n{machine.__name__}: {len(SEEDS)} seed programs, then {budget.max_examples} drawn examples; "
        "examples reaching each scenario (seeded + drawn):"
    )
    for scenario in SCENARIOS:
        print(f"  {seeded[scenario]:2d} + {drawn[scenario]:4d}  {scenario}")
    return seeded + drawn


def _unreached(tally: collections.Counter[str]) -> list[str]:
    """Scenarios no example reached (the seed programs reach each one)."""
    return [scenario for scenario in SCENARIOS if tally[scenario] == 0]


def test_stateful_memory() -> None:
    """The machine on the memory store; every staged-hook and concurrent-delegation
    scenario is reached (by its seed program, and then by whatever the draws reach)."""
    budget = _settings(share=1, steps=40)
    tally = _run_counted(MemoryMachine, budget)
    assert not _unreached(tally), f"scenarios never reached: {_unreached(tally)}"


def test_stateful_sqlite() -> None:
    """The machine on SQLite, with a third of the drawn examples; every scenario is
    reached (by its seed program, and then by whatever the draws reach)."""
    tally = _run_counted(SqliteMachine, _settings(share=3, steps=30))
    assert not _unreached(tally), f"scenarios never reached: {_unreached(tally)}"


# --- liveness of reconnect polling ---------------------------------------------------------
#
# Found while building the machine (whose reconnect tools answer ``running`` only once, so
# that it terminates): a status that keeps answering ``running`` is asked again and again
# inside one decision chain, the drive never reaches a quiet point, ``MAX_STATUS_POLLS``
# is never consulted, and a cancel waiting in the inbox is never applied.


def _running_forever() -> tuple[MemoryStore, World, Runtime, str]:
    """A Run whose reconnect call was left Executing{1} by a crash, and whose tool's
    ``status`` answers ``running`` every time; returns a fresh runtime to recover it."""
    store = MemoryStore()
    world = World.new(store)
    tool = ScriptedTool("job", world, mode=RecoveryMode.RECONNECT, status_script=(OperationStatus.RUNNING.value,))
    tools = ToolRegistry({"job": tool})
    model = ScriptedModel({"run-1": (StepScript("calling", (("job", {"n": 0}),)),)})
    ids = CountingIds("live")
    # the runtime dies right after the first Executing{1} commit is written
    dying = CrashingStore(store, CrashAt(Boundary.AFTER_WRITE, Position.CALL_START))
    first = Runtime(dying, model, tools, ids=ids, self_check=True)
    with pytest.raises(SimulatedCrash):
        first.start("thread-1", "run-1", (Message(Role.USER, "task"),))
    snapshot = store.run("run-1")
    assert snapshot is not None and snapshot.open_batch is not None
    operation_id = snapshot.open_batch.calls[0].operation_id
    return store, world, Runtime(store, model, tools, ids=ids, self_check=True), operation_id


def _drive_at_most(drive: Drive, effects: int) -> bool:
    for _ in range(effects):
        if drive.step():
            return True
    return False


def test_a_reconnect_operation_that_keeps_running_is_not_polled_forever() -> None:
    """``MAX_STATUS_POLLS`` bounds how often one runtime asks about an operation; after
    that the drive stops and leaves the call to a later drive."""
    store, world, runtime, operation_id = _running_forever()
    drive = runtime.begin_drive("run-1")
    stopped = _drive_at_most(drive, 10 * MAX_STATUS_POLLS)
    assert stopped, (
        f"still driving after {10 * MAX_STATUS_POLLS} effects: status({operation_id!r}) "
        f"was asked {world.status_answers.get(operation_id)} times (limit {MAX_STATUS_POLLS})"
    )
    assert world.status_answers.get(operation_id, 0) <= MAX_STATUS_POLLS


def test_a_cancel_is_applied_while_a_reconnect_operation_keeps_running() -> None:
    """A cancel in the inbox ends the Run even while a reconnect tool answers
    ``running`` (the call becomes Indeterminate(outcome_unknown))."""
    store, world, runtime, operation_id = _running_forever()
    assert isinstance(submit_end(store, "run-1", EndRequest(EndCause(EndCauseKind.CANCELLED))), int)
    _drive_at_most(runtime.begin_drive("run-1"), 10 * MAX_STATUS_POLLS)
    snapshot = store.run("run-1")
    assert snapshot is not None
    assert snapshot.state == Ended(EndCause(EndCauseKind.CANCELLED)), (
        f"the cancel is still pending after {world.status_answers.get(operation_id)} status polls: "
        f"{store.pending_commands('run-1')}"
    )


# --- a parent ended while children run, and a crash right after its end commit --------
#
# Found while adding the concurrent-delegation scenarios: the cancel each running child
# is sent ("The parent ends first") is an effect after the parent's end commit;
# a crash between the two lost it, until recovering an Ended parent sent the owed cancels
# again (``planning.redeliver``).


def _parent_ended_by_a_crash_before_its_cancels() -> (
    tuple[MemoryStore, ScriptedModel, ToolRegistry, list[Delegation]]
):
    """A parent with two running children, cancelled; its runtime dies right after the
    end commit, before the children's cancels."""
    store = MemoryStore()
    world = World.new(store)
    tools = ToolRegistry({"research": ScriptedTool("research", world, delegation=True), "fetch": ScriptedTool("fetch", world)})
    calls = (("research", {"topic": "a"}), ("research", {"topic": "b"}), ("fetch", {"n": 0}))
    model = ScriptedModel({"parent": (StepScript("delegating", calls),)}, world)
    quiet = Runtime(store, model, tools, self_check=True).start("thread-1", "parent", (Message(Role.USER, "go"),))
    batch = quiet.snapshot.open_batch
    assert batch is not None
    children = [call.delegation for call in batch.calls if call.delegation is not None]
    assert len(children) == 2 and all(store.run(child.run_id) is not None for child in children)
    assert isinstance(submit_end(store, "parent", EndRequest(EndCause(EndCauseKind.CANCELLED))), int)
    with pytest.raises(SimulatedCrash):
        dying = CrashingStore(store, CrashAt(Boundary.AFTER_WRITE, Position.END))
        Runtime(dying, model, tools, self_check=True).drive("parent")
    assert not any(store.pending_commands(child.run_id) for child in children)
    return store, model, tools, children


def test_a_crash_after_the_parents_end_commit_still_cancels_its_running_children() -> None:
    store, model, tools, children = _parent_ended_by_a_crash_before_its_cancels()
    ended = Runtime(store, model, tools, self_check=True).drive("parent")
    assert isinstance(ended.snapshot.state, Ended)
    uncancelled = [child.run_id for child in children if not store.pending_commands(child.run_id)]
    print(f"children with no cancel in their inbox after the parent's recovery: {uncancelled}")
    assert not uncancelled
    Runtime(store, model, tools, self_check=True).drive("parent")  # asked to continue again
    queued = {child.run_id: len(store.pending_commands(child.run_id)) for child in children}
    assert set(queued.values()) == {1}, f"a child was sent its owed cancel more than once: {queued}"


def test_children_of_a_parent_that_ended_before_its_cancels_are_cancelled_when_picked_up() -> None:
    # nobody recovers an Ended parent (a worker finds no work in it): its children,
    # which are work, learn of the end at their own pick-up
    store, model, tools, children = _parent_ended_by_a_crash_before_its_cancels()
    for child in children:
        outcome = Runtime(store, model, tools, self_check=True).drive(child.run_id)
        assert isinstance(outcome.snapshot.state, Ended), child.run_id
        assert outcome.snapshot.state.cause.kind is EndCauseKind.CANCELLED, outcome.snapshot.state
