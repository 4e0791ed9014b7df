"""Scripted actors for simulation and tests: a model, tools, a gate, and the world.

The World stands for everything downstream: it records every executor run with its
operation id and attempt, and whether that attempt was committed as Executing before
it started (invariant I5).
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Mapping, Sequence

from attrs import define, field, frozen

from runkernel.adapters.driver_actions import CallRequest, RunCall
from runkernel.adapters.inbox import submit_end
from runkernel.adapters.ports import (
    Delegated,
    Failed,
    GateAnswer,
    InferenceRequest,
    Lost,
    ModelReply,
    Permit,
    Returned,
    Scheduled,
    Staging,
    StatusReply,
    ToolReply,
)
from runkernel.adapters.store import Store
from runkernel.kernel.policies import (
    RecoveryMode,
    RetryPolicy,
    ToolPolicy,
    ToolRecoveryPolicy,
)
from runkernel.kernel.protocol import EndRequest, Hook, OperationStatus
from runkernel.kernel.state import (
    Staged,
    ActiveToolBatch,
    CallExecuting,
    EndCause,
    ResumeTicket,
    ToolCall,
    Wait,
)
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
        self.answered.setdefault(operation_id, []).append(value)

    @classmethod
    def new(cls, store: Store) -> World:
        return cls(store, [], {}, {}, set())

    def record(self, tool: str, invocation: RunCall) -> None:
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


class SimHooks:
    """Hooks that stage: BeforeInference stages the step it saw and hands request-only
    context (never committed); AfterTool reacts to every reply."""

    def before_inference(self, run_id: str, step: int, staged: JsonValue) -> Staging:
        return Staging(Staged({"step": step, "before": staged}), context={"request_only": f"{run_id}:{step}"})

    def after_tool(self, run_id: str, call_id: str, attempt: int, reply: ToolReply) -> JsonValue:
        return {"reacted_to": call_id, "attempt": attempt}


class SimTool:
    """A tool whose attempts follow a script; under reconnect, ``status`` follows one too."""

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
    ) -> None:
        """``sequential_delegation`` declares that the tool may delegate to a child that
        talks back (default: whether ``replies`` ever delegates)."""
        self.name = name
        self.world = world
        self._policy = ToolPolicy(
            ToolRecoveryPolicy(mode, max_attempts),
            RetryPolicy(retry_attempts),
            terminal_only_delegation=delegation,
            sequential_delegation=DELEGATE in replies if sequential_delegation is None else sequential_delegation,
        )
        self.replies = tuple(replies)
        self.status_script = tuple(status_script)

    @property
    def policy(self) -> ToolPolicy:
        return self._policy

    def run(self, invocation: RunCall) -> ToolReply:
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

    def status(self, operation_id: str) -> StatusReply:
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
        return self.answers.get(call.tool, Permit())


class CountingObserver:
    """Counts what was observed; nothing here is ever read as truth."""

    def __init__(self) -> None:
        self.hooks = 0
        self.deltas = 0
        self.notifications: list[ResumeTicket] = []
        self.published = 0

    def hook(self, run_id: str, hook: Hook, call_id: str | None) -> None:
        self.hooks += 1

    def delta(self, run_id: str, data: JsonValue) -> None:
        self.deltas += 1

    def notify(self, run_id: str, ticket: ResumeTicket, wait: Wait) -> None:
        self.notifications.append(ticket)

    def publish(self, run_id: str, batch: ActiveToolBatch) -> None:
        self.published += 1


class CountingIds:
    """Reproducible ids for simulation and tests: counted ids for batches, calls and
    operations, and tickets of 192 bits from a pseudo-random source seeded by the
    prefix and ``seed``, so the same run gives byte-identical traces. Production uses
    ``SecretIds``, whose tickets come from ``secrets``."""

    def __init__(self, prefix: str, seed: int = 0) -> None:
        self.prefix = prefix
        self._next = itertools.count(1)
        self._tickets = random.Random(f"runkernel-sim/{seed}/{prefix}")
        self._forgeries = random.Random(f"runkernel-sim-forged/{seed}/{prefix}")

    def new_id(self, prefix: str) -> str:
        return f"{prefix}-{self.prefix}-{next(self._next)}"

    def ticket_id(self) -> str:
        return f"tk_{self._tickets.getrandbits(192):048x}"

    def forged_ticket_id(self) -> str:
        """A ticket id no ticket of this source has (for commands that must be refused),
        drawn from a stream of its own so it never shifts the real tickets."""
        return f"tk_{self._forgeries.getrandbits(192):048x}"
