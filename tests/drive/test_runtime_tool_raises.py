"""A tool that raises instead of returning a ToolReply: the pull-mode runtime commits
what can be known (a replay tool's retryable error, anyone else's unknown outcome) and
reports the exception, instead of dying with it and leaving the call Executing."""

from __future__ import annotations

import pytest

from runkernel.adapters.stores.memory import MemoryStore
from runkernel.adapters.drive.ports import StatusReply, ToolRegistry, ToolReply
from runkernel import RunCall
from runkernel.adapters.drive.runtime import Runtime
from runkernel.adapters.drive.events import RuntimeEvent, ToolRaised
from runkernel.kernel.policies import RecoveryMode, RetryPolicy, ToolPolicy, ToolRecoveryPolicy
from runkernel.kernel.protocol import OperationStatus
from runkernel.kernel.state import CallCompleted, CallIndeterminate, Ended, Message
from runkernel.kernel.values import EndCauseKind, IndeterminateReason, ResultKind, Role
from runkernel.adapters.stores.export import export_lines
from runkernel.specs.checker import Verdict, check_lines
from runkernel.testing import Boundary, Position, ScriptedModel, SimulatedCrash, StepScript


class Raising:
    def __init__(self, policy: ToolPolicy, error: BaseException) -> None:
        self.policy, self.error, self.attempts = policy, error, 0

    def run(self, invocation: RunCall) -> ToolReply:
        self.attempts += 1
        raise self.error

    def status(self, operation_id: str, lease_epoch: int | None) -> StatusReply:
        return StatusReply(OperationStatus.UNKNOWN)


def drive(tool: Raising) -> tuple[MemoryStore, list[RuntimeEvent]]:
    store, events = MemoryStore(), list[RuntimeEvent]()
    model = ScriptedModel({"r": (StepScript("calling", (("t", {}),)), StepScript("done", end=EndCauseKind.COMPLETED))})
    runtime = Runtime(store, model, ToolRegistry({"t": tool}), on_event=events.append, self_check=True)
    outcome = runtime.start("th", "r", (Message(Role.USER, "go"),))
    assert isinstance(outcome.snapshot.state, Ended), "the Run went on after the tool raised"
    return store, events


def judged(store: MemoryStore) -> Verdict:
    return check_lines(line.encode() for line in export_lines(store, "th", redact=False)).verdict


def the_call(store: MemoryStore) -> object:
    """The call's status as the commit that finalized its batch left it."""
    batches = [c.batch for c in store.commits("th") if c.batch is not None]
    assert batches and not batches[-1].is_open
    return batches[-1].calls[0].status


def test_a_replay_tool_that_raises_is_retried_under_its_policy_then_completes_with_the_error() -> None:
    policy = ToolPolicy(ToolRecoveryPolicy(RecoveryMode.REPLAY), RetryPolicy(max_attempts=2))
    tool = Raising(policy, ValueError("bad gateway"))
    store, events = drive(tool)
    status = the_call(store)
    assert tool.attempts == 2
    assert isinstance(status, CallCompleted) and status.result.kind is ResultKind.ERROR
    assert status.result.value == {"type": "ValueError", "message": "bad gateway"}
    assert [e.attempt for e in events if isinstance(e, ToolRaised)] == [1, 2]
    assert judged(store) is Verdict.LEGAL


@pytest.mark.parametrize("mode", [RecoveryMode.INDETERMINATE, RecoveryMode.RECONNECT])
def test_a_tool_that_may_have_acted_and_raises_is_indeterminate_and_runs_once(mode: RecoveryMode) -> None:
    tool = Raising(ToolPolicy(ToolRecoveryPolicy(mode)), RuntimeError("socket closed mid-request"))
    store, events = drive(tool)
    status = the_call(store)
    assert tool.attempts == 1
    assert isinstance(status, CallIndeterminate) and status.reason is IndeterminateReason.OUTCOME_UNKNOWN
    raised = [e for e in events if isinstance(e, ToolRaised)]
    assert [(e.call_id, e.error.type, e.error.message) for e in raised] == [
        (raised[0].call_id, "RuntimeError", "socket closed mid-request")
    ]
    assert judged(store) is Verdict.LEGAL


def test_an_injected_crash_inside_a_tool_is_still_the_runtimes_death() -> None:
    crash = SimulatedCrash(Boundary.AFTER_EFFECT, Position.CALL_RESULT)
    with pytest.raises(SimulatedCrash):
        drive(Raising(ToolPolicy(), crash))
