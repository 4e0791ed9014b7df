"""The worked example of a third-party store (``examples/jsonl_store.py``, the store of
docs/how-to/write-a-store.md) passes the whole public store contract suite: in one
process, across instances, and across processes killed while they commit."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from examples.jsonl_store import JsonlStore
from runkernel.conformance import StoreContract, StoreFactory
from runkernel.conformance.instances import Reopen


class TestJsonlStore(StoreContract):
    @pytest.fixture
    def store(self, tmp_path: Path) -> Iterator[JsonlStore]:
        made = JsonlStore(tmp_path / "journal")
        yield made
        made.close()

    @pytest.fixture
    def reopen(self, tmp_path: Path) -> Reopen:
        return lambda **options: JsonlStore(tmp_path / "journal", **options)

    @pytest.fixture
    def store_factory(self, tmp_path: Path) -> StoreFactory:
        return StoreFactory("examples.jsonl_store:JsonlStore", str(tmp_path / "journal"))
