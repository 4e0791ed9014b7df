"""The store kinds, in one registry: which store a ``--store URL`` names (``memory:``,
``sqlite:///path.db`` or ``postgresql://...``), and how a store of that kind is opened,
its schema created (``db init``) and upgraded (``db migrate``), and claimed by
``simulate``. ``kind_of`` is the one place that decides which store a URL is:
``open_store``, the ``db`` commands, ``simulate`` and the console all ask it.

A PostgreSQL store's modules, and psycopg with them, are imported only when such a URL
is used: importing this module (or ``runkernel``) never imports them."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Protocol

from attrs import frozen

from runkernel.adapters.stores.contract import Store
from runkernel.adapters.stores.memory import MemoryStore
from runkernel.adapters.stores.redact import redacted as redacted
from runkernel.adapters.stores.sqlite import open_sqlite
from runkernel.adapters.stores.sqlite.migrate import migrate_sqlite
from runkernel.adapters.stores.sqlite.opening import URL_PREFIX, Access, check_path, path_of
from runkernel.errors import BadStoreUrl as BadStoreUrl

DEFAULT_STORE_URL = "sqlite:///runkernel.sqlite"


class ServerClaim(Protocol):
    """``simulate``'s claim of a server store, held while it runs (``postgres.claim``)."""

    taken: bool

    def simulated(self) -> bool:
        """Whether simulate filled this store."""

    def mark(self, owner: str) -> None:
        """Record that simulate fills this store."""


@frozen
class StoreKind:
    """One kind of store: the URLs that name it and what can be done with one.

    ``prefixes``: how its URLs start (``whole``: a URL is exactly one of them);
    ``opens(url, create, read_only)``: the store; ``init(url)``: create a server store's
    schema, whether it was made and the schema version (None: a store of this kind is
    made when it is first opened, or never outlives its process); ``migrate(url)``:
    upgrade its schema in place, the versions before and after (None: it has none);
    ``claim(url)``: ``simulate``'s claim of it, held across processes (None: the store
    claims itself, or is this process's own)."""

    name: str
    prefixes: tuple[str, ...]
    opens: Callable[[str, bool, bool], Store]
    whole: bool = False
    init: Callable[[str], tuple[bool, int]] | None = None
    migrate: Callable[[str], tuple[int, int]] | None = None
    claim: Callable[[str], AbstractContextManager[ServerClaim]] | None = None

    def names(self, url: str) -> bool:
        """Whether ``url`` names a store of this kind."""
        return url in self.prefixes if self.whole else url.startswith(self.prefixes)


def _open_memory(url: str, create: bool, read_only: bool) -> Store:
    return MemoryStore()


def _open_sqlite(url: str, create: bool, read_only: bool) -> Store:
    return open_sqlite(url, create=create, read_only=read_only)


def _migrate_sqlite(url: str) -> tuple[int, int]:
    path = path_of(url)
    check_path(path, Access.WRITE)  # a missing file, a directory, a FIFO: refused as elsewhere
    return migrate_sqlite(path)


def _require_psycopg() -> None:
    """Refuse with one line when the ``postgres`` extra is not installed."""
    try:
        import psycopg  # noqa: F401
        import psycopg_pool  # noqa: F401
    except ImportError as error:
        raise BadStoreUrl(
            f"the PostgreSQL store needs psycopg and psycopg-pool ({error}); install runkernel[postgres]"
        ) from None


def _open_postgres(url: str, create: bool, read_only: bool) -> Store:
    _require_psycopg()
    from runkernel.adapters.stores.postgres import open_postgres

    return open_postgres(url, create=create, read_only=read_only)


def _init_postgres(url: str) -> tuple[bool, int]:
    _require_psycopg()
    from runkernel.adapters.stores.postgres.schema import SCHEMA_VERSION, init_postgres

    return init_postgres(url), SCHEMA_VERSION


def _migrate_postgres(url: str) -> tuple[int, int]:
    _require_psycopg()
    from runkernel.adapters.stores.postgres.schema import migrate_postgres

    return migrate_postgres(url)


def _claim_postgres(url: str) -> AbstractContextManager[ServerClaim]:
    _require_psycopg()
    from runkernel.adapters.stores.postgres.claim import SimulateClaim

    return SimulateClaim(url)


MEMORY = StoreKind("memory", ("memory:",), _open_memory, whole=True)
SQLITE = StoreKind("sqlite", (URL_PREFIX,), _open_sqlite, migrate=_migrate_sqlite)
POSTGRESQL = StoreKind(
    "postgresql",
    ("postgresql://", "postgres://"),
    _open_postgres,
    init=_init_postgres,
    migrate=_migrate_postgres,
    claim=_claim_postgres,
)

#: Every kind of store, in the order ``kind_of`` tries them.
KINDS: tuple[StoreKind, ...] = (MEMORY, SQLITE, POSTGRESQL)


def kind_of(url: str) -> StoreKind | None:
    """The kind of store ``url`` names, or None when it names none."""
    return next((kind for kind in KINDS if kind.names(url)), None)


def open_store(url: str, *, create: bool = True, read_only: bool = False) -> Store:
    """Open the store a URL names. ``sqlite:///rel.db`` is relative to the working
    directory, ``sqlite:////abs/path.db`` absolute. With ``create=False`` a missing
    SQLite file is an error instead of a new empty store; ``read_only`` opens it for a
    read command (never written, readable on read-only media, one consistent snapshot).
    A PostgreSQL store is never created here (``runkernel db init`` does); its module
    and psycopg are loaded only when such a URL is opened."""
    kind = kind_of(url)
    if kind is None:
        raise BadStoreUrl(f"unknown store URL {url!r}; use memory:, sqlite:///path.db or postgresql://...")
    return kind.opens(url, create, read_only)
