"""Planned points where a worker process holds still until its test acts: how the kill
and stall tests make every kill and stall land where they planned it, at any machine
load, instead of hoping a timer falls inside a drive.

A point is ``TOOL:WHEN:N``: the N-th executor start of ``TOOL`` (counted across every
worker process of the test, retries included), ``before`` the tool's own work or
``after`` it (its effect done downstream, its reply not yet committed). The test plans
the points it acts on; a worker whose tool reaches one says so (a file naming its pid,
the Run and the lease epoch of the drive) and waits there until the test lets it go,
holding its lease. The test then SIGKILLs it (a crash at that very point) or SIGSTOPs it
and lets it go, and continues it once another worker took the Run over (a stall past
its lease).

The worker side is ``held_app(app)``: the app with every tool wrapped, holding only at
the points planned in the directory ``RUNKERNEL_TEST_HELD_POINTS`` names (nowhere when
it is unset). The test side is ``HeldPoints``.
"""

from __future__ import annotations

import fcntl
import json
import os
import signal
import time
from collections.abc import Callable, Iterable
from pathlib import Path

from attrs import frozen

from runkernel.adapters.drive.ports import StatusReply, Tool, ToolRegistry, ToolReply, fence_of
from runkernel import RunCall
from runkernel.adapters.stores.contract import Store
from runkernel.adapters.worker.apps import RuntimeApp
from runkernel.kernel.policies import ToolPolicy
from stopping import InTransaction, sqlite_writing, stop
from stopping import Process as Process  # the tests name it from here

ENV = "RUNKERNEL_TEST_HELD_POINTS"
#: how often this process was held at a planned point and let go
let_go = 0
#: how often a held worker looks for its go-ahead, and the test for arrivals (a poll of
#: a condition, never a guess at how long something takes)
POLL = 0.005
#: the digits of a point's start count, written in one piece
COUNT_WIDTH = 12


@frozen
class Arrival:
    """A worker holding at a planned point: its process, and the drive it holds."""

    point: str
    pid: int
    run_id: str
    lease_epoch: int | None


class HeldPoints:
    """The test's side: plans the points, hears each worker that reaches one, and lets
    it go on."""

    def __init__(self, directory: Path, planned: Iterable[str]) -> None:
        self.directory = directory
        self.planned = tuple(planned)
        self._heard: set[str] = set()
        directory.mkdir(parents=True, exist_ok=True)
        (directory / "plan.json").write_text(json.dumps(list(self.planned)))

    def env(self) -> dict[str, str]:
        """What a worker process's environment needs to hold at the planned points."""
        return {ENV: str(self.directory)}

    def arrivals(self) -> list[Arrival]:
        """The workers that reached a planned point since the last call, in plan order."""
        found = []
        for point in self.planned:
            path = self.directory / f"{point}.at"
            if point in self._heard or not path.exists():
                continue
            self._heard.add(point)
            found.append(Arrival(point=point, **json.loads(path.read_text())))
        return found

    def release(self, arrival: Arrival) -> None:
        """Let the worker at ``arrival`` go on (it sees this at its next look)."""
        (self.directory / f"{arrival.point}.go").touch()

    def missing(self) -> list[str]:
        """The planned points no worker has reached yet."""
        return [p for p in self.planned if p not in self._heard]


def kill(process: Process) -> None:
    """SIGKILL ``process`` (held at a point) and reap it."""
    process.kill()
    process.wait()


def taken_over(store: Store, run_id: str, epoch: int | None) -> bool:
    """Whether another lease than ``epoch`` drove ``run_id`` since: it holds the Run now,
    or wrote its last commit (epochs only rise)."""
    lease = store.current_lease(run_id)
    if lease is not None and epoch is not None and lease.epoch > epoch:
        return True
    snapshot = store.run(run_id)
    if snapshot is None:
        return False
    writer = store.writer_of(snapshot.thread_id, snapshot.version)
    return writer is not None and epoch is not None and writer.epoch > epoch


class KillsAndStalls:
    """Carries a plan out over a pool of worker processes (``workers``, kept full): the
    worker at a point of ``kills`` is SIGKILLed and replaced by ``spawn(slot)``; the
    worker at any other planned point is SIGSTOPped (outside its transactions, as
    ``in_transaction`` tells) and let go, and once ``store``
    shows its Run taken over it is continued and sent SIGTERM, and once it exited
    ``finish(process)`` says how many of its commits were refused (it came back holding a lease that
    another worker took over: W3), and it is replaced too."""

    def __init__(
        self,
        points: HeldPoints,
        kills: Iterable[str],
        store: Store,
        workers: list[Process],
        spawn: Callable[[int], Process],
        finish: Callable[[Process], int],
        in_transaction: InTransaction = sqlite_writing,
        stall: Callable[[Process], int] | None = None,
        resume: Callable[[Process], None] | None = None,
        in_flight: Callable[[Process], int] | None = None,
    ) -> None:
        self.points = points
        #: how many Runs a worker holds leases on (asked of each worker killed)
        self.in_flight = in_flight
        #: the Runs each killed worker held leases on when it was killed (with ``in_flight``)
        self.in_flight_at_kills: list[int] = []
        self.in_transaction = in_transaction
        #: how a worker is stalled (how often it was tried again) and let go on: SIGSTOP
        #: outside its transactions and SIGCONT unless the test says otherwise
        self.stall = stall or (lambda process: stop(process, self.in_transaction))
        self.resume = resume or (lambda process: process.send_signal(signal.SIGCONT))
        #: how often a stall found its worker inside a transaction and tried again
        self.stopped_inside_transactions = 0
        #: points reached by a worker already killed or stalled at another (several slots)
        self.passed: list[str] = []
        self.kill_points = frozenset(kills)
        self.store = store
        self.workers = workers
        self.spawn = spawn
        self.finish = finish
        self.kills = 0
        self.stalls = 0
        #: each stalled worker's refused commits, once it was continued and stopped
        self.refused_after_stalls: list[int] = []
        self._stalled: list[tuple[Arrival, Process]] = []
        self._finishing: list[Process] = []  # continued and told to stop, not exited yet

    def act(self) -> list[Arrival]:
        """Act on every worker that reached a planned point (returned), and continue
        every stalled worker whose Run was taken over."""
        arrivals = self.points.arrivals()
        for arrival in arrivals:
            self._act_on(arrival)
        for arrival, process in list(self._stalled):
            if not taken_over(self.store, arrival.run_id, arrival.lease_epoch):
                continue
            self._stalled.remove((arrival, process))
            self.resume(process)
            self.stalls += 1
            # stopped once it exits: meanwhile another of its slots may reach a point,
            # which the next look lets go (its SIGTERM waits for that drive)
            process.send_signal(signal.SIGTERM)
            self._finishing.append(process)
        for process in list(self._finishing):
            if process.poll() is None:
                continue
            self._finishing.remove(process)
            self.refused_after_stalls.append(self.finish(process))
            slot = self.workers.index(process)
            self.workers[slot] = self.spawn(slot)
        return arrivals

    def _act_on(self, arrival: Arrival) -> None:
        """Kill, or stop and let go, the worker at ``arrival``; a worker with several
        slots may reach two points at once: at the second, if the first killed it or
        stalls it, there is nothing left to act on (the point is let go, and counted
        in ``passed``)."""
        slot = next((n for n, w in enumerate(self.workers) if w.pid == arrival.pid), None)
        stalled = [p for _, p in self._stalled] + self._finishing
        if slot is None or any(p.pid == arrival.pid for p in stalled):
            self.points.release(arrival)
            self.passed.append(arrival.point)
            return
        if arrival.point in self.kill_points:
            if self.in_flight is not None:
                self.in_flight_at_kills.append(self.in_flight(self.workers[slot]))
            kill(self.workers[slot])
            self.kills += 1
            self.workers[slot] = self.spawn(slot)
        else:
            self.stopped_inside_transactions += self.stall(self.workers[slot])
            self.points.release(arrival)  # seen once it is continued
            self._stalled.append((arrival, self.workers[slot]))

    @property
    def done(self) -> bool:
        """Every planned point reached and acted on, no worker left stopped."""
        return not self.points.missing() and not self._stalled and not self._finishing

    def continue_all(self) -> None:
        """SIGCONT every worker still stopped, and let every point go (a test that
        fails half-way: a worker held at a point would never finish its SIGTERM)."""
        for _arrival, process in self._stalled:
            self.resume(process)
        for point in self.points.planned:
            (self.points.directory / f"{point}.go").touch()


# --- the worker's side ------------------------------------------------------------------


def _hold(directory: Path, tool: str, when: str, invocation: RunCall) -> None:
    """Count this start at ``tool``/``when``; if its number is a planned point, say so
    and wait for the test's go-ahead."""
    descriptor = os.open(directory / f"count-{tool}-{when}", os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX)  # one count per start across processes; a kill unlocks it
        number = int(os.pread(descriptor, COUNT_WIDTH, 0) or b"0") + 1
        point = f"{tool}:{when}:{number}"
        planned = point in json.loads((directory / "plan.json").read_text())
        if planned:
            # said before the count moves past it: a worker killed between the two (another
            # of its slots at a kill point) leaves the point said, which the test passes (its
            # worker is gone), and its number to the next start; never a point counted that
            # no worker said, which the test would wait for until its hang guard
            _say_arrival(directory, point, invocation)
        # one write of a fixed width, never a truncate first: a worker killed here (another
        # of its slots at a point) leaves the old count or the new one, never an empty file
        # that would number the next starts from 1 again and reach a point a second time
        os.pwrite(descriptor, b"%0*d" % (COUNT_WIDTH, number), 0)
    finally:
        os.close(descriptor)
    if not planned:
        return
    go = directory / f"{point}.go"
    while not go.exists():
        time.sleep(POLL)
    global let_go
    let_go += 1


def _say_arrival(directory: Path, point: str, invocation: RunCall) -> None:
    """Tell the test this worker is at ``point``, holding ``invocation``'s drive."""
    arrival = {"pid": os.getpid(), "run_id": invocation.run_id, "lease_epoch": invocation.lease_epoch}
    written = directory / f"{point}.at.{os.getpid()}"
    written.write_text(json.dumps(arrival))
    written.rename(directory / f"{point}.at")  # whole, or not there at all


@frozen
class HeldTool:
    """``inner``, holding at the planned points of its name."""

    name: str
    inner: Tool

    @property
    def policy(self) -> ToolPolicy:
        return self.inner.policy

    def run(self, invocation: RunCall) -> ToolReply:
        directory = os.environ.get(ENV)
        if directory:
            _hold(Path(directory), self.name, "before", invocation)
        reply = self.inner.run(invocation)
        if directory:
            _hold(Path(directory), self.name, "after", invocation)
        return reply

    def status(self, operation_id: str, lease_epoch: int | None) -> StatusReply:
        reply: StatusReply = self.inner.status(operation_id, lease_epoch)
        return reply


@frozen
class HeldFencedTool(HeldTool):
    """A ``HeldTool`` whose inner tool has a fence (W5), which it keeps."""

    def fence(self, operation_id: str, lease_epoch: int | None) -> None:
        fence = fence_of(self.inner)
        assert fence is not None
        fence(operation_id, lease_epoch)


def held_app(app: RuntimeApp) -> RuntimeApp:
    """``app`` with every tool a ``HeldTool`` (a ``HeldFencedTool`` if it has a fence);
    its name, model, gate and policies kept."""
    registry = app.tools
    tools = {
        name: (HeldFencedTool if fence_of(tool) is not None else HeldTool)(name, tool)
        for name, tool in registry.tools.items()
    }
    policies = registry.policies
    return RuntimeApp(
        name=app.name,
        model=app.model,
        tools=ToolRegistry(tools, max_steps=policies.max_steps, on_indeterminate=policies.on_indeterminate),
        gate=app.gate,
        observer=app.observer,
    )


def delegating_app() -> RuntimeApp:
    """What ``runkernel worker --app held_points:delegating_app`` loads: the delegating
    app (``delegating_app:app``), holding at the planned points."""
    from delegating_app import app

    return held_app(app())


def demo_app() -> RuntimeApp:
    """What ``runkernel worker --app held_points:demo_app`` loads: the example app
    (``examples.demo_app:app``), holding at the planned points."""
    from examples.demo_app import app

    return held_app(app)
