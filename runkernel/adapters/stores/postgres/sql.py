"""The PostgreSQL side of the shared SQL layer (``sql.shared.SqlStore``): its statements
run on the store's session (``postgres.connection``), reads repeated once on a new
connection when the old one dropped, and leases judged by the server's clock ``now()``
(Workers and leases): each lease act is one transaction holding the Run's
lease row locked, with the rules every store shares (``leases``); taking a lease, the
worker's hot path, is one statement with those rules in SQL."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from runkernel.adapters.stores.contract import Lease
from runkernel.adapters.stores.leases import LeaseRow, checked_duration, checked_take
from runkernel.adapters.stores.postgres.commit import NOW
from runkernel.adapters.stores.postgres.connection import Connection, PostgresConnection
from runkernel.adapters.stores.sql.dialect import POSTGRESQL
from runkernel.adapters.stores.sql.queries import work_query
from runkernel.adapters.stores.sql.versions import SqlVersions
from runkernel.adapters.stores.sql.statements import Row

#: Runs with work, judged by the server's clock.
_WORK = work_query(POSTGRESQL)

#: A lease taken in one statement, one round trip (the worker's hot path): the rules of
#: ``leases.acquired`` in SQL. The row is locked by the upsert itself, so two takers
#: queue on it; a lease another worker holds, valid by ``now()``, matches no row to
#: update and nothing comes back. A new row, or a released or expired lease, gets the
#: epoch after the row's (the placeholder row of ``_with_lease_row`` has epoch 0); the
#: worker's own valid lease keeps its epoch and the later expiry.
_TAKEN = (
    "ON CONFLICT (run_id) DO UPDATE SET worker_id = excluded.worker_id, "
    f"epoch = CASE WHEN NOT l.released AND l.expires_at > {NOW} THEN l.epoch ELSE l.epoch + 1 END, "
    f"expires_at = CASE WHEN NOT l.released AND l.expires_at > {NOW} "
    "THEN greatest(l.expires_at, excluded.expires_at) ELSE excluded.expires_at END, released = false "
    f"WHERE l.released OR l.expires_at <= {NOW} OR l.worker_id = excluded.worker_id "
    "RETURNING l.epoch, l.expires_at, l.run_id"
)
TAKE = (
    "INSERT INTO leases AS l (run_id, worker_id, epoch, expires_at, released) "
    f"VALUES (%s, %s, 1, {NOW} + %s::float8, false) " + _TAKEN
)

#: ``acquire_leases``: the same take for several Runs in one statement, their rows locked
#: in run id order (so two workers taking overlapping pages queue, never deadlock); a Run
#: that ended is left out.
TAKE_MANY = (
    "INSERT INTO leases AS l (run_id, worker_id, epoch, expires_at, released) "
    f"SELECT w.run_id, %s, 1, {NOW} + %s::float8, false FROM unnest(%s::text[]) AS w(run_id) "
    "WHERE NOT EXISTS (SELECT 1 FROM runs r WHERE r.run_id = w.run_id AND r.state = 'ended') "
    "ORDER BY w.run_id " + _TAKEN
)

#: ``renew_leases`` in one statement: each lease still held (the same worker and epoch,
#: neither released nor expired by ``now()``) extended, the rows locked in run id order.
RENEW_MANY = (
    "WITH held AS (SELECT l.run_id FROM leases l "
    "JOIN unnest(%s::text[], %s::bigint[]) AS w(run_id, epoch) ON l.run_id = w.run_id AND l.epoch = w.epoch "
    f"WHERE l.worker_id = %s AND NOT l.released AND l.expires_at > {NOW} ORDER BY l.run_id FOR UPDATE OF l) "
    f"UPDATE leases l SET expires_at = greatest(l.expires_at, {NOW} + %s::float8) FROM held "
    f"WHERE l.run_id = held.run_id AND NOT l.released AND l.expires_at > {NOW} "
    "RETURNING l.run_id, l.epoch, l.expires_at"
)


class PostgresSql(PostgresConnection, SqlVersions):
    """The shared store methods, on the store's session."""

    dialect = POSTGRESQL

    # --- the hooks of SqlStore --------------------------------------------------------

    def _one(self, query: str, params: Sequence[Any]) -> Row | None:
        row: Row | None = self._fetch(POSTGRESQL.sql(query), tuple(params))
        return row

    def _all(self, query: str, params: Sequence[Any]) -> list[Row]:
        return self._fetch_all(POSTGRESQL.sql(query), tuple(params))

    def _change_rows(self, query: str, params: Sequence[Any]) -> int:
        return self._execute(POSTGRESQL.sql(query), tuple(params))

    def _write_once(self, query: str, params: Sequence[Any]) -> None:
        text, values = POSTGRESQL.sql(query).encode(), tuple(params)
        self._change(lambda c: c.execute(text, values), repeat=False)

    def _checkpoint_write(self, query: str, params: Sequence[Any]) -> None:
        # the checkpoints table is UNLOGGED: the write never waits for a WAL flush
        self._execute(POSTGRESQL.sql(query), tuple(params))

    # --- leases, by the server's clock ------------------------------------------------

    def store_time(self) -> float:
        row = self._fetch(f"SELECT {NOW}", ())
        return float(row[0])

    def acquire_lease(self, run_id: str, worker_id: str, duration: float) -> Lease:
        checked_take(worker_id, duration)
        taken = self._change(lambda c: c.execute(TAKE.encode(), (run_id, worker_id, float(duration))).fetchone())
        if taken is not None:
            return Lease(run_id, worker_id, int(taken[0]), float(taken[1]))
        # another worker's valid lease (the rare path): name it, by the same rules
        return super().acquire_lease(run_id, worker_id, duration)

    def acquire_leases(self, run_ids: Sequence[str], worker_id: str, duration: float) -> list[Lease]:
        checked_take(worker_id, duration)
        wanted = list(dict.fromkeys(run_ids))
        if not wanted:
            return []
        rows = self._change(lambda c: c.execute(TAKE_MANY.encode(), (worker_id, float(duration), wanted)).fetchall())
        granted = {str(r[2]): Lease(str(r[2]), worker_id, int(r[0]), float(r[1])) for r in rows}
        return [granted[run_id] for run_id in wanted if run_id in granted]

    def renew_leases(self, leases: Sequence[Lease], duration: float) -> list[Lease]:
        checked_duration(duration)
        by_run = {lease.run_id: lease for lease in leases}
        renewed: dict[str, Lease] = {}
        for worker_id in dict.fromkeys(lease.worker_id for lease in by_run.values()):  # one, from a worker
            own = [lease for lease in by_run.values() if lease.worker_id == worker_id]
            params = ([lease.run_id for lease in own], [lease.epoch for lease in own], worker_id, float(duration))
            rows = self._change(lambda c: c.execute(RENEW_MANY.encode(), params).fetchall())
            renewed.update({str(r[0]): Lease(str(r[0]), worker_id, int(r[1]), float(r[2])) for r in rows})
        return [renewed[run_id] for run_id in by_run if run_id in renewed]

    def _lease_now(self, run_id: str) -> tuple[LeaseRow | None, float]:
        row = self._fetch(
            f"SELECT l.worker_id, l.epoch, l.expires_at, l.released, {NOW} FROM (SELECT 1) AS one "
            "LEFT JOIN leases l ON l.run_id = %s",
            (run_id,),
        )
        assert row is not None
        return _lease_row(run_id, row), float(row[4])

    def _leases_now(self, run_ids: list[str]) -> tuple[dict[str, LeaseRow], float]:
        rows = self._fetch_all(
            f"SELECT w.run_id, l.worker_id, l.epoch, l.expires_at, l.released, {NOW} "
            "FROM unnest(%s::text[]) AS w(run_id) LEFT JOIN leases l ON l.run_id = w.run_id",
            (run_ids,),
        )
        found = {str(r[0]): lease for r in rows for lease in (_lease_row(str(r[0]), r[1:5]),) if lease is not None}
        return found, float(rows[0][5])

    def _with_lease_row(
        self, run_id: str, act: Callable[[LeaseRow | None, float], LeaseRow | None], doing: str
    ) -> None:
        def work(conn: Connection) -> None:
            with conn.transaction():
                # a placeholder row (epoch 0) to lock, so two first takers queue on it
                conn.execute(
                    "INSERT INTO leases (run_id, worker_id, epoch, expires_at, released) VALUES (%s, '', 0, 0, true) "
                    "ON CONFLICT (run_id) DO NOTHING",
                    (run_id,),
                )
                row = conn.execute(
                    f"SELECT worker_id, epoch, expires_at, released, {NOW} FROM leases WHERE run_id = %s FOR UPDATE",
                    (run_id,),
                ).fetchone()
                assert row is not None  # the placeholder at least
                written = act(_lease_row(run_id, row), float(row[4]))
                if written is not None:
                    conn.execute(
                        "UPDATE leases SET worker_id = %s, epoch = %s, expires_at = %s, released = %s WHERE run_id = %s",
                        (written.lease.worker_id, written.lease.epoch, written.lease.expires_at, written.released, run_id),
                    )

        self._attempt(doing, work)

    def runs_with_work(self, app: str | None, limit: int = 100, *, version: str | None = None) -> list[str]:
        return [str(r[0]) for r in self._all(_WORK, (app, version, version, version, limit))]


def _lease_row(run_id: str, row: Sequence[Any]) -> LeaseRow | None:
    """The lease of a row (worker id, epoch, expiry, released, ...); None when no lease
    was ever granted (no row, or epoch 0: the placeholder a first taker locks)."""
    if row[0] is None or int(row[1]) == 0:
        return None
    return LeaseRow(Lease(run_id, str(row[0]), int(row[1]), float(row[2])), bool(row[3]))
