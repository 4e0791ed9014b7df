"""The registry of store kinds decides, alone, which store a URL names; the SQL dialects
hold what differs between SQLite and PostgreSQL."""

from __future__ import annotations

import subprocess
import sys

import pytest

from runkernel.adapters.stores.registry import KINDS, MEMORY, POSTGRESQL, SQLITE, kind_of
from runkernel.adapters.stores.sql import dialect
from runkernel.adapters.stores.sql.queries import work_query


@pytest.mark.parametrize(
    ("url", "kind"),
    [
        ("memory:", MEMORY),
        ("sqlite:///runkernel.sqlite", SQLITE),
        ("sqlite:////abs/path.db", SQLITE),
        ("sqlite:///", SQLITE),  # named, then refused by its opener: it names no file
        ("postgresql://user@host:5432/db?schema=s", POSTGRESQL),
        ("postgres://host/db", POSTGRESQL),
        ("memory:x", None),
        ("sqlite://relative.db", None),
        ("mysql://host/db", None),
        ("", None),
    ],
)
def test_each_url_names_at_most_one_kind(url: str, kind: object) -> None:
    assert kind_of(url) is kind
    assert sum(k.names(url) for k in KINDS) == (0 if kind is None else 1)


def test_what_each_kind_can_do() -> None:
    assert (MEMORY.init, MEMORY.migrate, MEMORY.claim) == (None, None, None)
    assert SQLITE.init is None and SQLITE.migrate is not None and SQLITE.claim is None
    assert None not in (POSTGRESQL.init, POSTGRESQL.migrate, POSTGRESQL.claim)


def test_the_registry_and_the_store_commands_load_no_postgresql_module() -> None:
    code = (
        "import sys\n"
        "import runkernel.adapters.stores.registry, runkernel.cli.db, runkernel.cli.simulate\n"
        "print(sorted(m for m in sys.modules if m.startswith(('psycopg', 'runkernel.adapters.stores.postgres'))))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


def test_a_dialect_takes_a_statement_written_once() -> None:
    shared = "SELECT 1 FROM inbox WHERE run_id = ? AND outcome LIKE 'refused%'"
    assert dialect.SQLITE.sql(shared) == shared
    assert dialect.POSTGRESQL.sql(shared) == "SELECT 1 FROM inbox WHERE run_id = %s AND outcome LIKE 'refused%%'"


def test_the_work_query_asks_for_the_clock_only_where_it_is_a_parameter() -> None:
    # SQLite: the app, the worker's version three times, this process's clock twice, the
    # limit; PostgreSQL: the app, the version three times and the limit, the clock being
    # the server's
    assert work_query(dialect.SQLITE).count("?") == 7
    postgres = work_query(dialect.POSTGRESQL)
    assert postgres.count("?") == 5 and postgres.count(dialect.POSTGRESQL.now) == 2
    assert "IS NOT DISTINCT FROM ?" in postgres and "r.app IS ?" in work_query(dialect.SQLITE)
