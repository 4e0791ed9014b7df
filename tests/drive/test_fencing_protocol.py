"""The fencing protocol (W5) call by call: which commits a fence precedes,
what a fence that raises does (a failed drive: nothing committed, driven again later),
how a push host answers ``Fence``, and the epoch on every question to the downstream.
The stall test is ``test_fencing.py``."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from runkernel import AsyncDriver, Driver, Fence, OperationStatus, RunCall, StatusReply, Worker, current_invocation
from runkernel.adapters.drive.actions import Action, CallRequest, CheckStatus, Done, Infer
from runkernel.adapters.drive.lease_keeper import LeaseKeeper
from runkernel.adapters.drive.ports import InferenceRequest, ModelReply, Returned, ToolRegistry, ToolReply
from runkernel.adapters.drive.runtime import Runtime
from runkernel.adapters.stores.memory import MemoryStore
from runkernel.adapters.worker.apps import RuntimeApp
from runkernel.errors import HostProtocolError
from runkernel.kernel import ToolPolicy
from runkernel.kernel.state import CallExecuting, CallIndeterminate, Message
from runkernel.kernel.values import EndCauseKind, IndeterminateReason, Role
from runkernel.testing.fixed import ManualClock

LEASE = 10.0


class Downstream:
    """Records every epoch it is told, by kind."""

    def __init__(self) -> None:
        self.told: list[tuple[str, str, int | None]] = []
        self.fence_fails = 0

    def fence(self, operation_id: str, lease_epoch: int | None) -> None:
        if self.fence_fails:
            self.fence_fails -= 1
            raise ConnectionError("the downstream is unreachable")
        self.told.append(("fence", operation_id, lease_epoch))


class Tool:
    """A tool whose start dies with its worker (``crash``) the first time."""

    def __init__(self, downstream: Downstream, policy: ToolPolicy, *, crash: bool = True) -> None:
        self.downstream, self._policy, self.crash = downstream, policy, crash
        self.epochs_seen: list[int | None] = []

    @property
    def policy(self) -> ToolPolicy:
        return self._policy

    def run(self, call: RunCall) -> ToolReply:
        self.epochs_seen.append(current_invocation().lease_epoch)
        if self.crash:
            self.crash = False
            raise _WorkerDied()
        return Returned("ok")

    def status(self, operation_id: str, lease_epoch: int | None) -> StatusReply:
        self.downstream.told.append(("status", operation_id, lease_epoch))
        return StatusReply(OperationStatus.UNKNOWN)

    def fence(self, operation_id: str, lease_epoch: int | None) -> None:
        self.downstream.fence(operation_id, lease_epoch)


class _WorkerDied(BaseException):
    """The worker dies inside its tool: the call stays Executing."""


class Model:
    def infer(self, request: InferenceRequest) -> ModelReply:
        if request.step == 1:
            return ModelReply(None, (CallRequest("t", {}, "call-1", "op-1"),))
        return ModelReply("done", end=EndCauseKind.COMPLETED)


def _crashed_run(store: MemoryStore, tool: Tool, clock: ManualClock) -> None:
    """Worker A starts the Run and dies inside the tool; its lease then expires."""
    leases = LeaseKeeper(store, "A", duration=LEASE, monotonic=clock)
    runtime = Runtime(store, Model(), ToolRegistry({"t": tool}), leases=leases, app="app")
    with pytest.raises(_WorkerDied):
        runtime.start("thread", "run", (Message(Role.USER, "go"),))
    clock.advance(LEASE + 1)


def _runtime(store: MemoryStore, tool: Tool, clock: ManualClock, worker: str = "B") -> Runtime:
    leases = LeaseKeeper(store, worker, duration=LEASE, monotonic=clock)
    return Runtime(store, Model(), ToolRegistry({"t": tool}), leases=leases)


def test_a_fence_that_raises_fails_the_drive_and_commits_nothing() -> None:
    clock = ManualClock()
    store, downstream = MemoryStore(clock=clock), Downstream()
    tool = Tool(downstream, ToolPolicy.indeterminate())
    _crashed_run(store, tool, clock)
    before = store.run("run")
    assert before is not None
    downstream.fence_fails = 1
    with pytest.raises(ConnectionError):
        _runtime(store, tool, clock).drive("run")
    after = store.run("run")
    assert after == before and after is not None and after.batch is not None
    assert isinstance(after.batch.calls[0].status, CallExecuting)  # nothing committed
    clock.advance(LEASE + 1)
    outcome = _runtime(store, tool, clock, "C").drive("run")
    print(f"after a fence raised: version {before.version} kept; the next drive fenced {downstream.told}")
    assert downstream.told == [("fence", "op-1", 3)]
    final = outcome.snapshot.batch
    assert final is None or isinstance(final.calls[0].status, CallIndeterminate)
    assert tool.epochs_seen == [1]  # recovery started nothing


def test_a_worker_retries_a_run_whose_fence_raised_with_backoff() -> None:
    clock = ManualClock()
    store, downstream = MemoryStore(clock=clock), Downstream()
    tool = Tool(downstream, ToolPolicy.indeterminate())
    _crashed_run(store, tool, clock)
    downstream.fence_fails = 1
    failures: list[BaseException] = []
    app = RuntimeApp(name="app", model=Model(), tools=ToolRegistry({"t": tool}))
    worker = Worker(
        store, app, worker_id="W", lease_duration=LEASE, monotonic=clock, on_failure=lambda _r, e: failures.append(e), concurrency=1
    )
    first = worker.run_once()  # a failed drive is not tried again in the same run_once
    assert first.failures == 1 and isinstance(failures[0], ConnectionError)
    assert store.current_lease("run") is None  # released: nothing held while it backs off
    worker.run_once()
    snapshot = store.run("run")
    print(f"worker: {worker.report.failures} failed drive (the fence raised), then {downstream.told}")
    assert snapshot is not None and snapshot.state.__class__.__name__ == "Ended"
    assert [kind for kind, _op, _epoch in downstream.told] == ["fence"]


def test_replay_attempts_exhausted_at_recovery_is_fenced_and_a_started_call_is_not() -> None:
    clock = ManualClock()
    store, downstream = MemoryStore(clock=clock), Downstream()
    tool = Tool(downstream, ToolPolicy.replay(max_attempts=1))
    _crashed_run(store, tool, clock)
    _runtime(store, tool, clock).drive("run")
    snapshot = store.run("run")
    assert snapshot is not None
    assert downstream.told == [("fence", "op-1", 2)]
    # the Run went on to its end without another fence: no other call was found Executing
    assert snapshot.state.__class__.__name__ == "Ended"


def test_a_reconnect_status_carries_the_epoch_and_its_unknown_is_fenced() -> None:
    clock = ManualClock()
    store, downstream = MemoryStore(clock=clock), Downstream()
    tool = Tool(downstream, ToolPolicy.reconnect())
    _crashed_run(store, tool, clock)
    _runtime(store, tool, clock).drive("run")
    assert downstream.told == [("status", "op-1", 2), ("fence", "op-1", 2)]


# --- push mode -----------------------------------------------------------------------------


def _push_crashed(fences: set[str]) -> tuple[MemoryStore, ManualClock, Driver]:
    clock = ManualClock()
    store = MemoryStore(clock=clock)
    a = Driver(store, {"t": "indeterminate"}, leases=LeaseKeeper(store, "A", duration=LEASE, monotonic=clock))
    action = a.start(["go"], thread_id="thread", run_id="run")
    assert isinstance(action, Infer)
    action = a.inferred(None, [CallRequest("t", {}, "call-1", "op-1")])
    assert isinstance(action, RunCall)  # and A dies here
    clock.advance(LEASE + 1)
    b = Driver(store, {"t": "indeterminate"}, leases=LeaseKeeper(store, "B", duration=LEASE, monotonic=clock), fences=fences)
    return store, clock, b


def test_push_fence_is_handed_out_before_the_commit_and_only_fenced_answers_it() -> None:
    store, _clock, b = _push_crashed({"t"})
    before = store.run("run")
    fence = b.pick_up("run")
    assert fence == Fence("run", "call-1", "t", "op-1", lease_epoch=2)
    assert store.run("run") == before  # the recovery commit waits for the fence
    with pytest.raises(HostProtocolError, match="Fence expects fenced"):
        b.call_returned("call-1", "ok")
    with pytest.raises(HostProtocolError, match="Fence expects fenced"):
        b.fenced("call-2")
    with pytest.raises(HostProtocolError, match="Fence expects fenced"):
        b.cancel()
    assert b.next_action() == fence  # asked again: still the fence
    assert store.run("run") == before
    action = b.fenced("call-1")
    assert isinstance(action, Infer)  # Indeterminate committed and published
    snapshot = store.run("run")
    assert snapshot is not None and snapshot.batch is not None
    status = snapshot.batch.calls[0].status
    assert isinstance(status, CallIndeterminate) and status.reason is IndeterminateReason.OUTCOME_UNKNOWN


def test_push_driver_without_fences_hands_out_no_fence() -> None:
    _store, _clock, b = _push_crashed(set())
    assert isinstance(b.pick_up("run"), Infer)


def test_push_call_this_driver_started_is_not_fenced_at_its_end() -> None:
    clock = ManualClock()
    store = MemoryStore(clock=clock)
    a = Driver(store, {"t": "indeterminate"}, leases=LeaseKeeper(store, "A", duration=LEASE, monotonic=clock), fences={"t"})
    a.start(["go"], thread_id="thread", run_id="run")
    action = a.inferred(None, [CallRequest("t", {}, "call-1", "op-1")])
    assert isinstance(action, RunCall) and action.lease_epoch == 1
    assert isinstance(a.cancel(), Done)  # its own call: no Fence before the end


def test_fences_must_name_declared_tools() -> None:
    with pytest.raises(ValueError, match="'nope'"):
        Driver(MemoryStore(), {"t": "indeterminate"}, fences={"nope"})
    with pytest.raises(TypeError, match="collection of tool names"):
        Driver(MemoryStore(), {"t": "indeterminate"}, fences="t")


def test_async_push_fence() -> None:
    clock = ManualClock()
    store = MemoryStore(clock=clock)
    _store, _clock, _b = store, clock, None
    sync_a = Driver(store, {"t": "indeterminate"}, leases=LeaseKeeper(store, "A", duration=LEASE, monotonic=clock))
    sync_a.start(["go"], thread_id="thread", run_id="run")
    sync_a.inferred(None, [CallRequest("t", {}, "call-1", "op-1")])
    clock.advance(LEASE + 1)

    async def go() -> tuple[Action, Action]:
        b = AsyncDriver(store, {"t": "indeterminate"}, leases=LeaseKeeper(store, "B", duration=LEASE, monotonic=clock), fences=["t"])
        fence = await b.pick_up("run")
        return fence, await b.fenced("call-1")

    fence, after = asyncio.run(go())
    assert fence == Fence("run", "call-1", "t", "op-1", lease_epoch=2)
    assert isinstance(after, Infer)


# --- the epoch on status questions -------------------------------------------------------


def _push_reconnect_crashed() -> tuple[MemoryStore, ManualClock]:
    clock = ManualClock()
    store = MemoryStore(clock=clock)
    a = Driver(store, {"t": "reconnect"}, leases=LeaseKeeper(store, "A", duration=LEASE, monotonic=clock))
    a.start(["go"], thread_id="thread", run_id="run")
    a.inferred(None, [CallRequest("t", {}, "call-1", "op-1")])
    clock.advance(LEASE + 1)
    return store, clock


def test_check_status_carries_the_epoch_and_ask_status_passes_it() -> None:
    store, clock = _push_reconnect_crashed()
    b = Driver(store, {"t": "reconnect"}, leases=LeaseKeeper(store, "B", duration=LEASE, monotonic=clock))
    check = b.pick_up("run")
    assert isinstance(check, CheckStatus) and check.lease_epoch == 2
    asked: list[tuple[str, int | None]] = []

    def status(operation_id: str, lease_epoch: int | None) -> StatusReply:
        asked.append((operation_id, lease_epoch))
        return StatusReply(OperationStatus.DONE, "paid")

    b.ask_status(status)
    assert asked == [("op-1", 2)]


def test_a_running_tool_reads_its_epoch_from_current_invocation(tmp_path: Path) -> None:
    clock = ManualClock()
    store, downstream = MemoryStore(clock=clock), Downstream()
    tool = Tool(downstream, ToolPolicy.replay(max_attempts=3))
    _crashed_run(store, tool, clock)
    _runtime(store, tool, clock).drive("run")
    assert tool.epochs_seen == [1, 2]  # attempt 1 under A, attempt 2 under B
    assert downstream.told == []  # a replayed call is run again, not fenced


class FencingPushApp:
    """A push app under a worker: it names its fenced tool, and fences it."""

    name = "app"
    tools = {"t": "indeterminate"}
    fences = {"t"}

    def __init__(self) -> None:
        self.fenced: list[tuple[str, int | None]] = []

    def serve(self, driver: Driver, action: Action) -> None:
        while not isinstance(action, Done):
            if isinstance(action, Fence):
                self.fenced.append((action.operation_id, action.lease_epoch))
                action = driver.fenced(action.call_id)
            elif isinstance(action, Infer):
                action = driver.inferred("done", end=EndCauseKind.COMPLETED)
            else:
                raise AssertionError(f"unexpected {action!r}")


def test_a_push_app_under_a_worker_gets_its_fences() -> None:
    clock = ManualClock()
    store = MemoryStore(clock=clock)
    a = Driver(store, {"t": "indeterminate"}, leases=LeaseKeeper(store, "A", duration=LEASE, monotonic=clock), app="app")
    a.start(["go"], thread_id="thread", run_id="run")
    assert isinstance(a.inferred(None, [CallRequest("t", {}, "call-1", "op-1")]), RunCall)  # A dies here
    clock.advance(LEASE + 1)
    app = FencingPushApp()
    report = Worker(store, app, worker_id="W", lease_duration=LEASE, monotonic=clock, concurrency=1).run_once()
    assert report.failures == 0
    assert app.fenced == [("op-1", 2)]
