"""I5 in pull mode when the store fails the Executing commit: a ``Runtime`` whose
Executing commit is lost (the store unavailable, nothing written) never runs the tool.

The store raises ``StoreUnavailable`` for the call's Executing commit and writes nothing,
at every attempt: once without leases, and at each of the W4 retries of a leased write.
The runtime raises the error out of driving, its tool never started, and the store still
says the call is Requested; a fresh runtime then continues from the store alone and
starts attempt 1, once. On the memory store, SQLite and PostgreSQL.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from postgres_support import postgres_url
from runkernel import CallRequest
from runkernel.adapters.drive.actions import RunCall
from runkernel.adapters.drive.lease_keeper import APPEND_RETRIES, LeaseKeeper
from runkernel.adapters.drive.ports import InferenceRequest, ModelReply, Returned, StatusReply, ToolRegistry
from runkernel.adapters.drive.runtime import Runtime
from runkernel.adapters.stores.contract import StoreUnavailable
from runkernel.kernel.policies import RecoveryMode, ToolPolicy, ToolRecoveryPolicy
from runkernel.kernel.protocol import OperationStatus
from runkernel.kernel.state import CallRequested, Ended, Message, ThreadCommit
from runkernel.kernel.values import EndCauseKind, Role
from runkernel.specs.checker import Verdict, check_commits
from runkernel.testing import CountingIds
from store_interleavings import STORES, open_stores

__all__ = ["postgres_url"]

REPLAY = ToolPolicy(ToolRecoveryPolicy(RecoveryMode.REPLAY, max_attempts=3))


class _Model:
    """Step 1 asks for the tool, step 2 ends; counts the steps asked."""

    def __init__(self) -> None:
        self.asked: list[int] = []

    def infer(self, request: InferenceRequest) -> ModelReply:
        self.asked.append(request.step)
        if request.step == 1:
            return ModelReply("working", (CallRequest("replay", {"n": 1}),))
        return ModelReply("done", (), EndCauseKind.COMPLETED)


class _Tool:
    policy = REPLAY

    def __init__(self) -> None:
        self.starts: list[int] = []

    def run(self, invocation: RunCall) -> Returned:
        self.starts.append(invocation.attempt)
        return Returned({"ran": invocation.attempt})

    def status(self, operation_id: str, lease_epoch: int | None) -> StatusReply:
        return StatusReply(OperationStatus.NOT_FOUND)


@pytest.mark.parametrize("leased", [False, True], ids=["unleased", "leased"])
@pytest.mark.parametrize("store_kind", STORES)
def test_a_runtime_whose_executing_commit_is_lost_to_an_unavailable_store_never_runs_the_tool(
    store_kind: str, leased: bool, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    store, rival = open_stores(store_kind, tmp_path, request)
    refused: list[ThreadCommit] = []

    def unavailable(commit: ThreadCommit) -> None:
        refused.append(commit)
        store.before_executing = unavailable  # every attempt, the retries too
        raise StoreUnavailable("the store went away before the Executing commit was written (injected)")

    store.before_executing = unavailable
    keeper = LeaseKeeper(store, "w1", duration=30.0) if leased else None
    model, tool = _Model(), _Tool()
    runtime = Runtime(store, model, ToolRegistry({"replay": tool}), leases=keeper, ids=CountingIds("id"))
    stopped: Exception | None = None
    try:
        runtime.start("t1", "r1", (Message(Role.USER, "go"),))
    except Exception as error:  # what was started is asserted first, then how driving stopped
        stopped = error
    assert tool.starts == [], "the tool ran although its Executing commit was never written"
    assert isinstance(stopped, StoreUnavailable), repr(stopped)
    assert model.asked == [1]
    assert len(refused) == (1 + APPEND_RETRIES if leased else 1), "the lost commit was retried as W4 says"
    state = rival.run("r1")
    assert state is not None and state.version == 2 and state.open_batch is not None
    (call,) = state.open_batch.calls
    assert call.status == CallRequested(), "nothing was written"
    # a fresh runtime continues from the store alone: attempt 1, once
    store.before_executing = None
    if keeper is not None:
        keeper.release_all()
    again_model, again_tool = _Model(), _Tool()
    again = Runtime(rival, again_model, ToolRegistry({"replay": again_tool}), ids=CountingIds("again"))
    assert isinstance(again.drive("r1").snapshot.state, Ended)
    assert again_tool.starts == [1] and again_model.asked == [2]
    commits = list(rival.commits("t1"))
    assert check_commits(commits).verdict is Verdict.LEGAL
    print(
        f"lost Executing commit, pull [{store_kind}/{'leased' if leased else 'unleased'}]: attempts refused "
        f"{len(refused)}, tool starts {len(tool.starts)}; after the pick-up {again_tool.starts}; commits {len(commits)}"
    )
