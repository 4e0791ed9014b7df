"""The PostgreSQL store against the machine's server: the public store contract, its
schema management, and its own specifics (cost model, read-only opening)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from runkernel.adapters.stores.contract import SchemaError, Store
from runkernel.conformance import StoreContract, append_all
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
