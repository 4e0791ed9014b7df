"""A pick-up reads the Run's snapshot, its Thread's messages, its checkpoint and its
parent's call in one store call (``stores.folded_reads``): PostgreSQL answers in one round
trip what the ordinary reads answer in four, and the answers are the same. The
snapshot and head it read are what the next commit is judged against, so a commit built
on them after a rival moved the Thread is still a conflict with nothing written.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from bench.postgres import drive_round_trips
from runkernel.adapters.stores.contract import Checkpoint, CommitConflict, DamagedStore, Store
from runkernel.adapters.stores.memory import MemoryStore
from runkernel.adapters.stores.folded_reads import PickUp, pending_commands, read_pick_up
from runkernel.adapters.stores.sqlite import SqliteStore
from runkernel.testing import delegating_run, text_run, tool_run
from postgres_support import postgres_url  # noqa: F401 - a fixture

if TYPE_CHECKING:
    from runkernel.adapters.stores.postgres import PostgresStore

KINDS = ["memory", "sqlite", "postgresql"]


@pytest.fixture(params=KINDS)
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    made: Store
    if request.param == "memory":
        made = MemoryStore()
    elif request.param == "sqlite":
        made = SqliteStore(tmp_path / "runs.db")
    else:
        from runkernel.adapters.stores.postgres import PostgresStore

        made = PostgresStore(request.getfixturevalue("postgres_url"))
    yield made
    made.close()


def _one_by_one(store: Store, run_id: str) -> PickUp:
    """The pick-up as five ordinary reads."""
    snapshot = store.run(run_id)
    if snapshot is None:
        return PickUp(None)
    messages = tuple(store.messages(snapshot.thread_id))
    pending = tuple(store.pending_commands(run_id))
    return PickUp(snapshot, messages, store.load_checkpoint(run_id), store.parent_of(run_id), pending)


def test_the_pick_up_read_answers_what_the_five_reads_answer(store: Store) -> None:
    for commit in tool_run("t-tool", "r-tool"):
        store.append(commit)
    for commit in text_run("t-text", "r-text", 3):
        store.append(commit)
    store.save_checkpoint(Checkpoint("r-text", 1, {"partial": ["a", 1]}))
    store.put_command("r-tool", {"kind": "end", "cause": "cancelled"})
    family = delegating_run("t-parent", "r-parent")
    for commit in (*family.opened, family.quiet, *family.activations):
        store.append(commit)
    children = family.children
    for run_id in ("r-tool", "r-text", "r-parent", *children, "nobody"):
        found = read_pick_up(store, run_id)
        assert found == _one_by_one(store, run_id), run_id
    assert read_pick_up(store, "r-text").checkpoint == Checkpoint("r-text", 1, {"partial": ["a", 1]})
    assert read_pick_up(store, children[0]).parent == family.parents[0]
    assert read_pick_up(store, "nobody") == PickUp(None)
    assert len(read_pick_up(store, "r-tool").messages) == 4
    assert [e.body for e in read_pick_up(store, "r-tool").pending] == [{"kind": "end", "cause": "cancelled"}]


def _postgres_store(url: str) -> PostgresStore:
    from runkernel.adapters.stores.postgres import PostgresStore

    return PostgresStore(url)


def test_postgresql_reads_the_pick_up_itself(postgres_url: str) -> None:  # noqa: F811
    store = _postgres_store(postgres_url)
    try:
        assert callable(getattr(store, "read_pick_up", None))
    finally:
        store.close()


def test_a_commit_built_on_a_pick_up_the_thread_has_moved_past_is_a_conflict(postgres_url: str) -> None:  # noqa: F811
    commits = text_run("t1", "r1", 3)
    mine, rival = _postgres_store(postgres_url), _postgres_store(postgres_url)
    try:
        mine.append(commits[0])
        picked = read_pick_up(mine, "r1")
        assert picked.snapshot is not None and picked.snapshot.version == 1
        rival.append(commits[1])  # the Thread moves past what mine read
        with pytest.raises(CommitConflict):
            mine.append(commits[1])  # built on the snapshot mine read
        assert [c.version for c in mine.commits("t1")] == [1, 2]
        assert list(mine.commit_lines("t1")) == list(rival.commit_lines("t1"))
    finally:
        mine.close()
        rival.close()


def _behind_the_store(url: str, statement: str) -> None:
    """Run ``statement`` (``{schema}`` names the store's schema) on a connection of its own."""
    import psycopg

    from runkernel.adapters.stores.postgres.schema import split_url

    conninfo, schema = split_url(url)
    with psycopg.connect(conninfo, autocommit=True) as conn:
        conn.execute(statement.format(schema=schema).encode())


def test_a_pick_up_of_a_damaged_log_is_refused_as_the_log_read_is(postgres_url: str) -> None:  # noqa: F811
    store = _postgres_store(postgres_url)
    try:
        for commit in tool_run("t1", "r1"):
            store.append(commit)
        _behind_the_store(postgres_url, "DELETE FROM {schema}.commits WHERE thread_id = 't1' AND version = 2")
        with pytest.raises(DamagedStore):
            list(store.commits("t1"))
        with pytest.raises(DamagedStore):
            read_pick_up(store, "r1")
    finally:
        store.close()


def test_a_drive_on_postgresql_folds_its_pick_up_and_its_inbox_looks(postgres_url: str, tmp_path: Path) -> None:  # noqa: F811
    sample = drive_round_trips(postgres_url, "rt", tmp_path)
    per_drive = sample.counts["round trips"] / sample.counts["drives"]
    print(f"round trips per drive of the worker bench's Run on PostgreSQL: {per_drive:.1f}")
    # the lease take with the pick-up read, decide's look-up of its new batch id and 6
    # commits. 22 when the pick-up was 5 reads and each of the 5 looks at the inbox a
    # read of its own; 13 before the judge reused decide's look-up, the commits answered
    # the 2 lease checks before the tools and the ending commit compacted the inbox
    # (tests/stores/test_commit_echo.py); 9 before the pick-up came with the take
    assert per_drive == 8


def test_the_pick_up_read_with_the_lease_take_is_the_pick_up(postgres_url: str) -> None:  # noqa: F811
    from runkernel.adapters.stores.contract import LeaseHeld

    store = _postgres_store(postgres_url)
    try:
        for commit in tool_run("t1", "r1"):
            store.append(commit)
        store.put_command("r1", {"kind": "end", "cause": "cancelled"})
        lease, picked = store.acquire_lease_and_pick_up("r1", "w1", 30.0)
        assert picked == _one_by_one(store, "r1")
        assert store.current_lease("r1") == lease and lease.epoch == 1
        again, _ = store.acquire_lease_and_pick_up("r1", "w1", 30.0)
        assert again.epoch == 1, "its own lease is extended, as acquire_lease does"
        with pytest.raises(LeaseHeld):
            store.acquire_lease_and_pick_up("r1", "w2", 30.0)
        assert store.acquire_lease_and_pick_up("nobody", "w1", 30.0)[1] == PickUp(None)
    finally:
        store.close()


def test_a_lease_taken_with_a_pick_up_of_a_damaged_log_is_held_and_the_drive_s_read_refuses(
    postgres_url: str,  # noqa: F811
) -> None:
    store = _postgres_store(postgres_url)
    try:
        for commit in tool_run("t1", "r1"):
            store.append(commit)
        _behind_the_store(postgres_url, "DELETE FROM {schema}.commits WHERE thread_id = 't1' AND version = 2")
        lease, picked = store.acquire_lease_and_pick_up("r1", "w1", 30.0)
        assert picked is None and store.current_lease("r1") == lease, "held, so the drive releases it"
        with pytest.raises(DamagedStore):
            read_pick_up(store, "r1")
    finally:
        store.close()


def test_a_read_only_store_takes_no_lease_with_its_pick_up(postgres_url: str) -> None:  # noqa: F811
    from runkernel.adapters.stores.contract import StoreUnavailable
    from runkernel.adapters.stores.postgres import PostgresStore

    writer = _postgres_store(postgres_url)
    for commit in text_run("t1", "r1", 2):
        writer.append(commit)
    reader = PostgresStore(postgres_url, read_only=True)  # one snapshot, taken now
    try:
        with pytest.raises(StoreUnavailable, match="read-only"):
            reader.acquire_lease_and_pick_up("r1", "w1", 30.0)
        assert reader.run("r1") is not None, "its connection still reads"
        assert writer.current_lease("r1") is None
    finally:
        reader.close()
        writer.close()


def test_a_drive_s_first_store_operation_takes_the_pick_up_read_with_the_lease_or_drops_it(
    postgres_url: str,  # noqa: F811
) -> None:
    from runkernel.adapters.drive.lease_keeper import LeaseKeeper
    from runkernel.adapters.drive.protocol import ReadHead, ReadPickUp, ReadTrace
    from runkernel.adapters.drive.store_ops import StoreOps

    store, other = _postgres_store(postgres_url), _postgres_store(postgres_url)
    try:
        for commit in text_run("t1", "r1", 2)[:2]:
            store.append(commit)
        keeper = LeaseKeeper(store, "w1")
        ops = StoreOps(store, keeper, lambda event: None)
        ops.lease("r1", picking_up=True)
        ops.perform(ReadTrace("r1"))  # reads nothing the pick-up holds: passes it on
        other.put_command("r1", {"kind": "end", "cause": "cancelled"})
        picked = ops.perform(ReadPickUp("r1"))
        assert isinstance(picked, PickUp) and picked.pending == (), "read with the take, before the command"
        keeper.release("r1")
        ops.lease("r1", picking_up=True)
        ops.perform(ReadHead("t1"))  # any other operation drops it
        again = ops.perform(ReadPickUp("r1"))
        assert isinstance(again, PickUp) and len(again.pending) == 1, "read again"
    finally:
        store.close()
        other.close()


def test_a_pick_up_read_with_a_take_answers_only_the_store_operation_after_it(postgres_url: str) -> None:  # noqa: F811
    from runkernel.adapters.drive.lease_keeper import LeaseKeeper

    store = _postgres_store(postgres_url)
    try:
        for commit in text_run("t1", "r1", 2)[:2]:
            store.append(commit)
        keeper = LeaseKeeper(store, "w1")
        keeper.take_and_pick_up("r1")
        first = keeper.picked_up()
        assert first is not None and first[0] == "r1" and first[1] == read_pick_up(store, "r1")
        assert keeper.picked_up() is None, "once"
        keeper.take_and_pick_up("r1")
        keeper.release("r1")
        assert keeper.picked_up() is None, "a drive that never used it leaves nothing behind"
    finally:
        store.close()


def test_the_look_after_a_commit_is_what_the_commit_saw_once(postgres_url: str) -> None:  # noqa: F811
    commits = text_run("t1", "r1", 3)  # the activation and 3 steps: versions 1 to 4
    mine, other = _postgres_store(postgres_url), _postgres_store(postgres_url)
    try:
        mine.append(commits[0])
        first = other.put_command("r1", {"kind": "end", "cause": "cancelled"})
        mine.append(commits[1])
        seen = mine.pending_seen_in_commit("r1", 2)
        assert seen is not None and [e.entry_id for e in seen] == [first]
        assert seen == mine.pending_commands("r1")
        assert mine.pending_seen_in_commit("r1", 2) is None, "answered once"
        mine.append(commits[2])
        assert mine.pending_seen_in_commit("r1", 2) is None, "another version's look is no answer"
        mine.append(commits[3])
        second = other.put_command("r1", {"kind": "end", "cause": "stopped"})  # after the commit: concurrent
        assert [e.entry_id for e in mine.pending_seen_in_commit("r1", 4) or []] == [first]
        assert [e.entry_id for e in mine.pending_commands("r1")] == [first, second], "the next look reads"
    finally:
        mine.close()
        other.close()


def test_a_write_of_the_store_after_its_commit_voids_the_commit_s_look(postgres_url: str) -> None:  # noqa: F811
    commits = text_run("t1", "r1", 2)
    store = _postgres_store(postgres_url)
    try:
        store.append(commits[0])
        store.put_command("r1", {"kind": "end", "cause": "cancelled"})  # this store's own write
        assert store.pending_seen_in_commit("r1", 1) is None
        store.append(commits[1])
        entry = store.pending_commands("r1")[0]
        store.settle_command(entry.entry_id, "refused: test")
        assert store.pending_seen_in_commit("r1", 2) is None
        assert store.pending_commands("r1") == []
    finally:
        store.close()


def test_a_store_that_does_not_look_in_its_commits_is_read(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "runs.db")
    try:
        store.append(text_run("t1", "r1", 2)[0])
        store.put_command("r1", {"kind": "end", "cause": "cancelled"})
        assert [e.body for e in pending_commands(store, "r1", committed=1)] == [{"kind": "end", "cause": "cancelled"}]
    finally:
        store.close()


def test_a_pick_up_read_that_fails_leaves_the_connection_usable(postgres_url: str) -> None:  # noqa: F811
    from runkernel.adapters.stores.contract import StoreUnavailable

    store = _postgres_store(postgres_url)
    try:
        for commit in tool_run("t1", "r1"):
            store.append(commit)
        _behind_the_store(postgres_url, "ALTER TABLE {schema}.checkpoints RENAME TO checkpoints_gone")
        with pytest.raises(StoreUnavailable):
            read_pick_up(store, "r1")  # its third statement fails inside the read's block
        snapshot = store.run("r1")  # not "current transaction is aborted"
        assert snapshot is not None and snapshot.version == 5
    finally:
        store.close()
