"""Terminal-only child delegations running concurrently (Step and ToolBatch;
I8, I15): the pull-mode runtime with parents and children in one store, crashes, and
the judge on parent and children together. A child that ends while its parent is down,
and a parent cancelled while children run, over every host (the pull-mode runtime,
and the push-mode driver through both shells)."""

from __future__ import annotations

import json

import pytest

import push_children
from push_host import SHELLS, make_shell, play_until_quiet
from runkernel.adapters.drive.actions import ChildrenRunning, Done
from runkernel.adapters.drive.inbox import submit_end
from runkernel.adapters.stores.memory import MemoryStore
from runkernel.adapters.drive.ports import (
    InferenceRequest,
    ModelReply,
    Returned,
    StatusReply,
    ToolRegistry,
    ToolReply,
)
from runkernel import CallRequest, RunCall
from runkernel.adapters.drive.runtime import Runtime
from runkernel.adapters.stores.contract import LeaseLost
from runkernel.adapters.drive.lease_keeper import LeaseKeeper
from runkernel.kernel.codec import commit_to_json
from runkernel.kernel.policies import ToolPolicy
from runkernel.kernel.protocol import EndRequest
from runkernel.kernel.state import (
    CallCompleted,
    CallExecuting,
    CallIndeterminate,
    EndCause,
    Ended,
    Message,
    Running,
    RunSnapshot,
)
from runkernel.kernel.values import EndCauseKind, IndeterminateReason, Role
from runkernel.specs.checker import Verdict, check_lines
from runkernel.testing import Boundary, CountingIds, CrashAt, CrashingStore, Position, SimulatedCrash

PARENT = "parent"


class _Model:
    """The parent asks for two delegations and one ordinary call; children answer."""

    def infer(self, request: InferenceRequest) -> ModelReply:
        if request.run_id == PARENT:
            if request.step == 1:
                return ModelReply("", (
                    CallRequest("research", {"topic": "a"}, "d1"),
                    CallRequest("research", {"topic": "b"}, "d2"),
                    CallRequest("fetch", {"q": 1}, "o3"),
                ))
            return ModelReply("summary", end=EndCauseKind.COMPLETED)
        return ModelReply(f"child answer for {request.messages[0].content}", end=EndCauseKind.COMPLETED)


class _Tool:
    def __init__(self, policy: ToolPolicy) -> None:
        self.policy = policy
        self.runs = 0

    def run(self, invocation: RunCall) -> ToolReply:
        self.runs += 1
        return Returned({"ran": invocation.call_id})

    def status(self, operation_id: str, lease_epoch: int | None) -> StatusReply:
        raise AssertionError("not a reconnect tool")


def _registry() -> tuple[ToolRegistry, _Tool, _Tool]:
    research = _Tool(ToolPolicy(terminal_only_delegation=True))
    fetch = _Tool(ToolPolicy())
    return ToolRegistry({"research": research, "fetch": fetch}), research, fetch


def _children(store: MemoryStore) -> list[str]:
    snapshot = store.run(PARENT)
    assert snapshot is not None and snapshot.batch is not None
    return [c.delegation.run_id for c in snapshot.batch.calls if c.delegation is not None]


def _all_lines(store: MemoryStore) -> list[bytes]:
    return [json.dumps(commit_to_json(c)).encode() for t in store.thread_ids() for c in store.commits(t)]


def _judged_legal(store: MemoryStore) -> None:
    finding = check_lines(_all_lines(store))
    assert finding.verdict is Verdict.LEGAL, finding.report("store")


def test_two_delegations_run_together_then_the_ordinary_call_then_results_in_order() -> None:
    store = MemoryStore()
    tools, research, fetch = _registry()
    runtime = Runtime(store, _Model(), tools, self_check=True)
    outcome = runtime.start("t", PARENT, (Message(Role.USER, "go"),))
    # quiet parent: Running with both children activated and Executing together
    assert isinstance(outcome.snapshot.state, Running)
    batch = outcome.snapshot.batch
    assert batch is not None
    assert [type(c.status) for c in batch.calls][:2] == [CallExecuting, CallExecuting]
    assert research.runs == 0 and fetch.runs == 0  # a delegation's executor is its child's activation
    children = _children(store)
    assert len(children) == 2 and all(store.run(c) is not None for c in children)
    first_commits = [next(iter(store.commits(store.run(c).thread_id))) for c in children]  # type: ignore[union-attr]
    assert [c.parent.call_id for c in first_commits if c.parent] == ["d1", "d2"]
    for child in reversed(children):  # the second child ends first
        Runtime(store, _Model(), tools, self_check=True).drive(child)
    done = Runtime(store, _Model(), tools, self_check=True).drive(PARENT)
    assert isinstance(done.snapshot.state, Ended)
    assert fetch.runs == 1
    tool_messages = [m for m in store.messages("t") if m.role is Role.TOOL]
    assert [m.call_id for m in tool_messages] == ["d1", "d2", "o3"]
    finalized = [c.batch for c in store.commits("t") if c.batch is not None and c.batch.finalized][0]
    d1 = finalized.calls[0]
    assert isinstance(d1.status, CallCompleted)
    assert d1.delegation is not None and d1.delegation.run_id == children[0]
    assert d1.status.result.value == {
        "thread_id": d1.delegation.thread_id,
        "run_id": children[0],
        "cause": {"kind": "completed"},
        "final": "child answer for {'topic': 'a'}",
    }
    _judged_legal(store)


@pytest.mark.parametrize("position, skip", [(Position.CALL_START, 0), (Position.ACTIVATION, 1), (Position.ACTIVATION, 2)])
def test_a_crash_while_children_start_reconnects_to_the_same_children(position: Position, skip: int) -> None:
    store = MemoryStore()
    tools, _, _ = _registry()
    # crash after the group's one Executing commit (before any activation), or after the
    # first or second child's activation (the parent's own activation is the first)
    dying = CrashingStore(store, CrashAt(Boundary.AFTER_WRITE, position, skip=skip))
    crashing = Runtime(dying, _Model(), tools, self_check=True)
    with pytest.raises(SimulatedCrash):
        crashing.start("t", PARENT, (Message(Role.USER, "go"),))
    Runtime(store, _Model(), tools, self_check=True).drive(PARENT)
    children = _children(store)
    assert len(children) == 2
    for child in children:
        assert len(list(store.commits(store.run(child).thread_id))) == 1  # type: ignore[union-attr]
        Runtime(store, _Model(), tools, self_check=True).drive(child)
    assert isinstance(Runtime(store, _Model(), tools, self_check=True).drive(PARENT).snapshot.state, Ended)
    _judged_legal(store)


# --- over every host: the pull-mode runtime, and the push-mode driver through both shells ---

#: the pull-mode Runtime, and the push-mode driver through both shells
HOSTS = ("pull", *SHELLS)


class PullParent:
    """The pull-mode ``Runtime`` hosting the parent and its children in one store, a
    fresh runtime for every drive (as after a crash)."""

    thread, parent = "t", PARENT

    def __init__(self, store: MemoryStore) -> None:
        self.store = store
        self.tools, _, self.fetch = _registry()

    def _runtime(self) -> Runtime:
        return Runtime(self.store, _Model(), self.tools, self_check=True)

    def quiet(self) -> list[str]:
        """Start the parent; it stops, quiet, while its two children run."""
        self._runtime().start(self.thread, self.parent, (Message(Role.USER, "go"),))
        return _children(self.store)

    def drive_child(self, run_id: str) -> None:
        assert isinstance(self._runtime().drive(run_id).snapshot.state, Ended)

    def pick_up_parent(self, running: str) -> None:
        self._runtime().drive(self.parent)
        assert self.fetch.runs == 0  # the ordinary call waits for the group

    def finish_parent(self) -> None:
        ended = self._runtime().drive(self.parent).snapshot.state
        assert isinstance(ended, Ended) and ended.cause.kind is EndCauseKind.COMPLETED
        assert self.fetch.runs == 1  # only now, after the group

    def apply_commands(self) -> None:
        assert isinstance(self._runtime().drive(self.parent).snapshot.state, Ended)


class PushParent:
    """The push-mode driver through one shell, and one host process that drives the
    parent and every child (``push_children``)."""

    thread, parent = "t1", push_children.PARENT

    def __init__(self, shell: str, store: MemoryStore) -> None:
        self.shell, self.store = shell, store

    def quiet(self) -> list[str]:
        self.driver, quiet, self.world = push_children.quiet_parent(self.shell, self.store)
        self.children = quiet.children
        return [child.run_id for child in quiet.children]

    def drive_child(self, run_id: str) -> None:
        push_children.drive_child(self.shell, self.store, self.world, run_id)

    def pick_up_parent(self, running: str) -> None:
        self.driver = make_shell(self.shell, self.store, ids=CountingIds("again"), tools=push_children.TOOLS)
        picked = self.driver.pick_up(self.parent)
        assert isinstance(picked, ChildrenRunning)
        assert picked.children == tuple(child for child in self.children if child.run_id == running)

    def finish_parent(self) -> None:
        action = self.driver.next_action()
        assert isinstance(action, RunCall) and action.tool == "reconnect"  # only now, after the group
        done = play_until_quiet(self.driver, action, self.world)
        assert isinstance(done, Done) and done.cause.kind is EndCauseKind.COMPLETED

    def apply_commands(self) -> None:
        done = self.driver.next_action()
        assert isinstance(done, Done) and done.cause.kind is EndCauseKind.CANCELLED


def parent_host(host: str, store: MemoryStore) -> PullParent | PushParent:
    return PullParent(store) if host == "pull" else PushParent(host, store)


def _parent_state(store: MemoryStore, run_id: str) -> RunSnapshot:
    snapshot = store.run(run_id)
    assert snapshot is not None and snapshot.batch is not None
    return snapshot


@pytest.mark.parametrize("host", HOSTS)
def test_a_child_that_ends_while_the_parent_is_down_completes_when_the_parent_is_picked_up(host: str) -> None:
    store = MemoryStore()
    hosting = parent_host(host, store)
    first, second = hosting.quiet()
    hosting.drive_child(first)  # the parent is down
    hosting.pick_up_parent(running=second)
    batch = _parent_state(store, hosting.parent).batch
    assert batch is not None
    assert isinstance(batch.calls[0].status, CallCompleted)
    assert isinstance(batch.calls[1].status, CallExecuting)  # still quiet on the other child
    hosting.drive_child(second)
    hosting.finish_parent()
    _judged_legal(store)


@pytest.mark.parametrize("host", HOSTS)
def test_a_parent_cancelled_through_its_inbox_while_children_run_cancels_them_and_keeps_committed_termini(
    host: str,
) -> None:
    store = MemoryStore()
    hosting = parent_host(host, store)
    first, second = hosting.quiet()
    hosting.drive_child(first)
    assert isinstance(submit_end(store, hosting.parent, EndRequest(EndCause(EndCauseKind.CANCELLED))), int)
    hosting.apply_commands()
    state = _parent_state(store, hosting.parent)
    assert isinstance(state.state, Ended) and state.batch is not None and state.batch.finalized
    ended, running, ordinary = state.batch.calls
    # its terminus was committed
    assert isinstance(ended.status, CallCompleted) and ended.delegation is not None and ended.delegation.run_id == first
    assert isinstance(ended.status.result.value, dict) and ended.status.result.value["run_id"] == first
    assert running.status == CallIndeterminate(1, IndeterminateReason.OUTCOME_UNKNOWN)
    assert ordinary.status == CallIndeterminate(0, IndeterminateReason.RUN_ENDED)
    assert [e.outcome for e in store.commands(hosting.parent)] == ["applied"]
    # the running child was sent a cancel through its inbox and ends cancelled
    assert running.delegation is not None and running.delegation.run_id == second
    assert len(store.pending_commands(second)) == 1
    hosting.drive_child(second)
    child = store.run(second)
    assert child is not None and isinstance(child.state, Ended) and child.state.cause.kind is EndCauseKind.CANCELLED
    _judged_legal(store)


def test_the_judge_refuses_an_ordinary_call_started_while_a_delegation_runs() -> None:
    store = MemoryStore()
    tools, _, _ = _registry()
    Runtime(store, _Model(), tools, self_check=True).start("t", PARENT, (Message(Role.USER, "go"),))
    lines = [commit_to_json(c) for c in store.commits("t")]
    bad = json.loads(json.dumps(lines[-1]))
    bad["version"] += 1
    bad["batch"]["calls"][2].update(status="executing", attempt=1)
    finding = check_lines([json.dumps(line).encode() for line in lines + [bad]])
    assert (finding.verdict, finding.line, finding.rule) == (Verdict.ILLEGAL, len(lines) + 1, "calls-one-at-a-time-in-order")


def test_the_spec_states_the_concurrency_rule_and_every_hooks_answer() -> None:
    from runkernel.kernel.protocol import Hook
    from runkernel.specs.export import as_json, markdown

    document = json.loads(as_json())
    assert any("Only the members of one group may be Executing together" in line for line in document["concurrency_rule"])
    assert [entry["hook"] for entry in document["hook_answers"]] == [hook.value for hook in Hook]
    page = markdown()
    assert page.index("## Tool-call state machine") < page.index("## Concurrency rule") < page.index("## Hook answers")


def test_children_name_their_parent_and_a_quiet_parent_is_woken_by_a_childs_end() -> None:
    from runkernel.adapters.drive.delegations import ended_children, parent_of, parents_to_wake

    store = MemoryStore()
    tools, _, _ = _registry()
    Runtime(store, _Model(), tools, self_check=True).start("t", PARENT, (Message(Role.USER, "go"),))
    children = _children(store)
    parent = parent_of(store, children[1])
    assert parent is not None and (parent.thread_id, parent.run_id, parent.call_id) == ("t", PARENT, "d2")
    assert parents_to_wake(store, [PARENT]) == []  # quiet: both children run
    Runtime(store, _Model(), tools, self_check=True).drive(children[1])
    assert ended_children(store, PARENT) == ["d2"]
    assert parents_to_wake(store, [PARENT, "nobody"]) == [PARENT]



class _LateModel(_Model):
    """The parent's first inference takes so long that its lease is too close to its
    expiry to start an executor once the batch is committed (it is still good for commits)."""

    def __init__(self, now: list[float]) -> None:
        self.now = now

    def infer(self, request: InferenceRequest) -> ModelReply:
        if request.run_id == PARENT and request.step == 1:
            self.now[0] = 6.0
        return super().infer(request)


def test_a_leased_runtime_rechecks_the_parents_lease_before_it_activates_a_child() -> None:
    # W1: a concurrent delegation's executor is its child's activation
    now = [0.0]
    store = MemoryStore(clock=lambda: now[0])
    keeper = LeaseKeeper(store, "w1", duration=10.0, margin=5.0, monotonic=lambda: 0.0)
    tools, _, _ = _registry()
    runtime = Runtime(store, _LateModel(now), tools, leases=keeper, self_check=True)
    with pytest.raises(LeaseLost):
        runtime.start("t1", PARENT, (Message(Role.USER, "go"),))
    snapshot = store.run(PARENT)
    assert snapshot is not None and snapshot.batch is not None
    assert any(isinstance(c.status, CallExecuting) for c in snapshot.batch.calls)
    assert [child for child in _children(store) if store.run(child) is not None] == []  # nothing activated
