"""The ports the reference runtime drives: model, tools, gate, hooks, sinks, ids, clock.

A real provider, tool or approval UI implements these small protocols; the simulator
and the tests plug in scripted ones.
"""

from __future__ import annotations

import datetime
import secrets
from collections.abc import Callable, Mapping, Sequence
from typing import Protocol, TypeAlias

from attrs import frozen

from runkernel.kernel.policies import IndeterminateChoice, Policies, ToolPolicy
from runkernel.kernel.protocol import Hook, OperationStatus
from runkernel.kernel.state import (
    ActiveToolBatch,
    Delegation,
    Message,
    ResumeTicket,
    Staged,
    ToolCall,
    Wait,
)
from runkernel.kernel.values import EndCauseKind, JsonValue, WaitKind

# --- model --------------------------------------------------------------------------


class StreamSink(Protocol):
    """Where a model streams while it works. Nothing here is ever read as truth."""

    def delta(self, data: JsonValue) -> None:
        """A live Delta for subscribers."""

    def checkpoint(self, partial: JsonValue) -> None:
        """Best-effort partial output, for a retryable interruption."""


@frozen
class InferenceRequest:
    """Everything a model needs for one step. ``checkpoint`` is a partial, never truth."""

    thread_id: str
    run_id: str
    step: int
    #: the Thread's messages so far (read-only; a view, not a copy, of the driver's log)
    messages: Sequence[Message]
    checkpoint: JsonValue
    stream: StreamSink
    #: BeforeInference's request-only context: for this request only, never committed
    context: JsonValue = None


@frozen
class ModelCall:
    """One tool call the model asks for."""

    tool: str
    arguments: JsonValue
    call_id: str | None = None


@frozen
class ModelReply:
    """A complete inference result: text (optionally ending the Run) or tool calls."""

    content: JsonValue
    calls: tuple[ModelCall, ...] = ()
    end: EndCauseKind | None = None


class ModelPort(Protocol):
    """The model: one complete inference per call (stream through ``request.stream``)."""

    def infer(self, request: InferenceRequest) -> ModelReply:
        """Run one inference."""
        ...


# --- tools ---------------------------------------------------------------------------


@frozen
class ToolInvocation:
    """One executor attempt. ``operation_id`` is the idempotency key of every attempt;
    ``lease_epoch`` the fencing token when a worker's lease drives the Run (None when
    no lease does): it only rises, so a downstream may refuse a lower one than it saw.
    ``delegation`` is the child Run a sequential delegation hands its work to (None for
    a tool not declared one)."""

    run_id: str
    call_id: str
    operation_id: str
    attempt: int
    arguments: JsonValue
    resume_value: JsonValue = None
    lease_epoch: int | None = None
    delegation: Delegation | None = None


@frozen
class Returned:
    """The tool returned ``value``."""

    value: JsonValue


@frozen
class Failed:
    """The tool failed with ``error``; ``retryable`` lets its retry policy try again."""

    error: JsonValue
    retryable: bool = False


@frozen
class Delegate:
    """Hand the work to the call's child Run and wait for it: the child is
    ``ToolInvocation.delegation``, derived and committed before the tool started (only
    a tool declared ``ToolPolicy(sequential_delegation=True)`` has one)."""


@frozen
class Schedule:
    """Run again at ``due_at``."""

    due_at: str


@frozen
class Lost:
    """The executor cannot say what happened."""


ToolReply: TypeAlias = Returned | Failed | Delegate | Schedule | Lost


@frozen
class StatusReply:
    """A reconnect tool's answer to ``status(operation_id)``."""

    status: OperationStatus
    value: JsonValue = None


class Tool(Protocol):
    """A tool declares its fixed recovery and retry policy."""

    @property
    def policy(self) -> ToolPolicy: ...

    def run(self, invocation: ToolInvocation) -> ToolReply: ...

    def status(self, operation_id: str) -> StatusReply:
        """Only called for tools under the reconnect policy."""
        ...


class ToolRegistry:
    """Tools by name, and the Policies they imply."""

    def __init__(
        self,
        tools: Mapping[str, Tool],
        *,
        max_steps: int | None = None,
        on_indeterminate: IndeterminateChoice = IndeterminateChoice.PUBLISH,
    ) -> None:
        self.tools = dict(tools)
        self.policies = Policies(
            tools={name: tool.policy for name, tool in self.tools.items()},
            max_steps=max_steps,
            on_indeterminate=on_indeterminate,
        )

    def get(self, name: str) -> Tool | None:
        return self.tools.get(name)


# --- gate, hooks, sinks ------------------------------------------------------------


@frozen
class Permit:
    """Gate: run the executor."""


@frozen
class Refuse:
    """Gate: block the call at once."""

    reason: JsonValue


@frozen
class Provide:
    """Gate: a plugin supplies the result."""

    value: JsonValue


@frozen
class Hold:
    """Gate: wait for approval, input, an external answer or a timer."""

    kind: WaitKind
    request: JsonValue = None
    expires_at: str | None = None
    due_at: str | None = None


GateAnswer: TypeAlias = Permit | Refuse | Provide | Hold


class GatePort(Protocol):
    """The permission and Plugin gate, asked before each call starts."""

    def check(self, run_id: str, call: ToolCall) -> GateAnswer: ...


class AllowAll:
    """A gate that permits every call."""

    def check(self, run_id: str, call: ToolCall) -> GateAnswer:
        return Permit()


@frozen
class Staging:
    """What StepStart and BeforeInference answer for one Step.

    ``staged`` is committed as the Run's staged state with the Step's next commit
    (``Staged(None)`` clears it; None leaves it unchanged). ``context`` goes to that one
    inference request only: never committed, never exported, and after a crash it is
    absent until the hooks run again.
    """

    staged: Staged | None = None
    context: JsonValue = None


class HookPort(Protocol):
    """The hooks that answer (the Observer sees every hook; these hand something back).
    A hook's answer is never truth until it is committed."""

    def before_inference(self, run_id: str, step: int, staged: JsonValue) -> Staging:
        """StepStart and BeforeInference of step ``step``; ``staged`` is the Run's
        committed staged state."""
        ...

    def after_tool(self, run_id: str, call_id: str, attempt: int, reply: ToolReply) -> JsonValue:
        """AfterTool: the reaction committed with the call's terminal result (None: none)."""
        ...


class NoHooks:
    """Hooks that stage nothing and react to nothing."""

    def before_inference(self, run_id: str, step: int, staged: JsonValue) -> Staging:
        return Staging()

    def after_tool(self, run_id: str, call_id: str, attempt: int, reply: ToolReply) -> JsonValue:
        return None


class Observer(Protocol):
    """Hooks, live deltas, notifications and publications: observed, never read back."""

    def hook(self, run_id: str, hook: Hook, call_id: str | None) -> None: ...

    def delta(self, run_id: str, data: JsonValue) -> None: ...

    def notify(self, run_id: str, ticket: ResumeTicket, wait: Wait) -> None: ...

    def publish(self, run_id: str, batch: ActiveToolBatch) -> None: ...


class NullObserver:
    """Observes nothing."""

    def hook(self, run_id: str, hook: Hook, call_id: str | None) -> None:
        pass

    def delta(self, run_id: str, data: JsonValue) -> None:
        pass

    def notify(self, run_id: str, ticket: ResumeTicket, wait: Wait) -> None:
        pass

    def publish(self, run_id: str, batch: ActiveToolBatch) -> None:
        pass


# --- ids and time -------------------------------------------------------------------


class IdSource(Protocol):
    """Where a driver gets the ids the host does not give (seed it in tests)."""

    def new_id(self, prefix: str) -> str:
        """A unique id for a batch, call, operation or Run."""
        ...

    def ticket_id(self) -> str:
        """A never-reused ticket id with at least 128 random bits."""
        ...


class SecretIds:
    """Ids from ``secrets``: 192 random bits for tickets, 128 for everything else."""

    def new_id(self, prefix: str) -> str:
        return f"{prefix}_{secrets.token_hex(16)}"

    def ticket_id(self) -> str:
        return f"tk_{secrets.token_urlsafe(24)}"


Clock: TypeAlias = Callable[[], str]


def utc_now() -> str:
    """UTC ISO-8601 with a fixed width, so timestamps compare as strings."""
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
