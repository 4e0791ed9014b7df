"""A group of concurrent ordinary calls under the drivers (Step and ToolBatch, "Concurrent
ordinary calls"): after the group's one Executing commit the core hands its calls out
together (``RunCalls``); the pull runtime runs them at once, each in a thread, and
reports them in call order; a push host answers them in any order, and a host written
for one call at a time runs every member exactly once. After a crash each member is
recovered by its own policy.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pytest

from push_host import SHELLS, Shell, make_shell
from runkernel import CallRequest
from runkernel.adapters.drive.actions import Action, CheckStatus, Done, Infer, RunCall, RunCalls
from runkernel.adapters.drive.lease_keeper import LeaseKeeper

from runkernel.adapters.drive.ports import (
    GateAnswer,
    InferenceRequest,
    NoHooks,
    Permit,
    ModelReply,
    Failed,
    Returned,
    StatusReply,
    ToolRegistry,
    ToolReply,
)
from runkernel.adapters.drive.inbox import submit_end
from runkernel.errors import HostProtocolError
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
    ToolCall,
)
from runkernel.kernel.values import JsonValue
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
        self.answer = OperationStatus.NOT_FOUND  # what ``status`` says
        self.barrier: threading.Barrier | None = None
        self.threads: set[str] = set()

    def run(self, invocation: RunCall) -> ToolReply:
        self.runs.append(invocation.attempt)
        if self.barrier is not None:
            self.threads.add(threading.current_thread().name)
            self.barrier.wait()
        if self.flaky and len(self.runs) == 1:
            return Failed("flaky", retryable=True)
        return Returned({"ran": invocation.tool})

    def status(self, operation_id: str, lease_epoch: int | None) -> StatusReply:
        self.asked += 1
        return StatusReply(self.answer, {"ran": "before"} if self.answer is OperationStatus.DONE else None)


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


def _grouped(
    kind: str, leases: LeaseKeeper | None = None, store: MemoryStore | None = None
) -> tuple[MemoryStore, Shell, Action]:
    """A push host's driver of ``kind`` whose model asked for the whole group: the store,
    the driver and what it handed out."""
    store = store or MemoryStore()
    driver = make_shell(kind, store, ids=CountingIds("id"), tools=GROUP, leases=leases)
    driver.start(["go"], thread_id="t1", run_id="r1")
    return store, driver, driver.inferred("", [CallRequest(t, {"n": i}) for i, t in enumerate(TOOLS)])


@pytest.mark.parametrize("kind", SHELLS)
def test_a_push_host_handling_one_call_at_a_time_runs_the_whole_group(kind: str) -> None:
    store = MemoryStore()
    driver = make_shell(kind, store, ids=CountingIds("id"), tools=GROUP)
    action = driver.start(["go"], thread_id="t1", run_id="r1")
    assert isinstance(action, Infer)
    action = driver.inferred("", [CallRequest(t, {"n": i}) for i, t in enumerate(TOOLS)])
    assert isinstance(action, RunCalls)
    # every member was committed Executing{1} before the group was handed out
    assert [c.status for c in _run(store).batch.calls] == [CallExecuting(1)] * 3  # type: ignore[union-attr]
    seen = []
    for call in action.calls:  # the calls of the action, in order, one at a time
        seen.append(call.tool)
        action = driver.call_returned(call.call_id, {"ran": call.tool})
    assert seen == list(TOOLS)
    assert isinstance(action, Infer) and action.step == 2
    assert isinstance(driver.inferred("done", end=EndCauseKind.COMPLETED), Done)
    _legal(store)


@pytest.mark.parametrize("kind", SHELLS)
def test_a_push_host_answers_the_group_in_any_order_and_starts_each_attempt_once(kind: str) -> None:
    """A host that starts every call of the ``RunCalls`` at once answers them last
    first; the first member fails retryable: its retry is listed beside the calls still
    unanswered, and ``to_start`` names only it."""
    store, driver, action = _grouped(kind)
    previous: Action | None = None
    starts: list[tuple[str, int]] = []
    answers = 0
    while isinstance(action, RunCalls):
        starts += [(c.tool, c.attempt) for c in action.to_start(previous)]
        previous, last = action, action.calls[-1]
        if answers == 1:  # the second answer: the first member fails retryable
            first = action.calls[0]
            assert first.tool == "read"
            action = driver.call_failed(first.call_id, "flaky", retryable=True)
            assert isinstance(action, RunCalls)
            assert [(c.tool, c.attempt) for c in action.calls] == [("read", 2), ("lookup", 1)]
            assert [(c.tool, c.attempt) for c in action.to_start(previous)] == [("read", 2)]
        else:
            action = driver.call_returned(last.call_id, {"ran": last.tool})
        answers += 1
    assert starts == [("read", 1), ("lookup", 1), ("charge", 1), ("read", 2)]
    assert isinstance(action, Infer) and action.step == 2
    batch = _published(store)
    statuses = [c.status for c in batch.calls]
    assert all(isinstance(status, CallCompleted) for status in statuses)
    assert [status.attempt for status in statuses if isinstance(status, CallCompleted)] == [2, 1, 1]
    _legal(store)


@pytest.mark.parametrize("kind", SHELLS)
def test_a_report_for_a_call_the_group_does_not_list_is_refused_and_changes_nothing(kind: str) -> None:
    store, driver, action = _grouped(kind)
    assert isinstance(action, RunCalls)
    version = _run(store).version
    with pytest.raises(HostProtocolError, match="RunCalls expects .* for one of its calls"):
        driver.call_returned("no-such-call", 1)
    assert _run(store).version == version
    assert driver.next_action() == action  # the same calls stand, as they were handed out


@pytest.mark.parametrize("kind", SHELLS)
def test_each_call_of_the_group_is_handed_out_under_the_lease_re_checked_once(kind: str) -> None:
    """W1 per start: every call of a ``RunCalls`` carries the lease epoch, and a call
    listed again is the one handed out before (its lease check is not repeated)."""
    store = MemoryStore()
    keeper = LeaseKeeper(store, "w1", duration=10.0, margin=5.0, monotonic=lambda: 0.0)
    _, driver, action = _grouped(kind, keeper, store)
    assert isinstance(action, RunCalls)
    assert keeper.checks == 3 and all(c.lease_epoch == 1 for c in action.calls)
    again = driver.call_returned(action.calls[0].call_id, 1)
    assert isinstance(again, RunCalls) and again.calls == action.calls[1:]
    assert keeper.checks == 3


class _ThreadNoting(NoHooks):
    def __init__(self) -> None:
        self.threads: list[str] = []

    def after_tool(self, run_id: str, call_id: str, attempt: int, reply: ToolReply) -> JsonValue:
        self.threads.append(threading.current_thread().name)
        return None


class _GateNoting:
    def __init__(self) -> None:
        self.threads: list[str] = []

    def check(self, run_id: str, call: ToolCall) -> GateAnswer:
        self.threads.append(threading.current_thread().name)
        return Permit()


def test_the_pull_runtime_runs_the_groups_tools_together() -> None:
    """Each tool waits at a barrier for the two others: run one after another, the
    first would wait alone and the barrier would break. Their results are still
    committed in call order, so the commits are the same whatever the timing."""
    store = MemoryStore()
    registry, tools = _tools()
    barrier = threading.Barrier(3, timeout=30)  # opens at once; only calls run in turn wait it out
    threads: set[str] = set()
    for tool in tools.values():
        tool.barrier, tool.threads = barrier, threads
    hooks, gate = _ThreadNoting(), _GateNoting()
    Runtime(store, _Model(), registry, self_check=True, hooks=hooks, gate=gate).start(
        "t1", "r1", (Message(Role.USER, "go"),)
    )
    assert {name: tool.runs for name, tool in tools.items()} == {"read": [1], "lookup": [1], "charge": [1]}
    assert len(threads) == 3 and threading.current_thread().name not in threads
    # the hooks and the gate are called from the drive's own thread, one at a time
    assert hooks.threads == [threading.current_thread().name] * 3
    assert gate.threads == [threading.current_thread().name] * 3
    ends = [c for c in store.commits("t1") if c.batch and any(isinstance(k.status, CallCompleted) for k in c.batch.calls)]
    completed = [sum(isinstance(k.status, CallCompleted) for k in c.batch.calls) for c in ends if c.batch]
    assert completed[:3] == [1, 2, 3]
    first_done = next(c for c in ends if c.batch)
    assert first_done.batch is not None and isinstance(first_done.batch.calls[0].status, CallCompleted)
    print(f"group of 3: {len(threads)} tool threads, {barrier.n_waiting} left at the barrier")
    _legal(store)


@pytest.mark.parametrize("kind", SHELLS)
def test_a_push_host_picking_up_a_started_group_is_handed_each_members_recovery(kind: str) -> None:
    store, driver, first = _grouped(kind)
    assert isinstance(first, RunCalls) and [c.tool for c in first.calls] == list(TOOLS)
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

    def __init__(self, policy: ToolPolicy) -> None:
        super().__init__(policy)
        self.fenced: list[str] = []

    def fence(self, operation_id: str, lease_epoch: int | None) -> None:
        self.fenced.append(operation_id)


def test_a_cancel_queued_while_the_group_was_down_fences_each_member_it_closes() -> None:
    """The drive that started the group dies after its Executing commit; an operator's
    cancel is queued. The next drive's recovery replays the replay member and closes the
    indeterminate one; the cancel then closes the reconnect member before its status is
    asked. Each member this drive closes without having started it is fenced first (W5
    per call)."""
    store = MemoryStore()
    fenced = {name: _FencedTool(GROUP[name]) for name in TOOLS}
    registry = ToolRegistry(dict(fenced))
    dying = CrashingStore(store, CrashAt(Boundary.AFTER_WRITE, Position.CALL_START))
    with pytest.raises(SimulatedCrash):
        Runtime(dying, _Model(), registry, self_check=True).start("t1", "r1", (Message(Role.USER, "go"),))
    assert isinstance(submit_end(store, "r1", EndRequest(EndCause(EndCauseKind.CANCELLED))), int)
    Runtime(store, _Model(), registry, self_check=True).drive("r1")
    ended = _run(store)
    assert isinstance(ended.state, Ended) and ended.state.cause.kind is EndCauseKind.CANCELLED
    assert [tool.runs for tool in fenced.values()] == [[2], [], []]
    assert fenced["lookup"].asked == 0
    batch = _published(store)
    operations = [c.operation_id for c in batch.calls]
    assert [tool.fenced for tool in fenced.values()] == [[], [operations[1]], [operations[2]]]
    assert isinstance(batch.calls[0].status, CallCompleted)
    assert [c.status for c in batch.calls[1:]] == [CallIndeterminate(1, IndeterminateReason.OUTCOME_UNKNOWN)] * 2
    _legal(store)


def test_a_cancel_queued_while_the_group_runs_waits_for_every_member() -> None:
    """A command that arrives while the group's tools run is applied once every member
    is answered: no member's result is lost, and none is run again."""
    store = MemoryStore()
    registry, tools = _tools()
    original = tools["read"].run

    def cancel_then_run(invocation: RunCall) -> ToolReply:
        assert isinstance(submit_end(store, "r1", EndRequest(EndCause(EndCauseKind.CANCELLED))), int)
        return original(invocation)

    tools["read"].run = cancel_then_run  # type: ignore[method-assign]
    Runtime(store, _Model(), registry, self_check=True).start("t1", "r1", (Message(Role.USER, "go"),))
    ended = _run(store)
    assert isinstance(ended.state, Ended) and ended.state.cause.kind is EndCauseKind.CANCELLED
    assert {name: tool.runs for name, tool in tools.items()} == {"read": [1], "lookup": [1], "charge": [1]}
    assert all(isinstance(c.status, CallCompleted) for c in _published(store).calls)
    _legal(store)


def test_a_drive_that_dies_while_its_group_runs_first_waits_for_the_tools_it_started() -> None:
    """The first member's result commit dies while the two others still run: the drive
    raises only once their bodies ended, so none of them runs beside whoever takes the
    Run over in this process."""
    store = MemoryStore()
    registry, tools = _tools()
    committing = threading.Event()
    ended: list[str] = []

    def slow(name: str) -> Callable[[RunCall], ToolReply]:
        def run(invocation: RunCall) -> ToolReply:
            assert committing.wait(120), "the first member's result was never committed"
            ended.append(name)
            return Returned({"ran": name})

        return run

    setattr(tools["lookup"], "run", slow("lookup"))
    setattr(tools["charge"], "run", slow("charge"))

    class _Noting(CrashingStore):
        def append(self, *args: Any, **kwargs: Any) -> Any:
            snapshot = self.store.run("r1")
            if snapshot is not None and snapshot.batch is not None and snapshot.batch.calls[0].status == CallExecuting(1):
                committing.set()  # the first member's result goes in now: the others may end
            return super().append(*args, **kwargs)

    dying = _Noting(store, CrashAt(Boundary.BEFORE_WRITE, Position.CALL_RESULT))
    try:
        Runtime(dying, _Model(), registry, self_check=True).start("t1", "r1", (Message(Role.USER, "go"),))
    except SimulatedCrash:
        at_the_raise = sorted(ended)  # before anything else runs here
    else:
        raise AssertionError("the planned crash did not come")
    print(f"tool bodies ended when the crash was raised: {at_the_raise}")
    assert at_the_raise == ["charge", "lookup"]


@pytest.mark.parametrize("status", [OperationStatus.DONE, OperationStatus.NOT_FOUND])
def test_a_replay_member_after_a_reconnect_member_runs_its_recovered_attempt_once(status: OperationStatus) -> None:
    """A group of a reconnect call then a replay call, found Executing after a crash: the
    recovery commit moves the replay call to Executing{2} and asks the reconnect call's
    status first; attempt 2 is then started, once, and no further attempt is planned,
    whether the status completed the reconnect call (DONE) or started it again
    (NOT_FOUND: the two attempts run together)."""
    policies = {"lookup": GROUP["lookup"], "read": GROUP["read"]}
    store = MemoryStore()
    tools = {name: _Tool(policy) for name, policy in policies.items()}
    tools["lookup"].answer = status
    registry = ToolRegistry(dict(tools))

    class _Pair(_Model):
        def infer(self, request: InferenceRequest) -> ModelReply:
            if request.step == 1:
                return ModelReply("", (CallRequest("lookup", {}), CallRequest("read", {})))
            return ModelReply("done", end=EndCauseKind.COMPLETED)

    dying = CrashingStore(store, CrashAt(Boundary.AFTER_WRITE, Position.CALL_START))
    with pytest.raises(SimulatedCrash):
        Runtime(dying, _Pair(), registry, self_check=True).start("t1", "r1", (Message(Role.USER, "go"),))
    Runtime(store, _Pair(), registry, self_check=True).drive("r1")
    assert tools["lookup"].asked == 1
    assert tools["lookup"].runs == ([] if status is OperationStatus.DONE else [2])
    assert tools["read"].runs == [2]
    assert isinstance(_run(store).state, Ended)
    _legal(store)
