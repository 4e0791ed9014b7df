"""The store contract, public: the suite every store runs, runkernel's own included.

A store passes if a ``runkernel/2`` trace it exports is legal and it keeps the
contract of ``runkernel.adapters.stores.contract.Store``: append atomically if and only if
identity and expected version match (a typed conflict otherwise, nothing written),
judge every commit with the kernel before writing it (a typed ``IllegalCommit``
otherwise, nothing written), refuse values no trace can hold, read the latest state,
keep messages as deltas, keep the inbox, checkpoints and reconciliations beside
the log, and keep the lease contract (Workers and leases: one valid lease
per Run by the store's clock, epochs rising with every take-over, the lease checked in
the commit's transaction, each commit's writer recorded, a retried commit whose
acknowledgement was lost adopted once), and keep all of it across instances on one
storage and across a crash (another thread, process or restart opening it again). The
lease tests need no clock control: a lease of duration 0 has expired when it is granted.
Subclass ``StoreContract`` in a module pytest collects, with a class name starting with
``Test``, and override its ``store`` fixture, and ``store_factory`` (and ``reopen``, here to
pass the race's clock on)::

    class TestMyStore(StoreContract):
        @pytest.fixture
        def store(self, tmp_path):
            made = MyStore(tmp_path / "db")
            yield made
            made.close()

        @pytest.fixture
        def reopen(self, tmp_path):  # a new instance on the same storage, with a clock
            return lambda **options: MyStore(tmp_path / "db", **options)

        @pytest.fixture
        def store_factory(self, tmp_path):  # the same, for a child process
            return StoreFactory("my_package.my_module:MyStore", str(tmp_path / "db"))

Without a ``reopen`` fixture the tests across instances open their instances with the
store's own ``store.reopen()`` (``Store.reopen``) and skip the forced lease race, which
needs ``reopen(clock=...)``; without ``store_factory`` those across processes are skipped
(``instances``, ``processes``). Every test starts from an empty
store. Needs ``pytest`` (runkernel's ``dev`` extra).
"""

from __future__ import annotations

from collections.abc import Iterator

import attrs
import pytest

from runkernel.adapters.stores.contract import Checkpoint, CommitConflict, IllegalCommit, Reconciliation, Store
from runkernel.conformance.inbox_contract import InboxContract
from runkernel.conformance.instances import InstancesContract
from runkernel.conformance.lease_contract import LeaseContract
from runkernel.conformance.processes import ProcessContract
from runkernel.conformance.versions_contract import VersionsContract
from runkernel.conformance.runs import Builder, awaiting_run, delegating_run, step, text_run, tool_run
from runkernel.kernel.canonical import jcs_digest
from runkernel.kernel.policies import RecoveryMode, RetryPolicy, ToolPolicy, ToolRecoveryPolicy
from runkernel.kernel.protocol import Allow, Approve, EndRequest, GateVerdict, ResumeCommand, ToolFinished, ToolOutput
from runkernel.kernel.rules import Rule
from runkernel.kernel.state import RESUMED_EVENT, Awaiting, EndCause, Ended, Event, Message, ThreadCommit, ToolUse
from runkernel.kernel.values import EndCauseKind, Role, WaitKind
from runkernel.specs.checker import Verdict, check_commits


def append_all(store: Store, commits: list[ThreadCommit]) -> None:
    for commit in commits:
        store.append(commit)


class StoreContract(LeaseContract, InboxContract, InstancesContract, ProcessContract, VersionsContract):
    """The store contract as pytest tests; subclass it and override ``store``, and
    ``store_factory`` to run the tests across processes (and ``reopen`` to open the
    instances of the tests across instances otherwise than by ``store.reopen()``).
    The lease contract's tests are ``LeaseContract``'s (``lease_contract``), the inbox's
    ``InboxContract``'s (``inbox_contract``), the app versions' ``VersionsContract``'s
    (``versions_contract``), those across
    instances ``InstancesContract``'s (``instances``), those across processes
    ``ProcessContract``'s (``processes``), inherited."""

    @pytest.fixture
    def store(self) -> Iterator[Store]:
        """An empty store; override in the subclass (and close it after the test)."""
        raise NotImplementedError("subclass StoreContract and override its `store` fixture")
        yield  # pragma: no cover


    def test_append_then_read_latest_state(self, store: Store) -> None:
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

    def test_export_is_the_commits_in_order_and_legal(self, store: Store) -> None:
        commits = tool_run("t1", "r1") + text_run("t1", "r2", 2, expected_version=5)
        append_all(store, commits)
        exported = list(store.commits("t1"))
        assert exported == commits
        assert check_commits(exported).verdict is Verdict.LEGAL

    def test_wrong_expected_version_is_a_typed_conflict_and_writes_nothing(self, store: Store) -> None:
        first, second, *_ = text_run("t1", "r1", 2)
        store.append(first)
        stale = attrs.evolve(second, expected_version=0)
        with pytest.raises(CommitConflict) as raised:
            store.append(stale)
        assert raised.value.rejection.rule is Rule.VERSION
        assert list(store.commits("t1")) == [first]
        head = store.thread_head("t1")
        assert head is not None and head.version == 1

    def test_identity_mismatch_is_a_conflict(self, store: Store) -> None:
        append_all(store, text_run("t1", "r1", 1))
        other = text_run("t2", "r1", 1)[0]
        with pytest.raises(CommitConflict) as raised:
            store.append(other)
        assert raised.value.rejection.rule in (Rule.IDENTITY, Rule.VERSION)
        assert store.thread_ids() == ["t1"]

    def test_illegal_commit_is_refused_and_writes_nothing(self, store: Store) -> None:
        commits = text_run("t1", "r1", 1)
        append_all(store, commits)
        after_end = attrs.evolve(commits[-1], expected_version=len(commits))
        with pytest.raises(IllegalCommit) as raised:
            store.append(after_end)
        assert raised.value.rejection.rule is Rule.AFTER_ENDED
        assert len(list(store.commits("t1"))) == len(commits)

    def test_racing_writers_one_wins(self, store: Store) -> None:
        first, second, *_ = text_run("t1", "r1", 3)
        store.append(first)
        rival = attrs.evolve(second, messages=())
        rival = attrs.evolve(rival, step=first.step)
        store.append(second)
        with pytest.raises(CommitConflict):
            store.append(rival)
        assert list(store.commits("t1")) == [first, second]

    def test_ticket_ids_are_never_reused_across_runs(self, store: Store) -> None:
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

    def test_a_ticket_of_an_earlier_run_of_the_thread_is_never_reused(self, store: Store) -> None:
        earlier, waiting = awaiting_run("t1", "r1", "ticket-shared-0002")
        append_all(store, earlier)
        cancelled = step(waiting, EndRequest(EndCause(EndCauseKind.CANCELLED))).commit
        assert cancelled is not None
        store.append(cancelled)
        reused, _ = awaiting_run("t1", "r2", "ticket-shared-0002", expected_version=cancelled.version)
        store.append(reused[0])
        store.append(reused[1])
        with pytest.raises(IllegalCommit) as raised:
            store.append(reused[2])
        assert raised.value.rejection.rule is Rule.TICKET_REUSED
        assert len(list(store.commits("t1"))) == cancelled.version + 2
        # the same commit with a fresh ticket is legal: only the reuse was refused
        fresh, _ = awaiting_run("t1", "r2", "ticket-fresh-0002", expected_version=cancelled.version)
        assert fresh[:2] == reused[:2]
        assert isinstance(store.append(fresh[2]).state, Awaiting)

    def test_thread_ids_are_every_thread_sorted(self, store: Store) -> None:
        for thread_id in ("t3", "t1", "t2"):
            append_all(store, text_run(thread_id, f"r-{thread_id}", 1))
        found = store.thread_ids()
        assert found == ["t1", "t2", "t3"], f"thread_ids() is {found}: every Thread with a commit, sorted"

    def test_a_run_is_judged_with_its_own_history(self, store: Store) -> None:
        # NO_HISTORY is the history of a Run's first commit only: judged with it, a Run
        # may open again a batch id it closed (the judge's one question only history answers)
        run = Builder("t1").start("r1").propose("lookup", batch_id="b1")
        for n in (1, 2):
            run = run.feed(GateVerdict(f"c{n}", Allow()), ToolFinished(f"c{n}", 1, ToolOutput("found")))
            run = run.propose("lookup", first=n + 1, batch_id=f"b{n + 1}")
        *before, fresh = run.commits  # the last opens batch b3
        append_all(store, before)
        assert fresh.batch is not None and store.history("r1").batch_closed("b1")
        reused = attrs.evolve(fresh, batch=attrs.evolve(fresh.batch, batch_id="b1"))
        try:
            store.append(reused)
        except IllegalCommit as refused:
            assert refused.rejection.rule is Rule.BATCH_IDENTITY, refused.rejection
        else:
            pytest.fail("a Run opened again batch id 'b1', which it closed: the store judged the append without "
                        "the Run's history (judge_append takes history(run_id); NO_HISTORY only for a new Run)")
        assert len(list(store.commits("t1"))) == len(before)
        store.append(fresh)  # under its own id it is legal: only the reuse was refused

    def test_messages_are_the_deltas_in_order(self, store: Store) -> None:
        commits = tool_run("t1", "r1")
        append_all(store, commits)
        expected = [m for c in commits for m in c.messages]
        assert store.messages("t1") == expected

    def test_checkpoints_are_kept_replaced_and_deleted(self, store: Store) -> None:
        assert store.load_checkpoint("r1") is None
        store.save_checkpoint(Checkpoint("r1", 1, {"partial": "he"}))
        store.save_checkpoint(Checkpoint("r1", 1, {"partial": "hell"}))
        assert store.load_checkpoint("r1") == Checkpoint("r1", 1, {"partial": "hell"})
        store.delete_checkpoint("r1")
        assert store.load_checkpoint("r1") is None

    def test_reconciliations_are_recorded_beside_the_log(self, store: Store) -> None:
        store.record_reconciliation(Reconciliation("op1", "applied", "seen in ledger"))
        store.record_reconciliation(Reconciliation("op2", "unknown", None))
        assert store.reconciliations("op1") == [Reconciliation("op1", "applied", "seen in ledger")]
        assert len(store.reconciliations()) == 2

    def test_reset_deletes_everything(self, store: Store) -> None:
        append_all(store, text_run("t1", "r1", 1))
        store.put_command("r1", {"type": "end", "kind": "cancelled"})
        store.reset()
        assert store.thread_ids() == []
        assert store.run("r1") is None
        assert store.pending_commands("r1") == []
        append_all(store, text_run("t1", "r1", 1))
        assert store.thread_ids() == ["t1"]

    def test_second_run_waits_for_the_first_to_end(self, store: Store) -> None:
        commits, _ = awaiting_run("t1", "r1", "ticket-0002")
        append_all(store, commits)
        second = text_run("t1", "r2", 1, expected_version=len(commits))
        with pytest.raises(IllegalCommit) as raised:
            store.append(second[0])
        assert raised.value.rejection.rule is Rule.ONE_ACTIVE_RUN


    # --- the judge's side of the contract ---------------------------------

    @pytest.mark.parametrize("where", ["content", "metadata", "arguments", "event"])
    def test_a_lone_surrogate_is_refused_with_a_typed_error_before_writing(self, store: Store, where: str) -> None:
        first, second, *_ = tool_run("t1", "r1")
        store.append(first)
        bad = "bad \ud800"
        if where == "content":
            broken = attrs.evolve(second, messages=(attrs.evolve(second.messages[0], content=bad),))
        elif where == "metadata":
            broken = attrs.evolve(second, messages=(attrs.evolve(second.messages[0], metadata={"k": bad}),))
        elif where == "arguments":
            assert second.batch is not None and second.messages[0].tool_calls is not None
            use = second.messages[0].tool_calls[0]
            message = attrs.evolve(second.messages[0], tool_calls=(ToolUse(use.call_id, use.tool, [bad]),))
            call = attrs.evolve(second.batch.calls[0], arguments=[bad])
            broken = attrs.evolve(second, messages=(message,), batch=second.batch.replace_call(call))
        else:
            broken = attrs.evolve(second, events=(Event("note", {"text": bad}),))
        with pytest.raises(IllegalCommit) as raised:
            store.append(broken)
        assert raised.value.rejection.rule is Rule.JSON_VALUE
        assert list(store.commits("t1")) == [first]
        head = store.thread_head("t1")
        assert head is not None and head.version == 1

    def test_metadata_and_committed_policies_are_kept_verbatim(self, store: Store) -> None:
        policy = ToolPolicy(ToolRecoveryPolicy(RecoveryMode.REPLAY, 4), RetryPolicy(2))
        commits = tool_run("t1", "r1")
        first = commits[0]
        metadata = {"framework": {"id": "m-1", "parts": [1, 2.5, None, True]}, "big": 2**70}
        commits[0] = attrs.evolve(first, messages=(Message(Role.USER, "task", metadata=metadata),))
        batch = commits[1].batch
        assert batch is not None
        commits[1:] = [
            attrs.evolve(c, batch=attrs.evolve(c.batch, calls=tuple(attrs.evolve(k, policy=policy) for k in c.batch.calls)))
            if c.batch is not None else c
            for c in commits[1:]
        ]
        for commit in commits:
            store.append(commit)
        exported = list(store.commits("t1"))
        assert exported == commits
        assert store.messages("t1")[0].metadata == metadata
        opened = exported[1].batch
        assert opened is not None and opened.calls[0].policy == policy

    def test_a_resume_whose_digest_is_not_its_commands_is_refused(self, store: Store) -> None:
        commits, waiting = awaiting_run("t1", "r1", "ticket-digest-0001")
        for commit in commits:
            store.append(commit)
        assert isinstance(waiting.state, Awaiting)
        resume = step(waiting, ResumeCommand("r1", "ticket-digest-0001", WaitKind.APPROVAL, Approve())).commit
        assert resume is not None
        (event,) = [e for e in resume.events if e.type == RESUMED_EVENT]
        assert event.data["digest"] == jcs_digest(event.data["command"])
        forged = attrs.evolve(resume, events=(Event(RESUMED_EVENT, {**event.data, "digest": "0" * 64}),))
        with pytest.raises(IllegalCommit) as raised:
            store.append(forged)
        assert raised.value.rejection.rule is Rule.RESUME_DIGEST
        store.append(resume)
        assert check_commits(list(store.commits("t1"))).verdict is Verdict.LEGAL


    # --- listing and work discovery --------------------------------------

    def test_runs_are_listed_newest_first_with_their_app(self, store: Store) -> None:
        append_all(store, text_run("t1", "r1", 1, app="billing"))
        waiting, _ = awaiting_run("t2", "r2", "ticket-list-0001", app="billing")
        append_all(store, waiting)
        append_all(store, text_run("t3", "r3", 2)[:2])
        listed = store.list_runs()
        assert [s.run_id for s in listed] == ["r3", "r2", "r1"]
        assert [(s.state, s.app) for s in listed] == [("running", None), ("awaiting", "billing"), ("ended", "billing")]
        assert listed[1].waiting_for == "approval" and listed[1].version == len(waiting)
        assert listed[2].step == 1 and listed[0].waiting_for is None
        assert [s.run_id for s in store.list_runs(state="awaiting")] == ["r2"]
        assert [s.run_id for s in store.list_runs(thread_id="t1")] == ["r1"]
        assert [s.run_id for s in store.list_runs(limit=1)] == ["r3"]
        activation = list(store.commits("t1"))[0]
        assert activation.app == "billing"

    def test_runs_are_paged_after_a_run_and_filtered_by_app(self, store: Store) -> None:
        for n in range(5):
            append_all(store, text_run(f"t{n}", f"r{n}", 1, app="even" if n % 2 == 0 else "odd")[:1])
        assert [s.run_id for s in store.list_runs(app="even")] == ["r4", "r2", "r0"]
        assert [s.run_id for s in store.list_runs(after="r3", limit=2)] == ["r2", "r1"]
        assert [s.run_id for s in store.list_runs(app="even", after="r3")] == ["r2", "r0"]  # r3 is odd
        assert [s.run_id for s in store.list_runs(after="r0")] == []
        assert [s.run_id for s in store.list_runs(app="none")] == []
        assert store.count_runs() == 5 and store.count_runs(app="even") == 3 and store.count_runs(cap=2) == 2
        assert store.count_runs(state="running", app="odd") == 2 and store.count_runs(thread_id="t1") == 1
        assert store.count_runs(state="ended") == 0

    def test_work_is_running_or_commanded_or_due_and_never_leased(self, store: Store) -> None:
        append_all(store, text_run("t1", "running", 2, app="a")[:2])
        append_all(store, text_run("t2", "ended", 1, app="a"))
        quiet, _ = awaiting_run("t3", "quiet", "ticket-work-0001", app="a")
        append_all(store, quiet)
        commanded, _ = awaiting_run("t4", "commanded", "ticket-work-0002", app="a")
        append_all(store, commanded)
        expired, _ = awaiting_run("t5", "expired", "ticket-work-0003", app="a", expires_at="2000-01-01T00:00:00Z")
        append_all(store, expired)
        later, _ = awaiting_run("t6", "later", "ticket-work-0004", app="a", expires_at="2999-01-01T00:00:00Z")
        append_all(store, later)
        due, _ = awaiting_run(
            "t7", "due", "ticket-work-0005", app="a", kind=WaitKind.SCHEDULED, due_at="2000-01-01T00:00:00Z"
        )
        append_all(store, due)
        append_all(store, text_run("t8", "other-app", 2, app="b")[:2])
        append_all(store, text_run("t9", "no-app", 2)[:2])
        store.put_command("commanded", {"type": "end", "kind": "cancelled"})
        assert store.runs_with_work("a") == ["running", "commanded", "expired", "due"]
        assert store.runs_with_work("b") == ["other-app"]
        assert store.runs_with_work(None) == ["no-app"]
        assert store.runs_with_work("a", limit=2) == ["running", "commanded"]
        lease = store.acquire_lease("running", "worker-a", self.LONG)
        assert store.runs_with_work("a") == ["commanded", "expired", "due"]
        store.release_lease(lease)
        store.acquire_lease("running", "worker-b", 0)  # expired at once: an orphan again
        assert store.runs_with_work("a")[0] == "running"
        store.put_command("ended", {"type": "end", "kind": "cancelled"})
        assert "ended" in store.runs_with_work("a")  # a command left to refuse is work too

    # --- quiet parents and their children ----------------------------------

    def test_a_quiet_parent_is_work_only_once_a_child_ended_or_was_never_activated(self, store: Store) -> None:
        run = delegating_run("tp", "parent", app="a")
        first, second = run.children
        append_all(store, list(run.opened))
        assert store.runs_with_work("a") == ["parent"]  # the group is still to start: not quiet
        store.append(run.quiet)
        assert store.runs_with_work("a") == ["parent"]  # quiet, but no child was activated
        store.append(run.activations[0])
        assert store.runs_with_work("a") == ["parent", first]  # d2's child still missing
        store.append(run.activations[1])
        assert store.runs_with_work("a") == [first, second]  # quiet: both children run
        assert store.runs_with_work(None) == []  # the children are the parent's app's
        store.append(run.child_ends[1])
        assert store.runs_with_work("a") == ["parent", first]  # a child ended: wake
        lease = store.acquire_lease("parent", "worker-a", self.LONG)
        assert store.runs_with_work("a") == [first]  # a woken parent is still leased work
        store.append(run.second_done, lease=lease)
        store.release_lease(lease)
        assert store.runs_with_work("a") == [first]  # quiet again, for d1 alone
        store.append(run.child_ends[0])
        assert store.runs_with_work("a") == ["parent"]
        store.append(run.first_done)
        assert store.runs_with_work("a") == ["parent"]  # o3 may start: not quiet

    def test_a_child_names_its_parent_call_from_its_own_row(self, store: Store) -> None:
        run = delegating_run("tp", "parent", app="a")
        append_all(store, [*run.opened, run.quiet, *run.activations])
        assert [store.parent_of(child) for child in run.children] == list(run.parents)
        assert store.parent_of("parent") is None and store.parent_of("nobody") is None
        assert {(s.run_id, s.app) for s in store.list_runs()} == {("parent", "a"), (run.children[0], "a"), (run.children[1], "a")}

