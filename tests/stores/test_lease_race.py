"""W3 under real concurrency (Workers and leases): several racers take the
lease of the same Runs at the same instant, round after round, and each Run may be
granted to one of them only. On SQLite the racers are processes, each with its own
connection to one file; on the MemoryStore they are threads sharing the store.

Every round races on Runs never leased and on Runs whose last lease every racer sees
expired: a racer's store clock reads its round's time, and a lease is shorter than a
round, so the previous round's leases ended before this round began.

That the racers' reads of a lease row overlap is forced, not left to the scheduler. A
barrier starts each attempt; then a racer's store clock, which the store reads inside
the write transaction that grants the lease, waits until every other racer has begun
its own write transaction (SQLite's ``BEGIN IMMEDIATE``, the MemoryStore's mutex) or
read the clock itself. A store that reads the lease row inside its write transaction
finds the others queued behind it, and they read its grant; one that reads the row
before it has every racer read the same unleased row, and grants the Run to each."""

from __future__ import annotations

import multiprocessing
import multiprocessing.connection
import multiprocessing.synchronize
import threading
from collections.abc import Callable, MutableSequence
from itertools import combinations
from pathlib import Path
from types import TracebackType
from typing import Protocol

from attrs import frozen

from runkernel.adapters.stores.memory import MemoryStore
from runkernel.adapters.stores.sqlite import SqliteStore
from runkernel.adapters.stores.contract import LeaseHeld, Store

PROCESSES = 4
THREADS = 4
ROUNDS = 6
#: per round, Runs raced for the first time
FRESH_RUNS = 2
#: Runs raced every round: from the second round on, every racer sees their lease expired
SHARED_RUNS = 2
#: store time from one round to the next
ROUND_SECONDS = 100.0
#: a lease's length, shorter than a round
LEASE_SECONDS = 10.0
#: how long a racer waits for the others before it gives up: only a broken racer is late
HANG_GUARD = 60.0


@frozen
class Grant:
    """One lease a racer was granted, with the store time it was granted at."""

    run_id: str
    worker_id: str
    epoch: int
    granted_at: float
    expires_at: float

    def overlaps(self, other: Grant) -> bool:
        """Whether both are valid at some instant of the store's clock (expiry is exclusive)."""
        return self.granted_at < other.expires_at and other.granted_at < self.expires_at


@frozen
class Attempt:
    """One race: every racer takes the lease of ``run_id`` at store time ``now``."""

    run_id: str
    now: float
    expired: bool  # the Run's last lease, granted a round before, expired by now


def _race_plan() -> list[Attempt]:
    """The attempts every racer makes, in the same order."""
    plan: list[Attempt] = []
    for round_no in range(ROUNDS):
        now = 1000.0 + round_no * ROUND_SECONDS
        plan += [Attempt(f"shared-{k}", now, expired=round_no > 0) for k in range(SHARED_RUNS)]
        plan += [Attempt(f"fresh-{round_no}-{k}", now, expired=False) for k in range(FRESH_RUNS)]
    return plan


class _Condition(Protocol):
    def __enter__(self) -> bool: ...
    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None) -> None: ...
    def notify_all(self) -> None: ...
    def wait_for(self, predicate: Callable[[], bool], timeout: float | None = None) -> bool: ...


class _Barrier(Protocol):
    def wait(self, timeout: float | None = None) -> int: ...


class Racer:
    """One racer's store clock and attempts. ``reached[i]`` is the last attempt racer
    ``i`` has begun a write transaction in (or read the clock in), under ``condition``."""

    def __init__(
        self, me: int, worker_id: str, barrier: _Barrier, condition: _Condition, reached: MutableSequence[int]
    ) -> None:
        self.me = me
        self.worker_id = worker_id
        self._barrier = barrier
        self._condition = condition
        self._reached = reached
        self._attempt = 0
        self._racing = False
        self._now = 0.0

    def write_begun(self) -> None:
        """This racer's store began a write transaction (it may wait for the lock now)."""
        if self._racing:
            self._reach()

    def _reach(self) -> None:
        with self._condition:
            if self._reached[self.me] < self._attempt:
                self._reached[self.me] = self._attempt
                self._condition.notify_all()

    def clock(self) -> float:
        """The store's clock: the attempt's time, read once every racer is as far."""
        if self._racing:
            self._reach()
            attempt = self._attempt
            with self._condition:
                if not self._condition.wait_for(lambda: min(self._reached) >= attempt, HANG_GUARD):
                    raise RuntimeError(f"{self.worker_id}: the other racers never began attempt {attempt}")
        return self._now

    def race(self, store: Store) -> tuple[list[Grant], int]:
        """Every attempt of the plan, started together with the other racers: the
        leases granted, and how many attempts were refused with LeaseHeld."""
        grants: list[Grant] = []
        refused = 0
        for attempt in _race_plan():
            self._attempt += 1
            self._now = attempt.now
            self._barrier.wait(HANG_GUARD)
            self._racing = True
            try:
                lease = store.acquire_lease(attempt.run_id, self.worker_id, LEASE_SECONDS)
            except LeaseHeld:
                refused += 1
            else:
                grants.append(Grant(lease.run_id, lease.worker_id, lease.epoch, attempt.now, lease.expires_at))
            finally:
                self._racing = False
        return grants, refused


def _checked_grants(store_name: str, racers: str, count: int, outcomes: list[tuple[list[Grant], int]]) -> list[Grant]:
    """W3 over every racer's grants: print the figures, then assert that no two grants
    of a Run overlap, that each attempt was granted to exactly one racer (every racer
    saw the Run unleased or its lease expired), and that epochs rise by one per grant."""
    plan = _race_plan()
    grants = [g for outcome, _ in outcomes for g in outcome]
    refused = sum(r for _, r in outcomes)
    doubles = sum(1 for a, b in combinations(grants, 2) if a.run_id == b.run_id and a.overlaps(b))
    expired_runs = {(a.run_id, a.now) for a in plan if a.expired}
    taken_over = sum(1 for g in grants if (g.run_id, g.granted_at) in expired_runs)
    print(
        f"{store_name} lease race: {racers} {count}, rounds {ROUNDS}, attempts {count * len(plan)}, "
        f"grants {len(grants)}, double grants {doubles} "
        f"(of them on expired leases: attempts {count * len(expired_runs)}, grants {taken_over})"
    )
    assert doubles == 0
    assert len(grants) + refused == count * len(plan)  # each attempt granted or refused with LeaseHeld
    assert sorted((g.run_id, g.granted_at) for g in grants) == sorted((a.run_id, a.now) for a in plan)
    assert len(grants) >= ROUNDS and taken_over == len(expired_runs) > 0
    for run_id in {a.run_id for a in plan}:
        epochs = [g.epoch for g in sorted(grants, key=lambda g: g.granted_at) if g.run_id == run_id]
        assert epochs == list(range(1, len(epochs) + 1)), run_id  # a take-over raises the epoch by one
    return grants


# --- SQLite: processes on one file -----------------------------------------------------


def _sqlite_racer(
    path: str,
    me: int,
    barrier: _Barrier,
    condition: _Condition,
    reached: MutableSequence[int],
    results: multiprocessing.connection.Connection,
) -> None:
    """One racing process: its own connection to the file, its outcome sent back."""
    try:
        racer = Racer(me, f"worker-{me}", barrier, condition, reached)
        store = SqliteStore(path, clock=racer.clock)
        # the statement is traced before it waits for the write lock
        store._db.set_trace_callback(lambda sql: racer.write_begun() if sql == "BEGIN IMMEDIATE" else None)
        try:
            results.send(racer.race(store))
        finally:
            store.close()
    except BaseException as error:
        results.send(f"racer {me} failed: {error!r}")
        raise
    finally:
        results.close()


def test_processes_taking_one_runs_lease_at_one_instant_are_granted_it_once(tmp_path: Path) -> None:
    path = str(tmp_path / "race.db")
    SqliteStore(path).close()  # the schema exists before the racers open the file
    context = multiprocessing.get_context("spawn")
    barrier = context.Barrier(PROCESSES)
    condition = context.Condition()
    reached = context.Array("i", PROCESSES, lock=False)
    pipes = [context.Pipe(duplex=False) for _ in range(PROCESSES)]
    racers = [
        context.Process(target=_sqlite_racer, args=(path, me, barrier, condition, reached, sender))
        for me, (_, sender) in enumerate(pipes)
    ]
    for racer in racers:
        racer.start()
    for _, sender in pipes:
        sender.close()
    outcomes: list[tuple[list[Grant], int]] = []
    for receiver, _ in pipes:
        assert receiver.poll(10 * HANG_GUARD), "a racer never answered"
        outcome = receiver.recv()
        assert not isinstance(outcome, str), outcome
        outcomes.append(outcome)
    for racer in racers:
        racer.join(HANG_GUARD)
        assert racer.exitcode == 0
    grants = _checked_grants("SQLite", "processes", PROCESSES, outcomes)
    last_round = _race_plan()[-1].now
    store = SqliteStore(path, clock=lambda: last_round)
    stored = {(g.run_id, g.worker_id, g.epoch, g.expires_at) for g in grants if g.granted_at == last_round}
    current = {store.current_lease(run_id) for run_id, *_ in stored}
    store.close()
    assert {(c.run_id, c.worker_id, c.epoch, c.expires_at) for c in current if c is not None} == stored


# --- MemoryStore: threads on one store -------------------------------------------------


class _RequestedLock:
    """The MemoryStore's mutex, telling the asking thread's racer before it may wait."""

    def __init__(self, inner: threading.Lock, requested: Callable[[], None]) -> None:
        self._inner = inner
        self._requested = requested

    def __enter__(self) -> bool:
        self._requested()
        return self._inner.__enter__()

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None) -> None:
        self._inner.__exit__(kind, error, tb)


def test_threads_taking_one_runs_lease_at_one_instant_are_granted_it_once() -> None:
    current = threading.local()

    def racer_here() -> Racer:
        racer: Racer = current.racer
        return racer

    store = MemoryStore(clock=lambda: racer_here().clock())
    store._lock = _RequestedLock(store._lock, lambda: racer_here().write_begun())  # type: ignore[assignment]
    barrier = threading.Barrier(THREADS)
    condition = threading.Condition()
    reached = [0] * THREADS
    outcomes: list[tuple[list[Grant], int]] = []
    failures: list[BaseException] = []

    def race(me: int) -> None:
        current.racer = Racer(me, f"worker-{me}", barrier, condition, reached)
        try:
            outcomes.append(racer_here().race(store))
        except BaseException as error:
            failures.append(error)
            barrier.abort()

    threads = [threading.Thread(target=race, args=(me,)) for me in range(THREADS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert failures == []
    _checked_grants("MemoryStore", "threads", THREADS, outcomes)
