"""``runkernel db migrate``: upgrade a store's schema to this runkernel's version."""

from __future__ import annotations

import argparse

from runkernel.adapters.sqlite_migrate import migrate_sqlite
from runkernel.adapters.urls import BadStoreUrl

EXIT_OK = 0


def _migrate(args: argparse.Namespace) -> int:
    url: str = args.store
    if not url.startswith("sqlite:///") or not url[len("sqlite:///"):]:
        raise BadStoreUrl(f"{url!r}: only a SQLite store (sqlite:///path.db) has a schema to migrate")
    before, after = migrate_sqlite(url[len("sqlite:///"):])
    if before == after:
        print(f"{url}: schema version {after}, nothing to migrate")
    else:
        print(f"{url}: migrated schema version {before} to {after}")
    return EXIT_OK


def register_db(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``db`` and its subcommands to the parser."""
    db = commands.add_parser("db", help="store maintenance: upgrade a store's schema")
    actions = db.add_subparsers(dest="db_command", metavar="ACTION", required=True)
    migrate = actions.add_parser(
        "migrate",
        help="upgrade a SQLite store made by an older runkernel to this version's schema, in place",
        description=(
            "Upgrade the store's schema in one transaction (a crash leaves it at the old or "
            "the new version). Every other command refuses a store with an older schema."
        ),
    )
    migrate.add_argument("--store", required=True, metavar="URL", help="sqlite:///path.db")
    migrate.set_defaults(handler=_migrate)
