"""The worker: finds Runs of its app that have work, leases each, drives it until it is
quiet, releases it (DESIGN.md, Workers and leases; the CLI's ``runkernel worker``).

Work is found by polling the store (``Store.runs_with_work``): Runs Running and
unleased (new, or orphaned by a worker that died), Runs with an inbox command, expired
approvals, due timers, and quiet parents whose children ended. A quiet parent (only
Executing concurrent delegations open) is released like any quiet Run and is not found
again until one of its children ends (or was never activated); the children, activated
with the parent's app, are found as new Runs. Driving is the pull-mode runtime's (a
``RuntimeApp``) or the host's own through a push-mode driver (a ``PushApp``); either
way under this worker's leases, so a commit that loses or a lease that is gone stops
that Run at once.

``shutdown()`` (what SIGTERM and SIGINT call) lets the commit in flight finish, starts
nothing new, releases every lease, and ``run()`` returns.

An asyncio push app (``AsyncPushApp``) runs in one long-lived event loop per worker,
made at its first drive and closed at shutdown (its tasks cancelled, its async
generators and default executor shut down, as ``asyncio.run`` does): what the app keeps
across drives (an HTTP client, a connection pool) stays on the loop it was made on.

An exception the host's tools, hooks, gate or push host raise never stops the worker:
the drive is counted in ``failures`` and handed to ``on_failure``, the lease is
released, and the Run waits its turn behind the others (not again in the same
``run_once()``; skipped by ``run()`` for 1, 2, 4 ... polls after each failure in a row).
A tool's exception is its call's outcome (``ToolRaised``), and the model's is decided
by the one interpreter (``model_errors``): a transient one commits nothing, and the
pull-mode Run is set aside for its backoff with its lease kept and renewed while the
worker drives other Runs, then driven on by the same drive (the count of attempts is the
drive's: it restarts when another worker takes the Run over); a non-transient one, or
the last attempt's, ends the Run ``failed``. ``run_once()`` returns while only Runs
set aside remain, keeping them (and their leases) for the next call; ``shutdown()``
drops them and releases their leases.
"""

from __future__ import annotations

import asyncio
import os
import secrets
import socket
import threading
import time
from collections.abc import Callable, Collection
from typing import Any

from attrs import define

from runkernel.adapters.drive.driver import AsyncDriver, Driver
from runkernel.adapters.drive.actions import DriverStopped
from runkernel.adapters.drive.ports import Clock, IdSource, SecretIds, utc_now
from runkernel.adapters.drive.runtime import Acknowledged, Drive, ModelFailed, Runtime, RuntimeEvent
from runkernel.adapters.stores.contract import CommitConflict, LeaseHeld, LeaseLost, Store, StoreError
from runkernel.adapters.worker.apps import AsyncPushApp, PushApp, RuntimeApp, WorkerApp
from runkernel.adapters.drive.lease_keeper import LeaseKeeper
from runkernel.kernel.state import Running

#: What a push app may set on the driver the worker builds for it (as ``Driver`` takes them).
_DRIVER_OPTIONS = ("gate", "max_steps", "on_indeterminate", "transient", "model_attempts", "fences")

#: Called by a worker when driving a Run failed (the host raised, or the store failed),
#: with the Run's id and the exception; the worker itself neither prints nor logs.
OnFailure = Callable[[str, BaseException], None]

#: The most polls ``run()`` skips a Run that keeps failing (doubled from 1 per failure).
MAX_SKIPPED_POLLS = 64


@define
class WorkerReport:
    """What a worker did (counts; printed by ``runkernel worker`` and the race test)."""

    drives: int = 0
    commits: int = 0
    #: leases taken on a Run some other worker had leased before (epoch > 1)
    takeovers: int = 0
    #: Runs another worker held when this one tried to take them
    contended: int = 0
    #: drives stopped because a commit lost (another writer won)
    conflicts: int = 0
    #: drives stopped because the lease was gone
    leases_lost: int = 0
    #: drives stopped by a store failure or an exception the host's tools, hooks, gate
    #: or push host raised (the Run is picked up again later)
    failures: int = 0
    #: model calls that raised (``ModelFailed``): each either waits for another attempt,
    #: nothing committed, or ends its Run failed
    model_failures: int = 0


def default_worker_id() -> str:
    """Unique per process: host, pid and 48 random bits."""
    return f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(6)}"


class Worker:
    """Drives every Run of ``app`` that has work, one at a time, under leases.

    ``Worker(store, app, worker_id=..., lease_duration=30.0, poll_interval=1.0)``;
    ``run_once()`` drives until nothing is runnable, ``run()`` polls until
    ``shutdown()``. One worker per thread of control (its store is its own).
    ``on_failure(run_id, error)`` hears of every failed drive (``runkernel worker``
    prints one line for it).
    """

    def __init__(
        self,
        store: Store,
        app: WorkerApp,
        *,
        worker_id: str | None = None,
        lease_duration: float = 30.0,
        lease_margin: float | None = None,
        poll_interval: float = 1.0,
        batch: int = 50,
        ids: IdSource | None = None,
        clock: Clock = utc_now,
        on_event: Callable[[RuntimeEvent], None] | None = None,
        on_failure: OnFailure | None = None,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        # monotonic: this process's clock for when to renew a lease and when a Run set
        # aside after a transient model error is due again (a test moves its own)
        self.store = store
        self.app = app
        self.worker_id = worker_id or default_worker_id()
        self.monotonic = monotonic
        self.leases = LeaseKeeper(
            store, self.worker_id, duration=lease_duration, margin=lease_margin, monotonic=monotonic
        )
        self.poll_interval = poll_interval
        self.batch = batch
        self.ids = ids or SecretIds()
        self.clock = clock
        self.report = WorkerReport()
        self._on_event = on_event
        self._on_failure = on_failure
        self._stopping = threading.Event()
        self._runtime = self._make_runtime() if isinstance(app, RuntimeApp) else None
        #: the event loop of an asyncio push app (an ``asyncio.Runner``, made at its first
        #: drive), and who runs it now: ``shutdown`` closes it only when nobody does
        self._async_runner: asyncio.Runner | None = None
        self._async_running = threading.Lock()
        #: pull-mode drives set aside while a model call backs off after a transient
        #: error, by Run, with when (``monotonic``) each is due again; their leases kept
        self._set_aside: dict[str, tuple[Drive, float]] = {}

    # --- public ---------------------------------------------------------------------

    @property
    def stopping(self) -> bool:
        """True once ``shutdown()`` was called."""
        return self._stopping.is_set()

    def shutdown(self) -> None:
        """Finish the commit in flight, start nothing new, release leases, return from
        ``run()``/``run_once()``, close the event loop of an asyncio app (now if no drive
        runs on it, else once ``run()``/``run_once()`` returns). Safe to call from a
        signal handler and from another thread, and more than once."""
        self._stopping.set()
        if self._async_running.acquire(blocking=False):
            try:
                self._close_async_loop()
            finally:
                self._async_running.release()

    def run_once(self) -> WorkerReport:
        """Drive Runs until none of this app has work this worker can make progress on;
        Runs that made no progress in this call (a reconnect tool still running) are
        not retried by it. An asyncio app's event loop stays open for the next call,
        until ``shutdown()``."""
        stalled: dict[str, int] = {}
        failed: set[str] = set()
        try:
            while not self.stopping:
                self._keep_set_aside()
                for run_id in [r for r, version in stalled.items() if self._version(r) != version]:
                    del stalled[run_id]  # it moved since (a command, another worker): work again
                found = self._due() + self._work(failed | stalled.keys() | self._set_aside.keys())
                if not found:
                    break
                for run_id in found:
                    if self.stopping:
                        break
                    before = self._version(run_id)
                    moved, failure = self._drive_tracked(run_id)
                    if failure:
                        failed.add(run_id)
                    elif not moved and run_id not in self._set_aside:
                        stalled[run_id] = before
        finally:
            self._release_leases()
            self._close_async_loop_if_stopping()
        return self.report

    def run(self) -> WorkerReport:
        """Poll for work and drive it until ``shutdown()``. With a store that offers
        ``wait_for_work(timeout)`` (PostgreSQL's LISTEN/NOTIFY), the wait between polls
        ends as soon as a Run is notified; polling stays the ground truth."""
        waiter: Callable[[float], object] | None = getattr(self.store, "wait_for_work", None)
        if waiter is not None:
            waiter(0.0)  # start listening before the first poll, so no wake-up is missed
        backoff = _Backoff()
        try:
            while not self.stopping:
                progressed = False
                backoff.next_poll()
                self._keep_set_aside()
                for run_id in self._due() + self._work(backoff.skipped() | self._set_aside.keys()):
                    if self.stopping:
                        break
                    moved, failure = self._drive_tracked(run_id)
                    backoff.record(run_id, failed=failure)
                    progressed = moved or progressed
                if not progressed and not self.stopping:
                    # nothing to do, or only Runs that cannot move yet (a reconnect
                    # tool still running, a model call backing off): wait a poll, or
                    # until the first Run set aside is due, instead of spinning on them
                    wait = self._until_due(self.poll_interval)
                    if waiter is not None:
                        waiter(wait)
                    else:
                        self._stopping.wait(wait)
        finally:
            self._release_leases()
            self._close_async_loop_if_stopping()
        return self.report

    def drive(self, run_id: str) -> None:
        """Lease ``run_id``, drive it until it is quiet (or this worker must stop),
        release the lease. Every refusal is counted, never raised: another worker (or
        a later poll) continues the Run from committed facts. A pull-mode Run whose model
        call backs off after a transient error is set aside instead, its lease kept, and
        ``run()``/``run_once()`` drive it on when its wait is over."""
        self.report.drives += 1
        resumed = run_id in self._set_aside
        held = self.leases.held(run_id)
        try:
            lease = self.leases.take(run_id)
        except LeaseHeld:
            self.report.contended += 1
            self._set_aside.pop(run_id, None)
            return
        except StoreError as error:
            self._set_aside.pop(run_id, None)
            self._failed(run_id, error)
            return
        if resumed and (held is None or held.epoch != lease.epoch):
            # its lease lapsed while it waited: whatever it believed may be stale
            self._set_aside.pop(run_id)
            resumed = False
        if lease.epoch > 1 and not resumed and self._taken_over(run_id):
            self.report.takeovers += 1
        try:
            if isinstance(self.app, RuntimeApp):
                self._drive_pull(run_id)
            else:
                self._drive_push(self.app, run_id)
        except CommitConflict:
            self.report.conflicts += 1
            self.leases.forget(run_id)
        except LeaseLost:
            self.report.leases_lost += 1
            self.leases.forget(run_id)
        except Exception as error:  # a store failure, or the host's hooks, gate or push host raised
            self._failed(run_id, error)
        finally:
            # the Run's lease, and those its drive took on the children it activated:
            # the children are work for the next poll (this worker's or another's); a
            # Run set aside keeps its lease
            self._release_leases()

    def _drive_tracked(self, run_id: str) -> tuple[bool, bool]:
        """Drive ``run_id``; whether anything was committed (to the Run, or to another:
        a quiet parent's drive commits only its children's activations), and whether
        the drive failed."""
        version, commits, failures = self._version(run_id), self.report.commits, self.report.failures
        self.drive(run_id)
        moved = self._version(run_id) != version or self.report.commits != commits
        return moved, self.report.failures != failures

    def _failed(self, run_id: str, error: BaseException) -> None:
        self.report.failures += 1
        if self._on_failure is not None:
            self._on_failure(run_id, error)

    # --- driving ----------------------------------------------------------------------

    def _make_runtime(self) -> Runtime:
        assert isinstance(self.app, RuntimeApp)
        return Runtime(
            self.store,
            self.app.model,
            self.app.tools,
            gate=self.app.gate,
            observer=self.app.observer,
            ids=self.ids,
            clock=self.clock,
            on_event=self._event,
            leases=self.leases,
            app=self.app.name,
            hooks=self.app.hooks,
            transient=self.app.transient,
            model_attempts=self.app.model_attempts,
        )

    def _drive_pull(self, run_id: str) -> None:
        assert self._runtime is not None
        aside = self._set_aside.pop(run_id, None)
        drive = aside[0] if aside is not None else self._runtime.begin_drive(run_id)
        while not drive.step():
            if drive.pause is not None:
                # a model call backs off: drive other Runs meanwhile, this one's lease kept
                self._set_aside[run_id] = (drive, self.monotonic() + drive.pause)
                return
            if self.stopping and not drive.commit_next():
                return  # the commit in flight is done; start nothing new

    def _drive_push(self, app: PushApp | AsyncPushApp, run_id: str) -> None:
        options: dict[str, Any] = {k: getattr(app, k) for k in _DRIVER_OPTIONS if hasattr(app, k)}
        options.update(ids=self.ids, clock=self.clock, leases=self.leases, app=app.name, on_event=self._push_event)
        driver: Driver | AsyncDriver | None = None
        try:
            if isinstance(app, AsyncPushApp):
                driver = AsyncDriver(self.store, app.tools, **options)
                with self._async_running:
                    self._async_loop().run(app.drive(driver, run_id))
            else:
                driver = Driver(self.store, app.tools, **options)
                app.serve(driver, driver.pick_up(run_id))
        except DriverStopped as stopped:
            cause = stopped.__cause__
            if isinstance(cause, (CommitConflict, LeaseLost)):
                raise cause from None
            raise  # counted and reported by ``drive``, like any other failure
        finally:
            self.report.commits += driver.commits if driver is not None else 0

    def _async_loop(self) -> asyncio.Runner:
        """The worker's one event loop for an asyncio app, made at its first drive (again
        only if a shutdown closed it and this worker is still asked to drive)."""
        if self._async_runner is None:
            self._async_runner = asyncio.Runner()
        return self._async_runner

    def _close_async_loop(self) -> None:
        runner, self._async_runner = self._async_runner, None
        if runner is not None:
            runner.close()  # cancels what the app left running, then closes the loop

    def _close_async_loop_if_stopping(self) -> None:
        if self.stopping:
            with self._async_running:
                self._close_async_loop()

    def _event(self, event: RuntimeEvent) -> None:
        if isinstance(event, Acknowledged):
            self.report.commits += 1
        self._push_event(event)

    def _push_event(self, event: RuntimeEvent) -> None:
        """A push driver's event (its commits are counted from the driver itself)."""
        if isinstance(event, ModelFailed):
            self.report.model_failures += 1
        if self._on_event is not None:
            self._on_event(event)

    # --- Runs set aside while a model call backs off ---------------------------------------

    def _due(self) -> list[str]:
        """The Runs set aside whose wait is over, the earliest first."""
        now = self.monotonic()
        return [r for r, (_, due) in sorted(self._set_aside.items(), key=lambda item: item[1][1]) if due <= now]

    def _until_due(self, longest: float) -> float:
        """Seconds until the first Run set aside is due, at most ``longest``."""
        if not self._set_aside:
            return longest
        first = min(due for _, due in self._set_aside.values())
        return max(0.0, min(longest, first - self.monotonic()))

    def _keep_set_aside(self) -> None:
        """Renew the lease of each Run set aside if its renewal is due: nothing is
        committed while it waits, and no other worker may take it meanwhile."""
        for run_id in list(self._set_aside):
            try:
                self.leases.for_commit(run_id)
            except LeaseLost:
                self.report.leases_lost += 1  # the Run is another worker's now
                self._set_aside.pop(run_id)
                self.leases.forget(run_id)
            except StoreError as error:
                self._set_aside.pop(run_id)
                self._failed(run_id, error)
                self.leases.release(run_id)

    def _release_leases(self) -> None:
        """Release every lease but those of Runs set aside (all of them once stopping)."""
        if self.stopping:
            self._set_aside.clear()
        for run_id in list(self.leases.held_runs()):
            if run_id not in self._set_aside:
                self.leases.release(run_id)

    # --- discovery ----------------------------------------------------------------------

    def _work(self, passed: Collection[str] = ()) -> list[str]:
        """Up to ``batch`` Runs with work, none of ``passed`` (Runs this worker sets aside:
        failing, or unable to move yet). The store lists the oldest first, so it is asked
        for as many more as are set aside: they never hide the Runs behind them."""
        found = self.store.runs_with_work(self.app.name, self.batch + len(passed))
        return [r for r in found if r not in passed][: self.batch]

    def _version(self, run_id: str) -> int:
        snapshot = self.store.run(run_id)
        return -1 if snapshot is None else snapshot.version

    def _taken_over(self, run_id: str) -> bool:
        """Whether the Run's last commit was written under another worker's lease."""
        snapshot = self.store.run(run_id)
        if snapshot is None or not isinstance(snapshot.state, Running):
            return False
        writer = self.store.writer_of(snapshot.thread_id, snapshot.version)
        return writer is not None and writer.worker_id != self.worker_id


class _Backoff:
    """Which Runs ``run()`` skips this poll: after its n-th failure in a row a Run sits
    out the next 2**(n-1) polls (at most ``MAX_SKIPPED_POLLS``); one good drive clears it."""

    def __init__(self) -> None:
        self.poll = 0
        self.failures: dict[str, int] = {}
        self.until: dict[str, int] = {}

    def next_poll(self) -> None:
        self.poll += 1
        # a Run whose last failure is long past (it ended, or another worker drove it)
        # is forgotten, so what this keeps is bounded by the Runs failing now
        for run_id in [r for r, until in self.until.items() if until + MAX_SKIPPED_POLLS < self.poll]:
            del self.until[run_id]
            del self.failures[run_id]

    def skipped(self) -> set[str]:
        """The Runs that sit out this poll."""
        return {run_id for run_id, until in self.until.items() if until >= self.poll}

    def record(self, run_id: str, *, failed: bool) -> None:
        if not failed:
            self.failures.pop(run_id, None)
            self.until.pop(run_id, None)
            return
        count = self.failures.get(run_id, 0) + 1
        self.failures[run_id] = count
        self.until[run_id] = self.poll + min(2 ** (count - 1), MAX_SKIPPED_POLLS)

