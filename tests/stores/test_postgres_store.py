"""The PostgreSQL store against the machine's server: the public store contract, its
schema management, and its own specifics (cost model, read-only opening)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from runkernel.adapters.stores.contract import SchemaError, Store
from runkernel.conformance import StoreContract, StoreFactory, append_all
from runkernel.conformance.instances import Reopen
from runkernel.testing import text_run
from postgres_support import dsn, fresh_url, postgres_url

__all__ = ["postgres_url"]


class TestPostgresStore(StoreContract):
    """The public suite, exactly as a third party's store runs it."""

    @pytest.fixture
    def store(self, postgres_url: str) -> Iterator[Store]:
        from runkernel.adapters.stores.postgres import PostgresStore

        made = PostgresStore(postgres_url)
        yield made
        made.close()

    @pytest.fixture
    def reopen(self, postgres_url: str) -> Reopen:
        from runkernel.adapters.stores.postgres import PostgresStore

        return lambda **options: PostgresStore(postgres_url, **options)  # no clock= (the server's): no forced race

    @pytest.fixture
    def store_factory(self, postgres_url: str) -> StoreFactory:
        return StoreFactory("runkernel.adapters.stores.postgres:PostgresStore", postgres_url)
