"""The SQLite store's leases (Workers and leases), by this process's clock: every process
on one file shares the machine's wall clock, the only clock they have in common. Each
lease act is one ``BEGIN IMMEDIATE`` transaction, so the rows it is judged against are
read under the write lock; the batched acts (``acquire_leases``, ``renew_leases``) read
and write all their rows in one such transaction, the rules being those every store
shares (``stores.leases``)."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Sequence
from typing import Any

from runkernel.adapters.stores.contract import Lease
from runkernel.adapters.stores.leases import LeaseRow, renewed_each, taken_each
from runkernel.adapters.stores.sql.versions import SqlVersions
from runkernel.adapters.stores.sqlite.opening import store_error

_UPSERT = (
    "INSERT INTO leases (run_id, worker_id, epoch, expires_at, released) VALUES (?, ?, ?, ?, ?) "
    "ON CONFLICT (run_id) DO UPDATE SET worker_id = excluded.worker_id, epoch = excluded.epoch, "
    "expires_at = excluded.expires_at, released = excluded.released"
)
_ROWS = "SELECT run_id, worker_id, epoch, expires_at, released FROM leases WHERE run_id IN ({marks})"


class SqliteLeases(SqlVersions):
    """The lease hooks of ``SqlStore`` and the batched lease acts, on one SQLite connection."""

    path: str
    _db: sqlite3.Connection
    _clock: Callable[[], float]

    def _read(self, query: Callable[[], Any]) -> Any:
        raise NotImplementedError

    def store_time(self) -> float:
        return self._clock()

    def _lease_row(self, run_id: str) -> LeaseRow | None:
        row = self._db.execute(
            "SELECT worker_id, epoch, expires_at, released FROM leases WHERE run_id = ?", (run_id,)
        ).fetchone()
        return None if row is None else lease_row_of(run_id, *row)

    def _lease_rows(self, run_ids: list[str]) -> dict[str, LeaseRow]:
        rows = self._db.execute(_ROWS.format(marks=", ".join("?" * len(run_ids))), run_ids).fetchall()
        return {str(r[0]): lease_row_of(str(r[0]), *r[1:]) for r in rows}

    def _lease_now(self, run_id: str) -> tuple[LeaseRow | None, float]:
        row: LeaseRow | None = self._read(lambda: self._lease_row(run_id))
        return row, self._clock()

    def _leases_now(self, run_ids: list[str]) -> tuple[dict[str, LeaseRow], float]:
        found: dict[str, LeaseRow] = self._read(lambda: self._lease_rows(run_ids))
        return found, self._clock()

    def _with_lease_row(
        self, run_id: str, act: Callable[[LeaseRow | None, float], LeaseRow | None], doing: str
    ) -> None:
        def one(rows: dict[str, LeaseRow], now: float) -> list[LeaseRow]:
            written = act(rows.get(run_id), now)
            return [] if written is None else [written]

        self._with_lease_rows([run_id], one, doing)

    def _with_lease_rows(
        self, run_ids: list[str], act: Callable[[dict[str, LeaseRow], float], list[LeaseRow]], doing: str
    ) -> None:
        """In one ``BEGIN IMMEDIATE`` transaction (the write lock taken first, so the rows
        read stay current): the stored lease rows of ``run_ids`` and the clock, then the
        rows ``act`` returns written."""
        db = self._db
        try:
            db.execute("BEGIN IMMEDIATE")
            try:
                written = act(self._lease_rows(run_ids) if run_ids else {}, self._clock())
                db.executemany(
                    _UPSERT,
                    [(w.lease.run_id, w.lease.worker_id, w.lease.epoch, w.lease.expires_at, int(w.released)) for w in written],
                )
                db.execute("COMMIT")
            finally:
                if db.in_transaction:
                    db.execute("ROLLBACK")
        except sqlite3.Error as error:
            raise store_error(self.path, doing, error) from None

    def acquire_leases(self, run_ids: Sequence[str], worker_id: str, duration: float) -> list[Lease]:
        granted: list[Lease] = []

        def take(rows: dict[str, LeaseRow], now: float) -> list[LeaseRow]:
            granted[:] = taken_each(run_ids, rows, worker_id, duration, now, self._ended(list(dict.fromkeys(run_ids))))
            return [LeaseRow(lease, released=False) for lease in granted]

        self._with_lease_rows(list(dict.fromkeys(run_ids)), take, "taking leases")
        return granted

    def _ended(self, run_ids: list[str]) -> set[str]:
        """Those of ``run_ids`` that ended (read in the lease act's transaction)."""
        marks = ", ".join("?" * len(run_ids))
        query = f"SELECT run_id FROM runs WHERE state = 'ended' AND run_id IN ({marks})"
        return {str(row[0]) for row in self._db.execute(query, run_ids).fetchall()} if run_ids else set()

    def renew_leases(self, leases: Sequence[Lease], duration: float) -> list[Lease]:
        renewed: list[Lease] = []

        def renew(rows: dict[str, LeaseRow], now: float) -> list[LeaseRow]:
            renewed[:] = renewed_each(leases, rows, duration, now)
            return [LeaseRow(lease, released=False) for lease in renewed]

        self._with_lease_rows(list(dict.fromkeys(lease.run_id for lease in leases)), renew, "renewing leases")
        return renewed


def lease_row_of(run_id: str, worker_id: Any, epoch: Any, expires_at: Any, released: Any) -> LeaseRow:
    """A ``leases`` row's columns as the lease rules take them."""
    return LeaseRow(Lease(run_id, str(worker_id), int(epoch), float(expires_at)), bool(released))


__all__ = ["SqliteLeases", "lease_row_of"]
