"""``runkernel db init`` and ``db migrate``: create a server store's schema, or upgrade a
store's schema to this runkernel's version."""

from __future__ import annotations

import argparse

from runkernel.adapters.stores.sqlite_migrate import migrate_sqlite
from runkernel.adapters.stores.sqlite_open import Access, check_path
from runkernel.adapters.stores.urls import BadStoreUrl, redacted

EXIT_OK = 0

_POSTGRES = ("postgresql://", "postgres://")


def _require_psycopg() -> None:
    """Refuse with one line when the ``postgres`` extra is not installed."""
    try:
        import psycopg  # noqa: F401
        import psycopg_pool  # noqa: F401
    except ImportError as error:
        raise BadStoreUrl(f"the PostgreSQL store needs psycopg and psycopg-pool ({error}); install runkernel[postgres]") from None


def _migrate(args: argparse.Namespace) -> int:
    url: str = args.store
    if url.startswith(_POSTGRES):
        _require_psycopg()
        from runkernel.adapters.stores.postgres_schema import migrate_postgres

        before, after = migrate_postgres(url)
    elif url.startswith("sqlite:///") and url[len("sqlite:///"):]:
        path = url[len("sqlite:///"):]
        check_path(path, Access.WRITE)  # a missing file, a directory, a FIFO: refused as elsewhere
        before, after = migrate_sqlite(path)
    else:
        raise BadStoreUrl(f"{url!r}: only a SQLite (sqlite:///path.db) or PostgreSQL store has a schema to migrate")
    if before == after:
        print(f"{redacted(url)}: schema version {after}, nothing to migrate")
    else:
        print(f"{redacted(url)}: migrated schema version {before} to {after}")
    return EXIT_OK


def _init(args: argparse.Namespace) -> int:
    url: str = args.store
    if not url.startswith(_POSTGRES):
        raise BadStoreUrl(
            f"{url!r}: db init is for server stores (postgresql://...); a SQLite file is created "
            "by `runkernel start` or `runkernel simulate`"
        )
    _require_psycopg()
    from runkernel.adapters.stores.postgres_schema import SCHEMA_VERSION, init_postgres

    made = init_postgres(url)
    state = "created" if made else "already initialized"
    print(f"{redacted(url)}: runkernel store {state}, schema version {SCHEMA_VERSION}")
    return EXIT_OK


def register_db(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``db`` and its subcommands to the parser."""
    db = commands.add_parser("db", help="store maintenance: create a server store's schema, upgrade a store's schema")
    actions = db.add_subparsers(dest="db_command", metavar="ACTION", required=True)
    init = actions.add_parser(
        "init",
        help="create the schema of a PostgreSQL store (every other command refuses an uninitialized one)",
        description=(
            "Create the store's tables in one transaction, in the schema the URL's ?schema=NAME "
            "names (default public); a store already initialized is left alone."
        ),
    )
    init.add_argument("--store", required=True, metavar="URL", help="postgresql://user@host:port/db[?schema=NAME]")
    init.set_defaults(handler=_init)
    migrate = actions.add_parser(
        "migrate",
        help="upgrade a store made by an older runkernel to this version's schema, in place",
        description=(
            "Upgrade the store's schema in one transaction (a crash leaves it at the old or "
            "the new version). Every other command refuses a store with an older schema."
        ),
    )
    migrate.add_argument("--store", required=True, metavar="URL", help="sqlite:///path.db or postgresql://...")
    migrate.set_defaults(handler=_migrate)
