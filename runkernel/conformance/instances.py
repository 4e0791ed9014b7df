"""The store contract across instances on one storage, in one process: what
``StoreContract`` (``suite``) inherits and runs with its ``reopen`` fixture, a callable
that opens a new instance on the storage of ``store`` (the instances a store has in
several threads or processes, or after a restart); by default ``store.reopen()``.

Two instances interleave commits and reads (no stale head, no lost write); instances
race to commit the same versions (each acknowledged once); a lease taken over through
one instance is lost to the other (no renewal on a stale read); an answer pending
through one instance is the wait's one answer for the other; the judgment's history
(tickets used) holds in a reopened instance, which judges what it replays; a retry
through a reopened instance adopts the commit that landed (W4); and threads, each with
its own instance, race for leases with their reads forced to overlap (``racing``): one
grant per attempt. ``reopen(clock=CLOCK)`` opens an instance whose store clock is
``CLOCK``; a store that takes no clock raises ``TypeError`` (as the default
``reopen`` does), and the lease race is skipped.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator

import attrs
import pytest

from runkernel.adapters.stores.contract import (
    Checkpoint, CommitConflict, IllegalCommit, LeaseHeld, LeaseLost, Reconciliation, Store,
)
from runkernel.conformance.inbox_contract import answered_wait, refused_as_pending
from runkernel.conformance.racing import (
    HANG_GUARD, RACERS, Barrier, Outcome, RaceClock, judge_race, race, race_in_threads,
)
from runkernel.conformance.runs import awaiting_run, text_run, tool_run
from runkernel.kernel.rules import Rule
from runkernel.kernel.state import Message
from runkernel.kernel.values import Role
from runkernel.specs.checker import Verdict, check_commits

#: A callable that opens a new instance on the storage of the test's ``store``.
Reopen = Callable[..., Store]


class InstancesContract:
    """The tests across instances of one storage; ``store`` and ``reopen`` are
    ``StoreContract``'s fixtures."""

    LONG = 600.0

    @pytest.fixture
    def reopen(self, store: Store) -> Reopen:
        """A callable that opens a new instance on the storage of ``store``: by default
        ``store.reopen()`` (``Store.reopen``), which takes no options, so the forced lease
        race, which needs ``reopen(clock=CLOCK)``, is skipped. Override it to pass a clock
        on; a store with no ``reopen`` method skips the tests across instances."""
        opened = getattr(store, "reopen", None)
        if opened is None:
            pytest.skip("the store has no reopen(): give StoreContract a `reopen` fixture to run the tests across instances")

        def by_store_reopen(**options: object) -> Store:
            if options:
                raise TypeError(f"Store.reopen() takes no options ({', '.join(sorted(options))})")
            again: Store = opened()
            return again

        return by_store_reopen

    @pytest.fixture
    def second(self, store: Store, reopen: Reopen) -> Iterator[Store]:
        made = reopen()
        yield made
        if made is not store:
            made.close()

    def test_two_instances_interleaving_commits_and_reads_see_every_commit_at_once(
        self, store: Store, second: Store
    ) -> None:
        first = tool_run("t1", "r1")
        commits = first + text_run("t1", "r2", 3, expected_version=len(first))
        instances = (store, second)
        for index, commit in enumerate(commits):
            writer = instances[index % 2]
            for seen in instances:  # no stale head: each sees the other's last commit
                head = seen.thread_head("t1")
                assert (0 if head is None else head.version) == commit.expected_version, "a stale head"
            writer.append(commit)
            for seen in instances:
                head, run = seen.thread_head("t1"), seen.run(commit.run_id)
                assert head is not None and head.version == commit.version, "a commit the other instance missed"
                assert run is not None and run.version == commit.version
        for seen in instances:
            assert list(seen.commits("t1")) == commits
            assert seen.messages("t1") == [m for c in commits for m in c.messages]
            assert seen.thread_ids() == ["t1"] and seen.thread_of("r2") == "t1"
        assert check_commits(list(second.commits("t1"))).verdict is Verdict.LEGAL

    def test_an_instance_that_did_not_see_a_commit_cannot_overwrite_it(self, store: Store, second: Store) -> None:
        one, two, *_ = text_run("t1", "r1", 3)
        store.append(one)
        second.append(two)
        rival = attrs.evolve(two, messages=(Message(Role.ASSISTANT, "another text"),))
        with pytest.raises((CommitConflict, IllegalCommit)):
            store.append(rival)  # version 2 is taken, by the other instance
        for seen in (store, second):
            assert list(seen.commits("t1")) == [one, two], "a lost write"

    def test_what_is_kept_beside_the_log_is_one_for_every_instance(self, store: Store, second: Store) -> None:
        commits, _ = awaiting_run("t1", "r1", "ticket-beside-0001", app="a")
        for commit in commits:
            store.append(commit)
        entry = store.put_command("r1", {"type": "end", "kind": "cancelled"})
        assert [e.entry_id for e in second.pending_commands("r1")] == [entry]
        assert second.runs_with_work("a") == ["r1"]  # a pending command is work, whoever queued it
        assert [s.run_id for s in second.list_runs(app="a")] == ["r1"]
        second.settle_command(entry, "refused: a test")
        assert store.pending_commands("r1") == []
        settled = store.inbox_entry(entry)
        assert settled is not None and settled.outcome == "refused: a test"
        assert store.compact_commands("r1") == 1 and second.commands("r1") == []
        store.save_checkpoint(Checkpoint("r1", 2, {"partial": "pay"}))
        assert second.load_checkpoint("r1") == Checkpoint("r1", 2, {"partial": "pay"})
        second.delete_checkpoint("r1")
        assert store.load_checkpoint("r1") is None
        store.record_reconciliation(Reconciliation("op1", "applied", None))
        assert second.reconciliations("op1") == [Reconciliation("op1", "applied", None)]
        lease = second.acquire_lease("r1", "worker-b", self.LONG)
        status = store.lease_status("r1")
        assert (status.lease, status.released) == (lease, False)
        assert store.runs_with_work("a") == []  # leased through the other instance
        second.reset()
        assert store.thread_ids() == [] and store.run("r1") is None and store.current_lease("r1") is None

    def test_a_wait_takes_one_pending_answer_across_instances(self, store: Store, second: Store) -> None:
        first, _, deny = answered_wait(store, "ticket-answer-0002")
        refused_as_pending(second, "r1", deny, first, "ticket-answer-0002")
        assert [e.entry_id for e in store.pending_commands("r1")] == [first], "two answers to one wait are pending"

    def test_instances_racing_to_commit_acknowledge_each_version_once(self, store: Store, reopen: Reopen) -> None:
        commits = text_run("t1", "r1", 12)
        acknowledged: list[int] = []
        failures: list[BaseException] = []
        barrier = threading.Barrier(RACERS)

        def commit_all() -> None:
            mine = reopen()
            try:
                barrier.wait(HANG_GUARD)
                for commit in commits:
                    try:
                        mine.append(commit)
                    except CommitConflict:
                        continue
                    acknowledged.append(commit.version)
            except BaseException as error:
                failures.append(error)
            finally:
                if mine is not store:
                    mine.close()

        threads = [threading.Thread(target=commit_all) for _ in range(RACERS)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        print(f"racing committers: {RACERS}, versions {len(commits)}, acknowledged {len(acknowledged)}")
        assert failures == []
        assert sorted(acknowledged) == [c.version for c in commits], "a version acknowledged twice, or never"
        assert list(store.commits("t1")) == commits

    def test_a_lease_taken_over_through_another_instance_is_lost_to_the_first(self, store: Store, second: Store) -> None:
        first, *_ = text_run("t1", "r1", 2)
        lease = store.acquire_lease("r1", "worker-a", self.LONG)
        assert second.current_lease("r1") == lease
        with pytest.raises(LeaseHeld):
            second.acquire_lease("r1", "worker-b", self.LONG)
        assert second.release_lease(lease) is True
        taken = second.acquire_lease("r1", "worker-b", self.LONG)
        assert taken.epoch == lease.epoch + 1
        with pytest.raises(LeaseLost):
            store.renew_lease(lease, self.LONG)  # renewed on a stale read, it would be held twice
        with pytest.raises(LeaseLost):
            store.check_lease(lease, 0)
        with pytest.raises(LeaseLost):
            store.append(first, lease=lease)
        assert store.release_lease(lease) is False
        with pytest.raises(LeaseHeld):
            store.acquire_lease("r1", "worker-a", self.LONG)
        assert store.current_lease("r1") == taken == second.current_lease("r1")
        store.append(first, lease=taken)
        assert second.writer_of("t1", 1) == taken.writer

    def test_a_reopened_instance_judges_with_the_history_it_replays(self, store: Store, reopen: Reopen) -> None:
        commits, _ = awaiting_run("t1", "r1", "ticket-reopen-0001")
        for commit in commits:
            store.append(commit)
        again = reopen()
        try:
            assert again.history("r1").ticket_used("ticket-reopen-0001")
            reused, _ = awaiting_run("t2", "r2", "ticket-reopen-0001")
            again.append(reused[0])
            again.append(reused[1])
            with pytest.raises(IllegalCommit) as raised:
                again.append(reused[2])
            assert raised.value.rejection.rule is Rule.TICKET_REUSED
        finally:
            if again is not store:
                again.close()

    def test_a_retry_through_a_reopened_instance_adopts_the_commit_that_landed(
        self, store: Store, reopen: Reopen
    ) -> None:
        one, two, three, *_ = tool_run("t1", "r1")
        lease = store.acquire_lease("r1", "worker-a", self.LONG)
        store.append(one, lease=lease)
        landed = store.append(two, lease=lease)
        again = reopen()  # the reply was lost; the worker restarted and retries
        try:
            assert again.append(two, lease=lease) == landed
            assert [c.version for c in again.commits("t1")] == [1, 2]
            assert again.writer_of("t1", 2) == lease.writer
            again.append(three, lease=lease)
            assert [c.version for c in store.commits("t1")] == [1, 2, 3]
        finally:
            if again is not store:
                again.close()

    def test_threads_racing_for_a_lease_through_their_own_instances_are_granted_it_once(
        self, store: Store, reopen: Reopen
    ) -> None:
        try:
            probe = reopen(clock=time.time)
        except TypeError:
            pytest.skip("reopen(clock=...) is refused: this store takes no clock, and the forced race needs one")
        if probe is not store:
            probe.close()

        def take(clock: RaceClock, barrier: Barrier) -> Outcome:
            mine = reopen(clock=clock)
            try:
                return race(mine, clock, f"worker-{clock.me}", barrier)
            finally:
                if mine is not store:
                    mine.close()

        outcomes = race_in_threads(RACERS, take)
        assert judge_race("threads", outcomes) == []


__all__ = ["InstancesContract", "Reopen"]
