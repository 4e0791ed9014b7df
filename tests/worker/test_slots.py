"""Many Runs in flight (Workers and leases): a worker's slots drive Runs at once, each on
its own store instance, on the memory store, SQLite and PostgreSQL; ``shutdown()``
lets every drive finish its commit in flight and releases every lease; an orphaned Run is
taken over by the reserve slot while every other slot is busy; the embedded worker
(``start()``/``stop()``); an asyncio app's drives share the worker's one loop and never
run a store call on it. Counts, never durations: overlap is shown by a barrier that only
opens when enough tools run at once."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from postgres_support import postgres_url
from runkernel.adapters.drive.actions import CallRequest, Done, Infer, RunCall, WaitFor
from runkernel.adapters.drive.driver import AsyncDriver
from runkernel.adapters.drive.ports import InferenceRequest, ModelReply, Returned, StatusReply, ToolRegistry, ToolReply
from runkernel.adapters.stores.contract import Store, StoreUnavailable
from runkernel.adapters.stores.memory import MemoryStore
from runkernel.adapters.stores.registry import open_store
from runkernel.adapters.worker.apps import AsyncPushApp, RuntimeApp
from runkernel.adapters.worker.loop import Worker
from runkernel.adapters.worker.outage import StoreOutage
from runkernel.kernel.policies import RecoveryMode, ToolPolicy, ToolRecoveryPolicy
from runkernel.kernel.protocol import Activate
from runkernel.kernel.state import Ended, Message
from runkernel.kernel.values import EndCauseKind, Role
from runkernel.testing import step

__all__ = ["postgres_url"]

REPLAY = ToolPolicy(ToolRecoveryPolicy(RecoveryMode.REPLAY))
#: how long a test waits for what must happen before it says it did not (a generous
#: bound that only a hang reaches: never a figure asserted)
HANG = 60.0


class OneCall:
    """Step 1 calls ``work``; step 2 ends the Run."""

    def infer(self, request: InferenceRequest) -> ModelReply:
        if request.step == 1:
            return ModelReply("working", (CallRequest("work", {}),))
        return ModelReply("done", end=EndCauseKind.COMPLETED)


class Gathering:
    """A tool that counts the starts running at once and, until ``released``, waits at
    a barrier of ``parties``: it opens only when that many run at the same moment."""

    policy = REPLAY

    def __init__(self, parties: int = 0, release: threading.Event | None = None) -> None:
        self.barrier = threading.Barrier(parties) if parties else None
        self.release = release
        self.lock = threading.Lock()
        self.running = self.most = self.starts = 0
        self.epochs: list[int | None] = []

    def run(self, invocation: RunCall) -> ToolReply:
        with self.lock:
            self.running += 1
            self.starts += 1
            self.most = max(self.most, self.running)
            self.epochs.append(invocation.lease_epoch)
        try:
            if self.barrier is not None:
                self.barrier.wait(HANG)  # BrokenBarrierError: fewer ran at once
            if self.release is not None:
                assert self.release.wait(HANG), "the test never released the tool"
            return Returned({"ok": True})
        finally:
            with self.lock:
                self.running -= 1

    def status(self, operation_id: str, lease_epoch: int | None) -> StatusReply:
        raise AssertionError("a replay tool is never asked its status")


def _app(tool: Gathering, name: str = "slots") -> RuntimeApp:
    return RuntimeApp(name, OneCall(), ToolRegistry({"work": tool}))


def _activate(store: Store, run_id: str, app: str = "slots") -> None:
    decision = step(None, Activate(f"t-{run_id}", run_id, 0, (Message(Role.USER, "go"),), app))
    assert decision.commit is not None
    store.append(decision.commit)


def _ended(store: Store, run_id: str) -> bool:
    snapshot = store.run(run_id)
    return snapshot is not None and isinstance(snapshot.state, Ended)


@pytest.fixture(params=["memory", "sqlite", "postgres"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    if request.param == "memory":
        yield MemoryStore()
        return
    url = f"sqlite:///{tmp_path / 'slots.db'}" if request.param == "sqlite" else request.getfixturevalue("postgres_url")
    opened = open_store(url)
    try:
        yield opened
    finally:
        opened.close()


def test_a_worker_drives_as_many_runs_at_once_as_it_has_slots(store: Store) -> None:
    runs, slots = 9, 3
    tool = Gathering(parties=slots)  # three tools must run at the same moment, three times
    for n in range(runs):
        _activate(store, f"r{n}")
    worker = Worker(store, _app(tool), worker_id="w1", concurrency=slots)
    report = worker.run_once()
    print(
        f"{runs} Runs, {slots} slots: {tool.starts} tool starts, at most {tool.most} at once, "
        f"{report.drives} drives, {report.commits} commits, in-flight peak {report.in_flight_peak}"
    )
    assert all(_ended(store, f"r{n}") for n in range(runs))
    assert tool.starts == runs and tool.most == slots
    assert report.failures == 0 and report.in_flight_peak == slots
    assert all(epoch == 1 for epoch in tool.epochs)
    statuses = store.lease_statuses([f"r{n}" for n in range(runs)])
    assert all(s.lease is not None and s.released for s in statuses.values()), "a slot kept a lease"


def test_shutdown_lets_every_drive_in_flight_commit_then_starts_nothing_and_releases_every_lease(
    store: Store,
) -> None:
    release = threading.Event()
    tool = Gathering(release=release)
    for n in range(6):
        _activate(store, f"r{n}")
    worker = Worker(store, _app(tool), worker_id="w1", concurrency=3, poll_interval=0.05)
    ran: list[object] = []
    thread = threading.Thread(target=lambda: ran.append(worker.run()))
    thread.start()
    for _ in range(int(HANG / 0.01)):
        if tool.running == 3:
            break
        threading.Event().wait(0.01)
    assert tool.running == 3, f"only {tool.running} of 3 slots reached their tool"
    worker.shutdown()
    release.set()
    thread.join(HANG)
    assert not thread.is_alive(), f"run() did not return after shutdown: {worker.waiting_for()}"
    statuses = store.lease_statuses([f"r{n}" for n in range(6)])
    # the three in flight committed their tools' outcomes; nothing else started
    outcomes = {r: store.run(r) for r in statuses}
    started = [r for r, s in statuses.items() if s.lease is not None]
    print(f"shutdown with 3 of 6 Runs in flight: {tool.starts} tool starts, leases taken on {started}")
    assert tool.starts == 3 and len(started) == 3
    assert all(statuses[r].released for r in started), "a lease was kept after shutdown"
    assert all(outcomes[r] is not None and outcomes[r].version >= 2 for r in started)  # type: ignore[union-attr]


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
def test_an_orphaned_run_is_taken_over_by_the_reserve_slot_while_every_slot_is_busy(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    # W2 however busy the slots are, on SQLite and PostgreSQL (the server's clock)
    url = f"sqlite:///{tmp_path / 'orphan.db'}" if kind == "sqlite" else request.getfixturevalue("postgres_url")
    store = open_store(url)
    release = threading.Event()
    busy, orphan_tool = Gathering(release=release), Gathering()
    routed = _Routed({"busy-1": busy, "busy-2": busy, "orphan": orphan_tool})
    app = RuntimeApp("slots", OneCall(), ToolRegistry({"work": routed}))
    _activate(store, "busy-1")
    _activate(store, "busy-2")
    _activate(store, "orphan")
    # a worker that died holding the orphan's lease, long expired by the store's clock
    store.acquire_lease("orphan", "dead-worker", 0.01)
    worker = Worker(store, app, worker_id="w1", concurrency=2, poll_interval=0.05)
    thread = threading.Thread(target=worker.run)
    thread.start()
    try:
        for _ in range(int(HANG / 0.01)):
            if _ended(store, "orphan"):
                break
            threading.Event().wait(0.01)
        taken = _ended(store, "orphan")
        busy_ended_then = [r for r in ("busy-1", "busy-2") if _ended(store, r)]
        lease = store.lease_statuses(["orphan"])["orphan"].lease
    finally:
        worker.shutdown()
        release.set()
        thread.join(HANG)
        store.close()
    print(f"[{kind}] both slots busy (ended then: {busy_ended_then}), the orphan ended: {taken}; report {worker.report}")
    assert busy_ended_then == [], "a busy Run ended before its tool was released"
    assert taken, "the orphaned Run waited behind the busy slots"
    assert lease is not None and lease.worker_id == "w1" and lease.epoch == 2  # the dead worker's was epoch 1
    assert worker.report.in_flight_peak == 3


class _Routed:
    """One tool name, the tool of each Run told apart by the Run's id."""

    policy = REPLAY

    def __init__(self, tools: Mapping[str, Gathering]) -> None:
        self.tools = tools

    def run(self, invocation: RunCall) -> ToolReply:
        return self.tools[invocation.run_id].run(invocation)

    def status(self, operation_id: str, lease_epoch: int | None) -> StatusReply:
        raise AssertionError("a replay tool is never asked its status")


def test_the_embedded_worker_drives_runs_in_the_background_until_stop(store: Store) -> None:
    tool = Gathering()
    worker = Worker(store, _app(tool), worker_id="w1", concurrency=4, poll_interval=0.05)
    worker.start()
    with pytest.raises(RuntimeError, match="already started"):
        worker.start()
    for n in range(5):
        _activate(store, f"r{n}")
    for _ in range(int(HANG / 0.01)):
        if all(_ended(store, f"r{n}") for n in range(5)):
            break
        threading.Event().wait(0.01)
    report = worker.stop()
    print(f"embedded worker: {report.drives} drives, {report.commits} commits, peak {report.in_flight_peak}")
    assert all(_ended(store, f"r{n}") for n in range(5)) and tool.starts == 5
    assert report.failures == 0


def test_stop_raises_what_stopped_the_embedded_worker() -> None:
    class Broken(MemoryStore):
        def runs_with_work(self, app: str | None, limit: int = 100, *, version: str | None = None) -> list[str]:
            raise KeyError("not a store failure")

    worker = Worker(Broken(), _app(Gathering()), worker_id="w1", concurrency=2)
    worker.start()
    with pytest.raises(KeyError, match="not a store failure"):
        worker.stop()


def test_concurrency_must_be_a_whole_number_of_runs() -> None:
    for bad in (0, -1, True, 2.5):
        with pytest.raises(ValueError, match="concurrency must be a whole number"):
            Worker(MemoryStore(), _app(Gathering()), concurrency=bad)  # type: ignore[arg-type]


# --- an asyncio app: one loop, no store call on it ---------------------------------------


class ThreadWatch:
    """A store whose every call records whether it ran on ``loop_thread``."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.loop_threads: set[int] = set()
        self.calls = self.on_loop = 0
        self.lock = threading.Lock()

    def reopen(self) -> ThreadWatch:
        watch = ThreadWatch(self.store.reopen())
        watch.loop_threads, watch.lock = self.loop_threads, self.lock
        watch.counts = self  # type: ignore[attr-defined]
        return watch

    def __getattr__(self, name: str) -> Any:
        return self._watched(getattr(self.store, name), deep=name == "history")

    def _watched(self, found: Any, *, deep: bool = False) -> Any:
        """``found`` if it is no method; else the method, recording where each call runs
        (and, for ``history``, where each read of the history it returns runs: the
        kernel's look-ups read the store too)."""
        if not callable(found):
            return found

        def call(*args: Any, **kwargs: Any) -> Any:
            owner: ThreadWatch = getattr(self, "counts", self)
            with self.lock:
                owner.calls += 1
                owner.on_loop += threading.get_ident() in self.loop_threads
            answer = found(*args, **kwargs)
            return _WatchedReads(self, answer) if deep else answer

        return call


class _WatchedReads:
    """A history whose every look-up is recorded by ``watch``."""

    def __init__(self, watch: ThreadWatch, history: Any) -> None:
        self.watch, self.history = watch, history

    def __getattr__(self, name: str) -> Any:
        return self.watch._watched(getattr(self.history, name))


class SleepingAsyncApp:
    """An asyncio host whose model sleeps (``asyncio.sleep``) at every step; it records
    the loop and its thread."""

    name = "slots"
    # a tool: handing out its start re-checks the lease with the store (W1)
    tools: Mapping[str, ToolPolicy | str] = {"work": "replay"}

    def __init__(self, watch: ThreadWatch, parties: int) -> None:
        self.watch = watch
        self.loops: set[int] = set()
        self.waiting = 0
        self.most = 0
        self.parties = parties
        self.all_in: asyncio.Event | None = None

    async def drive(self, driver: AsyncDriver, run_id: str) -> None:
        loop = asyncio.get_running_loop()
        self.loops.add(id(loop))
        with self.watch.lock:
            self.watch.loop_threads.add(threading.get_ident())
        if self.all_in is None:
            self.all_in = asyncio.Event()
        action = await driver.pick_up(run_id)
        while not isinstance(action, (WaitFor, Done)):
            if isinstance(action, RunCall):
                action = await driver.call_returned(action.call_id, {"ok": True})
                continue
            assert isinstance(action, Infer)
            if len(action.messages) > 1:  # the tool answered
                action = await driver.inferred("done", end=EndCauseKind.COMPLETED)
                continue
            self.waiting += 1
            self.most = max(self.most, self.waiting)
            if self.waiting >= self.parties:
                self.all_in.set()
            await asyncio.wait_for(self.all_in.wait(), HANG)  # the model call: every Run's at once
            self.waiting -= 1
            action = await driver.inferred("working", [CallRequest("work", {})])


def test_an_async_apps_drives_share_one_loop_and_never_run_a_store_call_on_it(store: Store) -> None:
    watch = ThreadWatch(store)
    app = SleepingAsyncApp(watch, parties=4)
    assert isinstance(app, AsyncPushApp)
    for n in range(4):
        _activate(store, f"r{n}")
    worker = Worker(watch, app, worker_id="w1", concurrency=4)
    report = worker.run_once()
    worker.shutdown()
    print(
        f"async app, 4 slots: {report.drives} drives on {len(app.loops)} loop(s), {app.most} model calls at once, "
        f"{watch.calls} store calls, {watch.on_loop} on the loop's thread"
    )
    assert all(_ended(store, f"r{n}") for n in range(4)) and report.failures == 0
    assert len(app.loops) == 1 and app.most == 4
    assert watch.calls > 0 and watch.on_loop == 0


def test_an_async_driver_runs_no_store_call_on_its_loop(store: Store) -> None:
    watch = ThreadWatch(store)

    async def main() -> None:
        watch.loop_threads.add(threading.get_ident())
        driver = AsyncDriver(watch, {"search": "replay"})
        action = await driver.start(["hello"], run_id="solo")
        assert isinstance(action, Infer)
        # a tool call: the kernel looks the batch up in the Run's history (a store read)
        action = await driver.inferred("looking", [CallRequest("search", {"q": "x"})])
        assert isinstance(action, RunCall)
        action = await driver.call_returned(action.call_id, {"found": 1})
        assert isinstance(action, Infer)
        action = await driver.inferred("hi", end=EndCauseKind.COMPLETED)
        assert isinstance(action, Done)

    asyncio.run(main())
    print(f"AsyncDriver alone: {watch.calls} store calls, {watch.on_loop} on the loop's thread")
    assert watch.calls > 0 and watch.on_loop == 0
    assert _ended(store, "solo")



class FailsOnce:
    """The first model call of ``r1`` times out (a transient error); every other answers."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    def infer(self, request: InferenceRequest) -> ModelReply:
        self.calls.append(request.run_id)
        if request.run_id == "r1" and self.calls.count("r1") == 1:
            raise TimeoutError("the model took too long")
        return ModelReply("done", end=EndCauseKind.COMPLETED)


def test_a_slot_waits_out_a_model_calls_backoff_with_its_lease_kept(tmp_path: Path) -> None:
    store = open_store(f"sqlite:///{tmp_path / 'backoff.db'}")
    model = FailsOnce()
    app = RuntimeApp("slots", model, ToolRegistry({}))
    for run_id in ("r1", "r2"):
        _activate(store, run_id)
    report = Worker(store, app, worker_id="w1", concurrency=2).run_once()
    lease = store.lease_statuses(["r1"])["r1"].lease
    print(f"a transient model error in one slot: model calls {model.calls}, report {report}")
    assert all(_ended(store, r) for r in ("r1", "r2"))
    # the drive after the backoff is the same drive of r1 taken up again: counted again, as the serial worker counts it
    assert report.model_failures == 1 and report.failures == 0 and report.drives == 3
    assert lease is not None and lease.epoch == 1, "the lease was given up during the backoff"
    store.close()


@pytest.mark.parametrize("taken_by_dispatcher", [False, True], ids=["own-take", "taken-together"])
def test_a_slot_handed_a_run_after_shutdown_starts_nothing(taken_by_dispatcher: bool) -> None:
    store = MemoryStore()
    _activate(store, "r1")
    worker = Worker(store, _app(Gathering()), worker_id="w1", concurrency=4)
    slot = worker._slot_worker()
    taken = (store.acquire_leases(["r1"], "w1", 30.0)[0], 0.0) if taken_by_dispatcher else None
    worker.shutdown()  # SIGTERM lands between the dispatcher's hand-over and the slot's start
    done = slot._serve("r1", taken)
    print(f"a Run handed over as shutdown came: {done}; the slot's report {slot.report}")
    assert not done.moved and slot.report.drives == 0
    assert store.current_lease("r1") is None and store.run("r1").version == 1  # type: ignore[union-attr]


def test_every_slots_drive_failing_in_one_outage_is_no_retry_of_the_worker() -> None:
    outage = StoreOutage()
    for _ in range(32):  # 32 slots meet one database restart at once
        outage.failed(StoreUnavailable("server closed the connection"), drive=True)
    print(f"32 drives failed in one outage: {outage.count} outage, next try in {outage.delay()} s")
    assert outage.count == 1 and outage.delay() == outage.first_delay
    outage.begin_pass()  # the worker's next pass, after the backoff, fails again: a retry
    outage.failed(StoreUnavailable("still down"))
    assert outage.delay() == 2 * outage.first_delay
