"""W3 under real concurrency (Workers and leases): several racers take the
lease of the same Runs at the same instant, round after round, and each Run may be
granted to one of them only. On SQLite the racers are processes, each with its own
connection to one file; on the MemoryStore they are threads sharing the store. The race
is the shipped suite's (``runkernel.conformance.racing``), with more racers and rounds.

Every round races on Runs never leased and on Runs whose last lease every racer sees
expired: a racer's store clock reads its round's time, and a lease is shorter than a
round, so the previous round's leases ended before this round began.

That the racers' reads of a lease row overlap is forced, not left to the scheduler. A
barrier starts each attempt; then a racer's store clock, which the store reads inside
the write transaction that grants the lease, waits until every other racer has begun
its own write transaction (SQLite's ``BEGIN IMMEDIATE``, the MemoryStore's mutex:
``RaceClock.write_begun``) or read the clock itself (``must_overlap``: never given up on).
A store that reads the lease row inside its write transaction finds the others queued
behind it, and they read its grant; one that reads the row before it has every racer
read the same unleased row, and grants the Run to each."""

from __future__ import annotations

import multiprocessing.connection
import threading
from collections.abc import Callable, MutableSequence, Sequence
from pathlib import Path
from types import TracebackType

from runkernel.adapters.stores.memory import MemoryStore
from runkernel.adapters.stores.sqlite import SqliteStore
from runkernel.conformance.racing import (
    HANG_GUARD,
    Attempt,
    Barrier,
    Condition,
    Outcome,
    RaceClock,
    judge_race,
    race,
    race_in_processes,
    race_in_threads,
    race_plan,
)

PROCESSES = 4
THREADS = 4
#: six rounds, each racing two Runs never leased and two raced every round (from the
#: second round on, every racer sees their lease expired)
PLAN = race_plan(rounds=6, shared=2, fresh=2)


def _checked(name: str, outcomes: Sequence[Outcome]) -> None:
    """W3 over every racer's grants (``judge_race`` prints the figures): each attempt
    granted to exactly one racer, no two grants of a Run valid at one instant, epochs
    rising by one per grant, and take-overs of expired leases among them."""
    assert judge_race(name, outcomes, PLAN) == []
    grants = [g for got, _ in outcomes for g in got]
    expired = {(a.run_id, a.now) for a in PLAN if a.expired}
    assert sum(1 for g in grants if (g.run_id, g.granted_at) in expired) == len(expired) > 0


# --- SQLite: processes on one file -----------------------------------------------------


def _sqlite_racer(
    path: str,
    me: int,
    plan: Sequence[Attempt],
    barrier: Barrier,
    condition: Condition,
    reached: MutableSequence[int],
    results: multiprocessing.connection.Connection,
) -> None:
    """One racing process: its own connection to the file, its outcome sent back."""
    try:
        clock = RaceClock(me, condition, reached, wait=HANG_GUARD, must_overlap=True)
        store = SqliteStore(path, clock=clock)
        # the statement is traced before it waits for the write lock
        store._db.set_trace_callback(lambda sql: clock.write_begun() if sql == "BEGIN IMMEDIATE" else None)
        try:
            results.send(race(store, clock, f"worker-{me}", barrier, plan))
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
    outcomes = race_in_processes(PROCESSES, _sqlite_racer, path, PLAN)
    _checked("SQLite processes", outcomes)
    last_round = PLAN[-1].now
    grants = [g for got, _ in outcomes for g in got]
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

    def clock_here() -> RaceClock:
        clock: RaceClock = current.clock
        return clock

    store = MemoryStore(clock=lambda: clock_here()())
    store._lock = _RequestedLock(store._lock, lambda: clock_here().write_begun())  # type: ignore[assignment]

    def take(clock: RaceClock, barrier: Barrier) -> Outcome:
        current.clock = clock
        return race(store, clock, f"worker-{clock.me}", barrier, PLAN)

    _checked("MemoryStore threads", race_in_threads(THREADS, take, wait=HANG_GUARD, must_overlap=True))
