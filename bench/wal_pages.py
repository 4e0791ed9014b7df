"""WAL pages per commit: the frames ``SqliteStore.append`` adds to the write-ahead log,
against a bare INSERT+COMMIT of the same line, counted (never timed).

A commit's cost at COMMIT is mostly the pages it writes (each one a WAL frame, and at
``synchronous=FULL`` part of the fsync'd bytes), so this counts them. Before each commit
a second connection checkpoints the log (PASSIVE: all of it, nobody reads it), so the
writer starts the log over; the checkpoint after the commit then returns the frames that
one commit wrote. Each side's figure is the sum over a round's commits.
"""

from __future__ import annotations

import functools
import itertools
import sqlite3
from collections.abc import Callable
from pathlib import Path

from bench import peers, subject
from bench.framework import Prepared, Sample, Sizes

GROUP = "commit pages"


class FrameCounter:
    """Counts the WAL frames each write to ``path`` adds, from its own connection."""

    def __init__(self, path: Path) -> None:
        self._db = sqlite3.connect(str(path), isolation_level=None)

    def frames(self, write: Callable[[], object]) -> int:
        """The frames ``write`` (one transaction on another connection) adds to the log."""
        self._checkpoint()
        write()
        return self._checkpoint()

    def _checkpoint(self) -> int:
        busy, log, done = self._db.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
        if busy or log != done:
            raise RuntimeError(f"the log was not checkpointed whole ({busy}, {log}, {done}): frames not countable")
        return int(log)

    def close(self) -> None:
        """Close the counting connection."""
        self._db.close()


def commit_pages(sizes: Sizes, scratch: Path) -> Prepared:
    """Each round: the next ``commits_per_round`` commits of a tool-step Run (a new Thread
    per round) appended to the store, then the same lines inserted raw, at NORMAL (the
    pages a commit writes do not depend on ``synchronous``)."""
    count = sizes.commits_per_round
    store_path, raw_path = scratch / "pages.db", scratch / "pages-raw.db"
    store = subject.sqlite_store(store_path, "NORMAL")
    raw = peers.RawSqlite(raw_path, "NORMAL")
    store_frames, raw_frames = FrameCounter(store_path), FrameCounter(raw_path)
    rounds = itertools.count()
    pending: list[list[str]] = []

    def runkernel() -> Sample:
        commits = list(itertools.islice(subject.history_commits(f"p{next(rounds)}", tool_steps=True), count))
        pending.append([subject.encode_commit(commit) for commit in commits])
        frames = sum(store_frames.frames(functools.partial(subject.append, store, commit)) for commit in commits)
        return Sample(1.0, count, {"frames": float(frames), "commits": float(count)})

    def limit() -> Sample:
        lines = pending.pop() if pending else []
        frames = sum(raw_frames.frames(functools.partial(raw.commit, line)) for line in lines)
        return Sample(1.0, max(len(lines), 1), {"frames": float(frames), "commits": float(len(lines))})

    return Prepared({"runkernel": runkernel, "raw": limit})
