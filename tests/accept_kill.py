"""A ``runkernel upgrade-check --accept`` that kills itself with SIGKILL at a chosen point
of its write (``Store.accept_versions``), for tests/stores/test_accept_crash.py.

    python tests/accept_kill.py STORE_URL APP_SPEC KILL_AT

``KILL_AT`` is ``count`` (no kill: print how many points the write passes, as
``points N``), ``after`` (killed right after the write returned), or a number k >= 1:
killed at the k-th point inside the write. On SQLite a point is one step of the
database engine's virtual machine while the write's statement runs (its progress
handler, called between instructions: the kill lands inside the statement, after some of
its rows may be in the page cache or journal); on PostgreSQL a point is one statement
the write is about to send (a statement cut on its way, or whose reply is lost, is
tests/pg_proxy.py's part).
"""

from __future__ import annotations

import contextlib
import os
import signal
import sqlite3
import sys
from collections.abc import Callable, Iterator
from typing import Any

from runkernel.cli.entry import main


class Points:
    """Counts the points the armed write passes; kills the process at ``kill_at``."""

    def __init__(self, kill_at: int | None) -> None:
        self.kill_at = kill_at
        self.armed = False
        self.passed = 0

    def point(self) -> None:
        if not self.armed:
            return
        self.passed += 1
        if self.passed == self.kill_at:
            os.kill(os.getpid(), signal.SIGKILL)


def _sqlite_points(points: Points) -> None:
    """Every SQLite connection opened from now on reports each VM step to ``points``."""
    connect = sqlite3.connect

    def counting(*args: Any, **kwargs: Any) -> sqlite3.Connection:
        db: sqlite3.Connection = connect(*args, **kwargs)

        def step() -> int:
            points.point()
            return 0

        db.set_progress_handler(step, 1)
        return db

    sqlite3.connect = counting  # type: ignore[assignment]


def _postgres_points(points: Points) -> None:
    """Each statement the store sends through psycopg reports to ``points`` before it is
    sent (a statement the server received is the proxy's cuts' part of the test)."""
    import psycopg

    execute = psycopg.Connection.execute

    def counting(self: psycopg.Connection[Any], query: Any, params: Any = None, **kwargs: Any) -> Any:
        points.point()
        return execute(self, query, params, **kwargs)

    psycopg.Connection.execute = counting  # type: ignore[method-assign]


@contextlib.contextmanager
def _armed(points: Points, store_class: type[Any]) -> Iterator[None]:
    accept: Callable[..., None] = store_class.accept_versions

    def armed(self: Any, *args: Any, **kwargs: Any) -> None:
        points.armed = True
        try:
            accept(self, *args, **kwargs)
        finally:
            points.armed = False
        if points.kill_at == 0:  # "after": the write returned
            os.kill(os.getpid(), signal.SIGKILL)

    store_class.accept_versions = armed
    try:
        yield
    finally:
        store_class.accept_versions = accept


def run(url: str, app: str, kill_at: str) -> int:
    points = Points(None if kill_at == "count" else 0 if kill_at == "after" else int(kill_at))
    if url.startswith("sqlite:"):
        from runkernel.adapters.stores.sqlite import SqliteStore as store_class

        _sqlite_points(points)
    else:
        from runkernel.adapters.stores.postgres import PostgresStore as store_class  # type: ignore[assignment]

        _postgres_points(points)
    with _armed(points, store_class):
        code = main(["upgrade-check", "--store", url, "--app", app, "--accept", "--format", "json"])
    print(f"points {points.passed}", file=sys.stderr)
    return code


if __name__ == "__main__":
    sys.exit(run(*sys.argv[1:4]))
