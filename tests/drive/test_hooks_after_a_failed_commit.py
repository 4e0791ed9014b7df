"""Hooks in a runtime that lives on after a failed commit (Step and ToolBatch:
hooks): "Staging that was not committed before a crash is lost and re-derived by
running the hook again: a hook's answer is never truth until committed."

The stateful test and the simulator build a fresh runtime for every drive. Here the
same pull-mode ``Runtime``, the same ``Worker`` (which keeps one runtime) and the same
push-mode ``Driver`` drive the Run again after the commit that would have carried the
hook's staged state S1 failed: the hook must run again, and the staged state committed
is its new answer S2, never S1; the request-only context reaches only its own inference
request and never a commit.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from push_host import SHELLS, make_shell
from runkernel.adapters.drive.actions import CallRequest, Done, DriverStopped, Infer, RunCall
from runkernel.adapters.stores.memory import MemoryStore
from runkernel.adapters.drive.ports import (
    InferenceRequest,
    ModelReply,
    Returned,
    Staging,
    StatusReply,
    ToolRegistry,
    ToolReply,
)
from runkernel.adapters.drive.runtime import Runtime
from runkernel.adapters.stores.sqlite import SqliteStore
from runkernel.adapters.stores.contract import CommitConflict, Store, StoreUnavailable
from runkernel.adapters.worker.loop import Worker
from runkernel.adapters.worker.apps import RuntimeApp
from runkernel.adapters.drive.lease_keeper import APPEND_RETRIES
from runkernel.kernel.codec import commit_to_json
from runkernel.kernel.policies import RecoveryMode, ToolPolicy, ToolRecoveryPolicy
from runkernel.kernel.protocol import Activate, OperationStatus
from runkernel.kernel.rules import Rejection, Rule
from runkernel.kernel.state import Ended, Message, RunSnapshot, Staged
from runkernel.kernel.values import EndCauseKind, JsonValue, Role
from runkernel.specs.checker import Verdict, check_lines
from runkernel.testing import (
    Boundary,
    CountingIds,
    CrashAt,
    CrashingStore,
    Failure,
    Position,
    SimulatedCrash,
    step,
)

#: In every request-only context: no committed or exported line may ever contain it.
CONTEXT_MARK = "request-only-context"
REPLAY = ToolPolicy(ToolRecoveryPolicy(RecoveryMode.REPLAY))


def _conflict(boundary: Boundary, position: Position) -> Exception:
    return CommitConflict(Rejection(Rule.VERSION, f"another writer won at {position.value} (injected)"))


def _unavailable(boundary: Boundary, position: Position) -> Exception:
    return StoreUnavailable(f"database restarted at {position.value} (injected)")


#: How the commit that would carry S1 fails, and what the driving object raises for it.
FAILURES: dict[str, tuple[Failure, type[BaseException]]] = {
    "writer_died": (SimulatedCrash, SimulatedCrash),
    "store_unavailable": (_unavailable, StoreUnavailable),
    "commit_conflict": (_conflict, CommitConflict),
}


class CountingHooks:
    """Each BeforeInference answer is new: staged state ``{"step", "answer": n}`` and a
    request-only context naming the same serial ``n``. Keeps what it was handed."""

    def __init__(self) -> None:
        self.answers = 0
        #: (step, the staged state it was handed) per call
        self.seen: list[tuple[int, JsonValue]] = []
        self.reactions = 0

    def before_inference(self, run_id: str, step: int, staged: JsonValue) -> Staging:
        self.answers += 1
        self.seen.append((step, staged))
        return Staging(
            Staged({"step": step, "answer": self.answers}),
            context={"mark": CONTEXT_MARK, "answer": self.answers},
        )

    def after_tool(self, run_id: str, call_id: str, attempt: int, reply: ToolReply) -> JsonValue:
        self.reactions += 1
        return {"reacted": call_id, "attempt": attempt, "reaction": self.reactions}


class OneCallModel:
    """Step 1 calls ``fetch``; step 2 ends. Keeps each request's request-only context."""

    def __init__(self) -> None:
        self.contexts: list[tuple[int, JsonValue]] = []

    def infer(self, request: InferenceRequest) -> ModelReply:
        self.contexts.append((request.step, request.context))
        if request.step == 1:
            return ModelReply("fetching", (CallRequest("fetch", {"q": 1}, "c1"),))
        return ModelReply("done", end=EndCauseKind.COMPLETED)


class Fetch:
    policy = REPLAY

    def run(self, invocation: RunCall) -> ToolReply:
        return Returned({"got": invocation.arguments})

    def status(self, operation_id: str, lease_epoch: int | None) -> StatusReply:
        return StatusReply(OperationStatus.NOT_FOUND)


def _store(kind: str, tmp_path: Path, plan: CrashAt, failure: Failure) -> CrashingStore:
    if kind == "memory":
        return CrashingStore(MemoryStore(), plan, failure)
    return CrashingStore(SqliteStore(tmp_path / "hooks.db"), plan, failure)


def _batch_open_fails(times: int = 1) -> CrashAt:
    """The first commit of Step 1 (the batch, with the hook's staged state) is not written."""
    return CrashAt(Boundary.BEFORE_WRITE, Position.BATCH_OPEN, times=times)


def _answer(n: int) -> dict[str, JsonValue]:
    return {"step": 1, "answer": n}


def _assert_only_the_second_answer_was_committed(store: Store, thread_id: str) -> None:
    """Step 1's batch carries the hook's second answer; the first is in no commit, and no
    request-only context is in any line."""
    commits = list(store.commits(thread_id))
    opened = [c for c in commits if c.step == 1 and any(m.role is Role.ASSISTANT for m in c.messages)]
    assert [c.staged for c in opened] == [Staged(_answer(2))]
    lines = [json.dumps(commit_to_json(c)) for c in commits]
    assert not any(json.dumps(_answer(1)) in line for line in lines), "the uncommitted answer was committed"
    assert not any(CONTEXT_MARK in line for line in lines), "a request-only context was committed"
    finding = check_lines([line.encode() for line in lines])
    assert finding.verdict is Verdict.LEGAL, finding


# --- a host reused: the pull-mode runtime, and the push-mode driver through both shells ---

#: the pull-mode Runtime, and the push-mode driver through both shells
HOSTS = ("pull", *SHELLS)


class ReusedRuntime:
    """The pull-mode ``Runtime``: it runs the hooks and hands each inference request the
    request-only context its own hook call answered."""

    def __init__(self, store: Store, hooks: CountingHooks) -> None:
        self.store, self.model = store, OneCallModel()
        self.runtime = Runtime(store, self.model, ToolRegistry({"fetch": Fetch()}), hooks=hooks, self_check=True)

    def start(self) -> None:
        self.runtime.start("t", "r", (Message(Role.USER, "go"),))

    def drive_again(self) -> RunSnapshot:
        outcome = self.runtime.drive("r")  # the same runtime object drives the Run again
        return outcome.snapshot

    def stops_with(self, raised: type[BaseException]) -> tuple[type[BaseException], ...]:
        return (raised,)

    def check_contexts(self) -> None:
        # each inference request carries the context its own hook call just answered
        assert self.model.contexts == [
            (1, {"mark": CONTEXT_MARK, "answer": 1}),
            (1, {"mark": CONTEXT_MARK, "answer": 2}),
            (2, {"mark": CONTEXT_MARK, "answer": 3}),
        ]


class ReusedDriver:
    """The push-mode driver through one shell, with a host that runs its own hooks (the
    request-only context stays with that host: the driver is never handed it)."""

    def __init__(self, shell: str, store: Store, hooks: CountingHooks) -> None:
        self.store, self.hooks = store, hooks
        self.driver = make_shell(shell, store, ids=CountingIds("id"), tools={"fetch": REPLAY})

    def start(self) -> None:
        action = self.driver.start(["go"], thread_id="t", run_id="r")
        assert isinstance(action, Infer) and action.staged is None
        staging = self.hooks.before_inference("r", action.step, action.staged)
        self.driver.inferred("fetching", [CallRequest("fetch", {"q": 1}, "c1")], staged=staging.staged)

    def drive_again(self) -> RunSnapshot:
        picked = self.driver.next_action()  # the same driver picks the Run up again
        # the Step is asked again with the committed staged state, not the lost answer
        assert isinstance(picked, Infer) and picked.step == 1 and picked.staged is None
        staging = self.hooks.before_inference("r", picked.step, picked.staged)
        action = self.driver.inferred("fetching", [CallRequest("fetch", {"q": 1}, "c1")], staged=staging.staged)
        assert isinstance(action, RunCall)
        action = self.driver.call_returned(action.call_id, {"got": 1})
        assert isinstance(action, Infer) and action.step == 2 and action.staged == _answer(2)
        staging = self.hooks.before_inference("r", action.step, action.staged)
        done = self.driver.inferred("done", end=EndCauseKind.COMPLETED, staged=staging.staged)
        assert isinstance(done, Done)
        snapshot = self.store.run("r")
        assert snapshot is not None
        return snapshot

    def stops_with(self, raised: type[BaseException]) -> tuple[type[BaseException], ...]:
        return (DriverStopped, SimulatedCrash)

    def check_contexts(self) -> None:
        """The driver never sees a request-only context: nothing to check beyond the commits."""


def reused_host(host: str, store: Store, hooks: CountingHooks) -> ReusedRuntime | ReusedDriver:
    return ReusedRuntime(store, hooks) if host == "pull" else ReusedDriver(host, store, hooks)


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
@pytest.mark.parametrize("failure", sorted(FAILURES))
@pytest.mark.parametrize("host", HOSTS)
def test_a_host_reused_after_a_failed_commit_runs_the_hook_again(
    host: str, failure: str, kind: str, tmp_path: Path
) -> None:
    inject, raised = FAILURES[failure]
    plan = _batch_open_fails()
    store = _store(kind, tmp_path, plan, inject)
    hooks = CountingHooks()
    reused = reused_host(host, store, hooks)
    with pytest.raises(reused.stops_with(raised)):
        reused.start()
    assert plan.fired == 1
    before = store.run("r")
    assert before is not None and before.version == 1 and before.staged is None
    final = reused.drive_again()
    assert isinstance(final.state, Ended)
    # Step 1's hook ran again, handed the committed staged state (none), not its lost answer
    assert hooks.seen == [(1, None), (1, None), (2, _answer(2))]
    reused.check_contexts()
    _assert_only_the_second_answer_was_committed(store, "t")
    assert final.staged == {"step": 2, "answer": 3}
    print(f"{host} host reused after {failure} ({kind}): hook asked {hooks.answers} times, committed answer 2 of step 1")
    store.close()


@pytest.mark.parametrize("failure", sorted(FAILURES))
def test_a_runtime_reused_after_a_lost_result_commits_the_reaction_of_the_attempt_it_commits(failure: str) -> None:
    """AfterTool's reaction is staged beside the call's terminal result: when that commit
    fails, the replayed attempt's reaction is the one committed, never the lost one."""
    inject, raised = FAILURES[failure]
    plan = CrashAt(Boundary.BEFORE_WRITE, Position.FINALIZE)  # the one call's result finalizes its batch
    store = CrashingStore(MemoryStore(), plan, inject)
    hooks = CountingHooks()
    runtime = Runtime(store, OneCallModel(), ToolRegistry({"fetch": Fetch()}), hooks=hooks, self_check=True)
    with pytest.raises(raised):
        runtime.start("t", "r", (Message(Role.USER, "go"),))
    assert plan.fired == 1 and hooks.reactions == 1
    outcome = runtime.drive("r")  # replays the call (Executing{2}): AfterTool runs again
    assert isinstance(outcome.snapshot.state, Ended)
    assert hooks.reactions == 2
    finalized = [c.batch for c in store.commits("t") if c.batch is not None and c.batch.finalized]
    assert [b.calls[0].reaction for b in finalized] == [{"reacted": "c1", "attempt": 2, "reaction": 2}]
    lines = [json.dumps(commit_to_json(c)) for c in store.commits("t")]
    assert not any('"reaction": 1' in line for line in lines), "the lost attempt's reaction was committed"
    assert check_lines([line.encode() for line in lines]).verdict is Verdict.LEGAL


# --- the worker, which keeps one runtime -----------------------------------------------


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
@pytest.mark.parametrize("failure", ["writer_died", "store_down_through_every_retry", "commit_conflict"])
def test_a_worker_that_drives_again_after_a_failed_commit_runs_the_hook_again(
    failure: str, kind: str, tmp_path: Path
) -> None:
    # under a lease a write that failed is retried as it is (W4): the store must stay
    # down through every retry for the drive to fail
    inject: Failure
    if failure == "store_down_through_every_retry":
        plan, inject = _batch_open_fails(APPEND_RETRIES + 1), _unavailable
    else:
        plan, inject = _batch_open_fails(), FAILURES[failure][0]
    store = _store(kind, tmp_path, plan, inject)
    activation = step(None, Activate("t", "r", 0, (Message(Role.USER, "go"),), "hooked"))
    assert activation.commit is not None
    store.append(activation.commit)
    hooks, model = CountingHooks(), OneCallModel()
    app = RuntimeApp("hooked", model, ToolRegistry({"fetch": Fetch()}), hooks=hooks)
    # one slot: the test drives the Run again with the same runtime, the worker's own
    worker = Worker(store, app, worker_id="w1", concurrency=1)
    if failure == "writer_died":
        # a simulated death is no failed drive: it passes the worker's handlers, as a
        # real crash would (the worker object, kept by the test, is reused below)
        with pytest.raises(SimulatedCrash):
            worker.run_once()
        assert plan.left == 0
    elif failure == "store_down_through_every_retry":
        # a store outage (W6), not a failed drive: the worker rides it out, and the same
        # run_once() drives the Run again once the store answers
        first = worker.run_once()
        assert (first.conflicts, first.failures, first.outages, first.interrupted) == (0, 0, 1, 1)
        assert plan.left == 0
    else:
        first = worker.run_once()
        assert (first.conflicts, first.failures) == (1, 0) and plan.left == 0
    if failure != "store_down_through_every_retry":
        snapshot = store.run("r")
        assert snapshot is not None and snapshot.version == 1 and snapshot.staged is None
        # the same worker, and so the same runtime, drives the Run again (by name: after a
        # conflict its lease stays in the store until it expires, so no poll finds it)
        worker.drive("r")
    second = worker.report
    snapshot = store.run("r")
    assert snapshot is not None and isinstance(snapshot.state, Ended)
    assert hooks.seen == [(1, None), (1, None), (2, _answer(2))]
    assert [context for _, context in model.contexts] == [
        {"mark": CONTEXT_MARK, "answer": n} for n in (1, 2, 3)
    ]
    _assert_only_the_second_answer_was_committed(store, "t")
    print(
        f"worker after {failure} ({kind}): {plan.fired} failed writes, drives {second.drives}, "
        f"failures {second.failures}, conflicts {second.conflicts}, hook asked {hooks.answers} times"
    )
    store.close()
