"""runkernel's stores run the public store contract (``runkernel.conformance``), then
the SQLite store's own specifics."""

from __future__ import annotations

import json
import sqlite3
import threading
from collections.abc import Iterator
from pathlib import Path

import attrs
import pytest

from runkernel.adapters.memory_store import MemoryStore
from runkernel.adapters.serial import commit_text
from runkernel.adapters.sqlite_store import SqliteStore
from runkernel.conformance import StoreContract, append_all, awaiting_run, text_run, tool_run
from runkernel.adapters.store import (
    Checkpoint,
    CommitConflict,
    IllegalCommit,
    Reconciliation,
    SchemaError,
    Store,
)
from runkernel.kernel.rules import Rule
from runkernel.kernel.state import Awaiting, Ended, ThreadCommit
from runkernel.specs.checker import Verdict, check_commits


class TestRunkernelStores(StoreContract):
    """runkernel's own stores run the public suite, exactly as a third party's would."""

    @pytest.fixture(params=["memory", "sqlite"])
    def store(self, request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
        made: Store = MemoryStore() if request.param == "memory" else SqliteStore(tmp_path / "store.db")
        yield made
        made.close()


# --- SQLite specifics ------------------------------------------------------------------


def test_sqlite_commit_size_does_not_grow_with_the_thread(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "s.db")
    commits = text_run("t1", "r1", 120)
    append_all(store, commits)
    lines = store.commit_lines("t1")
    early, late = lines[10], lines[110]
    # the same kind of commit (one text step) stores the same delta, whatever came before
    assert abs(len(late) - len(early)) <= 8
    assert late == commit_text(commits[110])
    store.close()


def test_sqlite_latest_state_is_one_key_lookup(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    SqliteStore(path).close()
    db = sqlite3.connect(path)
    plans = [
        " ".join(str(col) for col in row)
        for sql in (
            "SELECT snapshot FROM runs WHERE run_id = 'r'",
            "SELECT version, active_run_id FROM threads WHERE thread_id = 't'",
        )
        for row in db.execute("EXPLAIN QUERY PLAN " + sql)
    ]
    db.close()
    assert all("SEARCH" in plan and "SCAN" not in plan for plan in plans), plans


def test_sqlite_survives_reopen(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    store = SqliteStore(path)
    commits = tool_run("t1", "r1")
    append_all(store, commits)
    store.close()
    again = SqliteStore(path)
    assert list(again.commits("t1")) == commits
    assert again.run("r1") is not None
    again.close()


def test_sqlite_refuses_a_file_that_is_not_a_database(tmp_path: Path) -> None:
    path = tmp_path / "junk.db"
    path.write_bytes(b"definitely not sqlite\x00" * 100)
    with pytest.raises(SchemaError, match="not a runkernel SQLite store"):
        SqliteStore(path)


def test_sqlite_refuses_a_foreign_database(tmp_path: Path) -> None:
    path = tmp_path / "foreign.db"
    db = sqlite3.connect(path)
    db.execute("CREATE TABLE customers (id INTEGER)")
    db.commit()
    db.close()
    with pytest.raises(SchemaError, match="not a runkernel store"):
        SqliteStore(path)


def test_sqlite_refuses_a_newer_schema(tmp_path: Path) -> None:
    path = tmp_path / "newer.db"
    SqliteStore(path).close()
    db = sqlite3.connect(path)
    db.execute("UPDATE meta SET value = '99' WHERE key = 'version'")
    db.commit()
    db.close()
    with pytest.raises(SchemaError, match="upgrade runkernel"):
        SqliteStore(path)


def test_sqlite_racing_processes_lose_and_duplicate_nothing(tmp_path: Path) -> None:
    path = tmp_path / "race.db"
    commits = text_run("t1", "r1", 30)
    SqliteStore(path).close()
    errors: list[BaseException] = []

    def writer() -> None:
        store = SqliteStore(path)
        try:
            for commit in commits:
                try:
                    store.append(commit)
                except CommitConflict:
                    pass
        except BaseException as error:  # pragma: no cover - reported below
            errors.append(error)
        finally:
            store.close()

    threads = [threading.Thread(target=writer) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    reader = SqliteStore(path)
    assert list(reader.commits("t1")) == commits
    reader.close()


def test_sqlite_stores_each_commit_as_its_trace_line(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "s.db")
    commits = tool_run("t1", "r1")
    append_all(store, commits)
    for line, commit in zip(store.commit_lines("t1"), commits):
        assert json.loads(line)["version"] == commit.version
        assert line == commit_text(commit)
    store.close()
