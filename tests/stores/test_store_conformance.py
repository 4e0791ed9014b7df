"""runkernel's stores run the public store contract (``runkernel.conformance``), then
the SQLite store's own specifics."""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import attrs
import pytest

from runkernel.adapters.stores.memory import MemoryStore
from runkernel.adapters.stores.serial import commit_text
from runkernel.adapters.stores.sqlite import SqliteStore
from runkernel.conformance import StoreContract, StoreFactory, append_all
from runkernel.conformance.instances import Reopen
from runkernel.adapters.stores.contract import (
    Checkpoint,
    CommitConflict,
    IllegalCommit,
    Lease,
    LeaseLost,
    Reconciliation,
    SchemaError,
    Settlement,
    Store,
    StoreUnavailable,
)
from runkernel.kernel.rules import Rule
from runkernel.kernel.state import Awaiting, Ended, RunSnapshot, ThreadCommit
from runkernel.specs.checker import Verdict, check_commits
from runkernel.testing import awaiting_run, text_run, tool_run


class _ThreadClock:
    """A MemoryStore's clock that each thread may set for itself: the one MemoryStore
    instance stands for every instance on its storage, each racer with its own clock."""

    def __init__(self) -> None:
        self._local = threading.local()

    def __call__(self) -> float:
        clock: Callable[[], float] = getattr(self._local, "clock", time.time)
        return clock()

    def use(self, clock: Callable[[], float]) -> None:
        self._local.clock = clock


class TestRunkernelStores(StoreContract):
    """runkernel's own stores run the public suite, exactly as a third party's would. The
    MemoryStore's storage is the instance itself: its ``reopen`` is the store (the tests
    across instances run as threads sharing it), and it has no storage a child process
    could open."""

    @pytest.fixture(params=["memory", "sqlite"])
    def store(self, request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
        made: Store = MemoryStore(clock=_ThreadClock()) if request.param == "memory" else SqliteStore(tmp_path / "store.db")
        yield made
        made.close()

    @pytest.fixture
    def reopen(self, store: Store, tmp_path: Path) -> Reopen:
        if isinstance(store, MemoryStore):
            memory = store

            def the_same(*, clock: Callable[[], float] | None = None) -> Store:
                if clock is not None:
                    assert isinstance(memory._clock, _ThreadClock)
                    memory._clock.use(clock)
                return memory

            return the_same
        return lambda **options: SqliteStore(tmp_path / "store.db", **options)

    @pytest.fixture
    def store_factory(self, store: Store, tmp_path: Path) -> StoreFactory:
        if isinstance(store, MemoryStore):
            pytest.skip("a MemoryStore's storage is its instance: no child process can open it")
        return StoreFactory("runkernel.adapters.stores.sqlite:SqliteStore", str(tmp_path / "store.db"))


# --- W4 on the in-process stores: a retry after a lost reply ---------------------------


class _LosesOneReply:
    """Append number ``lose_at`` (1-based) reports ``StoreUnavailable``, as a connection
    dropped around the commit would: after it landed when ``instead`` is None (only the
    reply was lost), else without it landing, ``instead`` running in its place (what
    another writer did meanwhile)."""

    lose_at: int
    instead: Callable[[], None] | None
    appends: int

    def append(
        self,
        commit: ThreadCommit,
        settle: Settlement | None = None,
        *,
        lease: Lease | None = None,
        release: bool = False,
        trace_context: str | None = None,
    ) -> RunSnapshot:
        self.appends += 1
        if self.appends != self.lose_at:
            stored: RunSnapshot = super().append(commit, settle, lease=lease, release=release, trace_context=trace_context)  # type: ignore[misc]
            return stored
        if self.instead is None:
            super().append(commit, settle, lease=lease, release=release, trace_context=trace_context)  # type: ignore[misc]
        else:
            self.instead()
        raise StoreUnavailable("the connection dropped around the commit (injected)")


class _MemoryLosesOneReply(_LosesOneReply, MemoryStore):
    def __init__(self, lose_at: int) -> None:
        super().__init__()
        self.lose_at, self.instead, self.appends = lose_at, None, 0


class _SqliteLosesOneReply(_LosesOneReply, SqliteStore):
    def __init__(self, path: Path, lose_at: int) -> None:
        super().__init__(path)
        self.lose_at, self.instead, self.appends = lose_at, None, 0


#: who committed the identical commit at the version whose reply worker-a (epoch 1)
#: lost: the worker id the taker of the lease acquires it as, or None for worker-a's own
WHO_WROTE_IT = {"this writer": None, "another worker": "worker-b", "this worker id at a later epoch": "worker-a"}


@pytest.mark.parametrize("wrote_it", list(WHO_WROTE_IT))
@pytest.mark.parametrize("kind", ["memory", "sqlite"])
def test_a_retry_after_a_lost_reply_adopts_the_identical_commit_only_if_this_writer_wrote_it(
    kind: str, wrote_it: str, tmp_path: Path
) -> None:
    """W4 by writer, on the stores with no connection to drop: the caller retries a
    commit whose reply it lost, as the runtime and the driver do (``StoreUnavailable``,
    then the same append under the same lease), and the store alone recognizes it. Its
    own landed commit is adopted; the very same ThreadCommit committed at that version by
    a taker of the lease (another worker, or this worker id at a later epoch) is refused,
    never adopted, and the row stays the taker's."""
    lose_at = 3  # the activation and one step land first
    store: _MemoryLosesOneReply | _SqliteLosesOneReply = (
        _MemoryLosesOneReply(lose_at) if kind == "memory" else _SqliteLosesOneReply(tmp_path / "s.db", lose_at)
    )
    commits = text_run("t1", "r1", 2)
    taker_id = WHO_WROTE_IT[wrote_it]
    lease = store.acquire_lease("r1", "worker-a", 600.0)
    takers: list[object] = []

    def the_taker_commits_it() -> None:
        # worker-a's lease ends (in life it expires while worker-a stalls); the taker
        # acquires a later epoch and commits the identical commit, replaying the step
        assert taker_id is not None
        store.release_lease(lease)
        taker = store.acquire_lease("r1", taker_id, 600.0)
        store.append(commits[2], lease=taker)
        takers.append(taker.writer)

    store.instead = None if taker_id is None else the_taker_commits_it
    store.append(commits[0], lease=lease)
    store.append(commits[1], lease=lease)
    with pytest.raises(StoreUnavailable):
        store.append(commits[2], lease=lease)
    answer: RunSnapshot | CommitConflict | LeaseLost
    try:
        answer = store.append(commits[2], lease=lease)  # the retry, as it is
    except (CommitConflict, LeaseLost) as refusal:
        answer = refusal
    stored = list(store.commits("t1"))
    writer = store.writer_of("t1", 3)
    at_three = [c.version for c in stored].count(3)
    print(
        f"{kind}, reply lost, identical commit by {wrote_it}: appends {store.appends}, "
        f"answer {type(answer).__name__}, rows at version 3: {at_three}, writer {writer}"
    )
    assert stored == commits and at_three == 1  # never written twice, nothing lost
    if taker_id is None:
        assert answer == store.run("r1")
        assert writer == lease.writer
    else:
        assert takers == [writer] and writer != lease.writer
        # refused, whichever check says it first: worker-a's lease is gone (LeaseLost)
        # or the version is taken (CommitConflict); never adopted as worker-a's own
        assert isinstance(answer, (CommitConflict, LeaseLost)), "another writer's identical commit was adopted"
    store.close()


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
