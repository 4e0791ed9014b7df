"""The worker registry and the versions recorded compatible (``stores.versions``), written
once for both SQL stores over their ``workers`` and ``compatible_versions`` tables, each
statement in ``?`` style with the dialect's store clock (heartbeats are store time, the
clock leases are judged by)."""

from __future__ import annotations

from collections.abc import Sequence

from runkernel.adapters.stores.sql.shared import SqlStore
from runkernel.adapters.stores.versions import FORGET_AFTER, WorkerRecord, checked_acceptance

_REGISTER = (
    "INSERT INTO workers (worker_id, app, version, heartbeat_at) VALUES (?, ?, ?, {now}) "
    "ON CONFLICT (worker_id) DO UPDATE SET app = excluded.app, version = excluded.version, "
    "heartbeat_at = excluded.heartbeat_at"
)


class SqlVersions(SqlStore):
    """``register_worker``, ``heartbeat_worker``, ``forget_worker``, ``workers``,
    ``accept_versions`` and ``compatible_versions`` of a SQL store."""

    def _clock_sql(self) -> tuple[str, tuple[float, ...]]:
        """The store's clock inside a statement, and its parameter where it is one."""
        if self.dialect.now == "?":
            return "?", (self.store_time(),)
        return self.dialect.now, ()

    def store_time(self) -> float:
        raise NotImplementedError

    def register_worker(self, worker_id: str, app: str | None, version: str | None) -> None:
        if not isinstance(worker_id, str) or not worker_id:
            raise ValueError(f"worker_id must be a non-empty string, not {worker_id!r}")
        now, clock = self._clock_sql()
        self._change_rows(_REGISTER.format(now=now), (worker_id, app, version, *clock))

    def heartbeat_worker(self, worker_id: str) -> bool:
        now, clock = self._clock_sql()
        return self._change_rows(f"UPDATE workers SET heartbeat_at = {now} WHERE worker_id = ?", (*clock, worker_id)) > 0

    def forget_worker(self, worker_id: str) -> None:
        now, clock = self._clock_sql()
        self._change_rows(
            f"DELETE FROM workers WHERE worker_id = ? OR heartbeat_at < {now} - ?", (worker_id, *clock, FORGET_AFTER)
        )

    def workers(self) -> list[WorkerRecord]:
        rows = self._all("SELECT worker_id, app, version, heartbeat_at FROM workers ORDER BY worker_id", ())
        return [WorkerRecord(str(r[0]), r[1], r[2], float(r[3])) for r in rows]

    def accept_versions(self, app: str, version: str, drives: Sequence[str]) -> None:
        found = checked_acceptance(app, version, drives)
        if not found:
            return
        # one statement: every pair or none
        values = ", ".join("(?, ?, ?)" for _ in found)
        params = [value for drives_version in found for value in (app, version, drives_version)]
        self._change_rows(
            f"INSERT INTO compatible_versions (app, version, drives) VALUES {values} ON CONFLICT DO NOTHING", params
        )

    def compatible_versions(self, app: str, version: str) -> frozenset[str]:
        rows = self._all("SELECT drives FROM compatible_versions WHERE app = ? AND version = ?", (app, version))
        return frozenset({version, *(str(r[0]) for r in rows)})


__all__ = ["SqlVersions"]
