"""The capability's store, one per OS thread: a runkernel store instance belongs to one
thread of control (a SQLite connection refuses any other thread, a PostgreSQL store's
session is one transaction at a time), while a module-level durable agent is used from
any thread (a thread pool, ``asyncio.to_thread``, ``run_sync`` in a worker thread)."""

from __future__ import annotations

import sqlite3
import threading

from runkernel import open_store
from runkernel.adapters.stores.contract import Store


class ThreadStores:
    """The store ``url`` names, opened once per thread that asks (``memory:`` once in
    all: it is one in-process store behind its own lock), or the one open ``Store`` the
    host gave, used as given (it is then the host's to share safely)."""

    def __init__(self, store: str | Store) -> None:
        self._given = None if isinstance(store, str) else store
        self._url = store if isinstance(store, str) else None
        self._lock = threading.Lock()
        self._by_thread: dict[int, Store] = {}
        self._shared: Store | None = None

    def get(self) -> Store:
        """This thread's store (opened at its first call)."""
        if self._given is not None:
            return self._given
        assert self._url is not None
        with self._lock:
            if self._url == "memory:":
                if self._shared is None:
                    self._shared = open_store(self._url)
                return self._shared
            thread = threading.get_ident()
            if thread not in self._by_thread:
                self._by_thread[thread] = open_store(self._url)
            return self._by_thread[thread]

    def close(self) -> None:
        """Close every store this opened (a given ``Store`` stays the host's). SQLite
        refuses to close another thread's connection: that one is dropped, and closed
        when it is collected."""
        with self._lock:
            opened = [*self._by_thread.values(), *([self._shared] if self._shared is not None else [])]
            self._by_thread.clear()
            self._shared = None
        for store in opened:
            try:
                store.close()
            except sqlite3.ProgrammingError:  # another thread's connection (see above)
                continue
