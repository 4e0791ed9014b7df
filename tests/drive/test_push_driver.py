"""The push-mode driver through its public methods, every scenario through both shells."""

from __future__ import annotations

import asyncio

import pytest

from push_host import POLICIES, SHELLS, ApprovalGate, AsyncApprovalGate, Reply, Shell, World, make_shell, play
from runkernel.adapters.drive.driver import AsyncDriver, Driver
from runkernel.adapters.drive.actions import (
    DEFAULT_MAX_STEPS,
    Action,
    CallRequest,
    CheckStatus,
    Done,
    DriverError,
    DriverStopped,
    HostProtocolError,
    Infer,
    RunCall,
    UnknownTool,
    WaitFor,
)
from runkernel.adapters.drive.inbox import submit_end, submit_resume
from runkernel.adapters.stores.memory import MemoryStore
from runkernel.adapters.drive.ports import GateAnswer, Hold, Permit
from runkernel.adapters.stores.contract import CommitConflict, Store, StoreUnavailable
from runkernel.kernel.protocol import Approve, Deny, EndRequest, OperationStatus, ResumeCommand
from runkernel.kernel.state import (
    CallCompleted,
    CallExecuting,
    CallIndeterminate,
    EndCause,
    Ended,
    Message,
    RunSnapshot,
    ToolCall,
)
from runkernel.kernel.values import EndCauseKind, IndeterminateReason, ResultKind, Role, WaitKind
from runkernel.specs.checker import Verdict, check_commits
from runkernel.testing import CountingIds, CrashingStore

DONE = Reply("all done", end=EndCauseKind.COMPLETED)


def legal(store: Store, thread_id: str = "t1") -> None:
    finding = check_commits(store.commits(thread_id))
    assert finding.verdict is Verdict.LEGAL, finding


def snapshot(store: MemoryStore, run_id: str = "r1") -> RunSnapshot:
    state = store.run(run_id)
    assert state is not None
    return state


def started(kind: str, store: MemoryStore, world: World) -> tuple[Shell, WaitFor | Done]:
    driver = make_shell(kind, store, ids=CountingIds("id"))
    return driver, play(driver, driver.start(["go"], thread_id="t1", run_id="r1"), world)


shells = pytest.mark.parametrize("kind", SHELLS)


@shells
def test_a_text_only_run_ends_with_its_final_text(kind: str) -> None:
    store = MemoryStore()
    driver = make_shell(kind, store)
    first = driver.start(["hello"], thread_id="t1", run_id="r1")
    assert isinstance(first, Infer) and first.step == 1
    assert [m.content for m in first.messages] == ["hello"]
    done = driver.inferred("hi there", end=EndCauseKind.COMPLETED)
    assert done == Done("r1", "t1", EndCause(EndCauseKind.COMPLETED), "hi there", redelivery=False)
    legal(store)


@shells
def test_text_without_an_end_starts_another_step(kind: str) -> None:
    store = MemoryStore()
    driver = make_shell(kind, store)
    driver.start(["hello"], thread_id="t1", run_id="r1")
    second = driver.inferred("thinking")
    assert isinstance(second, Infer) and second.step == 2
    assert [m.content for m in second.messages] == ["hello", "thinking"]


@shells
def test_a_model_that_never_ends_stops_at_the_default_step_limit(kind: str) -> None:
    store = MemoryStore()
    driver = make_shell(kind, store)
    action = driver.start(["loop"], thread_id="t1", run_id="r1")
    steps = 0
    while isinstance(action, Infer):
        steps += 1
        action = driver.inferred(f"again {steps}")
    assert isinstance(action, Done) and action.cause.kind is EndCauseKind.STEP_LIMIT
    assert steps == DEFAULT_MAX_STEPS
    legal(store)


@shells
def test_a_tool_batch_runs_in_call_order_and_publishes_every_result(kind: str) -> None:
    store = MemoryStore()
    world = World({1: Reply("tools", (("replay", 1), ("reconnect", 2), ("indeterminate", 3))), 2: DONE})
    driver = make_shell(kind, store, ids=CountingIds("id"))
    action = driver.start(["go"], thread_id="t1", run_id="r1")
    assert isinstance(action, Infer)
    action = driver.inferred("tools", [CallRequest(t, a) for t, a in world.script[1].calls])
    seen = []
    while isinstance(action, RunCall):
        call = snapshot(store).open_batch.call(action.call_id)  # type: ignore[union-attr]
        assert call is not None and call.status == CallExecuting(1), "Executing{1} is durable first"
        seen.append((action.tool, action.attempt))
        action = driver.call_returned(action.call_id, {"ran": action.tool})
    assert seen == [("replay", 1), ("reconnect", 1), ("indeterminate", 1)]
    assert isinstance(action, Infer) and action.step == 2
    tool_messages = [m for m in action.messages if m.role is Role.TOOL]
    assert [m.content for m in tool_messages] == [
        {"kind": "output", "value": {"ran": t}} for t in ("replay", "reconnect", "indeterminate")
    ]
    assert isinstance(driver.inferred("ok", end=EndCauseKind.COMPLETED), Done)
    legal(store)


@shells
def test_a_retryable_failure_hands_out_the_next_attempt_after_its_commit(kind: str) -> None:
    store = MemoryStore()
    world = World({1: Reply("try", (("flaky", {}),)), 2: DONE})
    driver = make_shell(kind, store)
    action = driver.start(["go"], thread_id="t1", run_id="r1")
    action = driver.inferred("try", [CallRequest("flaky", {})])
    assert isinstance(action, RunCall) and action.attempt == 1
    retry = driver.call_failed(action.call_id, {"type": "Flaky", "message": "x"}, retryable=True)
    assert isinstance(retry, RunCall) and retry.attempt == 2 and retry.operation_id == action.operation_id
    assert snapshot(store).open_batch.calls[0].status == CallExecuting(2)  # type: ignore[union-attr]
    assert isinstance(play(driver, retry, world), Done)
    legal(store)


@shells
@pytest.mark.parametrize("answer", ["approve", "deny"])
def test_an_approval_is_applied_from_the_inbox_when_the_host_asks_what_next(kind: str, answer: str) -> None:
    store = MemoryStore()
    world = World({1: Reply("pay?", (("pay", {"amount": 5}),)), 2: DONE})
    driver, waiting = started(kind, store, world)
    assert isinstance(waiting, WaitFor) and waiting.wait.kind is WaitKind.APPROVAL
    assert waiting.call.tool == "pay" and waiting.call.arguments == {"amount": 5}
    assert driver.next_action() == waiting, "nothing queued: the wait stands"
    payload = Approve() if answer == "approve" else Deny("too much")
    entry = submit_resume(store, ResumeCommand("r1", waiting.ticket.ticket_id, WaitKind.APPROVAL, payload))
    assert isinstance(entry, int)
    action = driver.next_action()
    if answer == "approve":
        assert isinstance(action, RunCall) and action.tool == "pay" and action.attempt == 1
        action = play(driver, action, world)
    else:
        assert isinstance(action, Infer)
        assert action.messages[-1].content == {"kind": "denied", "value": "too much"}
        assert world.starts == {}, "a denied call never runs"
        action = play(driver, action, world)
    assert isinstance(action, Done) and action.cause.kind is EndCauseKind.COMPLETED
    settled = store.inbox_entry(entry)
    assert settled is not None and settled.outcome == "applied"
    legal(store)


@shells
def test_the_host_can_answer_a_wait_itself(kind: str) -> None:
    store = MemoryStore()
    world = World({1: Reply("pay?", (("pay", {}),)), 2: DONE})
    driver, waiting = started(kind, store, world)
    assert isinstance(waiting, WaitFor)
    action = driver.resume(Deny("no"))
    assert isinstance(action, Infer)
    status = snapshot(store).batch.calls[0].status  # type: ignore[union-attr]
    assert isinstance(status, CallCompleted) and status.result.kind is ResultKind.DENIED
    with pytest.raises(HostProtocolError):
        driver.resume(Approve())  # a resume answers only a wait
    legal(store)


@shells
def test_a_queued_cancel_ends_an_awaiting_run(kind: str) -> None:
    store = MemoryStore()
    world = World({1: Reply("pay?", (("pay", {}),)), 2: DONE})
    driver, waiting = started(kind, store, world)
    assert isinstance(waiting, WaitFor)
    assert isinstance(submit_end(store, "r1", EndRequest(EndCause(EndCauseKind.CANCELLED))), int)
    done = driver.next_action()
    assert isinstance(done, Done) and done.cause.kind is EndCauseKind.CANCELLED
    status = snapshot(store).batch.calls[0].status  # type: ignore[union-attr]
    assert status == CallIndeterminate(0, IndeterminateReason.RUN_ENDED)
    assert driver.next_action() == done, "an Ended Run only answers its terminus"
    legal(store)


@shells
def test_a_command_queued_while_the_model_works_is_applied_first(kind: str) -> None:
    store = MemoryStore()
    driver = make_shell(kind, store)
    action = driver.start(["go"], thread_id="t1", run_id="r1")
    assert isinstance(action, Infer)
    assert driver.next_action() == action, "nothing queued: the same question stands"
    submit_end(store, "r1", EndRequest(EndCause(EndCauseKind.STOPPED)))
    done = driver.next_action()
    assert isinstance(done, Done) and done.cause.kind is EndCauseKind.STOPPED
    legal(store)


@shells
def test_the_host_can_cancel_while_a_call_runs(kind: str) -> None:
    store = MemoryStore()
    driver = make_shell(kind, store)
    driver.start(["go"], thread_id="t1", run_id="r1")
    action = driver.inferred("x", [CallRequest("replay", {})])
    assert isinstance(action, RunCall)
    done = driver.cancel()
    assert isinstance(done, Done) and done.cause.kind is EndCauseKind.CANCELLED
    status = snapshot(store).batch.calls[0].status  # type: ignore[union-attr]
    assert status == CallIndeterminate(1, IndeterminateReason.OUTCOME_UNKNOWN)
    legal(store)


# --- pick-up after a crash -----------------------------------------------------------


def crashed_at_first_call(kind: str, tool: str) -> tuple[MemoryStore, World, RunCall]:
    """A Run whose driver died while ``tool`` ran (the effect happened, no report)."""
    store = MemoryStore()
    world = World({1: Reply("x", ((tool, {"n": 1}),)), 2: DONE})
    driver = make_shell(kind, store)
    driver.start(["go"], thread_id="t1", run_id="r1")
    action = driver.inferred("x", [CallRequest(tool, {"n": 1})])
    assert isinstance(action, RunCall)
    world.run(action)  # the tool ran; the driver is gone before it hears back
    return store, world, action


@shells
def test_a_replay_call_is_handed_out_again_with_the_same_operation_id(kind: str) -> None:
    store, world, first = crashed_at_first_call(kind, "replay")
    fresh = make_shell(kind, store)
    again = fresh.pick_up("r1")
    assert isinstance(again, RunCall)
    assert (again.attempt, again.operation_id) == (2, first.operation_id)
    assert snapshot(store).open_batch.calls[0].status == CallExecuting(2)  # type: ignore[union-attr]
    assert isinstance(play(fresh, again, world), Done)
    legal(store)


@shells
def test_a_reconnect_call_is_asked_about_never_started_again(kind: str) -> None:
    store, world, first = crashed_at_first_call(kind, "reconnect")
    fresh = make_shell(kind, store)
    question = fresh.pick_up("r1")
    assert question == CheckStatus("r1", first.call_id, "reconnect", first.operation_id, 1)
    still = fresh.status(first.call_id, OperationStatus.RUNNING)
    assert still == question, "running: ask again, start nothing"
    assert isinstance(play(fresh, still, world), Done)
    assert world.starts == {first.operation_id: [1]}
    legal(store)


@shells
def test_an_indeterminate_call_is_shown_to_the_model_with_its_operation_id(kind: str) -> None:
    store, world, first = crashed_at_first_call(kind, "indeterminate")
    fresh = make_shell(kind, store)
    action = fresh.pick_up("r1")
    assert isinstance(action, Infer)
    assert action.messages[-1].content == {
        "kind": "indeterminate", "reason": "outcome_unknown", "operation_id": first.operation_id
    }
    assert isinstance(play(fresh, action, world), Done)
    assert world.starts == {first.operation_id: [1]}
    legal(store)


@shells
def test_picking_up_a_waiting_or_ended_run_hands_its_wait_or_terminus_again(kind: str) -> None:
    store = MemoryStore()
    world = World({1: Reply("pay?", (("pay", {}),)), 2: DONE})
    _, waiting = started(kind, store, world)
    assert make_shell(kind, store).pick_up("r1") == waiting
    fresh = make_shell(kind, store)
    fresh.pick_up("r1")
    done = play(fresh, fresh.resume(Approve()), world)
    assert isinstance(done, Done) and not done.redelivery
    again = make_shell(kind, store).pick_up("r1")
    assert again == Done("r1", "t1", done.cause, "all done", redelivery=True)


class CountingStore(MemoryStore):
    def __init__(self) -> None:
        super().__init__()
        self.history_reads = 0

    def messages(self, thread_id: str) -> list[Message]:
        self.history_reads += 1
        return super().messages(thread_id)


@shells
def test_history_is_read_once_per_pick_up_and_then_kept(kind: str) -> None:
    store = CountingStore()
    driver = make_shell(kind, store)
    action = driver.start(["go"], thread_id="t1", run_id="r1")
    for n in range(5):
        action = driver.inferred(f"step {n}")
    assert store.history_reads == 0, "a new Thread has no history to read"
    fresh = make_shell(kind, store)
    picked = fresh.pick_up("r1")
    assert isinstance(picked, Infer) and isinstance(action, Infer)
    assert list(picked.messages) == list(action.messages)
    fresh.inferred("more")
    fresh.inferred("and more")
    assert store.history_reads == 1


# --- safe defaults and refusals ----------------------------------------------------------


@shells
def test_an_unknown_tool_is_a_loud_error_and_commits_nothing(kind: str) -> None:
    store = MemoryStore()
    driver = make_shell(kind, store)
    ask = driver.start(["go"], thread_id="t1", run_id="r1")
    version = snapshot(store).version
    with pytest.raises(UnknownTool, match="'rm_rf'"):
        driver.inferred("x", [CallRequest("rm_rf", {})])
    assert snapshot(store).version == version
    assert driver.next_action() == ask
    assert isinstance(driver.inferred("fine", end=EndCauseKind.COMPLETED), Done)


@shells
def test_an_answer_to_another_action_is_refused_and_changes_nothing(kind: str) -> None:
    store = MemoryStore()
    driver = make_shell(kind, store)
    driver.start(["go"], thread_id="t1", run_id="r1")
    call = driver.inferred("x", [CallRequest("replay", {})])
    assert isinstance(call, RunCall)
    version = snapshot(store).version
    with pytest.raises(HostProtocolError, match="RunCall expects"):
        driver.call_returned("someone-else", 1)
    with pytest.raises(HostProtocolError):
        driver.inferred("not now")
    with pytest.raises(HostProtocolError) as refused:
        driver.end(EndCauseKind.OUTCOME_UNKNOWN)  # only with an Indeterminate call
    assert refused.value.rejection is not None
    assert snapshot(store).version == version
    assert isinstance(driver.call_returned(call.call_id, 1), Infer)


@shells
def test_ids_are_minted_from_secrets_when_the_host_gives_none(kind: str) -> None:
    store = MemoryStore()
    driver = make_shell(kind, store)
    driver.start(["go"])
    action = driver.inferred("x", [CallRequest("replay", {})])
    assert isinstance(action, RunCall)
    for minted, prefix in ((action.run_id, "run_"), (action.call_id, "call_"), (action.operation_id, "op_")):
        assert minted.startswith(prefix) and len(minted) == len(prefix) + 32


@shells
def test_the_hosts_ids_are_kept(kind: str) -> None:
    store = MemoryStore()
    driver = make_shell(kind, store)
    driver.start(["go"], thread_id="t9", run_id="r9")
    action = driver.inferred("x", [CallRequest("replay", {}, call_id="toolu_1", operation_id="op-1")])
    assert isinstance(action, RunCall) and (action.call_id, action.operation_id) == ("toolu_1", "op-1")


@shells
def test_a_failed_store_write_stops_the_driver_and_next_action_picks_up(kind: str) -> None:
    store = CrashingStore(MemoryStore())
    driver = make_shell(kind, store)
    driver.start(["go"], thread_id="t1", run_id="r1")
    store.fail_writes = True
    with pytest.raises(DriverStopped) as stopped:
        driver.inferred("x", [CallRequest("replay", {})])
    assert isinstance(stopped.value.__cause__, StoreUnavailable)
    with pytest.raises(DriverStopped):
        driver.inferred("x")  # a report to a stopped driver is refused, not guessed at
    store.fail_writes = False
    again = driver.next_action()
    assert isinstance(again, Infer) and again.step == 1
    assert isinstance(driver.inferred("ok", end=EndCauseKind.COMPLETED), Done)
    legal(store)


@shells
def test_an_expired_approval_is_applied_as_a_deny(kind: str) -> None:
    class ExpiringGate:
        def check(self, run_id: str, call: ToolCall) -> GateAnswer:
            return Hold(WaitKind.APPROVAL, expires_at="2026-01-01T00:00:00Z")

    now = ["2025-12-31T23:59:59Z"]
    store = MemoryStore()
    driver = make_shell(kind, store, gate=ExpiringGate(), clock=lambda: now[0])
    driver.start(["go"], thread_id="t1", run_id="r1")
    waiting = driver.inferred("x", [CallRequest("pay", {})])
    assert isinstance(waiting, WaitFor) and waiting.wait.expires_at == "2026-01-01T00:00:00Z"
    assert driver.next_action() == waiting
    now[0] = "2026-01-01T00:00:01Z"
    action = driver.next_action()
    assert isinstance(action, Infer)
    assert action.messages[-1].content == {"kind": "denied", "value": {"expired_at": "2026-01-01T00:00:00Z"}}
    legal(store)


def test_a_sync_driver_refuses_an_async_gate() -> None:
    store = MemoryStore()
    driver = Driver(store, {"pay": POLICIES["pay"]}, gate=AsyncApprovalGate())
    driver.start(["go"], thread_id="t1", run_id="r1")
    with pytest.raises(DriverError, match="AsyncDriver"):
        driver.inferred("x", [CallRequest("pay", {})])


def test_the_async_driver_takes_a_sync_gate_too() -> None:
    store = MemoryStore()
    driver = make_shell("async", store, gate=ApprovalGate())
    driver.start(["go"], thread_id="t1", run_id="r1")
    assert isinstance(driver.inferred("x", [CallRequest("pay", {})]), WaitFor)


def test_bad_configuration_is_a_value_error() -> None:
    with pytest.raises(ValueError, match="ToolPolicy"):
        Driver(MemoryStore(), {"x": "sometimes"})  # "replay" is a policy now; this is not
    with pytest.raises(ValueError, match="max_steps"):
        Driver(MemoryStore(), {}, max_steps=0)
    with pytest.raises(DriverError, match="start"):
        Driver(MemoryStore(), {}).next_action()


@shells
def test_a_second_run_in_a_thread_sees_the_first_runs_messages(kind: str) -> None:
    store = MemoryStore()
    driver = make_shell(kind, store)
    driver.start(["one"], thread_id="t1", run_id="r1")
    driver.inferred("first answer", end=EndCauseKind.COMPLETED)
    second = make_shell(kind, store)
    action = second.start(["two"], thread_id="t1", run_id="r2")
    assert isinstance(action, Infer)
    assert [m.content for m in action.messages] == ["one", "first answer", "two"]
    with pytest.raises(DriverError, match="not Ended"):
        make_shell(kind, store).start(["three"], thread_id="t1", run_id="r3")
    legal(store)


@shells
def test_message_metadata(kind: str) -> None:
    store = MemoryStore()
    driver = make_shell(kind, store)
    driver.start(["go"], thread_id="t1", run_id="r1")
    framework_json = {"parts": [{"part_kind": "text", "content": "hi"}]}
    driver.inferred("hi", end=EndCauseKind.COMPLETED, metadata=framework_json)
    last = list(store.commits("t1"))[-1].messages[-1]
    assert last.metadata == framework_json
    assert isinstance(snapshot(store).state, Ended)


def test_a_permit_gate_is_the_default() -> None:
    store = MemoryStore()
    driver = Driver(store, {"pay": POLICIES["pay"]})
    driver.start(["go"], thread_id="t1", run_id="r1")
    assert isinstance(driver.inferred("x", [CallRequest("pay", {})]), RunCall)


@shells
def test_refused_inbox_commands_are_settled_with_their_reason_and_the_wait_stands(kind: str) -> None:
    store = MemoryStore()
    world = World({1: Reply("pay?", (("pay", {}),)), 2: DONE})
    driver, waiting = started(kind, store, world)
    assert isinstance(waiting, WaitFor)
    junk = store.put_command("r1", {"type": "reboot"})
    forged = store.put_command(
        "r1",
        {"type": "resume", "command": ResumeCommand("r1", "tk-forged", WaitKind.APPROVAL, Approve()).to_json()},
    )
    assert driver.next_action() == waiting
    outcomes = [store.inbox_entry(entry) for entry in (junk, forged)]
    assert [o.outcome.split(":")[0] if o and o.outcome else None for o in outcomes] == ["refused", "refused"]
    assert "malformed" in str(outcomes[0]) and "ticket" in str(outcomes[1])
    assert store.pending_commands("r1") == []


@shells
def test_a_streaming_hosts_checkpoint_comes_back_after_a_crash_and_goes_after_the_commit(kind: str) -> None:
    store = MemoryStore()
    driver = make_shell(kind, store)
    ask = driver.start(["go"], thread_id="t1", run_id="r1")
    assert isinstance(ask, Infer) and ask.partial is None
    assert driver.checkpoint({"text": "Hel"}) == ask
    assert driver.checkpoint({"text": "Hello, wor"}) == ask
    fresh = make_shell(kind, store)
    again = fresh.pick_up("r1")
    assert isinstance(again, Infer) and again.partial == {"text": "Hello, wor"}
    nxt = fresh.inferred("Hello, world")
    assert isinstance(nxt, Infer) and nxt.step == 2 and nxt.partial is None
    assert store.load_checkpoint("r1") is None, "a checkpoint is deleted once the inference commits"
    call = fresh.inferred("x", [CallRequest("replay", {})])
    assert isinstance(call, RunCall)
    with pytest.raises(HostProtocolError, match="checkpoint"):
        fresh.checkpoint({"text": "late"})


def test_a_failed_checkpoint_write_loses_only_the_checkpoint() -> None:
    store = CrashingStore(MemoryStore())
    store.fail_checkpoints = True
    driver = Driver(store, {})
    ask = driver.start(["go"], thread_id="t1", run_id="r1")
    assert driver.checkpoint({"text": "x"}) == ask
    assert driver.checkpoints_lost == 1
    assert isinstance(driver.inferred("done", end=EndCauseKind.COMPLETED), Done)


def test_an_async_driver_refuses_a_second_call_before_the_first_is_done() -> None:
    release = asyncio.Event()

    class SlowGate:
        async def check(self, run_id: str, call: ToolCall) -> GateAnswer:
            await release.wait()
            return Permit()

    async def scenario() -> tuple[Action, str]:
        store = MemoryStore()
        driver = AsyncDriver(store, POLICIES, gate=SlowGate())
        await driver.start(["go"], thread_id="t1", run_id="r1")
        first = asyncio.ensure_future(driver.inferred("x", [CallRequest("replay", {})]))
        await asyncio.sleep(0)  # the first call now waits for the gate
        with pytest.raises(DriverError, match="busy") as refused:
            await driver.next_action()
        release.set()
        return await first, str(refused.value)

    action, message = asyncio.run(scenario())
    assert isinstance(action, RunCall) and "await each call" in message


@shells
def test_a_driver_whose_commit_loses_stops_and_picks_up_what_the_winner_wrote(kind: str) -> None:
    store = MemoryStore()
    first = make_shell(kind, store)
    ask = first.start(["go"], thread_id="t1", run_id="r1")
    second = make_shell(kind, store)
    assert second.pick_up("r1") == ask
    assert isinstance(second.inferred("second wins"), Infer)
    with pytest.raises(DriverStopped) as stopped:
        first.inferred("first loses")
    assert isinstance(stopped.value.__cause__, CommitConflict)
    assert first.snapshot is None, "a stopped driver holds no belief"
    again = first.next_action()
    assert isinstance(again, Infer) and again.step == 2
    assert [m.content for m in again.messages] == ["go", "second wins"]
    assert first.snapshot == snapshot(store)
    legal(store)


def test_a_driver_tells_on_event_what_it_did_as_the_runtime_does() -> None:
    """The push driver reports through ``on_event`` what the pull-mode runtime reports
    (both carry out the core's store operations the same way): each acknowledged commit
    with its position, each settled inbox command, each recovery."""
    from runkernel.testing import Position
    from runkernel.adapters.drive.events import Acknowledged, CommandSettled, Recovered, RuntimeEvent
    from runkernel.adapters.stores.serial import end_to_inbox

    store = MemoryStore()
    events: list[RuntimeEvent] = []
    driver = Driver(store, {}, on_event=events.append)
    driver.start(["go"], thread_id="t1", run_id="r1")
    assert isinstance(driver.inferred("done", end=EndCauseKind.COMPLETED), Done)
    assert [(type(e), getattr(e, "position", None)) for e in events] == [
        (Acknowledged, Position.ACTIVATION),
        (Acknowledged, Position.END),
    ]
    assert driver.commits == 2
    store.put_command("r1", end_to_inbox(EndRequest(EndCause(EndCauseKind.CANCELLED))))
    events.clear()
    Driver(store, {}, on_event=events.append).pick_up("r1")
    recovered, settled = events
    assert isinstance(recovered, Recovered) and isinstance(recovered.snapshot.state, Ended)
    assert isinstance(settled, CommandSettled) and settled.outcome.startswith("refused")
