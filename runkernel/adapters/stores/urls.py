"""``--store URL``: ``memory:``, ``sqlite:///path.db`` or ``postgresql://...``."""

from __future__ import annotations

from runkernel.adapters.stores.memory import MemoryStore
from runkernel.adapters.stores.sqlite import SqliteStore
from runkernel.adapters.stores.contract import Store
from runkernel.adapters.stores.redact import redacted as redacted
from runkernel.errors import BadStoreUrl as BadStoreUrl

DEFAULT_STORE_URL = "sqlite:///runkernel.sqlite"


def open_store(url: str, *, create: bool = True, read_only: bool = False) -> Store:
    """Open the store a URL names. ``sqlite:///rel.db`` is relative to the working
    directory, ``sqlite:////abs/path.db`` absolute. With ``create=False`` a missing
    SQLite file is an error instead of a new empty store; ``read_only`` opens it for a
    read command (never written, readable on read-only media, one consistent snapshot).
    A PostgreSQL store is never created here (``runkernel db init`` does); its module
    and psycopg are loaded only when such a URL is opened."""
    if url == "memory:":
        return MemoryStore()
    if url.startswith("sqlite:///"):
        path = url[len("sqlite:///"):]
        if not path:
            raise BadStoreUrl(f"{url!r} names no file; use sqlite:///path.db")
        return SqliteStore(path, create=create, read_only=read_only)
    if url.startswith(("postgresql://", "postgres://")):
        return _postgres(url, read_only=read_only)
    raise BadStoreUrl(f"unknown store URL {url!r}; use memory:, sqlite:///path.db or postgresql://...")


def _postgres(url: str, *, read_only: bool) -> Store:
    try:
        from runkernel.adapters.stores.postgres import PostgresStore
    except ImportError as error:
        raise BadStoreUrl(
            f"the PostgreSQL store needs psycopg and psycopg-pool ({error}); "
            "install runkernel[postgres]"
        ) from None
    return PostgresStore(url, read_only=read_only)
