"""A group of concurrent ordinary calls under the drivers (Step and ToolBatch, "Concurrent
ordinary calls"): the core hands the group's calls out one at a time after the group's
one Executing commit, so a host written for one call at a time runs every member
exactly once; after a crash each member is recovered by its own policy.

(The drivers do not start a group's executors together yet: issue 34's item 2.)
"""

from __future__ import annotations

import pytest

from push_host import SHELLS, make_shell
from runkernel import CallRequest
from runkernel.adapters.drive.actions import CheckStatus, Done, Infer, RunCall
from runkernel.adapters.drive.ports import (
    InferenceRequest,
    ModelReply,
    Failed,
    Returned,
    StatusReply,
    ToolRegistry,
    ToolReply,
)
from runkernel.adapters.drive.inbox import submit_end
from runkernel.adapters.drive.runtime import Runtime
from runkernel.adapters.stores.memory import MemoryStore
from runkernel.kernel.policies import ToolPolicy
from runkernel.kernel.protocol import EndRequest, OperationStatus
from runkernel.kernel.state import (
    ActiveToolBatch,
    CallCompleted,
    CallExecuting,
    CallIndeterminate,
    EndCause,
    Ended,
    Message,
    RunSnapshot,
)
from runkernel.kernel.values import EndCauseKind, IndeterminateReason, Role
from runkernel.specs.checker import Verdict, check_commits
from runkernel.testing import Boundary, CrashAt, CrashingStore, CountingIds, Position, SimulatedCrash

GROUP = {
    "read": ToolPolicy.replay(retries=1, concurrent=True),
    "lookup": ToolPolicy.reconnect(concurrent=True),
    "charge": ToolPolicy.indeterminate(concurrent=True),
}
TOOLS = ("read", "lookup", "charge")


class _Model:
    def infer(self, request: InferenceRequest) -> ModelReply:
        if request.step == 1:
            return ModelReply("", tuple(CallRequest(t, {"n": i}) for i, t in enumerate(TOOLS)))
        return ModelReply("done", end=EndCauseKind.COMPLETED)


class _Tool:
    def __init__(self, policy: ToolPolicy) -> None:
        self.policy = policy
        self.runs: list[int] = []
        self.asked = 0
        self.flaky = False

    def run(self, invocation: RunCall) -> ToolReply:
        self.runs.append(invocation.attempt)
        if self.flaky and len(self.runs) == 1:
            return Failed("flaky", retryable=True)
        return Returned({"ran": invocation.tool})

    def status(self, operation_id: str, lease_epoch: int | None) -> StatusReply:
        self.asked += 1
        return StatusReply(OperationStatus.NOT_FOUND)


def _tools() -> tuple[ToolRegistry, dict[str, _Tool]]:
    tools = {name: _Tool(policy) for name, policy in GROUP.items()}
    return ToolRegistry(dict(tools)), tools


def _run(store: MemoryStore) -> RunSnapshot:
    snapshot = store.run("r1")
    assert snapshot is not None
    return snapshot


def _published(store: MemoryStore) -> ActiveToolBatch:
    """The batch as the commit that finalized it carries it."""
    return next(c.batch for c in store.commits("t1") if c.batch is not None and c.batch.finalized)


def _legal(store: MemoryStore) -> None:
    assert check_commits(list(store.commits("t1"))).verdict is Verdict.LEGAL


@pytest.mark.parametrize("flaky", [False, True])
def test_the_pull_runtime_runs_every_member_once_and_publishes_in_call_order(flaky: bool) -> None:
    """With ``flaky`` the first member's first attempt fails retryable: its retry runs
    while its siblings are Executing, and they still run, once each."""
    store = MemoryStore()
    registry, tools = _tools()
    tools["read"].flaky = flaky
    Runtime(store, _Model(), registry, self_check=True).start("t1", "r1", (Message(Role.USER, "go"),))
    reads = [1, 2] if flaky else [1]
    assert {name: tool.runs for name, tool in tools.items()} == {"read": reads, "lookup": [1], "charge": [1]}
    commits = list(store.commits("t1"))
    starts = [c for c in commits if c.batch and all(k.status == CallExecuting(1) for k in c.batch.calls)]
    assert len(starts) == 1  # the group started in one commit
    published = next(c for c in commits if c.batch is not None and c.batch.finalized)
    assert published.batch is not None
    assert [m.call_id for m in published.messages if m.role is Role.TOOL] == [c.call_id for c in published.batch.calls]
    _legal(store)


def test_a_crash_after_the_group_started_recovers_each_member_by_its_own_policy() -> None:
    store = MemoryStore()
    registry, tools = _tools()
    dying = CrashingStore(store, CrashAt(Boundary.AFTER_WRITE, Position.CALL_START))
    with pytest.raises(SimulatedCrash):
        Runtime(dying, _Model(), registry, self_check=True).start("t1", "r1", (Message(Role.USER, "go"),))
    assert not any(tool.runs for tool in tools.values())  # the crash fell before any start
    Runtime(store, _Model(), registry, self_check=True).drive("r1")
    assert tools["read"].runs == [2]  # replayed: attempt 2 committed first
    assert tools["lookup"].asked == 1 and tools["lookup"].runs == [2]  # provably never started
    assert tools["charge"].runs == []  # never started again
    batch = _published(store)
    assert batch.calls[2].status == CallIndeterminate(1, IndeterminateReason.OUTCOME_UNKNOWN)
    assert isinstance(batch.calls[0].status, CallCompleted)
    _legal(store)


@pytest.mark.parametrize("kind", SHELLS)
def test_a_push_host_handling_one_call_at_a_time_runs_the_whole_group(kind: str) -> None:
    store = MemoryStore()
    driver = make_shell(kind, store, ids=CountingIds("id"), tools=GROUP)
    action = driver.start(["go"], thread_id="t1", run_id="r1")
    assert isinstance(action, Infer)
    action = driver.inferred("", [CallRequest(t, {"n": i}) for i, t in enumerate(TOOLS)])
    seen = []
    while isinstance(action, RunCall):
        # every member was committed Executing{1} before the first one was handed out
        assert all(isinstance(c.status, (CallExecuting, CallCompleted)) for c in _run(store).batch.calls)  # type: ignore[union-attr]
        seen.append(action.tool)
        action = driver.call_returned(action.call_id, {"ran": action.tool})
    assert seen == list(TOOLS)
    assert isinstance(action, Infer) and action.step == 2
    assert isinstance(driver.inferred("done", end=EndCauseKind.COMPLETED), Done)
    _legal(store)


@pytest.mark.parametrize("kind", SHELLS)
def test_a_push_host_picking_up_a_started_group_is_handed_each_members_recovery(kind: str) -> None:
    store = MemoryStore()
    driver = make_shell(kind, store, ids=CountingIds("id"), tools=GROUP)
    driver.start(["go"], thread_id="t1", run_id="r1")
    first = driver.inferred("", [CallRequest(t, {"n": i}) for i, t in enumerate(TOOLS)])
    assert isinstance(first, RunCall) and first.tool == "read"
    # the host dies here; a fresh driver picks the Run up from the store alone
    fresh = make_shell(kind, store, ids=CountingIds("id2"), tools=GROUP)
    action = fresh.pick_up("r1")
    assert isinstance(action, RunCall) and (action.tool, action.attempt) == ("read", 2)
    action = fresh.call_returned(action.call_id, "r")
    assert isinstance(action, CheckStatus) and action.tool == "lookup"
    action = fresh.status(action.call_id, OperationStatus.NOT_FOUND)
    assert isinstance(action, RunCall) and (action.tool, action.attempt) == ("lookup", 2)
    action = fresh.call_returned(action.call_id, "l")
    assert isinstance(action, Infer)
    statuses = [c.status for c in _published(store).calls]
    assert statuses[2] == CallIndeterminate(1, IndeterminateReason.OUTCOME_UNKNOWN)
    _legal(store)


class _FencedTool(_Tool):
    """A tool whose downstream keeps the highest epoch per operation (W5)."""

    def __init__(self, policy: ToolPolicy, store: MemoryStore | None = None) -> None:
        super().__init__(policy)
        self.fenced: list[str] = []
        self.store = store

    def run(self, invocation: RunCall) -> ToolReply:
        if self.store is not None:  # the operator cancels while the group runs
            assert isinstance(submit_end(self.store, "r1", EndRequest(EndCause(EndCauseKind.CANCELLED))), int)
        return super().run(invocation)

    def fence(self, operation_id: str, lease_epoch: int | None) -> None:
        self.fenced.append(operation_id)


def test_a_cancel_while_the_group_runs_closes_every_member_and_fences_each_one_not_started() -> None:
    store = MemoryStore()
    first = _FencedTool(GROUP["read"], store)
    second, third = _FencedTool(GROUP["lookup"]), _FencedTool(GROUP["charge"])
    registry = ToolRegistry({"read": first, "lookup": second, "charge": third})
    Runtime(store, _Model(), registry, self_check=True).start("t1", "r1", (Message(Role.USER, "go"),))
    ended = _run(store)
    assert isinstance(ended.state, Ended) and ended.state.cause.kind is EndCauseKind.CANCELLED
    assert first.runs == [1] and second.runs == third.runs == []  # the cancel came first
    # W5 per call: each member Executing that this drive never started is fenced first
    batch = _published(store)
    operations = [c.operation_id for c in batch.calls]
    assert (first.fenced, second.fenced, third.fenced) == ([], [operations[1]], [operations[2]])
    statuses = [c.status for c in batch.calls]
    assert isinstance(statuses[0], CallCompleted)
    assert statuses[1:] == [CallIndeterminate(1, IndeterminateReason.OUTCOME_UNKNOWN)] * 2
    _legal(store)
