"""The pages a SQLite commit writes: only the b-trees of the rows it changes.

Each commit's pages are read from the write-ahead log (a second connection checkpoints
it whole before the commit, so the writer starts the log over) and named by ``dbstat``.
SQLite rewrites the entries of every index on a column an UPDATE sets, changed or not:
a commit that leaves its Run's state as it was must not name ``state``, or it writes a
page of each state index for nothing; and a commit of a Thread's active Run that leaves
it active writes no ``threads`` row (``sqlite.heads``) (issue 38).
"""

from __future__ import annotations

import functools
import sqlite3
import struct
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from runkernel.adapters.stores.sqlite import SqliteStore
from runkernel.conformance.runs import tool_run
from runkernel.kernel.state import ThreadHead

#: the b-trees a commit may write besides those its own rows live in: the database header
#: (page 1, rewritten when the file grows)
HEADER = "sqlite_schema"


class PageLog:
    """The b-trees each write to ``path`` adds pages of, by name."""

    def __init__(self, path: Path) -> None:
        self._path = path
        self._db = sqlite3.connect(str(path), isolation_level=None)

    def written(self, write: Callable[[], object]) -> list[str]:
        """The names of the b-trees ``write`` added pages of, one per page, sorted."""
        self._checkpoint()
        write()
        frames = self._checkpoint()
        # the log starts over at each write after a whole checkpoint, but its file is not
        # cut: only the first ``frames`` frames are this write's
        wal = (self._path.parent / (self._path.name + "-wal")).read_bytes()
        (page_size,) = struct.unpack(">I", wal[8:12])
        owners = dict(self._db.execute("SELECT pageno, name FROM dbstat").fetchall())
        starts = range(32, 32 + frames * (24 + page_size), 24 + page_size)
        return sorted(str(owners.get(struct.unpack(">I", wal[at:at + 4])[0], "unknown")) for at in starts)

    def _checkpoint(self) -> int:
        busy, log, done = self._db.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
        assert (busy, log) == (0, done)
        return int(log)

    def close(self) -> None:
        self._db.close()


@pytest.fixture
def store(tmp_path: Path) -> Iterator[tuple[SqliteStore, PageLog]]:
    made = SqliteStore(tmp_path / "pages.db", synchronous="NORMAL")
    try:
        made._db.execute("SELECT count(*) FROM dbstat").fetchone()
    except sqlite3.OperationalError:
        made.close()
        pytest.skip("this SQLite has no dbstat table")
    log = PageLog(tmp_path / "pages.db")
    yield made, log
    log.close()
    made.close()


def test_a_commit_writes_only_the_rows_it_changes(store: tuple[SqliteStore, PageLog]) -> None:
    sqlite, log = store
    activation, inference, verdict, finished, answer = tool_run("t", "r")
    sqlite.append(activation)
    # the inference closes no batch and keeps the Run running and active: its line and
    # the Run's row, which holds the head's version while the Run is active (schema 9)
    for commit in (inference, verdict):
        assert _rows_of(log.written(functools.partial(sqlite.append, commit))) == ["commits", "runs"]
    # the tool's result closes the batch: one history row more
    assert _rows_of(log.written(lambda: sqlite.append(finished))) == ["closed_batches", "commits", "runs"]
    assert sqlite.thread_head("t") == ThreadHead("t", finished.version, "r")
    # the end changes the state: both state indexes move, and list the Run by its new
    # state; and the Thread's active Run: its row holds the head again
    ended = log.written(lambda: sqlite.append(answer))
    assert {"runs_by_state", "runs_by_state_only", "threads"} <= set(ended)
    assert sqlite.thread_head("t") == ThreadHead("t", answer.version, None)
    assert [summary.run_id for summary in sqlite.list_runs(state="ended")] == ["r"]
    assert sqlite.list_runs(state="running") == []


def _rows_of(names: list[str]) -> list[str]:
    """The b-trees of the rows written, without the database header."""
    return [name for name in names if name != HEADER]
