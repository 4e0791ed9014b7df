"""``--store URL``: ``memory:``, ``sqlite:///path.db`` or ``postgresql://...``."""

from __future__ import annotations

import re
import urllib.parse

from runkernel.adapters.memory_store import MemoryStore
from runkernel.adapters.sqlite_store import SqliteStore
from runkernel.adapters.store import Store
from runkernel.errors import BadStoreUrl as BadStoreUrl

DEFAULT_STORE_URL = "sqlite:///runkernel.sqlite"


#: libpq takes a password in the query too (``password=``, ``sslpassword=``)
_QUERY_SECRET = re.compile(r"(?i)(^|&)([^=&]*password)=[^&]*")


def redacted(url: str) -> str:
    """The URL without its passwords (user-info and query parameters), for messages."""
    try:
        parts = urllib.parse.urlsplit(url)
        password = parts.password
    except ValueError:  # a port that is not a number: keep what can be kept
        return _QUERY_SECRET.sub(r"\1\2=***", url)
    netloc = parts.netloc
    if password is not None:
        user_info, _, host = netloc.rpartition("@")
        netloc = f"{user_info.partition(':')[0]}:***@{host}"
    query = _QUERY_SECRET.sub(r"\1\2=***", parts.query)
    if (netloc, query) == (parts.netloc, parts.query):
        return url  # urlunsplit would also rewrite sqlite:///a.db as sqlite:/a.db
    return urllib.parse.urlunsplit(parts._replace(netloc=netloc, query=query))


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
        from runkernel.adapters.postgres_store import PostgresStore
    except ImportError as error:
        raise BadStoreUrl(
            f"the PostgreSQL store needs psycopg and psycopg-pool ({error}); "
            "install runkernel[postgres]"
        ) from None
    return PostgresStore(url, read_only=read_only)
