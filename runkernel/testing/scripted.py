"""Ports that follow a script, for tests and the simulator: a model, tools and a gate.

- ``ScriptedModel`` answers step k of a Run with the k-th ``StepScript`` of that Run
  (text, maybe ending the Run, or tool calls), streaming a delta and a checkpoint on the
  way; past the script it ends the Run.
- ``ScriptedTool`` follows a script of behaviours, one per attempt (``OK``, ``FAIL``,
  ``RETRY``, ``LOST``, ``DELEGATE``, ``SCHEDULE``, ``CANCEL_DURING``), under the
  recovery and retry policy it is given; a reconnect tool's ``status`` follows a script
  of answers too (``TRUTH``: what the world saw).
- ``ScriptedGate`` answers by tool name and permits every other tool.

The ``World`` stands for everything downstream: it records every executor run with its
operation id and attempt, and whether that attempt was committed as Executing before
it started (invariant I5); and what the model and the tools really answered, which
committed messages must match.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from attrs import define, field, frozen

from runkernel.adapters.drive.actions import CallRequest, RunCall
from runkernel.adapters.drive.inbox import submit_end
from runkernel.adapters.drive.ports import (
    Delegated,
    Failed,
    GateAnswer,
    InferenceRequest,
    Lost,
    ModelReply,
    Permit,
    Returned,
    Scheduled,
    StatusReply,
    ToolReply,
)
from runkernel.adapters.stores.contract import Store
from runkernel.kernel.policies import (
    RecoveryMode,
    RetryPolicy,
    ToolPolicy,
    ToolRecoveryPolicy,
)
from runkernel.kernel.protocol import EndRequest, OperationStatus
from runkernel.kernel.state import CallExecuting, EndCause, ToolCall
from runkernel.kernel.values import EndCauseKind, JsonValue


@frozen
class Execution:
    """One executor start seen downstream."""

    run_id: str
    call_id: str
    operation_id: str
    tool: str
    attempt: int
    committed_first: bool
    resume_value: JsonValue = None


#: Marks what a stream checkpoint holds, so a checkpoint that reached committed state is
#: found whatever it looks like (I10: partial output is never truth).
CHECKPOINT_MARK = "checkpoint-only"


@define
class World:
    """The downstream systems: what really ran, and what a reconnect status says; and
    what the model and the tools really answered, which committed messages must match."""

    store: Store
    executions: list[Execution]
    operations: dict[str, JsonValue]
    status_answers: dict[str, int]
    not_found_answered: set[str]
    #: every complete model reply, by (run id, step)
    replies: dict[tuple[str, int], list[ModelReply]] = field(factory=dict)
    #: every value or error a tool or its status answered, by operation id
    answered: dict[str, list[JsonValue]] = field(factory=dict)

    def answer(self, operation_id: str, value: JsonValue) -> None:
        """Keep a value or error a tool (or its status) answered for an operation."""
        self.answered.setdefault(operation_id, []).append(value)

    @classmethod
    def new(cls, store: Store) -> World:
        """An empty world over ``store`` (read to see what each start was committed as)."""
        return cls(store, [], {}, {}, set())

    def record(self, tool: str, invocation: RunCall) -> None:
        """Keep one executor start, and whether its Executing commit came first (I5)."""
        snapshot = self.store.run(invocation.run_id)
        call = snapshot.batch.call(invocation.call_id) if snapshot and snapshot.batch else None
        committed = (
            call is not None
            and not snapshot.batch.finalized  # type: ignore[union-attr]
            and call.status == CallExecuting(invocation.attempt)
        )
        self.executions.append(
            Execution(
                invocation.run_id,
                invocation.call_id,
                invocation.operation_id,
                tool,
                invocation.attempt,
                committed,
                invocation.resume_value,
            )
        )


# Behaviour of one attempt of a simulated tool.
OK, FAIL, RETRY, LOST, DELEGATE, SCHEDULE = "ok", "fail", "retry", "lost", "delegate", "schedule"
# Returns a value, and meanwhile the client asks to cancel the Run (through the inbox).
CANCEL_DURING = "ok+cancel"
# Answers of a reconnect tool's status: "truth" reports what the world saw.
TRUTH = "truth"
PERMANENT_FAILURE: JsonValue = {"type": "ToolError", "message": "permanent failure"}
TRANSIENT_FAILURE: JsonValue = {"type": "Transient", "message": "try again"}


class ScriptedTool:
    """A tool whose attempts follow a script (attempt n behaves as ``replies[n - 1]``,
    the last entry repeating); under reconnect, ``status`` follows ``status_script``
    (the last answer repeating). Every start is recorded in ``world``."""

    def __init__(
        self,
        name: str,
        world: World,
        *,
        mode: RecoveryMode = RecoveryMode.INDETERMINATE,
        max_attempts: int = 3,
        retry_attempts: int = 1,
        replies: Sequence[str] = (OK,),
        status_script: Sequence[str] = (TRUTH,),
        delegation: bool = False,
        sequential_delegation: bool | None = None,
        concurrent: bool = False,
    ) -> None:
        """``sequential_delegation`` declares that the tool may delegate to a child that
        talks back (default: whether ``replies`` ever delegates); ``concurrent`` that its
        consecutive calls form a group (``ToolPolicy.concurrent``)."""
        self.name = name
        self.world = world
        self._policy = ToolPolicy(
            ToolRecoveryPolicy(mode, max_attempts),
            RetryPolicy(retry_attempts),
            terminal_only_delegation=delegation,
            sequential_delegation=DELEGATE in replies if sequential_delegation is None else sequential_delegation,
            concurrent=concurrent,
        )
        self.replies = tuple(replies)
        self.status_script = tuple(status_script)

    @property
    def policy(self) -> ToolPolicy:
        """The fixed recovery and retry policy it was given."""
        return self._policy

    def run(self, invocation: RunCall) -> ToolReply:
        """Record the start, then behave as the script says for this attempt."""
        self.world.record(self.name, invocation)
        behaviour = self.replies[min(invocation.attempt, len(self.replies)) - 1]
        value = {"tool": self.name, "operation_id": invocation.operation_id, "attempt": invocation.attempt}
        if invocation.resume_value is not None:
            value["input"] = invocation.resume_value
        if behaviour in (OK, CANCEL_DURING):
            self.world.operations[invocation.operation_id] = value
            self.world.answer(invocation.operation_id, value)
            if behaviour == CANCEL_DURING:
                submit_end(self.world.store, invocation.run_id, EndRequest(EndCause(EndCauseKind.CANCELLED)))
            return Returned(value)
        if behaviour == FAIL:
            self.world.answer(invocation.operation_id, PERMANENT_FAILURE)
            return Failed(PERMANENT_FAILURE)
        if behaviour == RETRY:
            self.world.answer(invocation.operation_id, TRANSIENT_FAILURE)
            return Failed(TRANSIENT_FAILURE, retryable=True)
        if behaviour == LOST:
            return Lost()
        if behaviour == DELEGATE:
            return Delegated()
        if behaviour == SCHEDULE:
            return Scheduled("2026-06-01T00:05:00.000000Z")
        raise ValueError(f"unknown tool behaviour {behaviour!r}")

    def status(self, operation_id: str, lease_epoch: int | None = None) -> StatusReply:
        """The next scripted answer about an operation (``TRUTH``: done with what ran, or
        ``not_found`` if nothing did)."""
        asked = self.world.status_answers.get(operation_id, 0)
        self.world.status_answers[operation_id] = asked + 1
        answer = self.status_script[min(asked, len(self.status_script) - 1)]
        if answer == TRUTH:
            if operation_id in self.world.operations:
                self.world.answer(operation_id, self.world.operations[operation_id])
                return StatusReply(OperationStatus.DONE, self.world.operations[operation_id])
            answer = OperationStatus.NOT_FOUND.value
        status = OperationStatus(answer)
        if status is OperationStatus.NOT_FOUND:
            self.world.not_found_answered.add(operation_id)
        value = {"reconnected": operation_id} if status is OperationStatus.DONE else None
        if status is OperationStatus.FAILED:
            value = {"type": "RemoteError", "message": "the operation failed downstream"}
        if value is not None:
            self.world.answer(operation_id, value)
        return StatusReply(status, value)


@frozen
class StepScript:
    """One scripted inference: text (maybe ending the Run) or tool calls."""

    text: str = "thinking"
    calls: tuple[tuple[str, JsonValue], ...] = ()
    end: EndCauseKind | None = None


class ScriptedModel:
    """Answers step k of a Run with the k-th script entry; streams deltas and a checkpoint
    (marked CHECKPOINT_MARK), and records each complete reply in ``world`` if given."""

    def __init__(self, scripts: Mapping[str, Sequence[StepScript]], world: World | None = None) -> None:
        self.scripts = scripts
        self.world = world
        self.inferences = 0
        self.resumed_from_checkpoint = 0

    def infer(self, request: InferenceRequest) -> ModelReply:
        """The script's entry for this Run's step (past the script: end the Run)."""
        self.inferences += 1
        if request.partial is not None:
            self.resumed_from_checkpoint += 1
        script = self.scripts.get(request.run_id, ())
        entry = (
            script[request.step - 1]
            if request.step <= len(script)
            else StepScript("done", end=EndCauseKind.COMPLETED)
        )
        request.stream.delta({"step": request.step, "text": entry.text[:4]})
        request.stream.checkpoint(
            {"step": request.step, "partial": f"{CHECKPOINT_MARK} {request.run_id} {entry.text[:4]}"}
        )
        request.stream.delta({"step": request.step, "text": entry.text})
        calls = tuple(
            CallRequest(tool, arguments, f"{request.run_id}-s{request.step}-c{index}")
            for index, (tool, arguments) in enumerate(entry.calls)
        )
        reply = ModelReply(entry.text, calls, entry.end)
        if self.world is not None:
            self.world.replies.setdefault((request.run_id, request.step), []).append(reply)
        return reply


class ScriptedGate:
    """Answers by tool name; every other tool is permitted."""

    def __init__(self, answers: Mapping[str, GateAnswer]) -> None:
        self.answers = answers

    def check(self, run_id: str, call: ToolCall) -> GateAnswer:
        """The answer for the call's tool, ``Permit()`` for any other."""
        return self.answers.get(call.tool, Permit())


__all__ = [
    "CANCEL_DURING",
    "CHECKPOINT_MARK",
    "DELEGATE",
    "FAIL",
    "LOST",
    "OK",
    "PERMANENT_FAILURE",
    "RETRY",
    "SCHEDULE",
    "TRANSIENT_FAILURE",
    "TRUTH",
    "Execution",
    "ScriptedGate",
    "ScriptedModel",
    "ScriptedTool",
    "StepScript",
    "World",
]
