"""What goes wrong in peer agent runtimes (re-run tools, stranded calls, stale approvals, ...), each as a scenario that must not."""

from __future__ import annotations

from pathlib import Path

import pytest

from runkernel.adapters.drive.inbox import submit_end, submit_resume
from runkernel.adapters.stores.memory import MemoryStore
from runkernel.adapters.drive.ports import Hold, ToolRegistry
from runkernel.adapters.drive.runtime import Runtime
from runkernel.adapters.stores.sqlite import SqliteStore
from runkernel.adapters.stores.contract import Store
from runkernel.kernel.decide import decide
from runkernel.kernel.policies import RecoveryMode
from runkernel.kernel.protocol import Approve, Deny, EndRequest, ResumeCommand, ToolFinished, ToolOutput
from runkernel.kernel.rules import Rejection, Rule
from runkernel.kernel.state import (
    Awaiting,
    CallCompleted,
    CallIndeterminate,
    EndCause,
    Ended,
    Message,
    RunSnapshot,
)
from runkernel.kernel.values import EndCauseKind, IndeterminateReason, Role, WaitKind
from runkernel.testing import (
    OK,
    Boundary,
    CountingIds,
    CrashAt,
    CrashingStore,
    Position,
    ScriptedGate,
    ScriptedModel,
    ScriptedTool,
    SimulatedCrash,
    StepScript,
    World,
    crashing_tools,
)

TASK = (Message(Role.USER, "do it"),)


def make(
    store: Store,
    steps: tuple[StepScript, ...],
    tools: dict[str, RecoveryMode],
    *,
    gate: dict[str, Hold] | None = None,
    crash: CrashAt | None = None,
    reuse: ToolRegistry | None = None,
) -> tuple[Runtime, World]:
    """A runtime with scripted ports; with ``crash``, its store and tools die there;
    ``reuse``: another runtime's tools, as they are (the same downstream world answers
    both runtimes)."""
    world = World.new(store)
    registry = ToolRegistry({name: ScriptedTool(name, world, mode=mode, replies=(OK,)) for name, mode in tools.items()})
    runtime = Runtime(
        store if crash is None else CrashingStore(store, crash),
        ScriptedModel({"r1": steps}),
        reuse or (registry if crash is None else crashing_tools(registry, crash)),
        gate=ScriptedGate(gate or {}),
        ids=CountingIds("t"),
    )
    return runtime, world


def calls(*tools: str) -> StepScript:
    return StepScript("calling", tuple((tool, {}) for tool in tools))


END = StepScript("done", end=EndCauseKind.COMPLETED)


def crash_then_recover(
    store: Store, steps: tuple[StepScript, ...], tools: dict[str, RecoveryMode], crash: CrashAt
) -> tuple[RunSnapshot, World]:
    runtime, world = make(store, steps, tools, crash=crash)
    try:
        runtime.start("t1", "r1", TASK)
    except SimulatedCrash:
        pass
    assert crash.fired
    fresh, _ = make(store, steps, tools, reuse=runtime.tools)  # the same downstream world answers both
    outcome = fresh.drive("r1")
    return outcome.snapshot, world


def test_a_tool_is_not_silently_rerun_after_a_worker_dies() -> None:
    """langgraph 7417, 7213: a long tool re-run from a checkpoint after a timeout."""
    store = MemoryStore()
    crash = CrashAt(Boundary.AFTER_EFFECT, Position.CALL_RESULT)
    final, world = crash_then_recover(store, (calls("transfer"), END), {"transfer": RecoveryMode.INDETERMINATE}, crash)
    assert [e.attempt for e in world.executions] == [1]
    batch = final.batch or next(c.batch for c in reversed(list(store.commits("t1"))) if c.batch)
    call = batch.calls[0]
    assert isinstance(call.status, CallIndeterminate)
    assert call.status.reason is IndeterminateReason.OUTCOME_UNKNOWN


def test_a_replay_tool_reruns_with_a_new_attempt_and_the_same_operation_id() -> None:
    store = MemoryStore()
    crash = CrashAt(Boundary.AFTER_EFFECT, Position.CALL_RESULT)
    final, world = crash_then_recover(store, (calls("fetch"), END), {"fetch": RecoveryMode.REPLAY}, crash)
    assert [e.attempt for e in world.executions] == [1, 2]
    assert len({e.operation_id for e in world.executions}) == 1
    assert isinstance(final.state, Ended) and final.state.cause.kind is EndCauseKind.COMPLETED


def test_no_tool_use_is_left_without_its_result_when_a_waiting_run_is_cancelled() -> None:
    """langgraph 4289 (INVALID_CHAT_HISTORY), 4397 (two results for one call)."""
    store = MemoryStore()
    runtime, _ = make(
        store,
        (calls("lookup", "pay", "send"), END),
        {"lookup": RecoveryMode.REPLAY, "pay": RecoveryMode.INDETERMINATE, "send": RecoveryMode.INDETERMINATE},
        gate={"pay": Hold(WaitKind.APPROVAL)},
    )
    waiting = runtime.start("t1", "r1", TASK)
    assert isinstance(waiting.snapshot.state, Awaiting)
    assert not isinstance(submit_end(store, "r1", EndRequest(EndCause(EndCauseKind.CANCELLED))), Rejection)
    final = runtime.drive("r1").snapshot
    assert isinstance(final.state, Ended)
    messages = store.messages("t1")
    uses = [u.call_id for m in messages if m.tool_calls for u in m.tool_calls]
    results = [m.call_id for m in messages if m.role is Role.TOOL]
    assert results == uses


def two_approvals(store: Store) -> tuple[Runtime, RunSnapshot]:
    runtime, _ = make(
        store,
        (calls("pay", "pay"), END),
        {"pay": RecoveryMode.INDETERMINATE},
        gate={"pay": Hold(WaitKind.APPROVAL)},
    )
    return runtime, runtime.start("t1", "r1", TASK).snapshot


def test_one_approval_answers_one_wait_only() -> None:
    """langgraph 6533/6626/8579 and openai-agents PR 4409: a resume routed to another
    wait, or one approval shared by two calls."""
    store = MemoryStore()
    runtime, first = two_approvals(store)
    assert isinstance(first.state, Awaiting)
    ticket = first.state.ticket
    approve = ResumeCommand("r1", ticket.ticket_id, WaitKind.APPROVAL, Approve())
    assert not isinstance(submit_resume(store, approve), Rejection)
    second = runtime.drive("r1").snapshot
    assert isinstance(second.state, Awaiting)
    assert second.state.ticket.ticket_id != ticket.ticket_id
    assert second.state.ticket.call_id != ticket.call_id
    again = submit_resume(store, approve)
    assert isinstance(again, Rejection) and again.rule is Rule.ALREADY_APPLIED
    reuse = ResumeCommand("r1", ticket.ticket_id, WaitKind.APPROVAL, Deny("no"))
    stale = submit_resume(store, reuse)
    assert isinstance(stale, Rejection) and stale.rule is Rule.STALE_COMMAND


def test_a_stale_approval_is_not_applied_to_a_newer_call() -> None:
    """pydantic-ai 3274: stale approvals applied to the wrong call."""
    store = MemoryStore()
    runtime, first = two_approvals(store)
    assert isinstance(first.state, Awaiting)
    old = first.state.ticket
    submit_resume(store, ResumeCommand("r1", old.ticket_id, WaitKind.APPROVAL, Approve()))
    second = runtime.drive("r1").snapshot
    assert isinstance(second.state, Awaiting)
    forged = ResumeCommand("r1", old.ticket_id + "x", WaitKind.APPROVAL, Approve())
    refused = decide(second, forged)
    assert isinstance(refused, Rejection) and refused.rule is Rule.TICKET_MISMATCH
    assert store.run("r1") == second


def test_recovery_after_a_database_restart_mid_recovery_finishes(tmp_path: Path) -> None:
    """dbos-transact-py 716/804/805: workflows stuck PENDING after a restart."""
    path = tmp_path / "restart.db"
    store = SqliteStore(path)
    tools = {"fetch": RecoveryMode.REPLAY, "job": RecoveryMode.RECONNECT}
    crash = CrashAt(Boundary.AFTER_WRITE, Position.CALL_START)
    runtime, world = make(store, (calls("fetch", "job"), END), tools, crash=crash)
    try:
        runtime.start("t1", "r1", TASK)
    except SimulatedCrash:
        pass
    store.close()
    recovery_crash = CrashAt(Boundary.AFTER_WRITE, Position.CALL_RETRY)
    for _ in range(2):  # recovery itself dies once, right after its replay commit
        reopened = SqliteStore(path)
        again, _ = make(reopened, (calls("fetch", "job"), END), tools, crash=recovery_crash, reuse=runtime.tools)
        world.store = reopened
        try:
            final = again.drive("r1").snapshot
        except SimulatedCrash:
            reopened.close()
            continue
        assert isinstance(final.state, Ended)
        assert recovery_crash.fired
        reopened.close()
        break
    else:
        raise AssertionError("the run never finished")


def test_storage_grows_linearly_not_quadratically(tmp_path: Path) -> None:
    """langgraph PR 7547: every checkpoint re-stores the message list (5.3 GB for 200 turns)."""
    store = SqliteStore(tmp_path / "growth.db")
    steps = tuple(StepScript(f"turn {i:03d}") for i in range(200)) + (END,)
    runtime, _ = make(store, steps, {})
    runtime.start("t1", "r1", TASK)
    sizes = [len(line) for line in store.commit_lines("t1")]
    assert len(sizes) == 202
    assert max(sizes[2:-1]) - min(sizes[2:-1]) <= 4
    store.close()


def test_a_completed_call_is_not_rerun_when_its_step_is_recovered() -> None:
    """awaken 0.6 re-runs the whole interrupted step after a crash."""
    store = MemoryStore()
    tools = {"fetch": RecoveryMode.REPLAY, "send": RecoveryMode.REPLAY}
    # let the first call finish, crash when the second one's start is written
    second_start = CrashAt(Boundary.AFTER_WRITE, Position.CALL_START, skip=1)
    runtime, world = make(store, (calls("fetch", "send"), END), tools, crash=second_start)
    with pytest.raises(SimulatedCrash):
        runtime.start("t1", "r1", TASK)
    assert second_start.fired == 1 and [(e.tool, e.attempt) for e in world.executions] == [("fetch", 1)]
    fresh, _ = make(store, (calls("fetch", "send"), END), tools, reuse=runtime.tools)
    final = fresh.drive("r1").snapshot
    assert isinstance(final.state, Ended)
    by_tool = [(e.tool, e.attempt) for e in world.executions]
    assert by_tool.count(("fetch", 1)) == 1 and ("fetch", 2) not in by_tool


def test_checkpointed_tool_calls_are_never_executed_from_the_stream() -> None:
    """awaken 0.6 turns checkpointed, never-committed tool calls into executions."""
    store = MemoryStore()
    crash = CrashAt(Boundary.BEFORE_WRITE, Position.BATCH_OPEN)
    runtime, world = make(store, (calls("fetch"), END), {"fetch": RecoveryMode.REPLAY}, crash=crash)
    try:
        runtime.start("t1", "r1", TASK)
    except SimulatedCrash:
        pass
    assert store.load_checkpoint("r1") is not None
    assert world.executions == []
    committed = store.run("r1")
    assert committed is not None and committed.open_batch is None
    fresh, _ = make(store, (calls("fetch"), END), {"fetch": RecoveryMode.REPLAY}, reuse=runtime.tools)
    model = fresh.model
    assert isinstance(model, ScriptedModel)
    fresh.drive("r1")
    assert model.resumed_from_checkpoint == 1
    assert [e.attempt for e in world.executions] == [1]
    assert all(e.committed_first for e in world.executions)
    assert store.load_checkpoint("r1") is None


def test_illegal_transitions_are_typed_rejections_not_silent_skips() -> None:
    """awaken 0.6 silently skips illegal transitions."""
    store = MemoryStore()
    runtime, _ = make(store, (calls("fetch"), END), {"fetch": RecoveryMode.REPLAY})
    final = runtime.start("t1", "r1", TASK).snapshot
    refused = decide(final, ToolFinished("r1-s1-c0", 1, ToolOutput("late")))
    assert isinstance(refused, Rejection) and refused.rule is Rule.RUN_ENDED
    batch = next(c.batch for c in store.commits("t1") if c.batch and c.batch.finalized)
    assert isinstance(batch.calls[0].status, CallCompleted)
