"""A PostgreSQL store's memo of history answers (``postgres_echo.HistoryMemo``) after
another writer moved the Thread and this store picked the Run up again.

The store wrote the Run up to version 7 and its drive looked up whether batch r-b3 is
closed (no: kept in the memo, for the commit judged against version 7). Another writer
then ran batches r-b3 and r-b4 and closed both (versions 8-13). This store picks the
Run up again, which fixes what its next commit is judged against without reading
(version 13): an answer kept before must not answer for it. A commit opening a batch
under the closed id r-b3 at version 14 is illegal against the new head, and the
database cannot tell (the expected version is right), so only the judge, with a fresh
answer, refuses it.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

import attrs
import pytest

from postgres_support import postgres_url
from runkernel.adapters.stores.contract import IllegalCommit
from runkernel.kernel.protocol import Allow, GateVerdict, InferenceResult, Input, ProposedCall, ToolFinished, ToolOutput
from runkernel.kernel.rules import Rule
from runkernel.kernel.state import ThreadCommit
from runkernel.testing import Builder

if TYPE_CHECKING:
    from runkernel.adapters.stores.postgres import PostgresStore

__all__ = ["postgres_url"]


@pytest.fixture
def store(postgres_url: str) -> Iterator[PostgresStore]:
    from runkernel.adapters.stores.postgres import PostgresStore

    made = PostgresStore(postgres_url)
    yield made
    made.close()


def _five_batches() -> list[ThreadCommit]:
    """A Run of five tool steps, batches r-b1 to r-b5: versions 2-4 are b1's (4 closes
    it), 5-7 b2's, 8-10 b3's, 11-13 b4's, 14-16 b5's."""
    feed: list[Input] = []
    for index in (1, 2, 3, 4, 5):
        call = ProposedCall(f"r-c{index}", "lookup", {"q": str(index)}, f"r-op{index}")
        feed += [InferenceResult(str(index), (call,), f"r-b{index}"), GateVerdict(call.call_id, Allow())]
        feed.append(ToolFinished(call.call_id, 1, ToolOutput("found")))
    commits = list(Builder("t").start("r", ("task",)).feed(*feed).commits)
    batches = [c.batch.batch_id if c.batch else None for c in commits[:14]]
    assert batches == [None, *["r-b1"] * 3, *["r-b2"] * 3, *["r-b3"] * 3, *["r-b4"] * 3, "r-b5"]
    return commits


@pytest.mark.parametrize("pick_up", ["read_pick_up", "acquire_lease_and_pick_up"])
def test_a_history_answer_kept_before_another_writer_moved_the_thread_is_not_used_after_a_pick_up(
    store: PostgresStore, postgres_url: str, pick_up: str
) -> None:
    from runkernel.adapters.stores.postgres import PostgresStore

    commits = _five_batches()
    for commit in commits[:7]:
        store.append(commit)
    assert store.history("r").batch_closed("r-b3") is False  # the drive's look-up, kept for version 7
    other = PostgresStore(postgres_url)
    try:
        for commit in commits[7:13]:  # another writer runs r-b3 and r-b4 (versions 8-13)
            other.append(commit)
    finally:
        other.close()
    lease = None
    if pick_up == "read_pick_up":
        picked = store.read_pick_up("r")
    else:
        lease, found = store.acquire_lease_and_pick_up("r", "w1", 30.0)
        assert found is not None
        picked = found
    assert picked.snapshot is not None and picked.snapshot.version == 13, "picked up at the other writer's head"
    opening = commits[13].batch  # version 14 opens r-b5; under r-b3's id it is illegal
    assert opening is not None
    reused = attrs.evolve(commits[13], batch=attrs.evolve(opening, batch_id="r-b3"))
    with pytest.raises(IllegalCommit) as refused:
        store.append(reused, lease=lease)
    assert refused.value.rejection.rule is Rule.BATCH_IDENTITY
    head = store.thread_head("t")
    assert head is not None and head.version == 13, "nothing written"
    # the legal commit at the same version is accepted: the refusal was the batch id's
    store.append(commits[13], lease=lease)
    print(f"history memo after a pick-up [{pick_up}]: refused {refused.value.rejection.rule.name}; head 14")
