"""Who may drive a Run, as operators see it (``runkernel runs``, ``inspect``, the
console): the store's worker registry read once, and for each Run that is not Ended,
why no worker may drive it, if none may (``versions.undriven_reason``): no live worker
of its app, or none of a compatible version. Read-only: it writes nothing."""

from __future__ import annotations

from runkernel.adapters.stores.contract import Store
from runkernel.adapters.stores.versions import LIVE_WINDOW, undriven_reason


class Fleet:
    """The workers ``store`` holds now (read once, by its clock), and the versions each
    live worker's version may drive (read once per app and version)."""

    def __init__(self, store: Store, window: float = LIVE_WINDOW) -> None:
        self._store = store
        self.workers = store.workers()
        self.now = store.store_time()
        self.window = window
        self._compatible: dict[tuple[str | None, str], frozenset[str]] = {}

    def undriven(self, app: str | None, app_version: str | None, state: str) -> str | None:
        """Why no live worker may drive a Run of ``app`` recorded with ``app_version`` in
        ``state`` (None: one may, or the Run is ended)."""
        if state == "ended":
            return None
        compatible: dict[str, frozenset[str]] = {}
        for worker in self.workers:
            if worker.app != app or worker.version is None or not worker.live(self.now, self.window):
                continue
            key = (app, worker.version)
            if key not in self._compatible:
                self._compatible[key] = (
                    self._store.compatible_versions(app, worker.version) if app is not None else frozenset({worker.version})
                )
            compatible[worker.version] = self._compatible[key]
        return undriven_reason(app, app_version, self.workers, compatible, self.now, self.window)


__all__ = ["Fleet"]
