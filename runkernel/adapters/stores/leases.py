"""The lease rules every store applies, as pure functions of the stored lease row and
the store's clock, so MemoryStore, SqliteStore and any other store decide alike.

A store keeps one row per leased Run: the worker, the epoch, the expiry (store time)
and whether it was released. The row is never deleted while the Run exists, so epochs
only rise. A store reads the row and its clock inside the transaction that acts on the
answer (a take-over, a renewal, a commit), which is what makes W3 hold: at most one
lease of a Run is valid at any instant of the store's clock.
"""

from __future__ import annotations

import math
from collections.abc import Container, Mapping, Sequence

from attrs import frozen

from runkernel.adapters.stores.contract import Lease, LeaseHeld, LeaseLost, Writer
from runkernel.kernel.state import ThreadCommit


@frozen
class LeaseRow:
    """A Run's stored lease: the last one granted, valid or not."""

    lease: Lease
    released: bool

    def valid_at(self, now: float) -> bool:
        """Whether this lease is valid at store time ``now``: neither released nor expired."""
        return not self.released and self.lease.expires_at > now


def checked_duration(duration: float) -> float:
    """A lease duration must be a finite number of seconds, zero or more."""
    if not (isinstance(duration, (int, float)) and math.isfinite(duration) and duration >= 0):
        raise ValueError(f"a lease duration is a finite number of seconds >= 0, not {duration!r}")
    return float(duration)


def checked_take(worker_id: str, duration: float) -> float:
    """What a taker asks for, checked before anything is read or written: a worker id
    that is not empty, and a valid ``duration`` (returned as a float)."""
    if not worker_id:
        raise ValueError("a worker id must not be empty")
    return checked_duration(duration)


def acquired(run_id: str, row: LeaseRow | None, worker_id: str, duration: float, now: float) -> Lease:
    """The lease ``worker_id`` gets on ``run_id`` (a store writes it as the new row), or
    ``LeaseHeld`` while another worker's lease is valid."""
    expires_at = now + checked_take(worker_id, duration)
    if row is None:
        return Lease(run_id, worker_id, 1, expires_at)
    if row.valid_at(now):
        if row.lease.worker_id != worker_id:
            raise LeaseHeld(row.lease)
        return Lease(run_id, worker_id, row.lease.epoch, max(expires_at, row.lease.expires_at))
    return Lease(run_id, worker_id, row.lease.epoch + 1, expires_at)


def require_held(lease: Lease, row: LeaseRow | None, now: float, margin: float = 0.0) -> Lease:
    """The stored lease if it is ``lease`` and stays valid ``margin`` more seconds; else
    ``LeaseLost`` saying why."""
    if row is None or row.lease.worker_id != lease.worker_id or row.lease.epoch != lease.epoch:
        holder = "nobody" if row is None else f"{row.lease.worker_id!r} at epoch {row.lease.epoch}"
        raise LeaseLost(lease, f"the Run's lease is now {holder}")
    if row.released:
        raise LeaseLost(lease, "it was released")
    if row.lease.expires_at - now < margin:
        if row.lease.expires_at <= now:
            raise LeaseLost(lease, f"it expired at store time {row.lease.expires_at:.3f} (now {now:.3f})")
        raise LeaseLost(
            lease, f"it expires at store time {row.lease.expires_at:.3f}, within the margin of {margin} s"
        )
    return row.lease


def taken_each(
    run_ids: Sequence[str],
    rows: Mapping[str, LeaseRow],
    worker_id: str,
    duration: float,
    now: float,
    ended: Container[str] = (),
) -> list[Lease]:
    """``acquire_leases`` by the rules of ``acquired``: the lease ``worker_id`` gets on each
    of ``run_ids`` (once each, in their order) whose lease no other worker holds valid at
    ``now``; the Runs another worker holds, and the ``ended`` ones, are left out.
    ``rows`` are the stored rows."""
    checked_take(worker_id, duration)
    granted = []
    for run_id in dict.fromkeys(run_ids):
        if run_id in ended:
            continue
        row = rows.get(run_id)
        if row is None or not row.valid_at(now) or row.lease.worker_id == worker_id:
            granted.append(acquired(run_id, row, worker_id, duration, now))
    return granted


def renewed_each(leases: Sequence[Lease], rows: Mapping[str, LeaseRow], duration: float, now: float) -> list[Lease]:
    """``renew_leases`` by the rules of ``renew_lease``: each of ``leases`` still held at
    ``now`` (the stored row is that lease, neither released nor expired) extended to
    ``duration`` seconds from ``now``, same epoch; the leases lost are left out."""
    checked_duration(duration)
    renewed = []
    for lease in {lease.run_id: lease for lease in leases}.values():
        row = rows.get(lease.run_id)
        if row is not None and row.valid_at(now) and row.lease.writer == lease.writer:
            renewed.append(acquired(lease.run_id, row, lease.worker_id, duration, now))
    return renewed


def checked_release(lease: Lease | None, release: bool) -> None:
    """``append(release=True)`` gives up the lease the commit names: without one there
    is nothing to release, which is a caller's mistake, refused before anything is
    written."""
    if release and lease is None:
        raise ValueError("append(release=True) releases the commit's lease: pass lease= too")


def commit_writer(commit: ThreadCommit, lease: Lease | None, row: LeaseRow | None, now: float) -> Writer | None:
    """The writer a commit records, after the lease check its transaction makes."""
    if lease is None:
        if row is not None and row.valid_at(now):
            raise LeaseHeld(row.lease)
        return None
    if lease.run_id != commit.run_id:
        raise LeaseLost(lease, f"it leases run {lease.run_id!r}, not the commit's run {commit.run_id!r}")
    require_held(lease, row, now)
    return lease.writer


def is_own_landed_commit(
    commit: ThreadCommit,
    lease: Lease | None,
    head_version: int | None,
    stored_run_id: str | None,
    stored_same_content: bool,
    stored_writer: Writer | None,
) -> bool:
    """W4: whether ``commit`` is the Thread's latest commit already, written by this
    lease's writer (its acknowledgement was lost), so the store adopts it instead of
    writing it again or calling it a conflict."""
    return (
        lease is not None
        and head_version == commit.version
        and stored_run_id == commit.run_id
        and stored_same_content
        and stored_writer == lease.writer
    )
