"""A worker's leases taken and renewed together (Workers and leases: many Runs in
flight), one statement for many Runs instead of one per Run.

Taking (``take_together``): the dispatcher fills several free slots at once, their Runs'
leases taken in one ``Store.acquire_leases``; a Run another worker holds is passed over,
as a slot's own take would pass it, and so is a Run that ended since the poll listed it. One Run alone is left to its slot, whose take reads
the Run with its lease where the store can (one round trip).

Renewing (``RenewalRounds``): the leases of every Run the slots have in flight are
renewed in one ``Store.renew_leases`` per round. A round is due every half renewal interval and renews each lease granted or renewed at
least half an interval ago, so a slot's own renewal (at a full interval, ``LeaseKeeper``)
happens only when the rounds fall behind: the store out, say. A lease a round finds lost
is left to its slot, which stops driving that Run at its next lease check, as it always
did; a round the store does not answer changes nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from runkernel.adapters.drive.lease_keeper import LeaseKeeper
from runkernel.adapters.stores.contract import Lease, Store, StoreError, StoreUnavailable

#: a Run to start, with the lease taken for it and when (None: its slot takes it)
Taken = tuple[str, tuple[Lease, float] | None]


def take_together(
    store: Store, leases: LeaseKeeper, picked: list[str], monotonic: Callable[[], float]
) -> tuple[list[Taken], list[str], set[str]]:
    """The Runs of ``picked`` to start, each with its lease if two or more were taken in
    one statement; the Runs not granted; and of those, the ones another worker holds (the
    others ended since they were listed), told by one more read. A store that refuses the
    statement (but for an outage, raised) leaves each slot to take its own lease."""
    if len(picked) < 2:
        return [(run_id, None) for run_id in picked], [], set()
    sent_at = monotonic()
    try:
        granted = {lease.run_id: lease for lease in store.acquire_leases(picked, leases.worker_id, leases.duration)}
    except StoreUnavailable:
        raise  # an outage: the dispatcher's to ride out
    except StoreError:
        return [(run_id, None) for run_id in picked], [], set()
    passed = [run_id for run_id in picked if run_id not in granted]
    statuses = store.lease_statuses(passed) if passed else {}
    held = {r for r, s in statuses.items() if s.lease is not None and not s.released and s.lease.expires_at > s.now}
    return [(run_id, (granted[run_id], sent_at)) for run_id in picked if run_id in granted], passed, held


class RenewalRounds:
    """The rounds of one dispatcher: ``store`` is its own store, ``leases`` the worker's
    keeper (its duration and renewal interval), ``monotonic`` its clock."""

    def __init__(self, store: Store, leases: LeaseKeeper, monotonic: Callable[[], float]) -> None:
        self.store, self.leases, self.monotonic = store, leases, monotonic
        self._next = float("-inf")
        #: rounds that renewed something, and the leases they renewed (for tests, the report)
        self.rounds = 0
        self.renewed = 0

    def due_in(self) -> float:
        """Seconds until the next round is due (0: now)."""
        return max(0.0, self._next - self.monotonic())

    def renew(self, keepers: Iterable[LeaseKeeper]) -> None:
        """A round, if one is due: one statement renewing every lease of ``keepers`` old
        enough, each keeper told of its own leases renewed."""
        now = self.monotonic()
        if now < self._next:
            return
        half = self.leases.renew_after / 2
        self._next = now + half
        held = list(keepers)
        due = [lease for keeper in held for lease in keeper.renewal_due(half)]
        if not due:
            return
        try:
            renewed = self.store.renew_leases(due, self.leases.duration)
        except StoreError:
            return  # the store is out: each slot renews its own lease when due
        self.rounds += 1
        self.renewed += len(renewed)
        for keeper in held:
            keeper.renewed_together(renewed, now)


__all__ = ["RenewalRounds", "Taken", "take_together"]
