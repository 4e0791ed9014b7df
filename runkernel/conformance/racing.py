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
``OVERLAP_WAIT`` bounds a wait; no test asserts a duration. A test that sees its store's
write transactions begin (runkernel's own lease-race test, tests/stores/test_lease_race.py)
also counts a racer as arrived once its transaction began (``RaceClock.write_begun``),
so its racers wait for each other without a time limit that matters (``must_overlap``).
"""

from __future__ import annotations

import importlib
import multiprocessing
import threading
from collections.abc import Callable, MutableSequence, Sequence
from itertools import combinations
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
    """One race: every racer takes the lease of ``run_id`` at store time ``now``;
    ``expired``: the Run's last lease, granted a round before, has expired by then."""

    run_id: str
    now: float
    expired: bool = False


def race_plan(rounds: int = 2, shared: int = 1, fresh: int = 1) -> list[Attempt]:
    """The attempts every racer makes, in the same order: each round (``ROUND_SECONDS``
    of store time apart, longer than a lease) races ``shared`` Runs raced every round
    (from the second round on a take-over of an expired lease) and ``fresh`` Runs never
    leased before."""
    plan: list[Attempt] = []
    for round_no in range(rounds):
        now = 1000.0 + round_no * ROUND_SECONDS
        plan += [Attempt(f"race-shared-{k}", now, expired=round_no > 0) for k in range(shared)]
        plan += [Attempt(f"race-fresh-{round_no}-{k}", now) for k in range(fresh)]
    return plan


@frozen
class Grant:
    """One lease a racer was granted, at the attempt's store time."""

    run_id: str
    worker_id: str
    epoch: int
    granted_at: float
    expires_at: float

    def overlaps(self, other: Grant) -> bool:
        """Whether both are valid at some instant of the store's clock (expiry is exclusive)."""
        return self.granted_at < other.expires_at and other.granted_at < self.expires_at


#: what one racer reports: the leases it was granted, and how many attempts were refused
Outcome = tuple[list[Grant], int]


class Condition(Protocol):
    def __enter__(self) -> bool: ...
    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None) -> None: ...
    def notify_all(self) -> None: ...
    def wait_for(self, predicate: Callable[[], bool], timeout: float | None = None) -> bool: ...


class Barrier(Protocol):
    def wait(self, timeout: float | None = None) -> int: ...
    def abort(self) -> None: ...


class RaceClock:
    """One racer's store clock: the attempt's time, read once every racer read its own
    (or ``wait`` seconds passed). ``reached[i]`` is the last attempt racer ``i`` read its
    clock in, or began a write transaction in (``write_begun``, for a test that can see
    the store's transactions begin), under ``condition``. With ``must_overlap`` a wait
    that passes without every racer is an error (every racer reports ``write_begun``, so
    none may be missing): the overlap is forced, never left to the scheduler."""

    def __init__(
        self, me: int, condition: Condition, reached: MutableSequence[int], *,
        wait: float = OVERLAP_WAIT, must_overlap: bool = False,
    ) -> None:
        self.me = me
        self.attempt = 0
        self.now = 0.0
        self.racing = False
        self._condition = condition
        self._reached = reached
        self._wait = wait
        self._must_overlap = must_overlap

    def write_begun(self) -> None:
        """This racer's store began a write transaction (it may wait for the lock now)."""
        if self.racing:
            self._reach()

    def _reach(self) -> None:
        with self._condition:
            if self._reached[self.me] < self.attempt:
                self._reached[self.me] = self.attempt
                self._condition.notify_all()

    def __call__(self) -> float:
        if self.racing:
            self._reach()
            attempt = self.attempt
            with self._condition:
                met = self._condition.wait_for(lambda: min(self._reached) >= attempt, self._wait)
            if not met and self._must_overlap:
                raise RuntimeError(f"racer {self.me}: the other racers never began attempt {attempt}")
        return self.now


def race(store: Store, clock: RaceClock, worker_id: str, barrier: Barrier, plan: Sequence[Attempt] | None = None) -> Outcome:
    """Every attempt of ``plan`` (``race_plan()``), started together with the other
    racers: the leases granted, and how many attempts were refused with ``LeaseHeld``."""
    grants: list[Grant] = []
    refused = 0
    for attempt in race_plan() if plan is None else plan:
        clock.attempt += 1
        clock.now = attempt.now
        barrier.wait(HANG_GUARD)
        clock.racing = True
        try:
            lease = store.acquire_lease(attempt.run_id, worker_id, LEASE_SECONDS)
        except LeaseHeld:
            refused += 1
        else:
            grants.append(Grant(lease.run_id, lease.worker_id, lease.epoch, attempt.now, lease.expires_at))
        finally:
            clock.racing = False
    return grants, refused


def race_in_threads(
    count: int, run: Callable[[RaceClock, Barrier], Outcome], *, wait: float = OVERLAP_WAIT, must_overlap: bool = False
) -> list[Outcome]:
    """``count`` threads, each ``run(its clock, the shared barrier)`` (which calls
    ``race``); their outcomes, or the first racer's failure raised."""
    condition = threading.Condition()
    reached = [0] * count
    barrier = threading.Barrier(count)
    outcomes: list[Outcome] = []
    failures: list[BaseException] = []

    def take(me: int) -> None:
        try:
            outcomes.append(run(RaceClock(me, condition, reached, wait=wait, must_overlap=must_overlap), barrier))
        except BaseException as error:
            failures.append(error)
            barrier.abort()

    threads = [threading.Thread(target=take, args=(me,)) for me in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if failures:
        raise failures[0]
    return outcomes


def race_in_processes(count: int, racer: Callable[..., None], argument: object, plan: Sequence[Attempt]) -> list[Outcome]:
    """``count`` spawned processes, each ``racer(argument, me, plan, barrier, condition,
    reached, results)``, which sends its outcome (or a failure's text) on ``results``
    (``child.race_in_child`` does); their outcomes."""
    context = multiprocessing.get_context("spawn")
    barrier = context.Barrier(count)
    condition = context.Condition()
    reached = context.Array("i", count, lock=False)
    pipes = [context.Pipe(duplex=False) for _ in range(count)]
    racers = [
        context.Process(target=racer, args=(argument, me, list(plan), barrier, condition, reached, sender))
        for me, (_, sender) in enumerate(pipes)
    ]
    for process in racers:
        process.start()
    for _, sender in pipes:
        sender.close()
    outcomes: list[Outcome] = []
    for receiver, _ in pipes:
        if not receiver.poll(10 * HANG_GUARD):
            raise AssertionError("a racer never answered")
        outcome = receiver.recv()
        if isinstance(outcome, str):
            raise AssertionError(outcome)
        outcomes.append(outcome)
    for process in racers:
        process.join(HANG_GUARD)
        if process.exitcode != 0:
            raise AssertionError(f"a racer exited with status {process.exitcode}")
    return outcomes


def judge_race(name: str, outcomes: Sequence[Outcome], plan: Sequence[Attempt] | None = None) -> list[str]:
    """What went wrong in a race of ``plan`` (``race_plan()``; empty: nothing), after
    printing its figures: each attempt granted to exactly one racer, every other racer
    refused with ``LeaseHeld``, no two grants of a Run valid at one instant, and a Run's
    epochs rising by one per grant."""
    plan = race_plan() if plan is None else plan
    grants = [g for got, _ in outcomes for g in got]
    refused = sum(r for _, r in outcomes)
    per_attempt = {(a.run_id, a.now): 0 for a in plan}
    for grant in grants:
        per_attempt[(grant.run_id, grant.granted_at)] += 1
    doubles = sum(1 for a, b in combinations(grants, 2) if a.run_id == b.run_id and a.overlaps(b))
    expired = {(a.run_id, a.now) for a in plan if a.expired}
    taken_over = sum(1 for g in grants if (g.run_id, g.granted_at) in expired)
    rounds = len({a.now for a in plan})
    print(f"{name} lease race: racers {len(outcomes)}, rounds {rounds}, attempts {len(outcomes) * len(plan)}, "
          f"grants {len(grants)}, refused {refused}, double grants {doubles} "
          f"(of them on expired leases: attempts {len(outcomes) * len(expired)}, grants {taken_over})")
    problems = [f"{run_id} at store time {now} was granted {n} times" for (run_id, now), n in per_attempt.items() if n != 1]
    if doubles:
        problems.append(f"{doubles} pairs of grants of one Run were valid at one instant")
    if len(grants) + refused != len(outcomes) * len(plan):
        problems.append("an attempt was neither granted nor refused with LeaseHeld")
    for run_id in {a.run_id for a in plan}:
        epochs = [g.epoch for g in sorted(grants, key=lambda g: g.granted_at) if g.run_id == run_id]
        if epochs != list(range(1, len(epochs) + 1)):
            problems.append(f"{run_id}: epochs {epochs}, not rising by one per grant")
    return problems


__all__ = ["StoreFactory"]
