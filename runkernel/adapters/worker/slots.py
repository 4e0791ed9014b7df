"""A worker's slots (Workers and leases: many Runs in flight): up to ``concurrency``
Runs driven at once, each in a slot of its own, so a Run that waits on a slow model or
tool never delays another.

A slot is a thread with a serial worker of its own, on its own store instance
(``Store.reopen()``: a connection, and the memos of what that instance wrote, are never
shared between drives), under the worker's one id: the leases are the worker's,
whichever slot holds them. The dispatcher (the thread that called ``run()`` or
``run_once()``) polls for work with the worker's own store and hands each Run found to a
free slot; a Run is in at most one slot at a time. Slots open as work needs them.

**Take-over has a slot of its own.** When every slot is busy with a long drive, a Run
whose lease expired under another worker (orphaned: W2) would wait behind them. So one
more slot, the reserve, drives only such Runs: one is taken over within its lease's
expiry plus one poll, however busy the others are. ``in_flight_peak`` counts it too: at
most ``concurrency + 1``.

**Leases, together** (``together``): the leases of the Runs handed out at once are taken,
and those of every Run in flight renewed, one statement for all.

**Shutdown.** ``shutdown()`` reaches every slot (they share the worker's stop flag):
each finishes the commit in flight, starts nothing new and releases its leases; the
dispatcher waits for them, then returns. An exception a slot's drive did not contain
(a simulated crash) stops the other slots the same way and is raised by ``run()``.
A slot waits out a model call's backoff itself, its lease kept and renewed.

Why this module is long: the dispatcher's passes, its hand-overs to the slots and the
counts it sums for the report (``counted``, while they drive) act on one state, the Runs
in flight and the slots; split, it would be kept in one module and changed in another.
"""

from __future__ import annotations

import collections
import queue
import threading
from collections.abc import Callable, Collection, Sequence
from typing import Protocol

import attrs
from attrs import frozen

from runkernel.adapters.drive.lease_keeper import LeaseKeeper
from runkernel.adapters.stores.contract import Lease, LeaseStatus, Store, StoreError, StoreUnavailable
from runkernel.adapters.worker.account import WorkerReport, add_slots, version_of
from runkernel.adapters.worker.outage import RunBackoff, StoreOutage
from runkernel.adapters.worker.together import RenewalRounds, Taken, take_together


@frozen
class Finished:
    """How one slot's drive of ``run_id`` went: whether it committed anything, whether it
    failed, the Run's version before it, and what killed the slot (None: it lives)."""

    run_id: str
    moved: bool
    failed: bool
    before: int
    #: the Run was leased by another worker when the slot tried to take it
    contended: bool = False
    death: BaseException | None = None


class SlotWorker(Protocol):
    """What a slot needs of the serial worker it drives with."""

    report: WorkerReport
    leases: LeaseKeeper

    def _serve(self, run_id: str, taken: tuple[Lease, float] | None) -> Finished:
        """Drive ``run_id`` until it is quiet; under ``taken`` (a lease, when), if given."""

    def waiting_for(self) -> str:
        """What its drive waits for (one phrase)."""

    def _close_slot(self) -> None:
        """Release every lease it holds and close its own store."""


class Dispatching(Protocol):
    """What the dispatcher needs of the worker it serves."""

    store: Store
    worker_id: str
    leases: LeaseKeeper
    concurrency: int
    poll_interval: float
    report: WorkerReport
    outage: StoreOutage
    monotonic: Callable[[], float]

    @property
    def stopping(self) -> bool:
        """Whether ``shutdown()`` was called."""

    def _slot_worker(self) -> SlotWorker:
        """A serial worker for a new slot, on its own store instance."""

    def _listed(self, passed: Collection[str]) -> list[str]:
        """Runs with work, in this worker's order, none of ``passed``."""

    def _after_outage_delay(self) -> bool:
        """Whether to make another pass (after an outage's backoff)."""

    def _idle(self, seconds: float, listen: bool) -> None:
        """Wait up to ``seconds`` for work (or ``shutdown()``)."""

    def _met_another(self) -> None:
        """A slot found a Run leased by another worker (``listing``)."""

    def _heartbeat(self) -> None:
        """Heartbeat in the store's worker registry, if one is due (``presence``)."""

    def shutdown(self) -> None:
        """Stop every slot: the commit in flight finishes, nothing new starts."""


class _Slot:
    """One slot's thread: takes Runs from ``jobs`` until it is given None."""

    def __init__(self, owner: Dispatching, jobs: queue.SimpleQueue[Taken | None], done: queue.Queue[Finished], name: str) -> None:
        self.owner, self.jobs, self.done = owner, jobs, done
        self.worker: SlotWorker | None = None
        self.busy_with: str | None = None
        #: drives that failed because the slot's store could not be opened (refused)
        self.refused = 0
        self.thread = threading.Thread(target=self._serve, name=name, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        try:
            while (job := self.jobs.get()) is not None:
                self.busy_with = job[0]
                self.done.put(self._drive(*job))
                self.busy_with = None
        finally:
            if self.worker is not None:
                self.worker._close_slot()

    def _drive(self, run_id: str, taken: tuple[Lease, float] | None) -> Finished:
        try:
            if self.worker is None:
                self.worker = self.owner._slot_worker()
            return self.worker._serve(run_id, taken)
        except StoreUnavailable as error:  # the slot's store could not be opened
            self.owner.outage.failed(error, drive=True)
            return Finished(run_id, False, False, -1)
        except StoreError:
            self.refused += 1
            return Finished(run_id, False, True, -1)
        except BaseException as death:  # noqa: BLE001 - handed to the dispatcher, which raises it
            return Finished(run_id, False, True, -1, death=death)


class Slots:
    """The slots of one ``run()`` or ``run_once()`` of a worker, and its dispatcher."""

    def __init__(self, owner: Dispatching) -> None:
        self.owner = owner
        self._jobs: queue.SimpleQueue[Taken | None] = queue.SimpleQueue()
        self._reserve_jobs: queue.SimpleQueue[Taken | None] = queue.SimpleQueue()
        # not a SimpleQueue: CPython 3.11's get(timeout) waits for ever once a signal handler
        # run meanwhile on this thread outlasts the timeout (polls, renewals stop)
        self._done: queue.Queue[Finished] = queue.Queue()
        self._slots: list[_Slot] = []
        self._reserve: _Slot | None = None
        #: Runs in flight: whether each is in the reserve slot
        self.in_flight: dict[str, bool] = {}
        self.peak = 0
        #: Runs whose drive made no progress: they sit out polls until this time
        self._resting: dict[str, float] = {}
        #: Runs listed by the last poll and not handed to a slot yet
        self._backlog: collections.deque[str] = collections.deque()
        self._once = False
        self._backoff = RunBackoff()
        #: ``run_once()``: Runs whose drive failed, and those that made no progress (their version then)
        self._failed: set[str] = set()
        self._stalled: dict[str, int] = {}
        #: what killed a slot, raised once every slot stopped
        self._death: BaseException | None = None
        #: an outage's end, pending: the drives in flight when the store answered again,
        #: and the outage's count of failures then
        self._settling: tuple[set[str], int] | None = None
        #: the leases of the Runs in flight, renewed together
        self.renewals = RenewalRounds(owner.store, owner.leases, owner.monotonic)
        #: polls whose Runs' leases were taken together (for tests)
        self.takes_together = 0
        #: held while the slots' counts are summed, so a sum never counts one twice
        self._summing = threading.Lock()
        self._summed = False

    # --- the dispatcher -------------------------------------------------------------

    def drain(self, *, once: bool) -> None:
        """Drive until nothing is runnable (``once``) or until ``shutdown()``.

        ``once`` passes over Runs whose drive failed, and Runs whose drive made no
        progress until they move (as the serial ``run_once()`` does); ``run()`` skips a
        failing Run for a growing number of polls (``RunBackoff``) and rests a Run that
        made no progress (a reconnect tool still running) until the next poll. A store
        outage ends once a poll answered and the drives in flight then finished without
        meeting it (a SQLite lock lets reads through while writes fail); meanwhile the
        dispatcher goes on polling and filling slots."""
        owner = self.owner
        self._once = once
        need_poll, listening, last_poll = True, False, float("-inf")
        try:
            while self._death is None and ((self._settling is not None and not owner.stopping) or owner._after_outage_delay()):
                polled_now, failures = False, owner.outage.failures
                owner.outage.begin_pass()
                try:
                    if need_poll and self._can_take():
                        if not once and not listening:
                            owner._idle(0.0, listen=True)  # listen before the poll: no wake-up missed
                            listening = True
                        self._backlog = collections.deque(owner._listed(self._passed()))
                        need_poll, polled_now, last_poll = False, True, owner.monotonic()
                    self._fill()
                    self.renewals.renew(slot.worker.leases for slot in self._all_slots() if slot.worker is not None)
                    owner._heartbeat()  # with the renewal rounds, while drives run long
                except StoreUnavailable as error:
                    owner.outage.failed(error)
                    listening = False
                self._settle_outage(polled_now and owner.outage.failures == failures)
                if owner.outage.active and self._settling is None:
                    need_poll = True
                    continue
                if once and polled_now and not self._backlog and not self.in_flight:
                    return
                # until the next poll is due; with no slot to fill, until a drive finishes
                wait = max(0.0, last_poll + owner.poll_interval - owner.monotonic()) if self._can_take() else owner.poll_interval
                if self.in_flight:
                    self._collect(min(wait, self.renewals.due_in()))
                elif not once:
                    # nothing in flight: a poll that found nothing waits a whole interval
                    try:
                        owner._idle(owner.poll_interval if polled_now else wait, listen=listening)
                    except StoreUnavailable as error:  # the listener dropped with the store
                        owner.outage.failed(error)
                        listening, need_poll = False, True
                        continue
                need_poll = need_poll or not self._backlog or owner.monotonic() >= last_poll + owner.poll_interval
        finally:
            if self._death is not None:
                owner.shutdown()  # the process is meant to die: every other slot stops too
            self._close()
        if self._death is not None:
            raise self._death

    def _settle_outage(self, answered: bool) -> None:
        """An outage under way ends once the store answered a poll and every drive then in
        flight finished without meeting it; a drive that meets it again keeps it going."""
        outage = self.owner.outage
        if not outage.active:
            self._settling = None
            return
        if self._settling is None:
            if answered:
                self._settling = (set(self.in_flight), outage.failures)
            return
        waiting_on, failures = self._settling
        if outage.failures != failures:
            self._settling = None  # met again: the outage goes on, its backoff too
        elif not waiting_on & self.in_flight.keys():
            self._settling = None
            outage.end_pass()

    def _passed(self) -> set[str]:
        """The Runs a poll leaves out: in flight, resting, failed or stalled (``once``),
        sitting out their backoff (``run()``)."""
        self._backoff.next_poll()
        for run_id in [r for r, v in self._stalled.items() if version_of(self.owner.store.run(r)) != v]:
            del self._stalled[run_id]  # it moved since (a command, another worker)
        return self.in_flight.keys() | self._rested() | self._failed | self._stalled.keys() | self._backoff.skipped()

    def _collect(self, wait: float) -> None:
        """The drives that finished (waiting up to ``wait`` seconds for the first), and
        what each means for the next polls."""
        for done in self._finished(wait):
            self._death = self._death or done.death
            del self.in_flight[done.run_id]
            if done.contended:
                self.owner._met_another()
            self._backoff.record(done.run_id, failed=done.failed)
            if done.failed:
                if self._once:
                    self._failed.add(done.run_id)
            elif not done.moved:
                self._rest(done.run_id, done.before)

    def _can_take(self) -> bool:
        return self._free() > 0 or not self._reserve_busy()

    def _free(self) -> int:
        return self.owner.concurrency - sum(1 for reserve in self.in_flight.values() if not reserve)

    def _reserve_busy(self) -> bool:
        return any(self.in_flight.values())

    def _rested(self) -> set[str]:
        now = self.owner.monotonic()
        for run_id in [r for r, until in self._resting.items() if until <= now]:
            del self._resting[run_id]
        return set(self._resting)

    def _fill(self) -> None:
        """Hand the backlog's Runs to free slots (several at once: their leases taken in
        one statement); with none free, an orphaned Run to the reserve slot."""
        while self._backlog and self._free() > 0 and not self.owner.stopping:
            picked: list[str] = []
            while self._backlog and len(picked) < self._free():
                run_id = self._backlog.popleft()
                if run_id not in self.in_flight and run_id not in picked:
                    picked.append(run_id)
            for run_id, taken in self._taken(picked):
                self._start(run_id, reserve=False, taken=taken)
        if self._backlog and not self._reserve_busy() and not self.owner.stopping:
            orphan = self._orphan(list(self._backlog))
            if orphan is not None:
                self._backlog.remove(orphan)
                self._start(orphan, reserve=True)

    def _taken(self, picked: list[str]) -> list[Taken]:
        """The Runs of ``picked`` to start, with their leases if taken together; the others
        (another worker's, or ended) rest."""
        owner = self.owner
        try:
            started, passed, contended = take_together(owner.store, owner.leases, picked, owner.monotonic)
        except StoreUnavailable:
            self._backlog.extendleft(reversed(picked))  # handed out after the outage
            raise
        for run_id in passed:
            if run_id in contended:
                owner.report.contended += 1
                owner._met_another()
            self._rest(run_id, version_of(owner.store.run(run_id)) if self._once else -1)
        self.takes_together += len(picked) > 1
        return started

    def _rest(self, run_id: str, version: int) -> None:
        """``run_id`` made no progress: passed over until it moves (``once``), or a poll."""
        if self._once:
            self._stalled[run_id] = version
        else:
            self._resting[run_id] = self.owner.monotonic() + self.owner.poll_interval

    def _all_slots(self) -> list[_Slot]:
        return [*self._slots, *([self._reserve] if self._reserve else [])]

    def _orphan(self, listed: Sequence[str]) -> str | None:
        """The first of ``listed`` whose lease expired under another worker (one read)."""
        statuses = self.owner.store.lease_statuses(listed)
        for run_id in listed:
            status = statuses.get(run_id)
            if status is not None and orphaned(status, self.owner.worker_id):
                return run_id
        return None

    def _start(self, run_id: str, *, reserve: bool, taken: tuple[Lease, float] | None = None) -> None:
        if reserve:
            if self._reserve is None:
                self._reserve = _Slot(self.owner, self._reserve_jobs, self._done, "runkernel take-over slot")
            self._reserve_jobs.put((run_id, taken))
        else:
            if len(self._slots) < self.owner.concurrency - self._free() + 1:
                self._slots.append(_Slot(self.owner, self._jobs, self._done, f"runkernel slot {len(self._slots) + 1}"))
            self._jobs.put((run_id, taken))
        self.in_flight[run_id] = reserve
        self.peak = max(self.peak, len(self.in_flight))

    def _finished(self, wait: float) -> list[Finished]:
        """The drives that finished: at least one (waiting up to ``wait`` seconds for it)."""
        try:
            found = [self._done.get(timeout=wait) if wait > 0 else self._done.get_nowait()]
        except queue.Empty:
            return []
        while True:
            try:
                found.append(self._done.get_nowait())
            except queue.Empty:
                return found

    def waiting_for(self) -> str:
        """What the Runs in flight wait for, one phrase each."""
        phrases = [
            slot.worker.waiting_for()
            for slot in self._all_slots()
            if slot.busy_with is not None and slot.worker is not None
        ]
        return "; ".join(phrases) if phrases else "no Run is being driven"

    def counted(self) -> WorkerReport:
        """The worker's report with every slot's counts so far and this drain's peak: what
        ``_close`` adds at the end, as a copy, while the slots drive (from any thread)."""
        with self._summing:
            total = attrs.evolve(self.owner.report)
            add_slots(total, [] if self._summed else self._counts(), self.peak)
            return total

    def _counts(self) -> list[tuple[int, WorkerReport | None]]:
        return [(slot.refused, None if slot.worker is None else slot.worker.report) for slot in self._all_slots()]

    def _close(self) -> None:
        """Every slot finishes its drive (``shutdown()`` cut it short at its commit in
        flight), releases its leases and closes its store; their counts join the report."""
        slots = self._all_slots()
        for _ in self._slots:
            self._jobs.put(None)
        self._reserve_jobs.put(None)
        for slot in slots:
            slot.thread.join()
        with self._summing:
            add_slots(self.owner.report, self._counts(), self.peak)
            self._summed = True


def orphaned(status: LeaseStatus, worker_id: str) -> bool:
    """Whether a Run's lease expired unreleased under another worker (W2: its holder
    died or stalled), by the store's own clock."""
    lease = status.lease
    return lease is not None and not status.released and lease.worker_id != worker_id and lease.expires_at <= status.now


__all__ = ["Dispatching", "Finished", "SlotWorker", "Slots", "orphaned"]
