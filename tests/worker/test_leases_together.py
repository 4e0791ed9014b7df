"""A worker's leases taken and renewed together (Workers and leases: many Runs in
flight): the dispatcher takes the leases of the Runs it hands to free slots in one
``acquire_leases``, and renews the leases of every Run in flight in one ``renew_leases``
per round, on the memory store, SQLite and PostgreSQL. Counts of store calls, never
durations."""

from __future__ import annotations

import collections
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

import pytest

from postgres_support import postgres_url
from runkernel.adapters.stores.contract import Lease, Store, StoreUnavailable
from runkernel.adapters.stores.memory import MemoryStore
from runkernel.adapters.worker.loop import Worker
from test_slots import HANG, Gathering, _activate, _app, _ended, store

__all__ = ["postgres_url", "store"]

_COUNTED = ("acquire_lease", "acquire_lease_and_pick_up", "acquire_leases", "renew_lease", "renew_leases")


class Counting:
    """A store whose lease acts are counted (with the Runs each names), across every
    instance ``reopen()`` makes: the worker's slots each open one."""

    def __init__(self, store: Store, calls: collections.Counter[str] | None = None, named: list[tuple[str, int]] | None = None) -> None:
        self.store = store
        self.calls: collections.Counter[str] = collections.Counter() if calls is None else calls
        #: (act, how many Runs it named) of every batched act
        self.named: list[tuple[str, int]] = [] if named is None else named
        self.lock = threading.Lock()

    def reopen(self) -> Counting:
        return Counting(self.store.reopen(), self.calls, self.named)

    def __getattr__(self, name: str) -> Any:
        found = getattr(self.store, name)
        if name not in _COUNTED:
            return found

        def counted(*args: Any, **kwargs: Any) -> Any:
            answer = found(*args, **kwargs)
            with self.lock:
                self.calls[name] += 1
                if name.endswith("s"):
                    self.named.append((name, len(args[0])))
            return answer

        return counted


def _until(done: Callable[[], bool], what: str) -> None:
    """Wait for ``done`` (a bound only a hang reaches)."""
    deadline = time.monotonic() + HANG
    while not done():
        assert time.monotonic() < deadline, f"never: {what}"
        time.sleep(0.01)


def test_free_slots_are_filled_by_taking_their_runs_leases_in_one_statement(store: Store) -> None:
    runs = 4
    counting = Counting(store)
    tool = Gathering(parties=runs)  # all four run at once, or the barrier breaks
    for n in range(runs):
        _activate(store, f"r{n}")
    worker = Worker(counting, _app(tool), worker_id="w1", concurrency=runs)
    report = worker.run_once()
    takes = [named for act, named in counting.named if act == "acquire_leases"]
    print(f"leases taken together: {takes}; lease calls {dict(counting.calls)}; most tools at once {tool.most}")
    assert takes[0] == runs, "the first poll's four Runs were taken in one statement"
    assert counting.calls["acquire_lease_and_pick_up"] == 0 and counting.calls["acquire_lease"] == 0
    assert tool.most == runs and report.failures == 0 and report.leases_lost == 0
    assert all(_ended(store, f"r{n}") for n in range(runs))
    assert all(store.current_lease(f"r{n}") is None for n in range(runs)), "every lease given up"


class TakenFirst(Counting):
    """A store on which another worker takes ``r1`` between the poll that listed it and
    this worker's take of the leases together."""

    def acquire_leases(self, run_ids: Sequence[str], worker_id: str, duration: float) -> list[Lease]:
        if "r1" in run_ids and self.store.current_lease("r1") is None:
            self.store.acquire_lease("r1", "w-other", 600.0)
        granted: list[Lease] = self.store.acquire_leases(run_ids, worker_id, duration)
        return granted

    def reopen(self) -> TakenFirst:
        return TakenFirst(self.store.reopen(), self.calls, self.named)


def test_a_run_another_worker_holds_is_passed_over_when_leases_are_taken_together(store: Store) -> None:
    for n in range(3):
        _activate(store, f"r{n}")
    worker = Worker(TakenFirst(store), _app(Gathering()), worker_id="w1", concurrency=3)
    report = worker.run_once()
    held = store.current_lease("r1")
    print(f"report {report}; r1's lease {held}")
    assert _ended(store, "r0") and _ended(store, "r2")
    assert not _ended(store, "r1") and held is not None and held.worker_id == "w-other", "never driven, left alone"
    assert report.contended == 1 and report.failures == 0  # passed over and counted, as a slot's own take is


def test_the_leases_of_every_run_in_flight_are_renewed_together(store: Store) -> None:
    runs, lease = 4, 2.0
    counting = Counting(store)
    release = threading.Event()
    tool = Gathering(release=release)
    for n in range(runs):
        _activate(store, f"r{n}")
    worker = Worker(counting, _app(tool), worker_id="w1", concurrency=runs, lease_duration=lease, poll_interval=0.05)
    worker.start()
    try:
        _until(lambda: tool.running == runs, "every tool running")
        first: list[Lease] = [found for n in range(runs) if (found := store.current_lease(f"r{n}")) is not None]
        assert len(first) == runs
        # every lease the worker first took has expired by the store's clock: only renewals keep them
        _until(lambda: store.store_time() > max(held.expires_at for held in first) + 0.1, "the first leases' expiry")
        rounds = [named for act, named in counting.named if act == "renew_leases"]
        singles = counting.calls["renew_lease"]
        held_now = [store.current_lease(f"r{n}") for n in range(runs)]
        release.set()
        _until(lambda: all(_ended(store, f"r{n}") for n in range(runs)), "every Run ended")
        report = worker.stop(timeout=HANG)
    finally:
        release.set()
        if worker._thread is not None and worker._thread.is_alive():
            worker.stop(timeout=HANG)
    print(f"renewal rounds (Runs each named): {rounds}; single renewals {singles}; report {report}")
    assert all(held is not None and held.epoch == 1 for held in held_now), "each lease kept by renewals, same epoch"
    assert len(rounds) >= 2 and max(rounds) == runs, "a round renews every Run in flight in one statement"
    assert singles == 0, "while the rounds keep up, no slot renews a lease of its own"
    assert report.leases_lost == 0 and report.failures == 0
    assert all(_ended(store, f"r{n}") for n in range(runs))


class _ReadsFail:
    """A store whose reads of a Run's snapshot fail (the database went away)."""

    def __init__(self, store: Store) -> None:
        self.store = store

    def run(self, run_id: str) -> None:
        raise StoreUnavailable("the database went away (injected)")

    def __getattr__(self, name: str) -> Any:
        return getattr(self.store, name)


def test_a_lease_taken_for_a_slot_is_given_up_when_its_drive_cannot_even_read_the_run() -> None:
    store = MemoryStore()
    _activate(store, "r1")
    worker = Worker(store, _app(Gathering()), worker_id="w1", concurrency=4)
    slot = worker._slot_worker()
    slot.store = _ReadsFail(slot.store)
    taken = (store.acquire_leases(["r1"], "w1", 30.0)[0], time.monotonic())
    with pytest.raises(StoreUnavailable):
        slot._serve("r1", taken)
    held = store.current_lease("r1")
    print(f"after the failed drive: the slot holds {slot.leases.held_runs()}, the store's lease {held}")
    assert slot.leases.held_runs() == () and held is None, "a lease nobody drives would be renewed by every round"
