"""A scripted push-mode host for the driver tests: a model that answers by step, tools
that keep a downstream record of every executor start, a gate, and one loop that plays
the host against either shell (the store that dies at a chosen boundary is
``runkernel.testing.CrashingStore``).

``BlockingAsync`` runs ``AsyncDriver`` on an event loop of its own behind the same
methods as ``Driver``, so every scenario runs through both shells unchanged.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Mapping, Sequence
from typing import Protocol, TypeVar

from attrs import define, field, frozen

from runkernel.adapters.drive.driver import AnyGate, AsyncDriver, Driver
from runkernel.adapters.drive.actions import (
    DEFAULT_MAX_STEPS,
    Action,
    CallRequest,
    CheckStatus,
    ChildrenRunning,
    Done,
    Infer,
    RunCall,
    RunCalls,
    WaitFor,
)
from runkernel.adapters.drive.model_errors import DEFAULT_MODEL_ATTEMPTS, TransientPredicate, transient_model_error
from runkernel.adapters.stores.contract import Store
from runkernel.adapters.drive.lease_keeper import LeaseKeeper
from runkernel.adapters.drive.ports import Clock, GateAnswer, Hold, IdSource, utc_now
from runkernel.kernel.policies import RecoveryMode, RetryPolicy, ToolPolicy, ToolRecoveryPolicy
from runkernel.kernel.protocol import OperationStatus, ResumePayload
from runkernel.kernel.state import CallExecuting, Message, RunSnapshot, Staged, ToolCall, TypedError
from runkernel.kernel.values import EndCauseKind, JsonValue, WaitKind
from runkernel.testing import Boundary, CrashPlan, Position, ScriptedGate, SimulatedCrash

T = TypeVar("T")


class Shell(Protocol):
    """The methods a host calls, as ``Driver`` has them."""

    @property
    def snapshot(self) -> RunSnapshot | None: ...

    def start(
        self, messages: Sequence[Message | str], *, thread_id: str | None = None, run_id: str | None = None
    ) -> Action: ...

    def pick_up(self, run_id: str) -> Action: ...

    def next_action(self) -> Action: ...

    def inferred(
        self,
        content: JsonValue,
        calls: Sequence[CallRequest] = (),
        *,
        end: EndCauseKind | None = None,
        metadata: JsonValue = None,
        staged: Staged | None = None,
    ) -> Action: ...

    def checkpoint(self, partial: JsonValue) -> Action: ...

    def inference_failed(self, error: BaseException) -> Action: ...

    def call_returned(self, call_id: str, value: JsonValue, *, metadata: JsonValue = None) -> Action: ...

    def call_failed(
        self, call_id: str, error: JsonValue, *, retryable: bool = False, metadata: JsonValue = None
    ) -> Action: ...

    def call_lost(self, call_id: str) -> Action: ...

    def call_delegated(self, call_id: str) -> Action: ...

    def status(self, call_id: str, status: OperationStatus, value: JsonValue = None) -> Action: ...

    def resume(self, payload: ResumePayload) -> Action: ...

    def end(self, kind: EndCauseKind = EndCauseKind.STOPPED, error: TypedError | None = None) -> Action: ...

    def cancel(self) -> Action: ...


class BlockingAsync:
    """``AsyncDriver`` behind ``Driver``'s blocking methods (one event loop per driver)."""

    def __init__(self, driver: AsyncDriver) -> None:
        self.driver = driver
        self.loop = asyncio.new_event_loop()

    def _run(self, awaitable: Awaitable[T]) -> T:
        async def wrapped() -> T:
            return await awaitable

        return self.loop.run_until_complete(wrapped())

    @property
    def snapshot(self) -> RunSnapshot | None:
        return self.driver.snapshot

    def start(
        self, messages: Sequence[Message | str], *, thread_id: str | None = None, run_id: str | None = None
    ) -> Action:
        return self._run(self.driver.start(messages, thread_id=thread_id, run_id=run_id))

    def pick_up(self, run_id: str) -> Action:
        return self._run(self.driver.pick_up(run_id))

    def next_action(self) -> Action:
        return self._run(self.driver.next_action())

    def inferred(
        self,
        content: JsonValue,
        calls: Sequence[CallRequest] = (),
        *,
        end: EndCauseKind | None = None,
        metadata: JsonValue = None,
        staged: Staged | None = None,
    ) -> Action:
        return self._run(self.driver.inferred(content, calls, end=end, metadata=metadata, staged=staged))

    def checkpoint(self, partial: JsonValue) -> Action:
        return self._run(self.driver.checkpoint(partial))

    def inference_failed(self, error: BaseException) -> Action:
        return self._run(self.driver.inference_failed(error))

    def call_returned(self, call_id: str, value: JsonValue, *, metadata: JsonValue = None) -> Action:
        return self._run(self.driver.call_returned(call_id, value, metadata=metadata))

    def call_failed(
        self, call_id: str, error: JsonValue, *, retryable: bool = False, metadata: JsonValue = None
    ) -> Action:
        return self._run(self.driver.call_failed(call_id, error, retryable=retryable, metadata=metadata))

    def call_lost(self, call_id: str) -> Action:
        return self._run(self.driver.call_lost(call_id))

    def call_delegated(self, call_id: str) -> Action:
        return self._run(self.driver.call_delegated(call_id))

    def status(self, call_id: str, status: OperationStatus, value: JsonValue = None) -> Action:
        return self._run(self.driver.status(call_id, status, value))

    def resume(self, payload: ResumePayload) -> Action:
        return self._run(self.driver.resume(payload))

    def end(self, kind: EndCauseKind = EndCauseKind.STOPPED, error: TypedError | None = None) -> Action:
        return self._run(self.driver.end(kind, error))

    def cancel(self) -> Action:
        return self._run(self.driver.cancel())


# --- the world outside the driver ------------------------------------------------------

POLICIES: Mapping[str, ToolPolicy] = {
    "replay": ToolPolicy(ToolRecoveryPolicy(RecoveryMode.REPLAY, max_attempts=3)),
    "reconnect": ToolPolicy(ToolRecoveryPolicy(RecoveryMode.RECONNECT)),
    "indeterminate": ToolPolicy(ToolRecoveryPolicy(RecoveryMode.INDETERMINATE)),
    # retries and replays share the attempt counter: room for both in one trial
    "flaky": ToolPolicy(ToolRecoveryPolicy(RecoveryMode.REPLAY, max_attempts=5), RetryPolicy(max_attempts=4)),
    "pay": ToolPolicy(),
}


@frozen
class Reply:
    """What the scripted model answers at one step."""

    content: JsonValue
    calls: tuple[tuple[str, JsonValue], ...] = ()
    end: EndCauseKind | None = None
    #: the calls' ids, in order, where a test names them (the driver mints the others)
    call_ids: tuple[str, ...] = ()


class ApprovalGate(ScriptedGate):
    """Holds ``pay`` for approval; permits everything else."""

    def __init__(self) -> None:
        super().__init__({"pay": Hold(WaitKind.APPROVAL, {"tool": "pay"})})


class AsyncApprovalGate:
    """The same gate, as a coroutine (only an ``AsyncDriver`` takes it)."""

    async def check(self, run_id: str, call: ToolCall) -> GateAnswer:
        return ApprovalGate().check(run_id, call)


@define
class World:
    """The scripted model and the tools' downstream system, shared by every driver that
    drives the Run (a crash throws drivers away, never the world)."""

    script: Mapping[int, Reply]
    crash: CrashPlan | None = None
    store: Store | None = None
    starts: dict[str, list[int]] = field(factory=dict)
    tool_of: dict[str, str] = field(factory=dict)
    done: dict[str, JsonValue] = field(factory=dict)
    flaky_failures: int = 0
    status_questions: int = 0

    def infer(self, action: Infer) -> Reply:
        return self.script[action.step]

    def run(self, action: RunCall) -> tuple[str, JsonValue]:
        """Start the executor; the downstream record keeps every start."""
        if self.store is not None:
            assert_durable(self.store, action)
        self.starts.setdefault(action.operation_id, []).append(action.attempt)
        self.tool_of[action.operation_id] = action.tool
        if action.tool == "flaky" and self.flaky_failures == 0:
            self.flaky_failures += 1
            return "failed", {"type": "Flaky", "message": "try again"}
        value: JsonValue = {"tool": action.tool, "args": action.arguments}
        self.done[action.operation_id] = value
        if self.crash is not None and self.crash.crash_here(Boundary.AFTER_EFFECT, Position.CALL_RESULT):
            raise SimulatedCrash(Boundary.AFTER_EFFECT, Position.CALL_RESULT)
        return "returned", value

    def status(self, action: CheckStatus) -> tuple[OperationStatus, JsonValue]:
        self.status_questions += 1
        if action.operation_id in self.done:
            return OperationStatus.DONE, self.done[action.operation_id]
        return OperationStatus.NOT_FOUND, None

    def repeated_starts(self) -> dict[str, list[int]]:
        """Operations of non-replay tools whose executor started more than once."""
        return {
            op: attempts
            for op, attempts in self.starts.items()
            if len(attempts) > 1 and POLICIES[self.tool_of[op]].recovery.mode is not RecoveryMode.REPLAY
            and self.tool_of[op] != "flaky"
        }


def play(driver: Shell, action: Action, world: World) -> WaitFor | Done:
    """Be the host until the Run waits or ends (it has no concurrent delegations)."""
    found = play_until_quiet(driver, action, world)
    assert not isinstance(found, ChildrenRunning), f"children running: {found}"
    return found


def play_until_quiet(driver: Shell, action: Action, world: World) -> WaitFor | ChildrenRunning | Done:
    """Be the host until the Run waits, ends, or is quiet while its children run."""
    while True:
        match action:
            case Infer():
                reply = world.infer(action)
                named = reply.call_ids + (None,) * (len(reply.calls) - len(reply.call_ids))
                calls = [CallRequest(tool, args, call_id) for (tool, args), call_id in zip(reply.calls, named)]
                action = driver.inferred(reply.content, calls, end=reply.end)
            case RunCall() | RunCalls():
                # a group's calls one at a time, in order: each answer lists the rest
                call = action if isinstance(action, RunCall) else action.calls[0]
                outcome, value = world.run(call)
                if outcome == "failed":
                    action = driver.call_failed(call.call_id, value, retryable=True)
                else:
                    action = driver.call_returned(call.call_id, value)
            case CheckStatus():
                status, value = world.status(action)
                action = driver.status(action.call_id, status, value)
            case WaitFor() | ChildrenRunning() | Done():
                return action


def assert_durable(store: Store, action: RunCall) -> None:
    """I5: attempt n runs only once its Executing{n} is committed."""
    snapshot = store.run(action.run_id)
    call = snapshot.open_batch.call(action.call_id) if snapshot and snapshot.open_batch else None
    assert call is not None and call.status == CallExecuting(action.attempt), (
        f"RunCall {action.call_id} attempt {action.attempt} handed out while the store says "
        f"{call.status if call else None}"
    )


SHELLS = ("sync", "async")


def make_shell(
    kind: str,
    store: Store,
    *,
    gate: AnyGate | None = None,
    max_steps: int | None = DEFAULT_MAX_STEPS,
    ids: IdSource | None = None,
    clock: Clock = utc_now,
    tools: Mapping[str, ToolPolicy | str] = POLICIES,
    app: str | None = None,
    leases: LeaseKeeper | None = None,
    transient: TransientPredicate = transient_model_error,
    model_attempts: int = DEFAULT_MODEL_ATTEMPTS,
) -> Shell:
    """A ``Driver`` or a blocking ``AsyncDriver`` with the test tools' policies."""
    if kind == "sync":
        return Driver(
            store,
            tools,
            gate=gate or ApprovalGate(),
            max_steps=max_steps,
            ids=ids,
            clock=clock,
            app=app,
            leases=leases,
            transient=transient,
            model_attempts=model_attempts,
        )
    driver = AsyncDriver(
        store,
        tools,
        gate=gate or AsyncApprovalGate(),
        max_steps=max_steps,
        ids=ids,
        clock=clock,
        app=app,
        leases=leases,
        transient=transient,
        model_attempts=model_attempts,
    )
    return BlockingAsync(driver)
