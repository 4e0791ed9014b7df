"""The store contract, run against every store. A new store joins by adding a fixture."""

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
from support import awaiting_run, text_run, tool_run


@pytest.fixture(params=["memory", "sqlite"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    made: Store = MemoryStore() if request.param == "memory" else SqliteStore(tmp_path / "store.db")
    yield made
    made.close()


def append_all(store: Store, commits: list[ThreadCommit]) -> None:
    for commit in commits:
        store.append(commit)


def test_append_then_read_latest_state(store: Store) -> None:
    commits = tool_run("t1", "r1")
    append_all(store, commits)
    snapshot = store.run("r1")
    assert snapshot is not None
    assert snapshot.version == len(commits)
    assert isinstance(snapshot.state, Ended)
    head = store.thread_head("t1")
    assert head is not None and head.version == len(commits) and head.active_run_id is None
    assert store.thread_ids() == ["t1"]
    assert store.thread_of("r1") == "t1"


def test_export_is_the_commits_in_order_and_legal(store: Store) -> None:
    commits = tool_run("t1", "r1") + text_run("t1", "r2", 2, expected_version=5)
    append_all(store, commits)
    exported = list(store.commits("t1"))
    assert exported == commits
    assert check_commits(exported).verdict is Verdict.LEGAL


def test_wrong_expected_version_is_a_typed_conflict_and_writes_nothing(store: Store) -> None:
    first, second, *_ = text_run("t1", "r1", 2)
    store.append(first)
    stale = attrs.evolve(second, expected_version=0)
    with pytest.raises(CommitConflict) as raised:
        store.append(stale)
    assert raised.value.rejection.rule is Rule.VERSION
    assert list(store.commits("t1")) == [first]
    head = store.thread_head("t1")
    assert head is not None and head.version == 1


def test_identity_mismatch_is_a_conflict(store: Store) -> None:
    append_all(store, text_run("t1", "r1", 1))
    other = text_run("t2", "r1", 1)[0]
    with pytest.raises(CommitConflict) as raised:
        store.append(other)
    assert raised.value.rejection.rule in (Rule.IDENTITY, Rule.VERSION)
    assert store.thread_ids() == ["t1"]


def test_illegal_commit_is_refused_and_writes_nothing(store: Store) -> None:
    commits = text_run("t1", "r1", 1)
    append_all(store, commits)
    after_end = attrs.evolve(commits[-1], expected_version=len(commits))
    with pytest.raises(IllegalCommit) as raised:
        store.append(after_end)
    assert raised.value.rejection.rule is Rule.AFTER_ENDED
    assert len(list(store.commits("t1"))) == len(commits)


def test_racing_writers_one_wins(store: Store) -> None:
    first, second, *_ = text_run("t1", "r1", 3)
    store.append(first)
    rival = attrs.evolve(second, messages=())
    rival = attrs.evolve(rival, step=first.step)
    store.append(second)
    with pytest.raises(CommitConflict):
        store.append(rival)
    assert list(store.commits("t1")) == [first, second]


def test_ticket_ids_are_never_reused_across_runs(store: Store) -> None:
    commits, _ = awaiting_run("t1", "r1", "ticket-shared-0001")
    append_all(store, commits)
    reused, _ = awaiting_run("t2", "r2", "ticket-shared-0001")
    store.append(reused[0])
    store.append(reused[1])
    with pytest.raises(IllegalCommit) as raised:
        store.append(reused[2])
    assert raised.value.rejection.rule is Rule.TICKET_REUSED
    snapshot = store.run("r2")
    assert snapshot is not None and not isinstance(snapshot.state, Awaiting)


def test_messages_are_the_deltas_in_order(store: Store) -> None:
    commits = tool_run("t1", "r1")
    append_all(store, commits)
    expected = [m for c in commits for m in c.messages]
    assert store.messages("t1") == expected


def test_inbox_keeps_commands_until_settled(store: Store) -> None:
    first = store.put_command("r1", {"type": "end", "kind": "cancelled"})
    second = store.put_command("r1", {"type": "end", "kind": "stopped"})
    store.put_command("r2", {"type": "end", "kind": "cancelled"})
    pending = store.pending_commands("r1")
    assert [e.entry_id for e in pending] == [first, second]
    assert pending[0].body == {"type": "end", "kind": "cancelled"}
    store.settle_command(first, "applied")
    assert [e.entry_id for e in store.pending_commands("r1")] == [second]
    settled = store.inbox_entry(first)
    assert settled is not None and (settled.state, settled.outcome) == ("settled", "applied")
    assert store.inbox_entry(999) is None


def test_checkpoints_are_kept_replaced_and_deleted(store: Store) -> None:
    assert store.load_checkpoint("r1") is None
    store.save_checkpoint(Checkpoint("r1", 1, {"partial": "he"}))
    store.save_checkpoint(Checkpoint("r1", 1, {"partial": "hell"}))
    assert store.load_checkpoint("r1") == Checkpoint("r1", 1, {"partial": "hell"})
    store.delete_checkpoint("r1")
    assert store.load_checkpoint("r1") is None


def test_reconciliations_are_recorded_beside_the_log(store: Store) -> None:
    store.record_reconciliation(Reconciliation("op1", "applied", "seen in ledger"))
    store.record_reconciliation(Reconciliation("op2", "unknown", None))
    assert store.reconciliations("op1") == [Reconciliation("op1", "applied", "seen in ledger")]
    assert len(store.reconciliations()) == 2


def test_reset_deletes_everything(store: Store) -> None:
    append_all(store, text_run("t1", "r1", 1))
    store.put_command("r1", {"type": "end", "kind": "cancelled"})
    store.reset()
    assert store.thread_ids() == []
    assert store.run("r1") is None
    assert store.pending_commands("r1") == []
    append_all(store, text_run("t1", "r1", 1))
    assert store.thread_ids() == ["t1"]


def test_second_run_waits_for_the_first_to_end(store: Store) -> None:
    commits, _ = awaiting_run("t1", "r1", "ticket-0002")
    append_all(store, commits)
    second = text_run("t1", "r2", 1, expected_version=len(commits))
    with pytest.raises(IllegalCommit) as raised:
        store.append(second[0])
    assert raised.value.rejection.rule is Rule.ONE_ACTIVE_RUN


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
