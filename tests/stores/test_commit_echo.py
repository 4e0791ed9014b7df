"""A PostgreSQL commit answers, in its own round trip, the reads a drive would send right
after it (``stores.postgres.echo``): the W1 lease re-check before a tool starts, the
compaction of an ended Run's inbox, and the judge's history look-ups that the drive's
own look-ups already answered. Each answer must be exactly what a read would have said,
and must be forgotten when anything could have changed it.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import TYPE_CHECKING

import attrs
import pytest

from runkernel.adapters.drive.lease_keeper import LeaseKeeper
from runkernel.adapters.stores.contract import CommitConflict, IllegalCommit, LeaseLost, StoreUnavailable
from runkernel.kernel.protocol import Allow, GateVerdict, InferenceResult, Input, ProposedCall, ToolFinished, ToolOutput
from runkernel.kernel.rules import Rule
from runkernel.kernel.state import Ended, ThreadCommit
from runkernel.testing import Builder, text_run
from postgres_support import postgres_url  # noqa: F401 - a fixture

if TYPE_CHECKING:
    from runkernel.adapters.stores.postgres import PostgresStore


@pytest.fixture
def store(postgres_url: str) -> Iterator[PostgresStore]:  # noqa: F811
    from runkernel.adapters.stores.postgres import PostgresStore

    made = PostgresStore(postgres_url)
    yield made
    made.close()


def _three_batches() -> list[ThreadCommit]:
    """A Run of three tool steps, batches r-b1, r-b2, r-b3: versions 2-4 are b1's (4
    closes it), 5-7 b2's, 8-10 b3's."""
    feed: list[Input] = []
    for index in (1, 2, 3):
        call = ProposedCall(f"r-c{index}", "lookup", {"q": str(index)}, f"r-op{index}")
        feed += [InferenceResult(str(index), (call,), f"r-b{index}"), GateVerdict(call.call_id, Allow())]
        feed.append(ToolFinished(call.call_id, 1, ToolOutput("found")))
    commits = list(Builder("t").start("r", ("task",)).feed(*feed).commits)
    assert [c.batch.batch_id if c.batch else None for c in commits[:8]] == [None, *["r-b1"] * 3, *["r-b2"] * 3, "r-b3"]
    return commits


def _opening_b3_as_b1(commits: list[ThreadCommit]) -> ThreadCommit:
    """Version 8 opening its batch under the closed batch's id r-b1: illegal."""
    batch = commits[7].batch
    assert batch is not None
    return attrs.evolve(commits[7], batch=attrs.evolve(batch, batch_id="r-b1"))


# --- history answers -------------------------------------------------------------------


def test_a_history_answer_read_before_the_store_s_own_commit_is_not_used_after_it(store: PostgresStore) -> None:
    commits = _three_batches()
    for commit in commits[:3]:
        store.append(commit)
    assert store.history("r").batch_closed("r-b1") is False  # the drive's look-up, kept
    for commit in commits[3:7]:  # version 4 closes r-b1
        store.append(commit)
    reused = _opening_b3_as_b1(commits)
    with pytest.raises(IllegalCommit) as refused:
        store.append(reused)
    assert refused.value.rejection.rule is Rule.BATCH_IDENTITY
    head = store.thread_head("t")
    assert head is not None and head.version == 7, "nothing written"


def test_a_commit_judged_with_an_answer_another_writer_made_stale_is_refused_by_the_database(
    store: PostgresStore, postgres_url: str  # noqa: F811
) -> None:
    from runkernel.adapters.stores.postgres import PostgresStore

    commits = _three_batches()
    for commit in commits[:7]:
        store.append(commit)
    assert store.history("r").batch_closed("r-b3") is False  # kept, for this store's version 7
    other = PostgresStore(postgres_url)
    try:
        for commit in commits[7:10]:  # another writer opens r-b3 and closes it (version 10)
            other.append(commit)
    finally:
        other.close()
    # judged against version 7 with the kept answer, the commit opening r-b3 is legal; the
    # database's conditional update refuses it, and the judge, on fresh rows, names why
    with pytest.raises(CommitConflict):
        store.append(commits[7])
    head = store.thread_head("t")
    assert head is not None and head.version == 10, "nothing written"


# --- the lease ---------------------------------------------------------------------------


def test_the_lease_check_before_a_tool_is_answered_by_the_commit_before_it(store: PostgresStore) -> None:
    keeper = LeaseKeeper(store, "w1", duration=30.0)
    commits = text_run("t1", "r1", 2)
    keeper.take("r1")
    store.append(commits[0], lease=keeper.for_commit("r1"))
    lease = keeper.held("r1")
    assert lease is not None
    left = store.lease_left_in_commit(lease)
    print(f"seconds left by the commit's own check: {left}")
    assert left is not None and 0 < left <= 30.0
    assert keeper.before_executor("r1") == lease
    assert (keeper.checks, keeper.checks_in_commit) == (1, 1)


def test_what_a_commit_saw_of_its_lease_is_forgotten_when_it_may_have_changed(store: PostgresStore) -> None:
    keeper = LeaseKeeper(store, "w1", duration=30.0)
    commits = text_run("t1", "r1", 4)
    lease = keeper.take("r1")
    store.append(commits[0], lease=lease)
    assert store.lease_left_in_commit(attrs.evolve(lease, epoch=lease.epoch + 1)) is None, "another epoch"
    assert store.lease_left_in_commit(attrs.evolve(lease, worker_id="w2")) is None, "another worker"
    store.put_command("r1", {"kind": "end", "cause": "cancelled"})  # any other write of this store
    assert store.lease_left_in_commit(lease) is None
    keeper.before_executor("r1")
    assert (keeper.checks, keeper.checks_in_commit) == (1, 0), "asked of the store"
    store.append(commits[1], lease=lease)
    store.renew_lease(lease, 30.0)
    assert store.lease_left_in_commit(lease) is None, "a renewal"
    store.append(commits[2], lease=lease)
    store.release_lease(lease)
    assert store.lease_left_in_commit(lease) is None, "a release"
    lease = keeper.take("r1")
    store.append(commits[3], lease=lease, release=True)
    assert store.lease_left_in_commit(lease) is None, "a commit that gave its lease up"


def test_a_commit_s_figure_for_its_lease_is_less_the_time_since_and_only_while_fresh() -> None:
    from runkernel.adapters.stores.contract import Lease
    from runkernel.adapters.stores.postgres.echo import FRESH, CommitEcho

    now = [100.0]
    echo = CommitEcho(clock=lambda: now[0])
    lease = Lease("r1", "w1", 3, 130.0)
    echo.committed("r1", 2, [], (lease, 30.0, 100.0), compacted=False)
    now[0] = 100.25
    assert echo.lease_left(lease) == 29.75
    now[0] = 100.0 + FRESH
    assert echo.lease_left(lease) is None, "too old: the store is asked"


def test_a_worker_stalled_past_its_lease_after_its_commit_starts_nothing(
    store: PostgresStore, postgres_url: str  # noqa: F811
) -> None:
    from runkernel.adapters.stores.postgres import PostgresStore

    # no renewal falls due in between (it would find the lease gone too): only the check can
    keeper = LeaseKeeper(store, "w1", duration=0.5, margin=0.1, renew_after=60.0)
    commits = text_run("t1", "r1", 1)
    keeper.take("r1")
    store.append(commits[0], lease=keeper.for_commit("r1"))
    stalled = 0.7  # past the lease, and within the time the commit's figure is used for
    time.sleep(stalled)  # the lease expires while the worker stalls before its tool
    rival = PostgresStore(postgres_url)
    try:
        taken = rival.acquire_lease("r1", "w2", 30.0)
    finally:
        rival.close()
    print(f"stalled {stalled} s on a 0.5 s lease; the rival took epoch {taken.epoch}")
    with pytest.raises(LeaseLost):
        keeper.before_executor("r1")
    assert keeper.checks_in_commit == 0


# --- the ended Run's inbox ---------------------------------------------------------------


def test_the_commit_that_ends_a_run_deletes_its_refusals(store: PostgresStore) -> None:
    commits = text_run("t1", "r1", 2)
    for commit in commits[:-1]:
        store.append(commit)
    refused = store.put_command("r1", {"kind": "end", "cause": "stopped"})
    store.settle_command(refused, "refused: test")
    pending = store.put_command("r1", {"kind": "end", "cause": "cancelled"})
    ended = store.append(commits[-1])
    assert isinstance(ended.state, Ended)
    assert [e.entry_id for e in store.commands("r1")] == [pending], "the refusal went with the end"
    assert store.compact_commands("r1") == 0


def test_a_refusal_settled_after_the_end_is_still_compacted(store: PostgresStore) -> None:
    commits = text_run("t1", "r1", 2)
    for commit in commits:
        store.append(commit)
    late = store.put_command("r1", {"kind": "end", "cause": "stopped"})
    store.settle_command(late, "refused: the run had ended")
    assert store.compact_commands("r1") == 1
    assert store.commands("r1") == []
