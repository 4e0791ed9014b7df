"""A driver whose commit loses stops at once and starts nothing (Workers and
leases: "a worker whose commit loses ... stops driving that Run at once"; W1: an
attempt's executor starts only in the worker whose Executing commit won).

Two drivers without leases pick up one Run whose host died after Executing{1}: both
decide the same Executing{2} replay, the winner's write lands first (forced: it runs
between the loser's decision and its write), and the loser's identical commit loses on
version. And a store answers ``CommitConflict`` to a driver's Executing commit. Either
way the loser starts no tool and asks no model, on memory, SQLite and PostgreSQL, and
each test runs over every host: the pull-mode ``Runtime`` (which raises the
``CommitConflict`` out of driving) and the push-mode driver through both shells,
``Driver`` and ``AsyncDriver`` (which hand out no ``RunCall`` and stop with
``DriverStopped`` caused by the conflict)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Protocol

import attrs
import pytest

from postgres_support import postgres_url
from push_host import POLICIES, SHELLS, Reply, Shell, World, make_shell, play
from runkernel.adapters.drive.actions import Action, Done, DriverStopped, Infer, RunCall
from runkernel.adapters.drive.ports import InferenceRequest, ModelReply, Returned, StatusReply, ToolRegistry
from runkernel import CallRequest
from runkernel.adapters.drive.runtime import Runtime
from runkernel.adapters.drive.runtime_drive import Drive
from runkernel.adapters.stores.contract import CommitConflict, Store
from runkernel.kernel.policies import Policies, ToolPolicy
from runkernel.kernel.protocol import Allow, GateVerdict, InferenceResult, OperationStatus, ProposedCall
from runkernel.kernel.state import CallExecuting, CallRequested, Ended, Message, ThreadCommit, ToolCall
from runkernel.kernel.values import Role
from runkernel.kernel.values import EndCauseKind
from runkernel.specs.checker import Verdict, check_commits
from runkernel.testing import CountingIds, activate, step
from store_interleavings import STORES, open_stores

__all__ = ["postgres_url"]

REPLAY: ToolPolicy = POLICIES["replay"]
SCRIPT = {1: Reply("working", (("replay", {"n": 1}),)), 2: Reply("done", end=EndCauseKind.COMPLETED)}


def abandoned_at_executing(store: Store) -> ToolCall:
    """Run r1 in Thread t1 whose replay call is Executing{1}: its host died after that
    commit (v3), so whoever picks the Run up next replays it as attempt 2."""
    policies = Policies(tools={"replay": REPLAY})
    call = ProposedCall("c1", "replay", {"n": 1}, "op1")
    decision = activate("t1", "r1")
    commits = [decision.commit]
    for event in (InferenceResult("working", (call,), "b1"), GateVerdict("c1", Allow())):
        decision = step(decision.state, event, policies)
        commits.append(decision.commit)
    for commit in commits:
        assert commit is not None
        store.append(commit)
    batch = decision.state.open_batch
    assert batch is not None and batch.calls[0].status == CallExecuting(1)
    return batch.calls[0]


def raised_by(attempt: Callable[[], object]) -> Exception | None:
    """What ``attempt`` raised (None if it returned): a test asserts what was started
    first, then how driving stopped, so a failure says which went wrong."""
    try:
        attempt()
    except Exception as error:
        return error
    return None


def legal(store: Store) -> int:
    commits = list(store.commits("t1"))
    finding = check_commits(commits)
    assert finding.verdict is Verdict.LEGAL, finding
    return len(commits)


class CountingModel:
    """Step 1 asks for the replay call, step 2 ends; counts every inference asked."""

    def __init__(self) -> None:
        self.asked: list[int] = []

    def infer(self, request: InferenceRequest) -> ModelReply:
        self.asked.append(request.step)
        reply = SCRIPT[request.step]
        calls = tuple(CallRequest(tool, arguments) for tool, arguments in reply.calls)
        return ModelReply(reply.content, calls, reply.end)


class CountingTool:
    """The replay tool; keeps the attempt of every executor start."""

    policy = REPLAY

    def __init__(self) -> None:
        self.starts: list[int] = []

    def run(self, invocation: RunCall) -> Returned:
        self.starts.append(invocation.attempt)
        return Returned({"n": invocation.arguments})

    def status(self, operation_id: str, lease_epoch: int | None) -> StatusReply:
        return StatusReply(OperationStatus.NOT_FOUND)


def runtime(store: Store) -> tuple[Runtime, CountingModel, CountingTool]:
    model, tool = CountingModel(), CountingTool()
    return Runtime(store, model, ToolRegistry({"replay": tool}), self_check=True), model, tool


# --- the hosts: one pull, two push -----------------------------------------------------

#: the pull-mode Runtime, and the push-mode driver through both shells
HOSTS = ("pull", *SHELLS)


class Host(Protocol):
    """A host of Run r1 (Thread t1) on one store, and what it started: the steps it
    asked the model for and the attempts of the replay tool's executor it started."""

    model_steps: list[int]
    tool_starts: list[int]

    def start(self) -> None:
        """Start r1 and drive it until it ends."""

    def pick_up(self) -> None:
        """Pick r1 up from the store alone and drive it until it ends."""

    def take_over(self, call: ToolCall) -> None:
        """Pick r1 up as far as its replay of ``call``'s Executing{2} commit (written),
        and no further."""

    def finish(self) -> None:
        """Drive on from ``take_over`` until r1 ends."""

    def stopped_by_conflict(self, stopped: Exception | None) -> None:
        """Assert that driving stopped with the conflict, as this host says it."""

    def carry_on(self) -> Host:
        """The host that drives r1 on after the stop, from the store alone, to its end."""


class PullHost:
    """The pull-mode ``Runtime``: it asks the model and starts the tool itself."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.runtime, self.model, self.tool = runtime(store)
        self.model_steps, self.tool_starts = self.model.asked, self.tool.starts
        self.taken: Drive | None = None

    def start(self) -> None:
        outcome = self.runtime.start("t1", "r1", (Message(Role.USER, "go"),))
        assert isinstance(outcome.snapshot.state, Ended)

    def pick_up(self) -> None:
        assert isinstance(self.runtime.drive("r1").snapshot.state, Ended)

    def take_over(self, call: ToolCall) -> None:
        self.taken = self.runtime.begin_drive("r1")
        decided = self.taken.next_commit
        assert decided is not None and decided.batch is not None
        assert decided.batch.call(call.call_id) == attrs.evolve(call, status=CallExecuting(2))
        assert not self.taken.step()  # its Executing{2} written

    def finish(self) -> None:
        assert self.taken is not None
        assert isinstance(self.taken.run().snapshot.state, Ended)

    def stopped_by_conflict(self, stopped: Exception | None) -> None:
        assert isinstance(stopped, CommitConflict), repr(stopped)

    def carry_on(self) -> Host:
        after = PullHost(self.store)  # a fresh runtime
        after.pick_up()
        return after


class CountingWorld(World):
    """The push host's world, counting the steps its model is asked for."""

    def __init__(self) -> None:
        super().__init__(SCRIPT)
        self.asked: list[int] = []

    def infer(self, action: Infer) -> Reply:
        self.asked.append(action.step)
        return super().infer(action)


class PushHost:
    """The push-mode driver through one shell, played by a host whose world starts the
    tool and asks the model."""

    def __init__(self, kind: str, store: Store, shell: Shell | None = None) -> None:
        self.store = store
        self.driver = shell or make_shell(kind, store, ids=CountingIds("id"))
        self.world = CountingWorld()
        self.model_steps = self.world.asked
        self.tool_starts: list[int] = []
        self.taken: RunCall | None = None

    def _play(self, action: Action) -> None:
        try:
            assert isinstance(play(self.driver, action, self.world), Done)
        finally:
            self.tool_starts[:] = [attempt for attempts in self.world.starts.values() for attempt in attempts]

    def start(self) -> None:
        self._play(self.driver.start(["go"], thread_id="t1", run_id="r1"))

    def pick_up(self) -> None:
        self._play(self.driver.pick_up("r1"))

    def take_over(self, call: ToolCall) -> None:
        replay = self.driver.pick_up("r1")
        assert isinstance(replay, RunCall) and (replay.call_id, replay.attempt) == (call.call_id, 2)
        self.taken = replay

    def finish(self) -> None:
        assert self.taken is not None
        self._play(self.taken)
        assert self.world.starts == {self.taken.operation_id: [2]}

    def stopped_by_conflict(self, stopped: Exception | None) -> None:
        assert isinstance(stopped, DriverStopped) and isinstance(stopped.__cause__, CommitConflict), repr(stopped)
        assert self.driver.snapshot is None, "a stopped driver holds no belief"
        with pytest.raises(DriverStopped):
            self.driver.call_returned("c1", "a result for a call it never handed out")

    def carry_on(self) -> Host:
        after = PushHost("", self.store, self.driver)  # the same driver: next_action() picks r1 up
        again = self.driver.next_action()
        assert isinstance(again, RunCall) and again.attempt == 1
        after._play(again)
        assert after.world.starts == {again.operation_id: [1]}
        return after


def make_host(kind: str, store: Store) -> Host:
    return PullHost(store) if kind == "pull" else PushHost(kind, store)


# --- the tests -------------------------------------------------------------------------


@pytest.mark.parametrize("store_kind", STORES)
@pytest.mark.parametrize("host", HOSTS)
def test_a_host_whose_executing_commit_loses_to_another_host_starts_nothing(
    host: str, store_kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    store, rival_store = open_stores(store_kind, tmp_path, request)
    call = abandoned_at_executing(store)
    # the winner is a host of the same mode, a synchronous one whatever the loser's shell:
    # it runs inside the loser's store call, after the loser decided Executing{2} and
    # before it writes it
    winner = make_host("pull" if host == "pull" else "sync", rival_store)
    decided: list[ThreadCommit] = []

    def winner_goes_first(executing: ThreadCommit) -> None:
        decided.append(executing)
        winner.take_over(call)

    store.before_executing = winner_goes_first
    loser = make_host(host, store)
    stopped = raised_by(loser.pick_up)
    assert loser.tool_starts == [] and loser.model_steps == [], "the loser started something after its commit lost"
    loser.stopped_by_conflict(stopped)
    state = rival_store.run("r1")
    assert state is not None and state.version == 4 and state.open_batch is not None
    assert state.open_batch.calls[0].status == CallExecuting(2), "the loser wrote nothing"
    (loser_commit,) = decided
    assert list(rival_store.commits("t1"))[3] == loser_commit, "both hosts decided the same Executing{2}"
    # the winner runs the one attempt 2 and finishes the Run
    winner.finish()
    assert winner.tool_starts == [2] and winner.model_steps == [2]
    commits = legal(rival_store)
    print(
        f"lost commit [{host}/{store_kind}]: Executing{{2}} decided by 2 hosts, written by 1; loser's tool "
        f"starts {loser.tool_starts}, model calls {loser.model_steps}; winner's starts {winner.tool_starts}; "
        f"commits {commits}"
    )


@pytest.mark.parametrize("store_kind", STORES)
@pytest.mark.parametrize("host", HOSTS)
def test_a_host_whose_executing_commit_is_answered_conflict_starts_nothing(
    host: str, store_kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    store, _ = open_stores(store_kind, tmp_path, request)
    store.refuse_executing = True
    first = make_host(host, store)
    # the host answers the model's step 1 with the call; its Executing commit would start the tool
    stopped = raised_by(first.start)
    assert first.tool_starts == [], "the tool started although its Executing commit lost"
    assert first.model_steps == [1], "the model was asked again after the commit lost"
    first.stopped_by_conflict(stopped)
    assert store.conflicts_answered == 1
    state = store.run("r1")
    assert state is not None and state.version == 2 and state.open_batch is not None
    assert state.open_batch.calls[0].status == CallRequested(), "nothing was half-written"
    # the Run goes on from the store alone: attempt 1, once
    after = first.carry_on()
    assert after.tool_starts == [1] and after.model_steps == [2]
    commits = legal(store)
    print(
        f"conflict answered [{host}/{store_kind}]: conflicts {store.conflicts_answered}, tool starts before the "
        f"pick-up {first.tool_starts}, model calls {first.model_steps}; after it {after.tool_starts}; commits {commits}"
    )
