"""``--store URL``: ``memory:``, ``sqlite:///path.db`` or ``postgresql://...``."""

from __future__ import annotations

from runkernel.adapters.memory_store import MemoryStore
from runkernel.adapters.sqlite_store import SqliteStore
from runkernel.adapters.store import Store, StoreError

DEFAULT_STORE_URL = "sqlite:///runkernel.sqlite"


class BadStoreUrl(StoreError):
    """The URL names no store this runkernel can open."""


def open_store(url: str, *, create: bool = True, read_only: bool = False) -> Store:
    """Open the store a URL names. ``sqlite:///rel.db`` is relative to the working
    directory, ``sqlite:////abs/path.db`` absolute. With ``create=False`` a missing
    SQLite file is an error instead of a new empty store; ``read_only`` opens it for a
    read command (never written, readable on read-only media, one consistent snapshot)."""
    if url == "memory:":
        return MemoryStore()
    if url.startswith("sqlite:///"):
        path = url[len("sqlite:///"):]
        if not path:
            raise BadStoreUrl(f"{url!r} names no file; use sqlite:///path.db")
        return SqliteStore(path, create=create, read_only=read_only)
    if url.startswith(("postgresql://", "postgres://")):
        raise BadStoreUrl(
            "the PostgreSQL store is not part of this version; use memory: or sqlite:///path.db"
        )
    raise BadStoreUrl(f"unknown store URL {url!r}; use memory:, sqlite:///path.db or postgresql://...")
