"""A worker's entry in the store's worker registry (Versions, under Workers and leases):
registered as it starts driving (its app, version and id), heartbeat with its polls and
its lease renewal rounds, or with its acknowledged commits when it has one slot (at most
once per ``interval`` of its own clock; the heartbeat's time is the store's), forgotten
as it stops. ``runkernel runs`` and the console read the
registry to say why a Run with work is not driven (``stores.versions``).

The registry is for operators: a heartbeat the store could not take (an outage) is
skipped, never an error, and the next one registers the worker again if it was
forgotten meanwhile."""

from __future__ import annotations

from collections.abc import Callable

from runkernel.adapters.stores.contract import Store, StoreError


class Presence:
    """One worker's registration in ``store``: ``beat()`` when due, ``leave()`` at the end."""

    def __init__(
        self,
        store: Store,
        worker_id: str,
        app: str | None,
        version: str | None,
        interval: float,
        monotonic: Callable[[], float],
    ) -> None:
        self.store, self.worker_id, self.app, self.version = store, worker_id, app, version
        self.interval, self.monotonic = interval, monotonic
        self._next = float("-inf")
        self._registered = False
        #: heartbeats the store took (registrations included)
        self.beats = 0

    def beat(self) -> None:
        """Register, or heartbeat, if ``interval`` has passed since the last one."""
        now = self.monotonic()
        if now < self._next:
            return
        self._next = now + self.interval
        try:
            if not self._registered or not self.store.heartbeat_worker(self.worker_id):
                self.store.register_worker(self.worker_id, self.app, self.version)
                self._registered = True
            self.beats += 1
        except StoreError:
            self._next = float("-inf")  # the store is out: try again at the next poll

    def leave(self) -> None:
        """Forget the worker in the registry (best effort: a worker that cannot say so is
        counted out once its heartbeat is ``LIVE_WINDOW`` old)."""
        if not self._registered:
            return
        self._registered, self._next = False, float("-inf")
        try:
            self.store.forget_worker(self.worker_id)
        except StoreError:
            pass


__all__ = ["Presence"]
