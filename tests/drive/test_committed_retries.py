"""A call's retry policy is the one committed with its batch, not the configuration of
whoever continues the Run (I11; ``ToolCall.policy``: "every worker recovers
and retries the call the same way whatever its own configuration").

Through the drivers: the batch opens under one retry policy, the process dies right
after that commit, and a pull-mode runtime, a worker or a push-mode driver configured
with another retry policy continues the Run. A retryable tool error is retried exactly
as the committed ``retries`` say: two retries committed are used under a configuration
of none, and none committed stay none under a configuration of two. (The kernel-level
twin: ``tests/kernel/test_resume_judge.py::test_retries_follow_the_committed_retry_policy_not_the_workers``.)
"""

from __future__ import annotations

import pytest

from push_host import SHELLS, make_shell
from runkernel.adapters.drive.actions import CallRequest, Done, Infer, RunCall
from runkernel.adapters.stores.memory import MemoryStore
from runkernel.adapters.drive.ports import (
    Failed,
    InferenceRequest,
    ModelReply,
    Returned,
    StatusReply,
    ToolRegistry,
    ToolReply,
)
from runkernel.adapters.drive.runtime import Runtime
from runkernel.adapters.stores.contract import Store
from runkernel.adapters.worker.loop import Worker
from runkernel.adapters.worker.apps import RuntimeApp
from runkernel.kernel.policies import RecoveryMode, RetryPolicy, ToolPolicy, ToolRecoveryPolicy
from runkernel.kernel.protocol import OperationStatus
from runkernel.kernel.state import CallCompleted, Ended, Message, RunSnapshot
from runkernel.kernel.values import EndCauseKind, ResultKind, Role
from runkernel.specs.checker import Verdict, check_commits
from runkernel.testing import Boundary, CountingIds, CrashAt, CrashingStore, Position, SimulatedCrash


def _policy(retries: int) -> ToolPolicy:
    # the same recovery policy under both configurations: only the retries differ
    return ToolPolicy(ToolRecoveryPolicy(RecoveryMode.REPLAY, max_attempts=5), RetryPolicy(max_attempts=retries + 1))


#: (retries committed with the batch, retries of whoever continues), and what the call
#: must end with: the attempt that ends it and its result kind
CASES = {
    "two_committed_none_configured": (2, 0, 3, ResultKind.OUTPUT),
    "none_committed_two_configured": (0, 2, 1, ResultKind.ERROR),
}
#: a tool that fails retryably this many times, then returns
FAILS_BEFORE_IT_WORKS = 2


class Downstream:
    """Every start of the tool, whichever runtime's tool object made it."""

    def __init__(self) -> None:
        self.attempts: list[int] = []

    def answer(self, attempt: int) -> tuple[bool, dict[str, object]]:
        """Whether this start fails (retryably), and with what."""
        self.attempts.append(attempt)
        if len(self.attempts) <= FAILS_BEFORE_IT_WORKS:
            return False, {"type": "Unavailable", "message": f"start {len(self.attempts)} failed"}
        return True, {"done_at": attempt}


class Flaky:
    """The pull-mode tool: its policy is its runtime's configuration."""

    def __init__(self, retries: int, downstream: Downstream) -> None:
        self.policy = _policy(retries)
        self.downstream = downstream

    def run(self, invocation: RunCall) -> ToolReply:
        worked, value = self.downstream.answer(invocation.attempt)
        return Returned(value) if worked else Failed(value, retryable=True)

    def status(self, operation_id: str, lease_epoch: int | None) -> StatusReply:
        return StatusReply(OperationStatus.NOT_FOUND)


class OneCall:
    def infer(self, request: InferenceRequest) -> ModelReply:
        if request.step == 1:
            return ModelReply("calling", (CallRequest("flaky", {"n": 1}, "c1"),))
        return ModelReply("done", end=EndCauseKind.COMPLETED)


def _dies_after_the_batch_opens() -> CrashAt:
    return CrashAt(Boundary.AFTER_WRITE, Position.BATCH_OPEN)


def _assert_the_call_ended(store: Store, thread_id: str, committed: int, attempt: int, kind: ResultKind) -> None:
    commits = list(store.commits(thread_id))
    finalized = [c.batch for c in commits if c.batch is not None and c.batch.finalized]
    assert len(finalized) == 1
    (call,) = finalized[0].calls
    assert call.policy == _policy(committed), "the committed policy changed"
    assert isinstance(call.status, CallCompleted)
    assert (call.status.attempt, call.status.result.kind) == (attempt, kind)
    assert check_commits(commits).verdict is Verdict.LEGAL


@pytest.mark.parametrize("host", ["runtime", "worker"])
@pytest.mark.parametrize("case", sorted(CASES))
def test_a_pull_mode_continuation_retries_as_the_batch_committed(case: str, host: str) -> None:
    committed, configured, attempt, kind = CASES[case]
    downstream = Downstream()
    store = MemoryStore()
    first = Runtime(CrashingStore(store, _dies_after_the_batch_opens()), OneCall(),
                    ToolRegistry({"flaky": Flaky(committed, downstream)}), app="retrying", app_version="r1")
    with pytest.raises(SimulatedCrash):
        first.start("t", "r", (Message(Role.USER, "go"),))
    opened = store.run("r")
    assert opened is not None and opened.open_batch is not None and downstream.attempts == []
    assert opened.open_batch.calls[0].policy == _policy(committed)
    tools = ToolRegistry({"flaky": Flaky(configured, downstream)})
    ended: RunSnapshot | None
    if host == "runtime":
        ended = Runtime(store, OneCall(), tools).drive("r").snapshot
    else:
        # its retry policy differs, but the app says it is the same version: it drives the Run
        Worker(store, RuntimeApp("retrying", OneCall(), tools, version="r1"), worker_id="w2").run_once()
        ended = store.run("r")
    assert ended is not None and isinstance(ended.state, Ended)
    assert downstream.attempts == list(range(1, attempt + 1))
    _assert_the_call_ended(store, "t", committed, attempt, kind)
    print(f"{host}: batch committed with {committed} retries, continued under {configured}: "
          f"{len(downstream.attempts)} starts, ended at attempt {attempt} with {kind.value}")


@pytest.mark.parametrize("shell", SHELLS)
@pytest.mark.parametrize("case", sorted(CASES))
def test_a_push_mode_continuation_retries_as_the_batch_committed(case: str, shell: str) -> None:
    committed, configured, attempt, kind = CASES[case]
    downstream = Downstream()
    store = CrashingStore(MemoryStore(), _dies_after_the_batch_opens())
    first = make_shell(shell, store, ids=CountingIds("first"), tools={"flaky": _policy(committed)})
    assert isinstance(first.start(["go"], thread_id="t", run_id="r"), Infer)
    with pytest.raises(SimulatedCrash):
        first.inferred("calling", [CallRequest("flaky", {"n": 1}, "c1")])
    driver = make_shell(shell, store, ids=CountingIds("second"), tools={"flaky": _policy(configured)})
    action = driver.pick_up("r")
    while isinstance(action, RunCall):
        worked, value = downstream.answer(action.attempt)
        if worked:
            action = driver.call_returned(action.call_id, value)
        else:
            action = driver.call_failed(action.call_id, value, retryable=True)
    assert isinstance(action, Infer) and action.step == 2
    assert isinstance(driver.inferred("done", end=EndCauseKind.COMPLETED), Done)
    assert downstream.attempts == list(range(1, attempt + 1))
    _assert_the_call_ended(store, "t", committed, attempt, kind)
    print(f"push driver [{shell}]: batch committed with {committed} retries, continued under {configured}: "
          f"{len(downstream.attempts)} starts, ended at attempt {attempt} with {kind.value}")
