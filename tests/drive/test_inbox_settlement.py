"""Every host settles an inbox command in the transaction of the commit that applies it
(the push-mode driver "applies inbox commands (a ``resume`` or ``cancel`` from the CLI
or the console) when the host asks what to do next"; the pull-mode runtime when it
drives the Run).

A command queued through the store's inbox, as the CLI queues it, is applied by the
push host's ``next_action()`` or the runtime's ``drive()``. No crash can fall between
that commit and the command's settlement: a writer that dies right after the commit
landed leaves the command applied (over every host: the pull-mode ``Runtime``, and
the push-mode driver through both shells), and a commit that never landed leaves it
pending, for the next pick-up to apply.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from push_host import SHELLS, Reply, Shell, World, make_shell, play
from runkernel.adapters.drive.actions import Action, Done, DriverStopped, RunCall, WaitFor
from runkernel.adapters.drive.inbox import submit_end, submit_resume
from runkernel.adapters.drive.ports import Hold, ToolRegistry
from runkernel.adapters.drive.runtime import Runtime
from runkernel.adapters.stores.memory import MemoryStore
from runkernel.adapters.stores.sqlite import SqliteStore
from runkernel.adapters.stores.contract import CommitConflict, StoreUnavailable
from runkernel.kernel.protocol import Approve, EndRequest, ResumeCommand
from runkernel.kernel.rules import Rejection, Rule
from runkernel.kernel.policies import RecoveryMode
from runkernel.kernel.state import RESUMED_EVENT, Awaiting, EndCause, Ended, Message, Running
from runkernel.kernel.values import EndCauseKind, Role, WaitKind
from runkernel.specs.checker import Verdict, check_commits
from runkernel.testing import (
    OK,
    Boundary,
    CountingIds,
    CrashAt,
    CrashingStore,
    Failure,
    Position,
    ScriptedGate,
    ScriptedModel,
    ScriptedTool,
    SimulatedCrash,
    StepScript,
)
from runkernel.testing import World as Downstream

SCRIPT = {1: Reply("pay?", (("pay", {"amount": 5}),)), 2: Reply("paid", end=EndCauseKind.COMPLETED)}
#: the commit point of the commit that applies each command
APPLIED_AT = {"resume": Position.RESUME, "cancel": Position.END}


def _store(kind: str, tmp_path: Path, plan: CrashAt, failure: Failure) -> CrashingStore:
    if kind == "memory":
        return CrashingStore(MemoryStore(), plan, failure)
    return CrashingStore(SqliteStore(tmp_path / "inbox.db"), plan, failure)


def _queue(command: str, store: CrashingStore, ticket_id: str) -> int:
    """Queue ``command`` through the store's inbox, as ``runkernel resume``/``cancel`` do."""
    if command == "resume":
        entry = submit_resume(store, ResumeCommand("r1", ticket_id, WaitKind.APPROVAL, Approve()))
    else:
        entry = submit_end(store, "r1", EndRequest(EndCause(EndCauseKind.CANCELLED)))
    assert isinstance(entry, int), entry
    return entry


def _applied_by_the_last_commit(command: str, store: CrashingStore) -> bool:
    snapshot = store.run("r1")
    assert snapshot is not None
    last = list(store.commits("t1"))[-1]
    if command == "resume":
        return isinstance(snapshot.state, Running) and any(e.type == RESUMED_EVENT for e in last.events)
    return isinstance(snapshot.state, Ended) and snapshot.state.cause.kind is EndCauseKind.CANCELLED


def _finish(command: str, action: Action, driver: Shell, world: World) -> None:
    """Play the Run to the end the applied command leads to."""
    done = play(driver, action, world)
    assert isinstance(done, Done)
    assert done.cause.kind is (EndCauseKind.COMPLETED if command == "resume" else EndCauseKind.CANCELLED)


#: the pull-mode Runtime, and the push-mode driver through both shells
HOSTS = ("pull", *SHELLS)


class PullHost:
    """The pull-mode ``Runtime``, with the push host's script: ``pay`` held for approval."""

    def __init__(self, store: CrashingStore) -> None:
        self.store = store
        self.downstream = Downstream.new(store)
        self.runtime = self._runtime("id")

    def _runtime(self, ids: str) -> Runtime:
        steps = (StepScript("pay?", (("pay", {"amount": 5}),)), StepScript("paid", end=EndCauseKind.COMPLETED))
        tool = ScriptedTool("pay", self.downstream, mode=RecoveryMode.INDETERMINATE, replies=(OK,))
        return Runtime(
            self.store, ScriptedModel({"r1": steps}), ToolRegistry({"pay": tool}),
            gate=ScriptedGate({"pay": Hold(WaitKind.APPROVAL)}), ids=CountingIds(ids),
        )

    def wait(self) -> str:
        state = self.runtime.start("t1", "r1", (Message(Role.USER, "go"),)).snapshot.state
        assert isinstance(state, Awaiting)
        return state.ticket.ticket_id

    def apply(self) -> None:
        self.runtime.drive("r1")

    def finish_fresh(self, command: str) -> None:
        state = self._runtime("fresh").drive("r1").snapshot.state
        assert isinstance(state, Ended)
        assert state.cause.kind is (EndCauseKind.COMPLETED if command == "resume" else EndCauseKind.CANCELLED)


class PushHost:
    """The push-mode driver through one shell, played against the push host's world."""

    def __init__(self, shell: str, store: CrashingStore) -> None:
        self.shell, self.store = shell, store
        self.world = World(SCRIPT)
        self.driver = make_shell(shell, store, ids=CountingIds("id"))

    def wait(self) -> str:
        waiting = play(self.driver, self.driver.start(["go"], thread_id="t1", run_id="r1"), self.world)
        assert isinstance(waiting, WaitFor)
        return waiting.ticket.ticket_id

    def apply(self) -> None:
        self.driver.next_action()

    def finish_fresh(self, command: str) -> None:
        fresh = make_shell(self.shell, self.store, ids=CountingIds("fresh"))
        _finish(command, fresh.pick_up("r1"), fresh, self.world)


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
@pytest.mark.parametrize("command", ["resume", "cancel"])
@pytest.mark.parametrize("host", HOSTS)
def test_a_host_that_dies_right_after_applying_a_command_leaves_it_settled(
    host: str, command: str, kind: str, tmp_path: Path
) -> None:
    plan = CrashAt(Boundary.AFTER_WRITE, APPLIED_AT[command])
    store = _store(kind, tmp_path, plan, SimulatedCrash)
    hosting = PullHost(store) if host == "pull" else PushHost(host, store)
    entry = _queue(command, store, hosting.wait())
    with pytest.raises(SimulatedCrash):
        hosting.apply()  # applies the command; the writer dies once its commit landed
    assert plan.fired == 1 and _applied_by_the_last_commit(command, store)
    settled = store.inbox_entry(entry)
    assert settled is not None and settled.outcome == "applied", "the commit landed without its settlement"
    assert store.pending_commands("r1") == []  # settled by the applying commit itself
    hosting.finish_fresh(command)
    again = store.inbox_entry(entry)
    assert again is not None and again.outcome == "applied"
    assert [e.entry_id for e in store.commands("r1")] == [entry]
    assert check_commits(store.commits("t1")).verdict is Verdict.LEGAL
    print(f"{host} host ({kind}) {command}: died after the applying commit, command {entry} settled 'applied'")
    store.close()


def _conflict(boundary: Boundary, position: Position) -> Exception:
    return CommitConflict(Rejection(Rule.VERSION, f"another writer won at {position.value} (injected)"))


def _unavailable(boundary: Boundary, position: Position) -> Exception:
    return StoreUnavailable(f"database restarted at {position.value} (injected)")


FAILED_WRITES: dict[str, tuple[Failure, type[BaseException]]] = {
    "writer_died": (SimulatedCrash, SimulatedCrash),
    "store_unavailable": (_unavailable, DriverStopped),
    "commit_conflict": (_conflict, DriverStopped),
}


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
@pytest.mark.parametrize("failure", sorted(FAILED_WRITES))
@pytest.mark.parametrize("command", ["resume", "cancel"])
def test_a_command_whose_applying_commit_fails_stays_pending_and_is_applied_by_the_next_pick_up(
    command: str, failure: str, kind: str, tmp_path: Path
) -> None:
    inject, raised = FAILED_WRITES[failure]
    plan = CrashAt(Boundary.BEFORE_WRITE, APPLIED_AT[command])
    store = _store(kind, tmp_path, plan, inject)
    world = World(SCRIPT)
    driver = make_shell("sync", store, ids=CountingIds("id"))
    waiting = play(driver, driver.start(["go"], thread_id="t1", run_id="r1"), world)
    assert isinstance(waiting, WaitFor)
    before = store.run("r1")
    entry = _queue(command, store, waiting.ticket.ticket_id)
    with pytest.raises(raised):
        driver.next_action()
    assert plan.fired == 1 and store.run("r1") == before
    pending = store.inbox_entry(entry)
    assert pending is not None and pending.outcome is None, "settled although its commit never landed"
    assert [e.entry_id for e in store.pending_commands("r1")] == [entry]
    action = driver.next_action()  # the same driver picks the Run up again and applies it now
    assert not isinstance(action, WaitFor)
    if command == "resume":
        assert isinstance(action, RunCall) and action.tool == "pay" and action.attempt == 1
    _finish(command, action, driver, world)
    settled = store.inbox_entry(entry)
    assert settled is not None and settled.outcome == "applied"
    assert check_commits(store.commits("t1")).verdict is Verdict.LEGAL
    print(f"push {command} after {failure} ({kind}): pending until its commit landed, then 'applied'")
    store.close()
