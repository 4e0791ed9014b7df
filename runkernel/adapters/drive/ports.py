"""The ports the pull-mode runtime drives: model, tools, gate, hooks, sinks; and (from
``sources``, re-exported) ids and clock.

A real provider, tool or approval UI implements these small protocols (structurally: no
need to subclass or import them); the simulator and the tests plug in scripted ones.

They speak the host's vocabulary, the same in both modes: a tool runs the ``RunCall`` a
push-mode host is handed, a model asks for calls with the ``CallRequest`` a push-mode
host answers with, and a gate answers ``Permit``, ``Refuse``, ``Provide`` or ``Hold`` in
both. Their answers carry no ids (``Returned``, ``Hold``, ``Scheduled``, ...), because a
gate or a tool should not have to mint tickets: the driver that asks supplies them, and
``port_inputs`` makes the kernel's input from each answer in one pure translation (the
kernel's own names, ``Allow``, ``ToolOutput``, ``RequireWait`` ..., stay behind
``runkernel.kernel``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Protocol, TypeAlias

from attrs import frozen

from runkernel.adapters.drive.actions import CallRequest, RunCall
# where ids and times come from is ``sources``; a driver's ports take them from here too
from runkernel.adapters.drive.sources import Clock as Clock, IdSource as IdSource, SecretIds as SecretIds, utc_now as utc_now
from runkernel.kernel.policies import IndeterminateChoice, Policies, ToolPolicy
from runkernel.kernel.protocol import Hook, OperationStatus
from runkernel.kernel.state import (
    ActiveToolBatch,
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
    """What the pull-mode runtime asks a model for one step (the push-mode host's
    ``Infer``, plus where to stream): the Thread's ``messages`` so far and ``partial``,
    the output a ``stream.checkpoint`` saved for this step before a crash (best effort,
    never truth). Answer with a ``ModelReply``."""

    thread_id: str
    run_id: str
    step: int
    #: the Thread's messages so far (read-only; a view, not a copy, of the driver's log)
    messages: Sequence[Message]
    #: what a checkpoint saved for this step before a crash (``Infer.partial``)
    partial: JsonValue
    stream: StreamSink
    #: BeforeInference's request-only context: for this request only, never committed
    context: JsonValue = None


@frozen
class ModelReply:
    """A model's complete reply to an ``InferenceRequest`` (what a push-mode host gives
    ``inferred``): text, optionally ending the Run with ``end``, or the tool calls it
    asks for (each a ``CallRequest``; ``end`` is ignored with calls)."""

    content: JsonValue
    calls: tuple[CallRequest, ...] = ()
    end: EndCauseKind | None = None


class ModelPort(Protocol):
    """The model: one complete inference per call (stream through ``request.stream``)."""

    def infer(self, request: InferenceRequest) -> ModelReply:
        """Run one inference."""
        ...


# --- tools ---------------------------------------------------------------------------


@frozen
class Returned:
    """A tool's reply: it returned ``value`` (a push-mode host says ``call_returned``)."""

    value: JsonValue


@frozen
class Failed:
    """A tool's reply: it failed with ``error``, and changed nothing; ``retryable`` lets
    its retry policy try again (a push-mode host says ``call_failed``)."""

    error: JsonValue
    retryable: bool = False


@frozen
class Delegated:
    """A tool's reply: the work is handed to the call's child Run, and the Run waits for
    it (a push-mode host says ``call_delegated``). The child is ``RunCall.delegation``,
    derived and committed before the tool started (only a tool declared
    ``ToolPolicy(sequential_delegation=True)`` has one)."""


@frozen
class Scheduled:
    """A tool's reply: run the call again at ``due_at``, a durable timer wait (a
    push-mode host says ``call_scheduled``)."""

    due_at: str


@frozen
class Lost:
    """A tool's reply: nobody can say what happened; the call becomes Indeterminate (a
    push-mode host says ``call_lost``)."""


ToolReply: TypeAlias = Returned | Failed | Delegated | Scheduled | Lost


@frozen
class StatusReply:
    """A reconnect tool's answer to ``status(operation_id, lease_epoch)`` (a push-mode
    host gives the same two values to ``status``, or a function returning this to
    ``ask_status``)."""

    status: OperationStatus
    value: JsonValue = None


#: A reconnect tool's ``status(operation_id, lease_epoch)``.
StatusQuery: TypeAlias = Callable[[str, "int | None"], StatusReply]


class Tool(Protocol):
    """A tool declares its fixed recovery and retry policy.

    ``run(call)`` runs one attempt (its Executing commit is durable): ``call.operation_id``
    is the idempotency key, ``call.lease_epoch`` the fencing token under a worker (also
    ``current_invocation().lease_epoch``). ``status(operation_id, lease_epoch)`` is only
    called for tools under the reconnect policy: what became of the operation, asked
    without starting anything, and the epoch goes with it (W5). A tool may also have
    ``fence(operation_id, lease_epoch)``: called before a commit makes terminal a call
    of it that this drive found Executing and did not start (recovery's outcome, or the
    Run's end), so a downstream that keeps the highest epoch per operation refuses a
    late start by a worker that stalled past its lease. A fence that raises fails the
    drive: nothing is committed and the Run is driven again later.
    """

    @property
    def policy(self) -> ToolPolicy: ...

    def run(self, call: RunCall, /) -> ToolReply:
        """Run one attempt (its Executing commit is durable); ``call.operation_id`` is
        the idempotency key, ``call.lease_epoch`` the fencing token under a worker."""
        ...

    @property
    def status(self) -> StatusQuery:
        """``status(operation_id, lease_epoch)``: only called for tools under the
        reconnect policy."""
        ...


def fence_of(tool: Tool) -> Callable[[str, int | None], object] | None:
    """The tool's optional ``fence(operation_id, lease_epoch)``, or None."""
    fence = getattr(tool, "fence", None)
    return fence if callable(fence) else None


class ToolRegistry:
    """A pull-mode runtime's tools by name (``ToolRegistry({"search": Search()},
    max_steps=20)``), and the ``Policies`` they imply: each tool's ``policy``, the step
    limit and what an Indeterminate call does to the Run."""

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
    """A gate's answer, in both modes: run the executor."""


@frozen
class Refuse:
    """A gate's answer, in both modes: complete the call at once, unrun; the model sees
    it as ``{"kind": "blocked", "value": reason}``."""

    reason: JsonValue


@frozen
class Provide:
    """A gate's answer, in both modes: a plugin supplies the result without running the
    tool; the model sees it as ``{"kind": "supplied", "value": value}``."""

    value: JsonValue


@frozen
class Hold:
    """A gate's answer, in both modes: the call waits (``kind``: approval, input, an
    external answer or a timer at ``due_at``) under a ticket the driver mints; the host
    sees ``WaitFor`` and answers with ``resume``. ``expires_at`` bounds an approval."""

    kind: WaitKind
    request: JsonValue = None
    expires_at: str | None = None
    due_at: str | None = None


GateAnswer: TypeAlias = Permit | Refuse | Provide | Hold


class GatePort(Protocol):
    """The permission and Plugin gate, asked before each call starts."""

    def check(self, run_id: str, call: ToolCall) -> GateAnswer: ...


class AllowAll:
    """A gate that permits every call (the default)."""

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
