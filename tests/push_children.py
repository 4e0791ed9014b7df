"""A push-mode host for concurrent delegations, shared by the delegation tests: a world
whose children answer their topic, a store that checks each child is activated only
after its call's Executing commit, the drivers of the children, and the judge over the
parent's and the children's Threads together."""

from __future__ import annotations

import json
from collections.abc import Mapping

from push_host import POLICIES, Reply, Shell, World, make_shell, play_until_quiet
from runkernel.adapters.drive.actions import ChildrenRunning, Done, Infer
from runkernel.adapters.stores.memory import MemoryStore
from runkernel.adapters.stores.contract import Lease, Settlement, Store
from runkernel.kernel.codec import commit_to_json
from runkernel.kernel.policies import ToolPolicy
from runkernel.kernel.state import ActiveToolBatch, CallExecuting, CallRequested, RunSnapshot, ThreadCommit
from runkernel.kernel.values import EndCauseKind
from runkernel.specs.checker import Verdict, check_lines
from runkernel.testing import CountingIds, CrashPlan, CrashingStore

TOOLS: Mapping[str, ToolPolicy] = {**POLICIES, "research": ToolPolicy(terminal_only_delegation=True)}
DONE = Reply("all done", end=EndCauseKind.COMPLETED)
PARENT = "r1"

#: two delegations and an ordinary call; and an ordinary call before a group as well
TWO_AND_ONE = {1: Reply("t", (("research", {"topic": "a"}), ("research", {"topic": "b"}), ("reconnect", 3))), 2: DONE}
AROUND = {
    1: Reply("t", (("replay", 1), ("research", {"topic": "a"}), ("research", {"topic": "b"}), ("indeterminate", 4))),
    2: DONE,
}
SCRIPTS = {"two_delegations_then_a_call": TWO_AND_ONE, "calls_around_a_group": AROUND}


class DelegatingWorld(World):
    """The parent follows its script; a child answers its topic and ends."""

    def infer(self, action: Infer) -> Reply:
        if action.run_id == PARENT:
            return super().infer(action)
        topic = action.messages[0].content
        assert isinstance(topic, dict)
        return Reply(f"child answer for {topic['topic']}", end=EndCauseKind.COMPLETED)


class DelegationStore(CrashingStore):
    """A crashing store that also checks I5 for children: a child is activated only once
    its call's Executing commit (naming that child) is durable."""

    def __init__(self, plan: CrashPlan) -> None:
        super().__init__(MemoryStore(), plan)
        self.activations: list[str] = []

    def append(
        self,
        commit: ThreadCommit,
        settle: Settlement | None = None,
        *,
        lease: Lease | None = None,
        release: bool = False,
        trace_context: str | None = None,
    ) -> RunSnapshot:
        parent = commit.parent
        if parent is not None:
            state = self.run(parent.run_id)
            call = state.open_batch.call(parent.call_id) if state and state.open_batch else None
            assert call is not None and isinstance(call.status, CallExecuting), f"{commit.run_id} before its Executing"
            assert call.delegation is not None and call.delegation.run_id == commit.run_id
        try:
            return super().append(commit, settle, lease=lease, release=release, trace_context=trace_context)
        finally:
            if parent is not None and self.run(commit.run_id) is not None:
                self.activations.append(commit.run_id)  # it landed, even if the writer died


def all_lines(store: Store) -> list[bytes]:
    return [json.dumps(commit_to_json(c)).encode() for t in store.thread_ids() for c in store.commits(t)]


def judged_legal(store: Store) -> str:
    finding = check_lines(all_lines(store))
    return "" if finding.verdict is Verdict.LEGAL else finding.report("store")


def child_driver(kind: str, store: Store, run_id: str, app: str | None = None) -> Shell:
    return make_shell(kind, store, ids=CountingIds(f"c-{run_id}"), tools=TOOLS, app=app)


def drive_child(kind: str, store: Store, world: World, run_id: str) -> Done:
    """Drive one child Run to its end, as any host of the child's app would."""
    driver = child_driver(kind, store, run_id)
    ended = play_until_quiet(driver, driver.pick_up(run_id), world)
    assert isinstance(ended, Done), ended
    return ended


def parent_batch(store: Store) -> RunSnapshot:
    state = store.run(PARENT)
    assert state is not None and state.batch is not None
    return state


def finalized_batch(store: Store) -> ActiveToolBatch:
    """The parent's first batch, as its finalizing commit left it."""
    return [c.batch for c in store.commits("t1") if c.batch is not None and c.batch.finalized][0]


def group_starts(store: Store, thread_id: str) -> list[list[str]]:
    """For each commit of the Thread that starts delegations from Requested, which ones:
    a group's allowed members start together, in one commit."""
    starts, before = [], None
    for commit in store.commits(thread_id):
        batch = commit.batch
        if batch is not None and before is not None and before.batch_id == batch.batch_id:
            moved = [
                n.call_id for o, n in zip(before.calls, batch.calls)
                if isinstance(o.status, CallRequested) and isinstance(n.status, CallExecuting)
                and n.delegation is not None and n.delegation.concurrent
            ]
            if moved:
                starts.append(moved)
        before = batch
    return starts


def quiet_parent(kind: str, store: Store, app: str | None = None) -> tuple[Shell, ChildrenRunning, World]:
    world = DelegatingWorld(TWO_AND_ONE, store=store)
    driver = make_shell(kind, store, ids=CountingIds("id"), tools=TOOLS, app=app)
    quiet = play_until_quiet(driver, driver.start(["go"], thread_id="t1", run_id=PARENT), world)
    assert isinstance(quiet, ChildrenRunning)
    return driver, quiet, world
