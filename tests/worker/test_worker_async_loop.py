"""An asyncio push app runs in one long-lived event loop per worker (Public
API): every drive of every Run by one worker runs on the same loop, made at the first
drive, and closed as soon as ``run_once()``/``run()`` returns after ``shutdown()``, or by
``stop()`` when neither runs (``shutdown()`` only asks: it is safe in a signal handler)."""

from __future__ import annotations

import pytest

import asyncio
from collections.abc import Callable, Mapping

from runkernel.adapters.drive.driver import AsyncDriver
from runkernel.adapters.drive.actions import Done, Infer, WaitFor
from runkernel.adapters.stores.memory import MemoryStore
from runkernel.adapters.worker.loop import Worker
from runkernel.adapters.worker.apps import AsyncPushApp
from runkernel.conformance.runs import step
from runkernel.kernel.policies import ToolPolicy
from runkernel.kernel.protocol import Activate
from runkernel.kernel.state import Ended, Message
from runkernel.kernel.values import EndCauseKind, Role


class LoopRecordingApp:
    """Ends each Run at its first step, recording the loop each drive ran on (and, for
    ``during``, calling it inside the drive)."""

    name = "loops"
    tools: Mapping[str, ToolPolicy | str] = {}

    def __init__(self) -> None:
        self.loops: list[asyncio.AbstractEventLoop] = []
        self.driven: list[str] = []
        self.during: Callable[[], None] | None = None
        self.closed_during: list[bool] = []

    async def drive(self, driver: AsyncDriver, run_id: str) -> None:
        loop = asyncio.get_running_loop()
        self.loops.append(loop)
        self.driven.append(run_id)
        action = await driver.pick_up(run_id)
        while not isinstance(action, (WaitFor, Done)):
            assert isinstance(action, Infer)
            if self.during is not None:
                self.during()
                self.closed_during.append(loop.is_closed())
            action = await driver.inferred("done", end=EndCauseKind.COMPLETED)


def _activate(store: MemoryStore, run_id: str) -> None:
    decision = step(None, Activate(f"t-{run_id}", run_id, 0, (Message(Role.USER, "go"),), "loops"))
    assert decision.commit is not None
    store.append(decision.commit)


def _ended(store: MemoryStore, run_id: str) -> bool:
    snapshot = store.run(run_id)
    return snapshot is not None and isinstance(snapshot.state, Ended)


def test_every_drive_of_an_async_app_runs_on_the_workers_one_loop_until_stop_closes_it() -> None:
    store, app = MemoryStore(), LoopRecordingApp()
    assert isinstance(app, AsyncPushApp)
    worker = Worker(store, app, worker_id="w1", concurrency=1)  # one drive at a time: its own loop, as slots share theirs (test_slots)
    _activate(store, "r1")
    _activate(store, "r2")
    first = worker.run_once()
    _activate(store, "r3")  # a later poll's work: a third drive, in another run_once()
    worker.run_once()
    assert first.failures == 0 and worker.report.failures == 0
    assert sorted(app.driven) == ["r1", "r2", "r3"] and all(_ended(store, r) for r in app.driven)
    loops = {id(loop) for loop in app.loops}
    print(f"async app: {len(app.driven)} drives of {len(set(app.driven))} Runs on {len(loops)} event loop(s)")
    assert len(loops) == 1, "each drive got an event loop of its own"
    loop = app.loops[0]
    assert not loop.is_closed() and not loop.is_running()
    worker.shutdown()  # only asks (safe in a signal handler): nothing runs to see it yet
    assert not loop.is_closed()
    worker.stop()
    assert loop.is_closed(), "stop() left the worker's event loop open"
    worker.stop()  # again: nothing left to close


@pytest.mark.parametrize("how", ["shutdown", "stop"])
def test_a_shutdown_during_a_drive_lets_it_finish_on_its_loop_then_closes_the_loop(how: str) -> None:
    """``shutdown()`` (what SIGTERM does) or ``stop()`` (which also closes an idle
    loop) while the app awaits its model: the drive finishes on its loop first."""
    store, app = MemoryStore(), LoopRecordingApp()
    worker = Worker(store, app, worker_id="w1", concurrency=1)  # one drive at a time: its own loop, as slots share theirs (test_slots)
    _activate(store, "r1")
    _activate(store, "r2")

    def stop() -> None:
        worker.stop()

    app.during = worker.shutdown if how == "shutdown" else stop
    worker.run_once()
    assert app.driven == ["r1"], "a drive started after shutdown"
    assert app.closed_during == [False], "shutdown closed the loop under the running drive"
    assert _ended(store, "r1")
    assert app.loops[0].is_closed(), "run_once() returned after a shutdown with the loop still open"
