"""The lease contract of a store (Workers and leases), as pytest tests that
``StoreContract`` (``suite``) inherits: one valid lease per Run by the store's clock,
epochs rising with every take-over, the lease checked in the commit's transaction, each
commit's writer recorded, a retried commit whose acknowledgement was lost adopted once,
a quiet commit that releases its lease doing so in its own transaction.
The tests need no clock control: a lease of duration 0 has expired when it is granted.
Run them through ``StoreContract``, whose ``store`` fixture each test takes.
"""

from __future__ import annotations

import attrs
import pytest

from runkernel.adapters.stores.contract import CommitConflict, IllegalCommit, LeaseHeld, LeaseLost, Store, Writer
from runkernel.conformance.runs import text_run, tool_run
from runkernel.kernel.state import Message
from runkernel.kernel.values import Role
from runkernel.specs.checker import Verdict, check_commits


class LeaseContract:
    """The lease tests of the store contract; the ``store`` fixture is ``StoreContract``'s."""

    LONG = 600.0  # seconds: outlasts any test, so only an explicit act ends the lease

    def test_a_lease_is_granted_once_by_the_stores_clock(self, store: Store) -> None:
        before = store.store_time()
        lease = store.acquire_lease("r1", "worker-a", self.LONG)
        assert (lease.run_id, lease.worker_id, lease.epoch) == ("r1", "worker-a", 1)
        assert lease.expires_at >= before + self.LONG
        assert store.current_lease("r1") == lease
        with pytest.raises(LeaseHeld) as raised:
            store.acquire_lease("r1", "worker-b", self.LONG)
        assert raised.value.holder == lease
        assert store.current_lease("r1") == lease
        assert store.current_lease("r2") is None

    def test_taking_a_lease_again_extends_it_with_the_same_epoch(self, store: Store) -> None:
        first = store.acquire_lease("r1", "worker-a", self.LONG)
        again = store.acquire_lease("r1", "worker-a", self.LONG)
        assert again.epoch == first.epoch and again.expires_at >= first.expires_at
        renewed = store.renew_lease(again, self.LONG)
        assert renewed.epoch == first.epoch and renewed.expires_at >= again.expires_at

    def test_epochs_rise_with_every_take_over_and_after_a_release(self, store: Store) -> None:
        expired = store.acquire_lease("r1", "worker-a", 0)
        assert store.current_lease("r1") is None
        taken = store.acquire_lease("r1", "worker-b", 0)
        assert taken.epoch == expired.epoch + 1
        own_again = store.acquire_lease("r1", "worker-b", self.LONG)
        assert own_again.epoch == taken.epoch + 1  # an expired lease is never revived
        assert store.release_lease(own_again) is True
        assert store.current_lease("r1") is None
        assert store.release_lease(own_again) is False
        after_release = store.acquire_lease("r1", "worker-a", self.LONG)
        assert after_release.epoch == own_again.epoch + 1

    def test_lease_status_shows_the_last_lease_valid_or_not_with_the_stores_clock(self, store: Store) -> None:
        never = store.lease_status("r1")
        assert (never.lease, never.released) == (None, False)
        expired = store.acquire_lease("r1", "worker-a", 0)
        seen = store.lease_status("r1")
        assert (seen.lease, seen.released) == (expired, False) and seen.now >= expired.expires_at
        held = store.acquire_lease("r1", "worker-b", self.LONG)
        seen = store.lease_status("r1")
        assert seen.lease == held and not seen.released and seen.now < held.expires_at
        store.release_lease(held)
        seen = store.lease_status("r1")
        assert seen.lease is not None and (seen.lease.worker_id, seen.lease.epoch, seen.released) == ("worker-b", 2, True)

    def test_lease_statuses_answers_each_run_as_lease_status_does(self, store: Store) -> None:
        store.acquire_lease("r1", "worker-a", 0)
        held = store.acquire_lease("r2", "worker-b", self.LONG)
        released = store.acquire_lease("r3", "worker-c", self.LONG)
        store.release_lease(released)
        wanted = ["r3", "never", "r1", "r2", "r1"]
        statuses = store.lease_statuses(wanted)
        assert list(statuses) == ["r3", "never", "r1", "r2"]  # each once, in the order asked
        for run_id, status in statuses.items():
            one = store.lease_status(run_id)
            assert (status.lease, status.released) == (one.lease, one.released), run_id
        assert statuses["r2"].lease == held and statuses["r2"].now < held.expires_at
        assert store.lease_statuses([]) == {}

    def test_a_lost_lease_cannot_be_renewed_checked_or_released(self, store: Store) -> None:
        old = store.acquire_lease("r1", "worker-a", 0)
        with pytest.raises(LeaseLost):
            store.renew_lease(old, self.LONG)
        with pytest.raises(LeaseLost):
            store.check_lease(old, 0)
        newer = store.acquire_lease("r1", "worker-b", self.LONG)
        with pytest.raises(LeaseLost):
            store.renew_lease(old, self.LONG)
        assert store.release_lease(old) is False
        assert store.current_lease("r1") == newer

    def test_check_lease_keeps_a_safety_margin(self, store: Store) -> None:
        lease = store.acquire_lease("r1", "worker-a", 60)
        assert store.check_lease(lease, 1).epoch == lease.epoch
        with pytest.raises(LeaseLost):
            store.check_lease(lease, 3600)
        assert store.current_lease("r1") == lease  # a failed check changes nothing

    def test_leases_taken_together_are_granted_as_one_by_one_and_skip_those_held(self, store: Store) -> None:
        held = store.acquire_lease("r2", "worker-b", self.LONG)
        expired = store.acquire_lease("r3", "worker-b", 0)
        released = store.acquire_lease("r4", "worker-b", self.LONG)
        store.release_lease(released)
        own = store.acquire_lease("r5", "worker-a", self.LONG)
        before = store.store_time()
        granted = store.acquire_leases(["r1", "r2", "r3", "r4", "r5", "r1"], "worker-a", self.LONG)
        assert [lease.run_id for lease in granted] == ["r1", "r3", "r4", "r5"], "in the order asked, each once, r2 held"
        epochs = {lease.run_id: lease.epoch for lease in granted}
        assert epochs == {"r1": 1, "r3": expired.epoch + 1, "r4": released.epoch + 1, "r5": own.epoch}
        assert all(lease.worker_id == "worker-a" and lease.expires_at >= before + self.LONG for lease in granted)
        for lease in granted:
            assert store.current_lease(lease.run_id) == lease, lease.run_id
        assert store.current_lease("r2") == held, "a lease another worker holds is left alone"
        assert store.acquire_leases([], "worker-a", self.LONG) == []
        with pytest.raises(ValueError):
            store.acquire_leases(["r6"], "", self.LONG)
        with pytest.raises(ValueError):
            store.acquire_leases(["r6"], "worker-a", -1.0)
        assert store.current_lease("r6") is None

    def test_leases_taken_together_leave_out_a_run_that_ended(self, store: Store) -> None:
        for commit in text_run("t1", "ended", 1):
            store.append(commit)
        for commit in text_run("t2", "going", 2)[:2]:
            store.append(commit)
        granted = store.acquire_leases(["ended", "going"], "worker-a", self.LONG)
        assert [lease.run_id for lease in granted] == ["going"], "an ended Run has nothing left to drive"
        assert store.lease_status("ended").lease is None, "its lease row is not even written"

    def test_leases_renewed_together_are_those_still_held_and_none_is_revived(self, store: Store) -> None:
        kept = store.acquire_lease("r1", "worker-a", self.LONG)
        expired = store.acquire_lease("r2", "worker-a", 0)
        released = store.acquire_lease("r3", "worker-a", self.LONG)
        store.release_lease(released)
        stale = store.acquire_lease("r4", "worker-a", 0)
        taken_over = store.acquire_lease("r4", "worker-b", self.LONG)
        short = store.acquire_lease("r5", "worker-a", 60)
        renewed = store.renew_leases([short, kept, expired, released, stale], self.LONG)
        assert [lease.run_id for lease in renewed] == ["r5", "r1"], "only the leases still held, in the order asked"
        assert [lease.epoch for lease in renewed] == [short.epoch, kept.epoch]
        assert renewed[0].expires_at > short.expires_at and renewed[1].expires_at >= kept.expires_at
        assert store.current_lease("r5") == renewed[0] and store.current_lease("r1") == renewed[1]
        assert store.current_lease("r2") is None and store.current_lease("r3") is None, "never revived"
        assert store.current_lease("r4") == taken_over
        assert store.renew_leases([], self.LONG) == []
        with pytest.raises(ValueError):
            store.renew_leases([kept], float("nan"))

    def test_a_lease_duration_must_be_a_finite_non_negative_number(self, store: Store) -> None:
        for bad in (-1.0, float("nan"), float("inf")):
            with pytest.raises(ValueError):
                store.acquire_lease("r1", "worker-a", bad)
        assert store.current_lease("r1") is None

    def test_commits_under_a_lease_record_their_writer(self, store: Store) -> None:
        commits = tool_run("t1", "r1")
        lease = store.acquire_lease("r1", "worker-a", self.LONG)
        for commit in commits:
            store.append(commit, lease=lease)
        assert [store.writer_of("t1", c.version) for c in commits] == [Writer("worker-a", lease.epoch)] * len(commits)
        assert check_commits(list(store.commits("t1"))).verdict is Verdict.LEGAL

    def test_a_commit_without_the_lease_is_refused_while_one_is_held(self, store: Store) -> None:
        first, second, *_ = text_run("t1", "r1", 2)
        store.append(first)
        assert store.writer_of("t1", 1) is None
        holder = store.acquire_lease("r1", "worker-a", self.LONG)
        with pytest.raises(LeaseHeld):
            store.append(second)
        assert [c.version for c in store.commits("t1")] == [1]
        store.release_lease(holder)
        store.append(second)
        assert store.writer_of("t1", 2) is None

    def test_a_commit_under_a_lost_lease_is_refused_and_writes_nothing(self, store: Store) -> None:
        first, second, *_ = text_run("t1", "r1", 2)
        stale = store.acquire_lease("r1", "worker-a", 0)
        with pytest.raises(LeaseLost):
            store.append(first, lease=stale)
        assert store.thread_ids() == []
        fresh = store.acquire_lease("r1", "worker-b", self.LONG)
        store.append(first, lease=fresh)
        with pytest.raises(LeaseLost):
            store.append(second, lease=stale)
        store.release_lease(fresh)
        with pytest.raises(LeaseLost):
            store.append(second, lease=fresh)
        assert [c.version for c in store.commits("t1")] == [1]
        assert store.writer_of("t1", 1) == fresh.writer

    def test_a_lease_of_another_run_is_refused_for_a_commit(self, store: Store) -> None:
        (first, *_) = text_run("t1", "r1", 1)
        other = store.acquire_lease("r2", "worker-a", self.LONG)
        with pytest.raises(LeaseLost):
            store.append(first, lease=other)
        assert store.thread_ids() == []

    def test_a_retried_commit_whose_reply_was_lost_is_adopted_not_written_twice(self, store: Store) -> None:
        first, second, third, *_ = tool_run("t1", "r1")
        lease = store.acquire_lease("r1", "worker-a", self.LONG)
        store.append(first, lease=lease)
        landed = store.append(second, lease=lease)
        # the reply was lost: the worker retries the very same commit
        assert store.append(second, lease=lease) == landed
        assert [c.version for c in store.commits("t1")] == [1, 2]
        store.append(third, lease=lease)
        assert [c.version for c in store.commits("t1")] == [1, 2, 3]

    def test_a_landed_commit_is_adopted_even_after_the_lease_ended(self, store: Store) -> None:
        first, second, *_ = text_run("t1", "r1", 2)
        lease = store.acquire_lease("r1", "worker-a", self.LONG)
        landed = store.append(first, lease=lease)
        store.release_lease(lease)
        assert store.append(first, lease=lease) == landed  # it did land: the truth is adopted
        with pytest.raises(LeaseLost):
            store.append(second, lease=lease)  # but nothing new is written under it

    def test_the_same_commit_by_another_writer_is_a_conflict(self, store: Store) -> None:
        first, second, *_ = text_run("t1", "r1", 2)
        old = store.acquire_lease("r1", "worker-a", 0)
        with pytest.raises(LeaseLost):
            store.append(first, lease=old)
        taker = store.acquire_lease("r1", "worker-b", 0)
        assert taker.epoch > old.epoch
        mine = store.acquire_lease("r1", "worker-a", self.LONG)
        store.append(first, lease=mine)
        store.append(second, lease=mine)
        store.release_lease(mine)
        other = store.acquire_lease("r1", "worker-b", self.LONG)
        with pytest.raises(CommitConflict):
            store.append(second, lease=other)
        assert [c.version for c in store.commits("t1")] == [1, 2]
        assert store.writer_of("t1", 2) == mine.writer
        store.release_lease(other)
        with pytest.raises(CommitConflict):
            store.append(second)  # nor is an unleased retry ever adopted
        assert [c.version for c in store.commits("t1")] == [1, 2]

    def test_a_commit_that_releases_its_lease_gives_it_up_in_the_same_write(self, store: Store) -> None:
        first, second, *_ = text_run("t1", "r1", 2)
        lease = store.acquire_lease("r1", "worker-a", self.LONG)
        store.append(first, lease=lease)
        landed = store.append(second, lease=lease, release=True)
        assert store.current_lease("r1") is None
        status = store.lease_status("r1")
        assert (status.lease, status.released) == (lease, True)
        assert store.writer_of("t1", 2) == lease.writer
        # the reply was lost: the retry is adopted, and the lease stays released
        assert store.append(second, lease=lease, release=True) == landed
        assert store.lease_status("r1").released
        assert store.acquire_lease("r1", "worker-b", self.LONG).epoch == lease.epoch + 1

    def test_a_refused_commit_releases_nothing(self, store: Store) -> None:
        first, second, *_ = text_run("t1", "r1", 2)
        lease = store.acquire_lease("r1", "worker-a", self.LONG)
        store.append(first, lease=lease)
        rival = attrs.evolve(first, messages=(Message(Role.USER, "something else"),))
        with pytest.raises((CommitConflict, IllegalCommit)):
            store.append(rival, lease=lease, release=True)  # version 1 is taken
        assert store.current_lease("r1") == lease
        with pytest.raises(ValueError):
            store.append(second, release=True)  # nothing to release without a lease
        assert store.current_lease("r1") == lease
        assert [c.version for c in store.commits("t1")] == [1]

    def test_a_different_commit_at_a_landed_version_is_a_conflict_even_for_its_writer(self, store: Store) -> None:
        first, second, *_ = text_run("t1", "r1", 2)
        lease = store.acquire_lease("r1", "worker-a", self.LONG)
        store.append(first, lease=lease)
        store.append(second, lease=lease)
        rival = attrs.evolve(second, messages=(Message(Role.ASSISTANT, "something else"),))
        with pytest.raises((CommitConflict, IllegalCommit)):
            store.append(rival, lease=lease)
        assert list(store.commits("t1")) == [first, second]


__all__ = ["LeaseContract"]
