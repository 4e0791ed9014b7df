"""Concurrent delegations under the push-mode driver beside the rest of the system: a
worker of the app, a SQLite file opened afresh by each driver with the CLI's export and
check-trace, the lease re-check before a child's activation, and a crash right after a
parent's end (a gap in the design, shown as an expected failure)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import pytest

from push_children import (
    PARENT,
    TOOLS,
    TWO_AND_ONE,
    DelegatingWorld,
    drive_child,
    finalized_batch,
    judged_legal,
    parent_batch,
    quiet_parent,
)
from push_host import SHELLS, make_shell, play_until_quiet
from runkernel.adapters.drive.driver import Driver
from runkernel.adapters.drive.actions import Action, CallRequest, ChildrenRunning, Done, DriverStopped
from runkernel.adapters.stores.memory import MemoryStore
from runkernel.adapters.stores.contract import LeaseLost, Writer
from runkernel.adapters.stores.registry import open_store
from runkernel.adapters.worker.loop import Worker
from runkernel.adapters.drive.lease_keeper import LeaseKeeper
from runkernel.cli.entry import main
from runkernel.kernel.policies import ToolPolicy
from runkernel.kernel.state import CallCompleted, CallExecuting, Ended
from runkernel.kernel.values import EndCauseKind, Role
from runkernel.testing import Boundary, CountingIds, CrashingStore, Position, SimulatedCrash


# --- under a worker ------------------------------------------------------------------------


class DelegatingApp:
    """A push-mode worker app whose parent delegates two topics; its children answer them."""

    name = "research-app"
    tools: Mapping[str, ToolPolicy] = TOOLS

    def __init__(self, store: MemoryStore) -> None:
        self.world = DelegatingWorld(TWO_AND_ONE, store=store)
        self.quiet = 0

    def serve(self, driver: Driver, action: Action) -> None:
        found = play_until_quiet(driver, action, self.world)
        self.quiet += isinstance(found, ChildrenRunning)


def test_a_worker_drives_the_parent_and_the_children_it_activated_with_its_app() -> None:
    store = MemoryStore()
    driver = Driver(store, TOOLS, app="research-app")
    driver.start(["go"], thread_id="t1", run_id=PARENT)  # queued for the app's worker
    app = DelegatingApp(store)
    worker = Worker(store, app, worker_id="w1")
    rounds = 0
    while not isinstance(getattr(store.run(PARENT), "state", None), Ended):
        rounds += 1
        assert rounds <= 3, "the worker left the parent unfinished"
        worker.run_once()
    batch = finalized_batch(store)
    assert [type(c.status) for c in batch.calls] == [CallCompleted] * 3
    children = [c.delegation for c in batch.calls if c.delegation is not None]
    assert len(children) == 2
    for child in children:
        commits = list(store.commits(child.thread_id))
        assert commits[0].app == "research-app" and commits[0].parent is not None
        assert store.writer_of(child.thread_id, commits[0].version) is None  # activated under no lease
        assert store.writer_of(child.thread_id, commits[-1].version) == Writer("w1", 1)  # then the worker's
        assert isinstance(commits[-1].disposition, Ended)
    assert app.quiet >= 1 and store.current_lease(PARENT) is None
    print(f"worker: {rounds} run_once rounds, {worker.report.drives} drives, parent quiet {app.quiet} times")
    assert judged_legal(store) == ""


@pytest.mark.parametrize("kind", SHELLS)
def test_on_sqlite_each_run_is_driven_from_the_file_alone(
    kind: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Parent, children and parent again, each by a driver over a store opened afresh
    (as separate processes would): the file alone carries the delegations."""
    url = f"sqlite:///{tmp_path / 'agent.db'}"
    world = DelegatingWorld(TWO_AND_ONE)
    store = open_store(url)
    driver = make_shell(kind, store, ids=CountingIds("id"), tools=TOOLS)
    quiet = play_until_quiet(driver, driver.start(["go"], thread_id="t1", run_id=PARENT), world)
    assert isinstance(quiet, ChildrenRunning) and len(quiet.children) == 2
    for child in quiet.children:
        ended = drive_child(kind, open_store(url), world, child.run_id)
        assert ended.final == f"child answer for {child.arguments['topic']}"
    again = make_shell(kind, open_store(url), ids=CountingIds("again"), tools=TOOLS)
    done = play_until_quiet(again, again.pick_up(PARENT), world)
    assert isinstance(done, Done) and done.cause.kind is EndCauseKind.COMPLETED
    reader = open_store(url)
    tool_messages = [m for m in reader.messages("t1") if m.role is Role.TOOL]
    assert [m.content["kind"] for m in tool_messages] == ["output"] * 3
    assert judged_legal(reader) == ""
    # the CLI's own export of each Thread, in one file: check-trace judges I15 across them
    exported = []
    for thread_id in reader.thread_ids():
        assert main(["export", "--store", url, thread_id]) == 0
        exported.append(capsys.readouterr().out)
    together = tmp_path / "together.jsonl"
    together.write_text("".join(exported))
    assert main(["check-trace", str(together)]) == 0
    verdict = capsys.readouterr().out.strip()
    # the parent's 8 (the two delegations start together, in one commit) and 2 per child
    assert verdict.endswith("legal: 12 commits in 3 threads"), verdict
    print(f"sqlite [{kind}]: {len(exported)} exported Threads, check-trace: {verdict}")


def test_a_leased_driver_rechecks_its_lease_before_it_activates_a_child() -> None:
    """W1: a child's activation is its delegation's executor, so a lease too close to its
    expiry stops the driver after the Executing commit and before the activation; the
    next driver activates the same child."""
    now = [0.0]
    store = MemoryStore(clock=lambda: now[0])
    keeper = LeaseKeeper(store, "w1", duration=10.0, margin=5.0, monotonic=lambda: 0.0)
    driver = Driver(store, TOOLS, leases=keeper, ids=CountingIds("id"))
    driver.start(["go"], thread_id="t1", run_id=PARENT)
    now[0] = 6.0  # still held for commits, no longer for starting an executor
    with pytest.raises(DriverStopped) as stopped:
        driver.inferred("t", [CallRequest("research", {"topic": "a"})])
    assert isinstance(stopped.value.__cause__, LeaseLost)
    batch = parent_batch(store).batch
    assert batch is not None
    call = batch.calls[0]
    assert isinstance(call.status, CallExecuting) and call.delegation is not None
    assert store.run(call.delegation.run_id) is None  # the executor did not start
    now[0] = 20.0  # the lease expired: another worker takes the Run over
    other = Driver(store, TOOLS, leases=LeaseKeeper(store, "w2", duration=10.0), ids=CountingIds("w2"))
    quiet = other.pick_up(PARENT)
    assert isinstance(quiet, ChildrenRunning) and quiet.children[0].run_id == call.delegation.run_id
    assert judged_legal(store) == ""


class CrashAtParentEnd:
    """Once armed, the writer dies right after the parent's end commit landed."""

    def __init__(self) -> None:
        self.armed = False

    def crash_here(self, boundary: Boundary, position: Position) -> bool:
        return self.armed and (boundary, position) == (Boundary.AFTER_WRITE, Position.END)


def _parent_cancelled_and_crashed_right_after_its_end() -> tuple[CrashingStore, ChildrenRunning]:
    """The quiet parent cancelled by its host, its writer dying right after the end
    commit landed, before the children's cancels: the store, and the children it had running."""
    plan = CrashAtParentEnd()
    store = CrashingStore(MemoryStore(), plan)
    driver, quiet, _ = quiet_parent("sync", store)
    plan.armed = True
    with pytest.raises(SimulatedCrash):
        driver.cancel()
    plan.armed = False
    assert not any(store.pending_commands(child.run_id) for child in quiet.children)
    return store, quiet


def test_a_crash_right_after_the_parents_end_still_cancels_its_running_children() -> None:
    store, quiet = _parent_cancelled_and_crashed_right_after_its_end()
    again = make_shell("sync", store, ids=CountingIds("again"), tools=TOOLS)
    assert isinstance(again.pick_up(PARENT), Done)
    assert all(store.pending_commands(child.run_id) for child in quiet.children)


def test_a_child_of_a_parent_that_ended_before_its_cancels_is_cancelled_when_picked_up() -> None:
    store, quiet = _parent_cancelled_and_crashed_right_after_its_end()
    for child in quiet.children:  # nobody recovers the Ended parent: the children are work
        picked = make_shell("sync", store, ids=CountingIds(child.run_id), tools=TOOLS).pick_up(child.run_id)
        assert isinstance(picked, Done) and picked.cause.kind is EndCauseKind.CANCELLED, picked
