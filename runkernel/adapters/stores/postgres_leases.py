"""The PostgreSQL store's leases and work discovery (Workers and leases):
each lease act is one transaction holding the Run's lease row locked, judged by the
server's clock ``now()`` with the rules every store shares (``runkernel.adapters.stores.leases``);
the Runs with work are one query over the summary rows each commit rewrites."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from runkernel.adapters.stores.leases import LeaseRow, acquired, checked_duration, require_held
from runkernel.adapters.stores.postgres_commit import NOW
from runkernel.adapters.stores.postgres_connection import Connection, PostgresConnection
from runkernel.adapters.stores.contract import Lease, LeaseStatus
from runkernel.adapters.stores.work import RunSummary, count_query, listing_query, parent_from_columns, summary_from_row, work_query
from runkernel.kernel.state import ParentCall


class PostgresLeases(PostgresConnection):
    """Leases and listing, on the store's session."""

    # --- leases (Workers and leases), by the server's clock ---------------

    def store_time(self) -> float:
        row = self._fetch(f"SELECT {NOW}", ())
        return float(row[0])

    def _lease_row(self, run_id: str, *, lock: bool = False, conn: Connection | None = None) -> tuple[LeaseRow | None, float]:
        query = (
            f"SELECT l.worker_id, l.epoch, l.expires_at, l.released, {NOW} FROM (SELECT 1) AS one "
            "LEFT JOIN leases l ON l.run_id = %s"
        )
        if conn is None:
            row = self._fetch(query, (run_id,))
        else:
            locked = f"SELECT worker_id, epoch, expires_at, released, {NOW} FROM leases WHERE run_id = %s FOR UPDATE"
            row = conn.execute((locked if lock else query).encode(), (run_id,)).fetchone()
        assert row is not None
        now = float(row[4])
        if row[0] is None or int(row[1]) == 0:  # no lease was ever granted (epoch 0: the placeholder)
            return None, now
        return LeaseRow(Lease(run_id, str(row[0]), int(row[1]), float(row[2])), bool(row[3])), now

    def _with_lease_row(self, run_id: str, act: Callable[[LeaseRow | None, float], LeaseRow | None]) -> None:
        """In one transaction: the Run's lease row locked and the server's clock, then
        the row ``act`` returns (None: unchanged) written."""

        def work(conn: Connection) -> None:
            with conn.transaction():
                # a placeholder row (epoch 0) to lock, so two first takers queue on it
                conn.execute(
                    "INSERT INTO leases (run_id, worker_id, epoch, expires_at, released) VALUES (%s, '', 0, 0, true) "
                    "ON CONFLICT (run_id) DO NOTHING",
                    (run_id,),
                )
                row, now = self._lease_row(run_id, lock=True, conn=conn)
                written = act(row, now)
                if written is not None:
                    conn.execute(
                        "UPDATE leases SET worker_id = %s, epoch = %s, expires_at = %s, released = %s WHERE run_id = %s",
                        (written.lease.worker_id, written.lease.epoch, written.lease.expires_at, written.released, run_id),
                    )

        self._change(work)

    def acquire_lease(self, run_id: str, worker_id: str, duration: float) -> Lease:
        checked_duration(duration)
        if not worker_id:
            raise ValueError("a worker id must not be empty")
        granted: list[Lease] = []

        def take(row: LeaseRow | None, now: float) -> LeaseRow:
            granted.append(acquired(run_id, row, worker_id, duration, now))
            return LeaseRow(granted[-1], released=False)

        self._with_lease_row(run_id, take)
        return granted[-1]

    def renew_lease(self, lease: Lease, duration: float) -> Lease:
        checked_duration(duration)
        renewed: list[Lease] = []

        def renew(row: LeaseRow | None, now: float) -> LeaseRow:
            require_held(lease, row, now)
            renewed.append(acquired(lease.run_id, row, lease.worker_id, duration, now))
            return LeaseRow(renewed[-1], released=False)

        self._with_lease_row(lease.run_id, renew)
        return renewed[-1]

    def check_lease(self, lease: Lease, margin: float) -> Lease:
        row, now = self._lease_row(lease.run_id)
        return require_held(lease, row, now, margin)

    def release_lease(self, lease: Lease) -> bool:
        released: list[bool] = []

        def release(row: LeaseRow | None, now: float) -> LeaseRow | None:
            mine = row is not None and row.valid_at(now) and row.lease.writer == lease.writer
            released.append(mine)
            return LeaseRow(row.lease, released=True) if mine and row is not None else None

        self._with_lease_row(lease.run_id, release)
        return released[-1]

    def current_lease(self, run_id: str) -> Lease | None:
        row, now = self._lease_row(run_id)
        return row.lease if row is not None and row.valid_at(now) else None

    def lease_status(self, run_id: str) -> LeaseStatus:
        row, now = self._lease_row(run_id)
        return LeaseStatus(None if row is None else row.lease, row is not None and row.released, now)

    def lease_statuses(self, run_ids: Sequence[str]) -> dict[str, LeaseStatus]:
        wanted = list(dict.fromkeys(run_ids))
        if not wanted:
            return {}
        rows = self._fetch_all(
            f"SELECT w.run_id, l.worker_id, l.epoch, l.expires_at, l.released, {NOW} "
            "FROM unnest(%s::text[]) AS w(run_id) LEFT JOIN leases l ON l.run_id = w.run_id",
            (wanted,),
        )
        statuses = {}
        for row in rows:
            leased = row[1] is not None and int(row[2]) != 0  # epoch 0: the placeholder, never granted
            lease = Lease(str(row[0]), str(row[1]), int(row[2]), float(row[3])) if leased else None
            statuses[str(row[0])] = LeaseStatus(lease, leased and bool(row[4]), float(row[5]))
        return {run_id: statuses[run_id] for run_id in wanted}

    # --- listing and work discovery ---------------------------------------------------

    def list_runs(
        self,
        *,
        state: str | None = None,
        thread_id: str | None = None,
        limit: int | None = None,
        app: str | None = None,
        after: str | None = None,
    ) -> list[RunSummary]:
        query, params = listing_query(
            "%s", "activated", state=state, thread_id=thread_id, limit=limit, app=app, after=after
        )
        rows = self._fetch_all(query, tuple(params))
        return [summary_from_row(r) for r in rows]

    def count_runs(
        self, *, state: str | None = None, thread_id: str | None = None, app: str | None = None, cap: int = 1000
    ) -> int:
        query, params = count_query("%s", state=state, thread_id=thread_id, app=app, cap=cap)
        row = self._fetch(query, tuple(params))
        return 0 if row is None else int(row[0])

    def runs_with_work(self, app: str | None, limit: int = 100) -> list[str]:
        rows = self._fetch_all(work_query("%s", NOW, "IS NOT DISTINCT FROM", "r.activated"), (app, limit))
        return [str(r[0]) for r in rows]

    def parent_of(self, run_id: str) -> ParentCall | None:
        row = self._fetch(
            "SELECT parent_thread_id, parent_run_id, parent_call_id FROM runs WHERE run_id = %s", (run_id,)
        )
        return None if row is None else parent_from_columns(row)
