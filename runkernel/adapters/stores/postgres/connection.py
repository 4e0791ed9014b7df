# generated from runkernel/adapters/stores/postgres/connection_async.py by tools/async_to_sync.py, do not edit:
# change runkernel/adapters/stores/postgres/connection_async.py and run `python tools/async_to_sync.py`
"""The PostgreSQL store's connection: one session from a psycopg-pool pool (remade when
it drops), the schema recognized before anything else, reads repeated once on a new
connection when the old one dropped, and the LISTEN/NOTIFY wake-ups of workers.

A connection that dropped is made again in the caller's own time: one direct attempt
first (bounded by the connect timeout), and only once the server answers a fresh pool
for it. So while the server is down nothing retries in the background, the pool logs no
warnings, and each call fails within the timeout with the server's own reason (a worker
rides the outage out: ``runkernel.adapters.worker.outage``). ``connect_timeout`` comes
from the store URL's ``?connect_timeout=SECONDS`` when it has one (libpq's own
parameter), else from the argument; it bounds each connection attempt and the wait for
the pool's connection.

One source for both APIs, as psycopg writes its own: ``connection_async.py`` is written
by hand on psycopg's async connection and psycopg-pool's async pool, and
``connection.py``, the session of the synchronous ``PostgresStore``, is generated from
it by ``tools/async_to_sync.py`` (async names made sync, awaits dropped, ``if True:  #
ASYNC`` blocks resolved to their ``else:``). An async session cannot connect in its
constructor: it is opened by awaiting its ``_open()``; a sync one connects in its
constructor. Both work through one pooled connection; the async pool's workers are
tasks of the event loop, not threads.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import psycopg
from psycopg import sql
from psycopg_pool import ConnectionPool, PoolTimeout

from runkernel.adapters.stores.postgres.commit import PREPARED
from runkernel.adapters.stores.postgres.schema import (
    TABLES_QUERY,
    connect_failure,
    holds_store,
    meta_query,
    meta_version,
    redacted,
    refuse_unless_current,
    split_url,
    unavailable,
)
from runkernel.adapters.stores.contract import StoreUnavailable

Connection = psycopg.Connection[tuple[Any, ...]]


class PostgresConnection:
    """The session a PostgreSQL store works through. Use one per thread of control.

    ``url`` is a libpq URL (``postgresql://user@host:5432/db``), optionally with
    ``?schema=NAME``. ``read_only`` opens it for a read command: one REPEATABLE READ,
    READ ONLY transaction for its life, so everything read is one snapshot."""

    def __init__(
        self, url: str, *, read_only: bool = False, connect_timeout: float = 10.0, _checked: bool = False
    ) -> None:
        # _checked: the schema was found current by the instance this one reopens
        self.url = url
        self.where = redacted(url)
        self.read_only = read_only
        self._conninfo, self.schema = split_url(url)
        connect_timeout = _url_timeout(self._conninfo, connect_timeout)
        self.connect_timeout = connect_timeout
        self._channel = f"runkernel_work_{self.schema}"
        self._listener: Connection | None = None
        self._pool = self._new_pool()
        self._checked = _checked
        self._open()

    def _open(self) -> None:
        """Connect: the server asked first, the schema recognized, the pool opened."""
        try:
            # one direct connection first: a server that is down or a store that is not
            # initialized is refused at once with the server's own reason, where the
            # pool would keep retrying in the background until its timeout
            with self._connect() as probe:
                if not self._checked:
                    _check_current(probe, self.url, self.schema)
            self._pool.open(wait=True, timeout=self.connect_timeout)
            self._conn = self._take()
            if self.read_only:
                _check_current(self._conn, self.url, self.schema)  # begins the one read snapshot
        except PoolTimeout:
            self._pool.close()
            raise StoreUnavailable(f"{self.where}: cannot connect within {self.connect_timeout:g} s") from None
        except psycopg.Error as error:
            self._pool.close()
            raise connect_failure(self.url, "opening the store", error) from None
        except BaseException:
            self._pool.close()
            raise

    def _connect(self) -> Connection:
        """A direct connection, outside the pool (bounded by the connect timeout)."""
        return psycopg.Connection.connect(
            self._conninfo, autocommit=True, connect_timeout=_whole_seconds(self.connect_timeout)
        )

    def _new_pool(self) -> ConnectionPool[Connection]:
        """A pool of the one connection this store works through (not opened yet)."""
        schema, read_only = self.schema, self.read_only

        def configure(conn: Connection) -> None:
            conn.execute(sql.SQL("SET search_path TO {}").format(sql.Identifier(schema)))
            if not read_only:  # every statement prepared in one round trip
                conn.execute(";\n".join(PREPARED).encode())

        return ConnectionPool(
            self._conninfo,
            min_size=1,
            max_size=1,
            # prepare_threshold=None: psycopg's own statement cache answers a ROLLBACK
            # with DEALLOCATE ALL, which would drop the commit's prepared statements too
            kwargs={
                "autocommit": True,
                "connect_timeout": _whole_seconds(self.connect_timeout),
                "prepare_threshold": None,
            },
            configure=configure,
            open=False,
            name=f"runkernel {self.where}",
        )

    def _take(self) -> Connection:
        conn = self._pool.getconn(timeout=self.connect_timeout)
        if self.read_only:
            conn.set_autocommit(False)
            conn.set_isolation_level(psycopg.IsolationLevel.REPEATABLE_READ)
            conn.set_read_only(True)
        return conn

    def _reconnect(self) -> None:
        """A new connection for one that dropped: the old one and its pool closed (so
        nothing reconnects in the background), one direct attempt, and a fresh pool
        only once the server answered it; else ``StoreUnavailable`` with its reason.
        Called again at the next store call while the server stays down."""
        try:
            self._conn.close()
        except Exception:  # noqa: BLE001 - closing a broken connection must not fail
            pass
        self._drop_listener()  # it went to the same server: listen afresh at the next wait
        if not self._pool.closed:
            self._pool.close(timeout=_POOL_STOP)
        try:
            probe = self._connect()
            probe.close()
        except psycopg.Error as error:
            raise unavailable(self.url, "reconnecting", error) from None
        self._pool = self._new_pool()
        try:
            self._pool.open(wait=True, timeout=self.connect_timeout)
            self._conn = self._take()
        except PoolTimeout:
            self._pool.close(timeout=_POOL_STOP)
            raise StoreUnavailable(f"{self.where}: the connection dropped and none could be made again") from None

    # --- work wake-ups (LISTEN/NOTIFY) ------------------------------------------------

    def wait_for_work(self, timeout: float) -> list[str]:
        """Wait up to ``timeout`` seconds for a wake-up and return the run ids notified
        (a new Run committed, a command put in the inbox). The first call starts
        listening, so a worker calls it once with ``timeout=0`` before its first poll,
        then alternates polls with waits; notifications between waits are kept."""
        for attempt in (1, 2):
            try:
                if self._listener is None or self._listener.closed or self._listener.broken:
                    self._listener = self._connect()
                    self._listener.execute(sql.SQL("LISTEN {}").format(sql.Identifier(self._channel)))
                woken = [n.payload for n in self._listener.notifies(timeout=timeout, stop_after=1)]
                return woken + [n.payload for n in self._listener.notifies(timeout=0.0)]
            except psycopg.Error as error:
                self._drop_listener()
                if attempt == 2:
                    raise unavailable(self.url, "waiting for work", error) from None
                # a listener that dropped (its server restarted) listens again once at
                # once; polling finds whatever was notified meanwhile
        raise AssertionError("unreachable")

    def _drop_listener(self) -> None:
        listener, self._listener = self._listener, None
        if listener is not None:
            try:
                listener.close()
            except Exception:  # noqa: BLE001 - closing a broken connection must not fail
                pass

    def close(self) -> None:
        if self._listener is not None:
            self._listener.close()
        try:
            if self.read_only and not self._conn.broken:
                self._conn.rollback()  # ends the read snapshot before the pool sees it
            self._pool.putconn(self._conn)
        except Exception:  # noqa: BLE001 - closing must not fail on a broken connection
            pass
        self._pool.close()

    # --- plumbing -------------------------------------------------------------------

    def _attempt(
        self, doing: str, work: Callable[[Connection], Any], *, repeat: bool = True
    ) -> Any:
        """``work`` on the connection. A connection that dropped is made again (for the
        next call), and ``work`` repeated once if ``repeat`` (a read, or a write that
        does the same when done twice); else the drop is a StoreUnavailable."""
        for attempt in (1, 2):
            try:
                return work(self._conn)
            except psycopg.Error as error:
                if (self._conn.broken or self._conn.closed) and not self.read_only:
                    self._reconnect()
                    if attempt == 1 and repeat:
                        continue
                raise unavailable(self.url, doing, error) from None
        raise AssertionError("unreachable")

    def _fetch(self, query: str, params: tuple[Any, ...]) -> Any:
        def one(conn: Connection) -> Any:
            cursor = conn.execute(query.encode(), params)
            return cursor.fetchone()

        return self._attempt("a read", one)

    def _fetch_all(self, query: str, params: tuple[Any, ...]) -> list[tuple[Any, ...]]:
        def every(conn: Connection) -> list[tuple[Any, ...]]:
            cursor = conn.execute(query.encode(), params)
            return cursor.fetchall()

        rows: list[tuple[Any, ...]] = self._attempt("a read", every)
        return rows

    def _execute(self, query: str, params: tuple[Any, ...]) -> int:
        def counted(conn: Connection) -> int:
            cursor = conn.execute(query.encode(), params)
            return cursor.rowcount

        count: int = self._attempt("a write", counted)
        return count

    def _change(self, work: Callable[[Connection], Any], *, repeat: bool = True) -> Any:
        return self._attempt("a write", work, repeat=repeat)


def _check_current(conn: Connection, url: str, schema: str) -> None:
    """``schema.check_current`` on this module's connection: anything but a store of
    this runkernel's schema version refused."""
    cursor = conn.execute(TABLES_QUERY, (schema,))
    version = None
    if holds_store(url, schema, {str(r[0]) for r in cursor.fetchall()}):
        cursor = conn.execute(meta_query(schema))
        version = meta_version(url, schema, {str(k): str(v) for k, v in cursor.fetchall()})
    refuse_unless_current(url, schema, version)


#: Seconds a pool closed after its connection dropped gets to stop its threads (they are
#: idle: the one connection was checked out), so closing it logs no warning.
_POOL_STOP = 2.0


def _url_timeout(conninfo: str, default: float) -> float:
    """The URL's ``connect_timeout`` (seconds, as libpq reads it), else ``default``."""
    given = psycopg.conninfo.conninfo_to_dict(conninfo).get("connect_timeout")
    try:
        seconds = float(str(given)) if given is not None else default
    except ValueError:
        return default
    return seconds if seconds > 0 else default


def _whole_seconds(seconds: float) -> int:
    """libpq takes whole seconds, and reads below 2 as 2."""
    return max(2, round(seconds))
