"""The PostgreSQL server the tests use: ``RUNKERNEL_TEST_POSTGRES_DSN`` (``.ci/run`` sets
it). Without it these tests skip, saying why. Each test gets a schema of its own, named
from the process id and a counter, so parallel runs never collide; it is dropped after."""

from __future__ import annotations

import itertools
import os
import urllib.parse
from collections.abc import Iterator

import pytest

DSN_VARIABLE = "RUNKERNEL_TEST_POSTGRES_DSN"
_counter = itertools.count()


def dsn() -> str:
    """The server's DSN, or a skip naming the variable to set."""
    found = os.environ.get(DSN_VARIABLE)
    if not found:
        pytest.skip(f"no PostgreSQL server: set {DSN_VARIABLE}=postgresql://user@host:port/db to run these tests")
    pytest.importorskip("psycopg_pool", reason="the postgres extra (psycopg, psycopg-pool) is not installed")
    return found


def with_schema(base: str, schema: str) -> str:
    """``base`` with runkernel's ``schema`` URL parameter set."""
    parts = urllib.parse.urlsplit(base)
    query = [(k, v) for k, v in urllib.parse.parse_qsl(parts.query) if k != "schema"] + [("schema", schema)]
    return urllib.parse.urlunsplit(parts._replace(query=urllib.parse.urlencode(query)))


def fresh_url(tag: str = "t") -> str:
    """A store URL naming a schema nobody else uses (not yet initialized)."""
    return with_schema(dsn(), f"rk_{tag}_{os.getpid()}_{next(_counter)}")


@pytest.fixture
def postgres_url() -> Iterator[str]:
    """An initialized, empty store of its own; dropped after the test."""
    from runkernel.adapters.stores.postgres.schema import drop_store, init_postgres

    url = fresh_url()
    init_postgres(url)
    try:
        yield url
    finally:
        drop_store(url)
