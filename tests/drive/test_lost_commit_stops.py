"""A driver whose commit loses stops at once and starts nothing (Workers and
leases: "a worker whose commit loses ... stops driving that Run at once"; W1: an
attempt's executor starts only in the worker whose Executing commit won).

Two drivers without leases pick up one Run whose host died after Executing{1}: both
decide the same Executing{2} replay, the winner's write lands first (forced: it runs
between the loser's decision and its write), and the loser's identical commit loses on
version. And a store answers ``CommitConflict`` to a driver's Executing commit. Either
way the loser hands out no ``RunCall`` (push mode: ``Driver`` and ``AsyncDriver``,
stopping with ``DriverStopped`` caused by the conflict) or starts no tool and asks no
model (pull mode: ``Runtime``, which raises the ``CommitConflict`` out of driving), on
memory, SQLite and PostgreSQL."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from postgres_support import postgres_url
from push_host import POLICIES, SHELLS, Reply, World, make_shell, play
from runkernel.adapters.drive.driver import Driver
from runkernel.adapters.drive.actions import Action, Done, DriverStopped, RunCall
from runkernel.adapters.drive.ports import InferenceRequest, ModelReply, Returned, StatusReply, ToolRegistry
from runkernel import CallRequest
from runkernel.adapters.drive.runtime import Runtime
from runkernel.adapters.stores.contract import CommitConflict, Store
from runkernel.kernel.policies import Policies, ToolPolicy
from runkernel.kernel.protocol import Allow, GateVerdict, InferenceResult, OperationStatus, ProposedCall
from runkernel.kernel.state import CallExecuting, CallRequested, Ended, ThreadCommit, ToolCall
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

    def status(self, operation_id: str) -> StatusReply:
        return StatusReply(OperationStatus.NOT_FOUND)


def runtime(store: Store) -> tuple[Runtime, CountingModel, CountingTool]:
    model, tool = CountingModel(), CountingTool()
    return Runtime(store, model, ToolRegistry({"replay": tool}), self_check=True), model, tool


# --- push mode -----------------------------------------------------------------------


@pytest.mark.parametrize("store_kind", STORES)
@pytest.mark.parametrize("kind", SHELLS)
def test_a_push_driver_whose_executing_commit_loses_to_another_driver_hands_out_nothing(
    kind: str, store_kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    store, rival_store = open_stores(store_kind, tmp_path, request)
    call = abandoned_at_executing(store)
    # the winner is a synchronous Driver whatever the loser's shell: it runs inside the
    # loser's store call, after the loser decided Executing{2} and before it writes it
    winner = Driver(rival_store, POLICIES)
    decided: list[ThreadCommit] = []
    won: list[Action] = []

    def winner_goes_first(executing: ThreadCommit) -> None:
        decided.append(executing)
        won.append(winner.pick_up("r1"))

    store.before_executing = winner_goes_first
    loser = make_shell(kind, store)
    handed_by_loser: list[Action] = []
    stopped = raised_by(lambda: handed_by_loser.append(loser.pick_up("r1")))
    assert handed_by_loser == [], "the loser handed out an action after its commit lost"
    assert isinstance(stopped, DriverStopped) and isinstance(stopped.__cause__, CommitConflict), repr(stopped)
    (replay,) = won
    assert isinstance(replay, RunCall) and (replay.call_id, replay.attempt) == (call.call_id, 2)
    assert loser.snapshot is None, "a stopped driver holds no belief"
    with pytest.raises(DriverStopped):
        loser.call_returned(call.call_id, "a result for a call it never handed out")
    state = rival_store.run("r1")
    assert state is not None and state.version == 4 and state.open_batch is not None
    assert state.open_batch.calls[0].status == CallExecuting(2), "the loser wrote nothing"
    (loser_commit,) = decided
    assert list(rival_store.commits("t1"))[3] == loser_commit, "both drivers decided the same Executing{2}"
    # the winner's host runs the one attempt 2 and finishes the Run
    world = World(SCRIPT)
    assert isinstance(play(winner, replay, world), Done)
    assert world.starts == {call.operation_id: [2]}
    commits = legal(rival_store)
    print(
        f"lost commit, push [{kind}/{store_kind}]: Executing{{2}} decided by 2 drivers, written by 1; "
        f"RunCalls handed by the loser {len(handed_by_loser)}, by the winner {len(won)}; "
        f"starts {world.starts}; commits {commits}"
    )


@pytest.mark.parametrize("store_kind", STORES)
@pytest.mark.parametrize("kind", SHELLS)
def test_a_push_driver_whose_executing_commit_is_answered_conflict_hands_out_nothing(
    kind: str, store_kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    store, _ = open_stores(store_kind, tmp_path, request)
    store.refuse_executing = True
    world = World(SCRIPT)
    driver = make_shell(kind, store, ids=CountingIds("id"))
    first = driver.start(["go"], thread_id="t1", run_id="r1")
    # the host answers Infer with the call; a RunCall would start the tool
    stopped = raised_by(lambda: play(driver, first, world))
    started_before_pick_up = sum(len(attempts) for attempts in world.starts.values())
    assert started_before_pick_up == 0, f"the tool started although its Executing commit lost: {world.starts}"
    assert isinstance(stopped, DriverStopped) and isinstance(stopped.__cause__, CommitConflict), repr(stopped)
    assert store.conflicts_answered == 1
    assert driver.snapshot is None
    state = store.run("r1")
    assert state is not None and state.version == 2 and state.open_batch is not None
    assert state.open_batch.calls[0].status == CallRequested(), "nothing was half-written"
    # next_action() picks the Run up from the store alone: attempt 1, once
    again = driver.next_action()
    assert isinstance(again, RunCall) and again.attempt == 1
    assert isinstance(play(driver, again, world), Done)
    assert world.starts == {again.operation_id: [1]}
    commits = legal(store)
    print(
        f"conflict answered, push [{kind}/{store_kind}]: conflicts {store.conflicts_answered}, tool starts "
        f"before the pick-up {started_before_pick_up}, after it {world.starts}; commits {commits}"
    )


# --- pull mode -----------------------------------------------------------------------


@pytest.mark.parametrize("store_kind", STORES)
def test_a_runtime_whose_executing_commit_loses_to_another_runtime_starts_nothing(
    store_kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    store, rival_store = open_stores(store_kind, tmp_path, request)
    abandoned_at_executing(store)
    loser, loser_model, loser_tool = runtime(store)
    winner, winner_model, winner_tool = runtime(rival_store)
    losing = loser.begin_drive("r1")
    winning = winner.begin_drive("r1")
    decided = winning.next_commit
    assert decided is not None and losing.next_commit == decided, "both decide Executing{2}"
    assert not winning.step()  # the winner's Executing{2} lands first
    stopped = raised_by(losing.run)
    assert loser_tool.starts == [] and loser_model.asked == [], "the loser started something after its commit lost"
    assert isinstance(stopped, CommitConflict), repr(stopped)
    outcome = winning.run()
    assert isinstance(outcome.snapshot.state, Ended)
    assert winner_tool.starts == [2] and winner_model.asked == [2]
    commits = legal(rival_store)
    print(
        f"lost commit, pull [{store_kind}]: Executing{{2}} decided by 2 runtimes, written by 1; loser's tool "
        f"starts {loser_tool.starts}, model calls {len(loser_model.asked)}; winner's starts {winner_tool.starts}; "
        f"commits {commits}"
    )


@pytest.mark.parametrize("store_kind", STORES)
def test_a_runtime_whose_executing_commit_is_answered_conflict_starts_nothing(
    store_kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    store, _ = open_stores(store_kind, tmp_path, request)
    activation = activate("t1", "r1").commit
    assert activation is not None
    store.append(activation)
    store.refuse_executing = True
    first, first_model, first_tool = runtime(store)
    stopped = raised_by(lambda: first.drive("r1"))
    assert first_tool.starts == [], "the tool started although its Executing commit lost"
    assert first_model.asked == [1], "the model was asked again after the commit lost"
    assert isinstance(stopped, CommitConflict), repr(stopped)
    assert store.conflicts_answered == 1
    state = store.run("r1")
    assert state is not None and state.version == 2 and state.open_batch is not None
    assert state.open_batch.calls[0].status == CallRequested(), "nothing was half-written"
    # a fresh runtime continues from the store alone: attempt 1, once
    second, second_model, second_tool = runtime(store)
    assert isinstance(second.drive("r1").snapshot.state, Ended)
    assert second_tool.starts == [1] and second_model.asked == [2]
    commits = legal(store)
    print(
        f"conflict answered, pull [{store_kind}]: conflicts {store.conflicts_answered}, tool starts before the pick-up "
        f"{len(first_tool.starts)}, model calls {first_model.asked}; after it {second_tool.starts}; commits {commits}"
    )
