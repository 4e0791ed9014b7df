"""App versions in a store (Versions, under Workers and leases): the worker registry's
records, when a worker counts as live, the compatibility an operator records, and why
no worker may drive a Run.

A Run records its app's version on its activation (``app_version``); a worker drives
the Runs of its app recorded with its own version, with a version recorded compatible
with its own (``Store.accept_versions``), or with none (activated before versions
existed). Workers register in the store (app, version, worker id) and heartbeat there,
by the store's clock; a worker is *live* while its last heartbeat is at most
``LIVE_WINDOW`` seconds old. What is recorded here is an operator's decision or a
worker's presence, kept beside the commit log and never in a Run's log.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from attrs import frozen

#: A worker is live while its last heartbeat (store time) is at most this many seconds
#: old. Workers heartbeat with their lease renewal rounds and polls, at least every half
#: lease duration (15 s with the default 30 s leases), so a live worker is never
#: counted out by one late round.
LIVE_WINDOW = 60.0

#: A worker silent for this many seconds (it crashed without forgetting itself) is
#: deleted from the registry when another worker leaves (``forget_worker``), so the
#: registry stays bounded by the workers of the last day.
FORGET_AFTER = 86_400.0


@frozen
class WorkerRecord:
    """A registered worker: its id, the app and version it drives (None: a worker of
    Runs activated without an app, or of every version) and its last heartbeat, in
    seconds of the store's clock."""

    worker_id: str
    app: str | None
    version: str | None
    heartbeat_at: float

    def live(self, now: float, window: float = LIVE_WINDOW) -> bool:
        """Whether the worker heartbeat within ``window`` seconds of ``now`` (store time)."""
        return now - self.heartbeat_at <= window


def checked_acceptance(app: str, version: str, drives: Sequence[str]) -> tuple[str, ...]:
    """The versions ``accept_versions`` records for ``(app, version)``, checked: every
    name a non-empty string (``ValueError`` otherwise), without repeats, in order."""
    if isinstance(drives, str):
        raise TypeError(f"drives is a sequence of versions, not the string {drives!r}")
    for name, value in (("app", app), ("version", version)):
        if not isinstance(value, str) or not value:
            raise ValueError(f"{name} must be a non-empty string, not {value!r}")
    for value in drives:
        if not isinstance(value, str) or not value:
            raise ValueError(f"every version in drives must be a non-empty string, not {value!r}")
    return tuple(dict.fromkeys(drives))


def may_drive(run_version: str | None, worker_version: str | None, compatible: Iterable[str]) -> bool:
    """Whether a worker of ``worker_version`` (None: every version) may drive a Run
    recorded with ``run_version`` (None: activated before versions existed), given the
    versions recorded compatible with the worker's (``compatible``)."""
    if worker_version is None or run_version is None or run_version == worker_version:
        return True
    return run_version in set(compatible)


#: Why a Run with work is not driven (``undriven_reason``): no live worker of its app.
NO_LIVE_WORKER = "no live worker of its app"


def undriven_reason(
    app: str | None,
    run_version: str | None,
    workers: Iterable[WorkerRecord],
    compatible: dict[str, frozenset[str]],
    now: float,
    window: float = LIVE_WINDOW,
) -> str | None:
    """Why no worker may drive a Run of ``app`` recorded with ``run_version``: None when
    a live worker may; ``NO_LIVE_WORKER``; or ``none of a compatible version`` naming the
    live workers' versions. ``compatible`` maps each live worker's version to the versions
    recorded compatible with it (``Store.compatible_versions``)."""
    live = [w for w in workers if w.app == app and w.live(now, window)]
    if not live:
        return NO_LIVE_WORKER
    if any(may_drive(run_version, w.version, compatible.get(w.version or "", frozenset())) for w in live):
        return None
    versions = ", ".join(sorted({w.version or "" for w in live}))
    return f"no live worker of a compatible version (run version {run_version}; live: {versions})"


__all__ = [
    "FORGET_AFTER",
    "LIVE_WINDOW",
    "NO_LIVE_WORKER",
    "WorkerRecord",
    "checked_acceptance",
    "may_drive",
    "undriven_reason",
]
