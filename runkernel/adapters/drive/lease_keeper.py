"""A worker's leases (Workers and leases): taken before a Run is driven,
named by every commit, renewed while driving (at most once per renewal interval, never
once per commit), checked with a safety margin immediately before every executor start
(W1), and released when the Run is quiet. Both drivers use it: the pull-mode runtime
and the push-mode driver.

When to renew is decided by this process's monotonic clock (cheap, and only a matter
of timing); whether a lease is valid is always the store's answer, by the store's
clock, inside the transaction that acts on it. A store that can tell how long the lease
had left when its last commit checked it in that commit's transaction
(``lease_left_in_commit``, PostgreSQL) answers the W1 re-check that follows the commit
without another round trip: the figure less the time since the commit was sent is a
lower bound, and a lease it puts under the margin is asked of the store as before.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence

from runkernel.adapters.stores.contract import Lease, LeaseLost, Store, StoreError
from runkernel.adapters.stores.folded_reads import PickUp

#: how often a leased commit whose reply was lost is retried before the error stands
APPEND_RETRIES = 3


class LeaseKeeper:
    """The leases one worker holds. ``duration`` is each grant's length in seconds,
    ``margin`` how long a lease must still be valid when an executor starts (default a
    fifth of ``duration``), ``renew_after`` how long after a grant the next commit or
    executor start renews it (default half of ``duration``). ``worker_id`` must be
    unique per process."""

    def __init__(
        self,
        store: Store,
        worker_id: str,
        *,
        duration: float = 30.0,
        margin: float | None = None,
        renew_after: float | None = None,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        if duration <= 0:
            raise ValueError(f"a lease duration must be positive, not {duration!r}")
        self.store = store
        self.worker_id = worker_id
        self.duration = duration
        self.margin = duration / 5 if margin is None else margin
        self.renew_after = duration / 2 if renew_after is None else renew_after
        if not 0 <= self.margin < duration:
            raise ValueError(f"the safety margin must be in [0, duration), not {self.margin!r}")
        self._monotonic = monotonic
        self._held: dict[str, tuple[Lease, float]] = {}
        # the leases are read and renewed by a worker's dispatcher too (``renewal_due``,
        # ``renewed_together``), from its own thread
        self._lock = threading.Lock()
        self._picked: tuple[str, PickUp] | None = None
        #: counts, for tests and the race test's report
        self.taken = 0
        self.renewals = 0
        self.checks = 0
        #: of ``checks``, those the last commit's own lease check answered
        self.checks_in_commit = 0
        self.released_in_commits = 0

    def take(self, run_id: str) -> Lease:
        """Acquire (or extend) the lease on ``run_id``; ``LeaseHeld`` if another worker
        holds it."""
        return self._granted(run_id, self.store.acquire_lease(run_id, self.worker_id, self.duration), None)

    def take_and_pick_up(self, run_id: str) -> Lease:
        """``take`` before a drive picks the Run up: where the store can
        (``acquire_lease_and_pick_up``: PostgreSQL), the pick-up is read in the same round
        trip and kept for the drive's first store operation (``picked_up``)."""
        both: Callable[[str, str, float], tuple[Lease, PickUp | None]] | None = getattr(
            self.store, "acquire_lease_and_pick_up", None
        )
        if both is None:
            return self.take(run_id)
        return self._granted(run_id, *both(run_id, self.worker_id, self.duration))

    def _granted(self, run_id: str, lease: Lease, picked: PickUp | None) -> Lease:
        """Hold ``lease``, granted now; keep the pick-up read with it, if any."""
        with self._lock:
            self._held[run_id] = (lease, self._monotonic())
        self.taken += 1
        self._picked = None if picked is None else (run_id, picked)
        return lease

    def adopt(self, lease: Lease, granted_at: float) -> None:
        """Hold ``lease``, taken for this keeper by another (a worker's dispatcher, which
        takes several Runs' leases in one statement: ``Store.acquire_leases``) at
        ``granted_at`` by this keeper's monotonic clock."""
        with self._lock:
            self._held[lease.run_id] = (lease, granted_at)
        self.taken += 1
        self._picked = None

    def renewal_due(self, older_than: float) -> list[Lease]:
        """The leases held that were granted or renewed at least ``older_than`` seconds
        ago: what a dispatcher's renewal round renews together."""
        now = self._monotonic()
        with self._lock:
            return [lease for lease, granted in self._held.values() if now - granted >= older_than]

    def renewed_together(self, leases: Sequence[Lease], sent_at: float) -> None:
        """``leases``, renewed by a dispatcher's ``Store.renew_leases`` sent at ``sent_at``
        (this keeper's monotonic clock): held from then on, unless this keeper released,
        lost or retook the Run meanwhile."""
        with self._lock:
            for lease in leases:
                found = self._held.get(lease.run_id)
                if found is not None and found[0].writer == lease.writer and found[1] < sent_at:
                    self._held[lease.run_id] = (lease, sent_at)
                    self.renewals += 1

    def picked_up(self) -> tuple[str, PickUp] | None:
        """The (run id, pick-up) read with the last take, once: the first store operation
        after the take asks, whatever it is, so it never answers a later one."""
        picked, self._picked = self._picked, None
        return picked

    def held(self, run_id: str) -> Lease | None:
        """The lease this worker believes it holds on ``run_id`` (the store decides)."""
        found = self._held.get(run_id)
        return None if found is None else found[0]

    def for_commit(self, run_id: str) -> Lease:
        """The lease a commit of ``run_id`` names: taken if not held yet (a new Run),
        renewed if its renewal is due."""
        found = self._held.get(run_id)
        if found is None:
            return self.take(run_id)
        lease, granted = found
        if self._monotonic() - granted < self.renew_after:
            return lease
        sent_at = self._monotonic()
        try:
            renewed = self.store.renew_lease(lease, self.duration)
        except LeaseLost:
            self.forget(run_id)
            raise
        with self._lock:
            self._held[run_id] = (renewed, sent_at)
        self.renewals += 1
        return renewed

    def before_executor(self, run_id: str) -> Lease:
        """W1: immediately before an executor starts, the lease as the store holds it,
        valid at least ``margin`` more seconds (renewed first if due); else
        ``LeaseLost``, and the executor must not start. Answered without asking the
        store when the store's last commit checked this lease and the time it had left
        then, less the time since, is still at least ``margin``."""
        lease = self.for_commit(run_id)
        self.checks += 1
        left = self._known_left(lease)
        if left is not None and left >= self.margin:
            self.checks_in_commit += 1
            return lease
        try:
            return self.store.check_lease(lease, self.margin)
        except LeaseLost:
            self.forget(run_id)
            raise

    def _known_left(self, lease: Lease) -> float | None:
        """Seconds ``lease`` is valid at least by the store's last commit (None: ask)."""
        told: Callable[[Lease], float | None] | None = getattr(self.store, "lease_left_in_commit", None)
        return None if told is None else told(lease)

    def held_runs(self) -> tuple[str, ...]:
        """The Runs this worker believes it holds a lease on."""
        with self._lock:
            return tuple(self._held)

    def forget(self, run_id: str) -> None:
        """Drop a lease this worker lost (nothing to release)."""
        with self._lock:
            self._held.pop(run_id, None)
        self._picked = None

    def released(self, run_id: str) -> None:
        """The store released the lease on ``run_id`` in a commit (the commit that made
        the Run quiet): this worker holds it no more, and a later commit takes it again."""
        self._picked = None
        with self._lock:
            found = self._held.pop(run_id, None)
        if found is not None:
            self.released_in_commits += 1

    def release(self, run_id: str) -> None:
        """Give the lease on ``run_id`` up (the Run is quiet, or the worker stops)."""
        self._picked = None  # a pick-up no drive used never answers a later one
        with self._lock:
            found = self._held.pop(run_id, None)
        if found is None:
            return
        try:
            self.store.release_lease(found[0])
        except StoreError:
            pass  # an unreleased lease only expires later: W2 covers it

    def release_all(self) -> None:
        """Release every lease held (a worker that stops)."""
        for run_id in list(self._held):
            self.release(run_id)
