"""The worker: finds Runs of its app that have work, leases each, drives it until it is
quiet (the commit that makes it quiet releases the lease), in Workers and leases; the
CLI's ``runkernel worker``.

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
nothing new, releases every lease, and ``run()`` returns; it only asks, on a flag that
is safe to raise in a signal handler and wakes every wait of the worker (``stop_flag``).
A push app's drive is ``push_drive``'s; an asyncio push app runs in one event loop per
worker (``app_loop``).

An exception the host's tools, hooks, gate or push host raise never stops the worker:
the drive is counted in ``failures`` and handed to ``on_failure``, the lease is
released, and the Run waits its turn behind the others (not again in the same
``run_once()``; skipped by ``run()`` for 1, 2, 4 ... polls after each failure in a row).
A tool's exception is its call's outcome (``ToolRaised``), and the model's is decided
by the one interpreter (``model_errors``): a transient one commits nothing, and the
pull-mode Run is set aside for its backoff (``set_aside``), its lease kept and renewed
while the worker drives other Runs, then driven on by the same drive (whose count of
attempts restarts when another worker takes the Run over); a non-transient one, or the
last attempt's, ends the Run ``failed``. ``run_once()`` returns while only Runs set
aside remain, keeping them and their leases; ``shutdown()`` releases them.

With more than one slot (``concurrency``), ``run()`` and ``run_once()`` hand the Runs
they find to the slots (``slots``), each a serial worker of this class on its own store;
``start()`` runs ``run()`` in a background thread (the embedded worker).

Why this module is long: the ``Worker`` is the one object a user holds, and its serial
passes, the hooks its slots and their dispatcher call, and the embedded thread all act
on the same state (its leases, report, stop flag and outage); split into mixins, that
state would be declared in one module and changed in three.
"""

from __future__ import annotations

import math
import os
import secrets
import socket
import threading
import time
from collections.abc import Callable, Collection

import attrs

from runkernel.adapters.drive.ports import Clock, IdSource, SecretIds, utc_now
from runkernel.adapters.drive.events import ToolRaised
from runkernel.adapters.drive.runtime import Acknowledged, ModelFailed, Runtime, RuntimeEvent
from runkernel.adapters.stores.contract import CommitConflict, Lease, LeaseHeld, LeaseLost, Store, StoreError, StoreUnavailable
from runkernel.adapters.worker.account import WorkerReport as WorkerReport
from runkernel.adapters.worker.account import (
    ended_since_listed, in_flight_after, store_outage_in, taken_over, version_of,
)
from runkernel.adapters.worker.app_loop import AppLoop, SharedAppLoop
from runkernel.adapters.worker.listing import Listing, Walk
from runkernel.adapters.worker.apps import AsyncPushApp, HostOptions, PushApp, RuntimeApp, WorkerApp, app_runtime
from runkernel.adapters.worker.apps import version_of as app_version_of
from runkernel.adapters.worker.presence import Presence
from runkernel.adapters.worker.outage import MAX_SKIPPED_POLLS as MAX_SKIPPED_POLLS, OutageEvent, RunBackoff, StoreOutage
from runkernel.adapters.worker.push_drive import drive_push
from runkernel.adapters.worker.set_aside import SetAside
from runkernel.adapters.worker.slots import Finished, Slots
from runkernel.adapters.worker.stop_flag import StopFlag
from runkernel.adapters.drive.lease_keeper import LeaseKeeper
from runkernel.adapters.drive.telemetry import NO_TELEMETRY, Telemetry
from runkernel.kernel.state import EndCause, Ended
from runkernel.kernel.values import EndCauseKind

#: Called by a worker when driving a Run failed (the host raised, or the store refused),
#: with the Run's id and the exception; the worker itself neither prints nor logs.
OnFailure = Callable[[str, BaseException], None]

#: Called by a worker when one of its drives ended a Run ``failed``, with the Run's id
#: and the committed cause (its ``error`` says why), unless a ``ModelFailed`` event
#: already said the Run ends.
OnRunFailed = Callable[[str, EndCause], None]


def default_worker_id() -> str:
    """Unique per process: host, pid and 48 random bits."""
    return f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(6)}"


#: The longest a worker waits between two heartbeats in the worker registry (seconds of
#: its own clock), whatever its lease duration: well inside ``versions.LIVE_WINDOW``.
HEARTBEAT_INTERVAL = 15.0

#: How many Runs a worker drives at once unless told otherwise.
DEFAULT_CONCURRENCY = 32

#: The longest slice of a store's LISTEN wait (seconds): how long a ``shutdown()`` may
#: wait for a worker that listens for work to see it.
LISTEN_SLICE = 0.1


class Worker:
    """Drives every Run of ``app`` that has work, up to ``concurrency`` at once, under
    leases.

    ``Worker(store, app, concurrency=32, lease_duration=30.0, poll_interval=1.0)``;
    ``run_once()`` drives until nothing is runnable, ``run()`` polls until
    ``shutdown()``, ``start()`` runs ``run()`` in a background thread of the
    application's own process until ``stop()`` (the embedded worker). Each Run in flight
    has a slot: a thread driving it through its own ``store.reopen()`` (``slots``), so a
    slow model or tool in one Run never delays another; ``concurrency=1`` drives one Run
    at a time on ``store`` itself, in the calling thread. The callbacks are called from
    the slot's thread.
    ``on_failure(run_id, error)`` hears of every failed drive, ``on_run_failed(run_id,
    cause)`` of every Run a drive ended ``failed``, and ``on_outage(event)`` when the
    store stops answering and when it answers again (``runkernel worker`` prints one
    line for each). ``telemetry`` is told what each drive does, its lease take-overs and
    failed drives (``runkernel.integrations.otel.OpenTelemetry()`` for traces and
    metrics); the default records nothing.
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
        on_run_failed: OnRunFailed | None = None,
        on_outage: Callable[[OutageEvent], None] | None = None,
        monotonic: Callable[[], float] = time.monotonic,
        telemetry: Telemetry | None = None,
        concurrency: int = DEFAULT_CONCURRENCY,
    ) -> None:
        # monotonic: this process's clock to renew leases and for Runs set aside (a test's own)
        if isinstance(concurrency, bool) or not isinstance(concurrency, int) or concurrency < 1:
            raise ValueError(f"concurrency must be a whole number of Runs, at least 1, not {concurrency!r}")
        self.store = store
        self.concurrency = concurrency
        self.app = app
        #: the version of the app's code this worker drives (``apps.version_of``): it
        #: finds only the Runs that version may drive
        self.version = app_version_of(app)
        self.worker_id = worker_id or default_worker_id()
        self.monotonic = monotonic
        self._options = (lease_duration, lease_margin, batch)
        self.leases = LeaseKeeper(store, self.worker_id, duration=lease_duration, margin=lease_margin, monotonic=monotonic)
        self.poll_interval = poll_interval
        self.batch = batch
        #: this worker's entry in the store's worker registry (``presence``)
        self.presence = Presence(
            store, self.worker_id, app.name, self.version, min(lease_duration / 2, HEARTBEAT_INTERVAL), monotonic
        )
        self._listing = Listing(self.worker_id)
        self.ids = ids or SecretIds()
        self.clock = clock
        self.report = WorkerReport()
        self._on_event, self._on_failure, self._on_run_failed = on_event, on_failure, on_run_failed
        self.telemetry = telemetry or NO_TELEMETRY
        #: whether the store answers (W6): one report when an outage begins, one when it ends
        self.outage = StoreOutage(on_outage, monotonic=monotonic)
        #: the Run being driven now, and what its drive waits for (for the operator)
        self.current_run: str | None = None
        self._in_flight = ""
        #: the drive's acknowledged commits (any Run's: a child's activation too), its ended Runs' causes
        self._acknowledged, self._ends = 0, dict[str, EndCause]()
        #: Runs whose end ``failed`` a ``ModelFailed`` event already told, this drive
        self._end_told: set[str] = set()
        self._stop = StopFlag()
        self._runtime = self._make_runtime() if isinstance(app, RuntimeApp) else None
        #: the event loop of an asyncio push app, made at its first drive (its slots share one)
        self._app_loop = AppLoop() if concurrency == 1 else SharedAppLoop()
        #: a worker of one slot heartbeats with its commits (not a slot of another's)
        self._beats_with_commits = concurrency == 1
        #: the slots of the ``run()`` or ``run_once()`` under way, and the embedded worker's thread
        self._slots: Slots | None = None
        self._thread: threading.Thread | None = None
        self._ended: BaseException | None = None
        self._owns_store = False
        #: pull-mode drives set aside while a model call backs off, their leases kept
        self._set_aside = SetAside(self.leases, monotonic)

    # --- public ---------------------------------------------------------------------

    @property
    def stopping(self) -> bool:
        """True once ``shutdown()`` was called."""
        return self._stop.requested

    def shutdown(self) -> None:
        """Finish the commit in flight, start nothing new, release leases, return from
        ``run()``/``run_once()``, and close the event loop of an asyncio app when they
        return (``stop()`` closes it if neither runs). It only asks, and wakes the
        worker's waits at once (``stop_flag``): it takes no lock and sets no event, so it
        is safe to call from a signal handler, from another thread, and more than once."""
        self._stop.request()

    def report_so_far(self) -> WorkerReport:
        """The report's figures now, while ``run()`` or ``run_once()`` runs (``report``
        gets the slots' counts, the in-flight peak and the outages only when it returns):
        a copy, safe to read from another thread."""
        slots = self._slots
        report = slots.counted() if slots is not None else attrs.evolve(self.report)
        report.outages = self.outage.count
        return report

    def waiting_for(self) -> str:
        """What the worker waits for before it can stop (one phrase, for the operator)."""
        if self._slots is not None:
            return self._slots.waiting_for()
        if self.current_run is None:
            return "no Run is being driven"
        return f"waiting for run {self.current_run}: {self._in_flight or 'the step in flight and its commit'}"

    def run_once(self) -> WorkerReport:
        """Drive Runs until none of this app has work this worker can make progress on;
        Runs that made no progress in this call (a reconnect tool still running) are
        not retried by it. An asyncio app's event loop stays open for the next call,
        until ``stop()`` (or a call after ``shutdown()``). A store outage is ridden out
        (``outage``)."""
        if self.concurrency > 1:
            return self._in_slots(once=True)
        stalled: dict[str, int] = {}
        failed: set[str] = set()
        try:
            while self._after_outage_delay():
                self.outage.begin_pass()
                found: Walk | list[str] = []
                try:
                    self._set_aside.keep(self.report, self._failed)
                    for run_id in [r for r, version in stalled.items() if version_of(self.store.run(r)) != version]:
                        del stalled[run_id]  # it moved since (a command, another worker): work again
                    found = self._work(failed | stalled.keys() | self._set_aside.runs())
                    self.outage.answered()  # the store is back: an outage ends here, once
                    for run_id in found:
                        if self.stopping or self.outage.hit:
                            break
                        moved, failure, before = self._drive_tracked(run_id)
                        if failure:
                            failed.add(run_id)
                        elif not moved and run_id not in self._set_aside and not self.outage.hit:
                            stalled[run_id] = before
                except StoreUnavailable as error:
                    self.outage.failed(error)
                self.outage.end_pass()
                if not self.outage.active and not found:
                    break
        finally:
            self._set_aside.release_others(stopping=self.stopping)
            self.presence.leave()
            self._close_app_loop_if_stopping()
            self.report.outages = self.outage.count
        return self.report

    def run(self) -> WorkerReport:
        """Poll for work and drive it until ``shutdown()``. With a store that offers
        ``wait_for_work(timeout)`` (PostgreSQL's LISTEN/NOTIFY), the wait between polls
        ends as soon as a Run is notified; polling stays the ground truth."""
        if self.concurrency > 1:
            return self._in_slots(once=False)
        waiter: Callable[[float], object] | None = getattr(self.store, "wait_for_work", None)
        backoff = RunBackoff()
        listening = False
        try:
            while self._after_outage_delay():
                progressed = False
                self.outage.begin_pass()
                try:
                    if waiter is not None and not listening:
                        waiter(0.0)  # start listening before the poll, so no wake-up is missed
                        listening = True
                    backoff.next_poll()
                    self._set_aside.keep(self.report, self._failed)
                    found = self._work(backoff.skipped() | self._set_aside.runs())
                    self.outage.answered()  # the store is back: an outage ends here, once
                    for run_id in found:
                        if self.stopping or self.outage.hit:
                            break
                        moved, failure, _ = self._drive_tracked(run_id)
                        backoff.record(run_id, failed=failure)
                        progressed = moved or progressed
                except StoreUnavailable as error:
                    self.outage.failed(error)
                self.outage.end_pass()
                if progressed or self.stopping or self.outage.active:
                    continue
                # nothing to do, or only Runs that cannot move yet (a reconnect tool still
                # running, a model call backing off): wait a poll, or until the first Run
                # set aside is due, instead of spinning on them
                wait = self._set_aside.until_due(self.poll_interval)
                try:
                    if waiter is not None:
                        self._listen(waiter, wait)
                    else:
                        self._stop.wait(wait)
                except StoreUnavailable as error:
                    self.outage.failed(error)
                if self.outage.active:
                    listening = False  # the listener dropped with the store: listen again first
        finally:
            self._set_aside.release_others(stopping=self.stopping)
            self.presence.leave()
            self._close_app_loop_if_stopping()
            self.report.outages = self.outage.count
        return self.report

    def start(self) -> None:
        """Run ``run()`` in a background thread of this process (the embedded worker):
        the Runs of ``app`` that crashed or wait for a resume are driven on without a
        ``runkernel worker``. A background thread cannot take signals: call ``stop()``
        from the application's own shutdown (a FastAPI lifespan, ``atexit``)."""
        if self._thread is not None:
            raise RuntimeError(f"worker {self.worker_id} is already started")
        self._thread = threading.Thread(target=self._run_embedded, name=f"runkernel worker {self.app.name}", daemon=True)
        self._thread.start()

    def stop(self, timeout: float | None = None) -> WorkerReport:
        """``shutdown()``, then wait (up to ``timeout`` seconds; None: as long as it
        takes) for what it asks: the commits in flight finish, nothing new starts, every
        lease is released, an asyncio app's event loop is closed. Returns the report;
        raises what stopped the worker's thread, if anything did; ``TimeoutError`` if it
        is still stopping."""
        self.shutdown()
        if self._thread is not None:
            self._thread.join(timeout)
            if self._thread.is_alive():
                raise TimeoutError(f"worker {self.worker_id} is still stopping: {self.waiting_for()}")
        if self._slots is None:  # a ``run()`` under way closes it as it returns
            self._app_loop.close_unless_running()
        ended, self._ended = self._ended, None
        if ended is not None:
            raise ended
        return self.report

    def _run_embedded(self) -> None:
        try:
            self.run()
        except BaseException as error:  # noqa: BLE001 - raised again by stop()
            self._ended = error

    def _in_slots(self, *, once: bool) -> WorkerReport:
        self._slots = Slots(self)
        try:
            self._slots.drain(once=once)
        finally:
            self._slots = None
            self.presence.leave()
            self._close_app_loop_if_stopping()
            self.report.outages = self.outage.count
        return self.report

    # --- what a slot and its dispatcher ask (``slots``) -----------------------------------

    def _slot_worker(self) -> Worker:
        """A serial worker for a new slot: this worker's id, options, stop flag, outage and
        event loop, on a store of its own."""
        duration, margin, batch = self._options
        slot = Worker(
            self.store.reopen(),
            self.app,
            worker_id=self.worker_id,
            lease_duration=duration,
            lease_margin=margin,
            poll_interval=self.poll_interval,
            batch=batch,
            ids=self.ids,
            clock=self.clock,
            on_event=self._on_event,
            on_failure=self._on_failure,
            on_run_failed=self._on_run_failed,
            monotonic=self.monotonic,
            telemetry=self.telemetry,
            concurrency=1,
        )
        slot._stop, slot.outage, slot._app_loop = self._stop, self.outage, self._app_loop
        slot._beats_with_commits = False  # the dispatcher's renewal rounds heartbeat for it
        slot._owns_store = slot.store is not self.store  # a store shared as itself stays open
        return slot

    def _serve(self, run_id: str, taken: tuple[Lease, float] | None) -> Finished:
        """A slot's drive of ``run_id``: until it is quiet, waiting out a model call's
        backoff with its lease kept and renewed. ``taken``: the lease the dispatcher took
        for it (``Slots``), and when."""
        if taken is not None:
            self.leases.adopt(*taken)
        if self.stopping:  # handed over just before shutdown(): start nothing new
            self._set_aside.release_others(stopping=True)
            return Finished(run_id, False, False, -1)
        contended, failures = self.report.contended, self.report.failures
        try:
            moved, failed, before = self._drive_tracked(run_id)
            while run_id in self._set_aside and not self.stopping:
                self._stop.wait(self._set_aside.until_due(self.poll_interval))
                try:
                    self._set_aside.keep(self.report, self._failed)
                    if run_id in self._set_aside.due() and not self.stopping:
                        again, failed_again, _ = self._drive_tracked(run_id)
                        moved, failed = moved or again, failed or failed_again
                except StoreUnavailable as error:
                    self.outage.failed(error, drive=True)
                    self._stop.wait(self.outage.delay())  # the store is out: never a busy loop
        finally:
            # a Run this slot no longer drives keeps no lease (a failure above, or shutdown;
            # one taken for it that its drive never reached too: the rounds would renew it)
            self._set_aside.release_others(stopping=True)
        failed = failed or self.report.failures != failures
        return Finished(run_id, moved, failed, before, contended=self.report.contended != contended)

    def _close_slot(self) -> None:
        self._set_aside.release_others(stopping=True)
        if self._owns_store:
            self.store.close()

    def _listed(self, passed: Collection[str]) -> list[str]:
        return list(self._work(passed))

    def _idle(self, seconds: float, listen: bool) -> None:
        waiter: Callable[[float], object] | None = getattr(self.store, "wait_for_work", None) if listen else None
        if waiter is not None:
            self._listen(waiter, seconds)
        elif seconds > 0:
            self._stop.wait(seconds)

    def _listen(self, waiter: Callable[[float], object], seconds: float) -> None:
        """The store's LISTEN wait, up to ``seconds``: in slices, since ``shutdown()``
        cannot reach into the store's own wait (a signal only interrupts it to run the
        handler, and it waits on), so a shutdown is seen within one slice. A wait that
        returns a notification (or starts listening: no seconds) ends at once."""
        slices = max(1, math.ceil(seconds / LISTEN_SLICE))
        for index in range(slices):
            if self.stopping or waiter(min(LISTEN_SLICE, seconds - index * LISTEN_SLICE)):
                return

    def _met_another(self) -> None:
        self._listing.met_another()

    def _heartbeat(self) -> None:
        self.presence.beat()

    def _after_outage_delay(self) -> bool:
        """Whether to make another pass: not stopping, after the outage's backoff if the
        store is out (a wait that ``shutdown()`` cuts short)."""
        if self.outage.active and not self.stopping:
            self._stop.wait(self.outage.delay())
        return not self.stopping

    def drive(self, run_id: str) -> None:
        """Lease ``run_id``, drive it until it is quiet (or this worker must stop),
        release the lease. Every refusal is counted, never raised: another worker (or
        a later poll) continues the Run from committed facts. A pull-mode Run whose model
        call backs off after a transient error is set aside instead, its lease kept, and
        ``run()``/``run_once()`` drive it on when its wait is over."""
        self.report.drives += 1
        self.report.in_flight_peak = max(self.report.in_flight_peak, 1)
        resumed = run_id in self._set_aside
        held = self.leases.held(run_id)
        try:
            if held is not None and not resumed:
                lease = held  # taken for this drive by its dispatcher, with others (``Slots``)
            else:
                lease = self.leases.take(run_id) if resumed else self.leases.take_and_pick_up(run_id)
        except LeaseHeld:
            self.report.contended += 1
            self._listing.met_another()
            self._set_aside.take(run_id)
            return
        except StoreError as error:
            self._set_aside.take(run_id)
            self._failed(run_id, error)
            return
        self.current_run, self._in_flight = run_id, ""
        if resumed and (held is None or held.epoch != lease.epoch):
            # its lease lapsed while it waited: whatever it believed may be stale
            self._set_aside.take(run_id)
            resumed = False
        try:
            if lease.epoch > 1 and not resumed and taken_over(self.store, run_id, self.worker_id):
                self.report.takeovers += 1
                self.telemetry.taken_over(run_id, lease.epoch)
            if isinstance(self.app, RuntimeApp):
                self._drive_pull(run_id)
            else:
                self._drive_push(self.app, run_id)
        except CommitConflict as conflict:
            self.report.conflicts += 1
            self.telemetry.drive_failed(run_id, "conflict", conflict)
            self.leases.forget(run_id)
        except LeaseHeld:
            # its quiet commit gave the lease up, and another worker took the Run (for
            # a command that came meanwhile) before this drive could take it again
            self.report.contended += 1
        except LeaseLost as lost:
            self.report.leases_lost += 1
            self.telemetry.drive_failed(run_id, "lease_lost", lost)
            self.leases.forget(run_id)
        except Exception as error:  # a store failure, or the host's hooks, gate or push host raised
            self._failed(run_id, error)
        finally:
            self.current_run = None
            # the Run's lease, and those its drive took on the children it activated:
            # the children are work for the next poll (this worker's or another's); a
            # Run set aside keeps its lease
            self._set_aside.release_others(stopping=self.stopping)

    def _drive_tracked(self, run_id: str) -> tuple[bool, bool, int]:
        """Drive ``run_id``; whether anything was committed (to the Run, or to another:
        a quiet parent's drive commits only its children's activations), whether the
        drive failed, and the Run's version before it. A Run the drive ended ``failed``
        is counted and reported."""
        before, failures = self.store.run(run_id), self.report.failures
        if run_id not in self._set_aside and ended_since_listed(self.store, before):
            return False, False, version_of(before)
        self._end_told.discard(run_id)
        # what the drive committed is told by its acknowledgements: no read after it
        self._acknowledged, self._ends = 0, {}
        self.drive(run_id)
        cause = self._ends.get(run_id)
        if cause is not None and cause.kind is EndCauseKind.FAILED:
            self.report.runs_failed += 1
            if self._on_run_failed is not None and run_id not in self._end_told:
                self._on_run_failed(run_id, cause)
        return self._acknowledged > 0, self.report.failures != failures, version_of(before)

    def _failed(self, run_id: str, error: BaseException) -> None:
        outage = store_outage_in(error)
        if outage is not None:
            # the store stopped answering: one report for the whole outage, not one per
            # drive; the Run continues from committed facts once it answers again
            self.report.interrupted += 1
            self.outage.failed(outage, drive=True)
            return
        self.report.failures += 1
        self.telemetry.drive_failed(run_id, "error", error)
        if self._on_failure is not None:
            self._on_failure(run_id, error)

    # --- driving ----------------------------------------------------------------------

    def _make_runtime(self) -> Runtime:
        assert isinstance(self.app, RuntimeApp)
        return app_runtime(self.app, self.store, self._host(self._event))

    def _host(self, on_event: Callable[[RuntimeEvent], None]) -> HostOptions:
        return HostOptions(self.ids, self.clock, on_event, self.leases, self.telemetry)

    def _drive_pull(self, run_id: str) -> None:
        assert self._runtime is not None
        drive = self._set_aside.take(run_id) or self._runtime.begin_drive(run_id)
        while not drive.step():
            if drive.pause is not None:
                # a model call backs off: drive other Runs meanwhile, this one's lease kept
                self._set_aside.put(run_id, drive, drive.pause)
                return
            if self.stopping and not drive.finish_in_flight():
                return  # the commits and tools in flight are done; start nothing new

    def _drive_push(self, app: PushApp | AsyncPushApp, run_id: str) -> None:
        drive_push(self.store, app, run_id, self._app_loop, self.report, self._host(self._push_event))

    def _close_app_loop_if_stopping(self) -> None:
        if self.stopping:
            self._app_loop.close()

    def _event(self, event: RuntimeEvent) -> None:
        if isinstance(event, Acknowledged):
            self.report.commits += 1
        self._push_event(event)

    def _beat_with_commit(self) -> None:
        """One slot: no dispatcher's renewal rounds heartbeat while a long drive runs, so
        its acknowledged commits do (when one is due: at most once per interval)."""
        if self._beats_with_commits:
            self.presence.beat()

    def _push_event(self, event: RuntimeEvent) -> None:
        """A push driver's event (its commits are counted from the driver itself)."""
        if isinstance(event, ModelFailed):
            self.report.model_failures += 1
            if event.retry_after is None:
                self._end_told.add(event.run_id)  # it said the Run ends failed
        elif isinstance(event, ToolRaised):
            self.report.tool_exceptions += 1
        elif isinstance(event, Acknowledged):
            self._in_flight = in_flight_after(event)
            self._acknowledged += 1
            self._beat_with_commit()
            if isinstance(event.commit.disposition, Ended):
                self._ends[event.commit.run_id] = event.commit.disposition.cause
        if self._on_event is not None:
            self._on_event(event)

    def _work(self, passed: Collection[str] = ()) -> Walk:
        """The Runs set aside now due, then up to ``batch`` Runs with work that this worker's
        version may drive, none of ``passed`` (set aside: failing, or unable to move yet),
        in this worker's order (``listing``).
        The store lists the oldest first, asked for as many more as ``passed`` hides."""
        self.presence.beat()  # each poll, at most once per heartbeat interval
        found = self.store.runs_with_work(self.app.name, self.batch + len(passed), version=self.version)
        return self._listing.walk(self._set_aside.due(), found, passed, self.batch)
