"""The memory store's worker registry and recorded compatibility (``stores.versions``):
plain dicts, each call under the store's lock, the heartbeats by the store's clock."""

from __future__ import annotations

from collections.abc import Sequence

from runkernel.adapters.stores.versions import FORGET_AFTER, WorkerRecord, checked_acceptance


class MemoryVersions:
    """What ``MemoryStore`` keeps of workers and versions (it holds the lock and the clock)."""

    def __init__(self) -> None:
        self._workers: dict[str, WorkerRecord] = {}
        self._compatible: dict[tuple[str, str], set[str]] = {}

    def register(self, worker_id: str, app: str | None, version: str | None, now: float) -> None:
        """``Store.register_worker`` at ``now``."""
        if not isinstance(worker_id, str) or not worker_id:
            raise ValueError(f"worker_id must be a non-empty string, not {worker_id!r}")
        self._workers[worker_id] = WorkerRecord(worker_id, app, version, now)

    def heartbeat(self, worker_id: str, now: float) -> bool:
        """``Store.heartbeat_worker`` at ``now``."""
        found = self._workers.get(worker_id)
        if found is None:
            return False
        self._workers[worker_id] = WorkerRecord(found.worker_id, found.app, found.version, now)
        return True

    def forget(self, worker_id: str, now: float) -> None:
        """``Store.forget_worker`` at ``now``."""
        self._workers.pop(worker_id, None)
        for stale in [w.worker_id for w in self._workers.values() if w.heartbeat_at < now - FORGET_AFTER]:
            del self._workers[stale]

    def records(self) -> list[WorkerRecord]:
        """``Store.workers``."""
        return [self._workers[k] for k in sorted(self._workers)]

    def accept(self, app: str, version: str, drives: Sequence[str]) -> None:
        """``Store.accept_versions``."""
        found = checked_acceptance(app, version, drives)
        self._compatible.setdefault((app, version), set()).update(found)

    def compatible(self, app: str | None, version: str) -> frozenset[str]:
        """``Store.compatible_versions`` (an app of None has nothing recorded)."""
        recorded = self._compatible.get((app, version), set()) if app is not None else set()
        return frozenset({version, *recorded})


__all__ = ["MemoryVersions"]
