"""One process may hold several stores on one SQLite file: opening the second must not
drop the first one's POSIX locks. If it did, another process closing its connection
would believe itself the last one, checkpoint and delete the write-ahead log under the
first store's connection, and the file could be damaged (sqlite.org/howtocorrupt.html,
2.2); a worker whose tool opens the store, as the Pydantic AI tests' tools do, did so."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from runkernel.adapters.stores.sqlite import SqliteStore

TOUCH = "import sqlite3, sys; db = sqlite3.connect(sys.argv[1]); db.execute('SELECT count(*) FROM meta'); db.close()"


@pytest.mark.parametrize("read_only", [False, True])
def test_a_second_store_in_one_process_keeps_the_first_ones_locks(tmp_path: Path, read_only: bool) -> None:
    path = tmp_path / "s.db"
    SqliteStore(path).close()
    first = SqliteStore(path)
    try:
        first.list_runs()
        SqliteStore(path, create=not read_only, read_only=read_only).close()
        subprocess.run([sys.executable, "-c", TOUCH, str(path)], check=True, timeout=60)
        wal = path.with_name(path.name + "-wal")
        print("write-ahead log kept while the first store is open:", wal.exists())
        assert wal.exists(), "another process took itself for the last connection and removed the log"
    finally:
        first.close()
