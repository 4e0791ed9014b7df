"""The pull-mode Runs a worker sets aside while a model call backs off after a transient
error: each one's ``Drive``, when it is due again (by the worker's ``monotonic`` clock),
and its lease, kept and renewed meanwhile so no other worker takes the Run (transient
model errors, ``model_errors``). The worker drives other Runs until one is due.
"""

from __future__ import annotations

from collections.abc import Callable, KeysView

from runkernel.adapters.drive.lease_keeper import LeaseKeeper
from runkernel.adapters.drive.runtime import Drive
from runkernel.adapters.stores.contract import LeaseLost, StoreError, StoreUnavailable
from runkernel.adapters.worker.account import WorkerReport


class SetAside:
    """The drives set aside, by Run, with when (``monotonic``) each is due again."""

    def __init__(self, leases: LeaseKeeper, monotonic: Callable[[], float]) -> None:
        self.leases = leases
        self.monotonic = monotonic
        self.drives: dict[str, tuple[Drive, float]] = {}

    def __contains__(self, run_id: str) -> bool:
        return run_id in self.drives

    def runs(self) -> KeysView[str]:
        return self.drives.keys()

    def put(self, run_id: str, drive: Drive, pause: float) -> None:
        """Set ``drive`` aside for ``pause`` seconds, its lease kept."""
        self.drives[run_id] = (drive, self.monotonic() + pause)

    def take(self, run_id: str) -> Drive | None:
        """The drive set aside for ``run_id`` (no longer set aside), if any."""
        aside = self.drives.pop(run_id, None)
        return aside[0] if aside is not None else None

    def due(self) -> list[str]:
        """The Runs set aside whose wait is over, the earliest first."""
        now = self.monotonic()
        return [r for r, (_, due) in sorted(self.drives.items(), key=lambda item: item[1][1]) if due <= now]

    def until_due(self, longest: float) -> float:
        """Seconds until the first Run set aside is due, at most ``longest``."""
        if not self.drives:
            return longest
        first = min(due for _, due in self.drives.values())
        return max(0.0, min(longest, first - self.monotonic()))

    def keep(self, report: WorkerReport, failed: Callable[[str, BaseException], None]) -> None:
        """Renew the lease of each Run set aside if its renewal is due: nothing is
        committed while it waits, and no other worker may take it meanwhile. A lease
        lost drops the Run (another worker's now); any store failure but an outage is
        the drive's failure (``failed``)."""
        for run_id in list(self.drives):
            try:
                self.leases.for_commit(run_id)
            except LeaseLost:
                report.leases_lost += 1  # the Run is another worker's now
                self.drives.pop(run_id)
                self.leases.forget(run_id)
            except StoreUnavailable:
                raise  # an outage: the Run stays set aside, its renewal tried again later
            except StoreError as error:
                self.drives.pop(run_id)
                failed(run_id, error)
                self.leases.release(run_id)

    def release_others(self, *, stopping: bool) -> None:
        """Release every lease but those of Runs set aside (all of them once stopping)."""
        if stopping:
            self.drives.clear()
        for run_id in list(self.leases.held_runs()):
            if run_id not in self.drives:
                self.leases.release(run_id)


__all__ = ["SetAside"]
