"""``runkernel db init`` and ``db migrate``: create a server store's schema, or upgrade a
store's schema to this runkernel's version."""

from __future__ import annotations

import argparse

from runkernel.adapters.stores.registry import BadStoreUrl, kind_of, redacted

EXIT_OK = 0


def _migrate(args: argparse.Namespace) -> int:
    url: str = args.store
    kind = kind_of(url)
    if kind is None or kind.migrate is None:
        raise BadStoreUrl(f"{url!r}: only a SQLite (sqlite:///path.db) or PostgreSQL store has a schema to migrate")
    before, after = kind.migrate(url)
    if before == after:
        print(f"{redacted(url)}: schema version {after}, nothing to migrate")
    else:
        print(f"{redacted(url)}: migrated schema version {before} to {after}")
    return EXIT_OK


def _init(args: argparse.Namespace) -> int:
    url: str = args.store
    kind = kind_of(url)
    if kind is None or kind.init is None:
        raise BadStoreUrl(
            f"{url!r}: db init is for server stores (postgresql://...); a SQLite file is created "
            "by `runkernel start` or `runkernel simulate`"
        )
    made, version = kind.init(url)
    state = "created" if made else "already initialized"
    print(f"{redacted(url)}: runkernel store {state}, schema version {version}")
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
