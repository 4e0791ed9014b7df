"""Which Runs a worker's pass drives, and in which order.

The store lists an app's Runs with work oldest first, and every worker of the app is
given the same list. Walked in that order by two workers, the list makes them meet on
one Run: one takes its lease, the other is refused and moves to the next Run, which the
first then finds leased when it is done, and so on, a refused take (and a wait on the
lease row) for nearly every Run. So a worker walks its list oldest first until it meets
another worker on a Run, and from then on, for the rest of that pass and all of the
next, in an order of its own (shuffled by a generator seeded with its worker id). A
worker alone keeps the oldest-first order; the list itself is always the oldest
``batch``, so no Run waits behind newer ones for more than one pass.
"""

from __future__ import annotations

import random
from collections.abc import Collection, Iterator, Sequence


class Listing:
    """The order one worker (``worker_id``) walks the Runs its polls find."""

    def __init__(self, worker_id: str) -> None:
        self._order = random.Random(worker_id)
        self._met = False  # met another worker on a Run in this pass (or the last)

    def met_another(self) -> None:
        """A lease this worker tried to take was held by another worker."""
        self._met = True

    def walk(self, due: Sequence[str], found: Sequence[str], passed: Collection[str], batch: int) -> Walk:
        """One pass: ``due`` (Runs set aside, now due) first, then the first ``batch`` of
        ``found`` (oldest first) that are not in ``passed``."""
        return Walk(self, list(due), [run_id for run_id in found if run_id not in passed][:batch])

    def _runs(self, due: list[str], listed: list[str]) -> Iterator[str]:
        yield from due
        met_last_pass, self._met = self._met, False
        spread = False
        while listed:
            if not spread and (met_last_pass or self._met):
                self._order.shuffle(listed)
                spread = True
            yield listed.pop(0)


class Walk:
    """The Runs of one pass, in the order ``Listing`` walks them (as they are iterated)."""

    def __init__(self, listing: Listing, due: list[str], listed: list[str]) -> None:
        self._listing, self._due, self._listed = listing, due, listed

    def __bool__(self) -> bool:
        return bool(self._due or self._listed)

    def __iter__(self) -> Iterator[str]:
        return self._listing._runs(list(self._due), list(self._listed))
