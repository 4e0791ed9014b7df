"""The WAL page count of the bench (``bench.wal_pages``) counts the pages a write adds."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from bench.wal_pages import FrameCounter


def test_each_write_counts_the_pages_it_changed(tmp_path: Path) -> None:
    path = tmp_path / "counted.db"
    db = sqlite3.connect(str(path), isolation_level=None)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("CREATE TABLE one (k INTEGER PRIMARY KEY, v TEXT)")
    db.execute("CREATE TABLE two (k INTEGER PRIMARY KEY, v TEXT)")
    db.execute("INSERT INTO one VALUES (0, 'x'), (1, 'y')")
    db.execute("INSERT INTO two VALUES (0, 'x')")
    counter = FrameCounter(path)
    try:
        # each table here is one page (its root): a write is a frame per table it changes
        assert counter.frames(lambda: db.execute("UPDATE one SET v = 'z' WHERE k = 0")) == 1
        assert counter.frames(lambda: db.executescript("BEGIN; UPDATE one SET v = 'w'; UPDATE two SET v = 'w'; COMMIT;")) == 2
        # and the same count again: each commit's frames, not the log's total
        assert counter.frames(lambda: db.execute("UPDATE one SET v = 'q' WHERE k = 1")) == 1
    finally:
        counter.close()
        db.close()
