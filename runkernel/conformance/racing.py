"""The lease race of the store contract suite, shared by its thread and process racers:
several racers take the lease of the same Runs at the same store time, attempt after
attempt, and each attempt may be granted to one of them only (W3).

That the racers' reads overlap is forced through the store's clock, which the suite
gives every racer's instance: a racer's clock, read while it takes a lease, waits until
every other racer has read its own clock in the same attempt (for at most
``OVERLAP_WAIT`` seconds: a store that reads its clock inside the transaction that grants
the lease has the others queued behind that transaction, and they never read it while
it waits). A store that reads the lease row before that transaction has every racer read
the same unleased row, waits until all of them did, and grants the Run to each.
``OVERLAP_WAIT`` bounds a wait; no test asserts a duration.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, MutableSequence, Sequence
from types import TracebackType
from typing import Any, Protocol

from attrs import frozen

from runkernel.adapters.stores.contract import LeaseHeld, Store

RACERS = 3
#: seconds a racer's clock waits at most for the other racers to read theirs
OVERLAP_WAIT = 0.3
#: store time between rounds, and a lease's length (shorter: a round finds the last
#: round's leases expired)
ROUND_SECONDS = 100.0
LEASE_SECONDS = 10.0
#: how long a racer waits at the start of an attempt for the others: only a broken racer is late
HANG_GUARD = 120.0


@frozen
class StoreFactory:
    """How a child process opens another instance on a store's storage: ``target`` is
    ``"MODULE:ATTR"``, a callable importable in a fresh interpreter, called as
    ``ATTR(argument)`` (or ``ATTR(argument, clock=CLOCK)`` for the lease race; a store
    that takes no clock raises ``TypeError`` and the race is skipped)."""

    target: str
    argument: str

    def open(self, **options: Any) -> Store:
        """A new instance on the storage, opened as a child process opens it."""
        module, _, attr = self.target.partition(":")
        if not module or not attr:
            raise ValueError(f"a store factory is MODULE:ATTR, not {self.target!r}")
        made: Store = getattr(importlib.import_module(module), attr)(self.argument, **options)
        return made


@frozen
class Attempt:
    """One race: every racer takes the lease of ``run_id`` at store time ``now``."""

    run_id: str
    now: float


def race_plan() -> list[Attempt]:
    """Two rounds: a Run raced in both (the second round finds its lease expired, so the
    race is a take-over) and a fresh Run each round."""
    return [
        Attempt(run_id, 1000.0 + round_no * ROUND_SECONDS)
        for round_no in range(2)
        for run_id in ("race-shared", f"race-fresh-{round_no}")
    ]


@frozen
class Grant:
    """One lease a racer was granted, at the attempt's store time."""

    run_id: str
    worker_id: str
    epoch: int
    granted_at: float


class Condition(Protocol):
    def __enter__(self) -> bool: ...
    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None) -> None: ...
    def notify_all(self) -> None: ...
    def wait_for(self, predicate: Callable[[], bool], timeout: float | None = None) -> bool: ...


class Barrier(Protocol):
    def wait(self, timeout: float | None = None) -> int: ...


class RaceClock:
    """One racer's store clock: the attempt's time, read once every racer read its own
    (or ``OVERLAP_WAIT`` passed). ``reached[i]`` is the last attempt racer ``i`` read its
    clock in, under ``condition``."""

    def __init__(self, me: int, condition: Condition, reached: MutableSequence[int]) -> None:
        self.me = me
        self.attempt = 0
        self.now = 0.0
        self.racing = False
        self._condition = condition
        self._reached = reached

    def __call__(self) -> float:
        if self.racing:
            attempt = self.attempt
            with self._condition:
                if self._reached[self.me] < attempt:
                    self._reached[self.me] = attempt
                    self._condition.notify_all()
                self._condition.wait_for(lambda: min(self._reached) >= attempt, OVERLAP_WAIT)
        return self.now


def race(store: Store, clock: RaceClock, worker_id: str, barrier: Barrier) -> tuple[list[Grant], int]:
    """Every attempt of the plan, started together with the other racers: the leases
    granted, and how many attempts were refused with ``LeaseHeld``."""
    grants: list[Grant] = []
    refused = 0
    for attempt in race_plan():
        clock.attempt += 1
        clock.now = attempt.now
        barrier.wait(HANG_GUARD)
        clock.racing = True
        try:
            lease = store.acquire_lease(attempt.run_id, worker_id, LEASE_SECONDS)
        except LeaseHeld:
            refused += 1
        else:
            grants.append(Grant(lease.run_id, lease.worker_id, lease.epoch, attempt.now))
        finally:
            clock.racing = False
    return grants, refused


def judge_race(name: str, outcomes: Sequence[tuple[list[Grant], int]]) -> list[str]:
    """What went wrong in a race (empty: nothing), after printing its figures: each
    attempt granted to exactly one racer, every other racer refused with ``LeaseHeld``,
    and a Run's epochs rising by one per grant."""
    plan = race_plan()
    grants = [g for got, _ in outcomes for g in got]
    refused = sum(r for _, r in outcomes)
    per_attempt = {(a.run_id, a.now): 0 for a in plan}
    for grant in grants:
        per_attempt[(grant.run_id, grant.granted_at)] += 1
    doubles = sum(n - 1 for n in per_attempt.values() if n > 1)
    print(f"{name} lease race: racers {len(outcomes)}, attempts {len(plan)}, grants {len(grants)}, "
          f"refused {refused}, double grants {doubles}")
    problems = [f"{run_id} at store time {now} was granted {n} times" for (run_id, now), n in per_attempt.items() if n != 1]
    if len(grants) + refused != len(outcomes) * len(plan):
        problems.append("an attempt was neither granted nor refused with LeaseHeld")
    for run_id in {a.run_id for a in plan}:
        epochs = [g.epoch for g in sorted(grants, key=lambda g: g.granted_at) if g.run_id == run_id]
        if epochs != list(range(1, len(epochs) + 1)):
            problems.append(f"{run_id}: epochs {epochs}, not rising by one per grant")
    return problems


__all__ = ["StoreFactory"]
