"""The pull-mode runtime's ports as a ``Drive`` calls them (``RuntimePorts``): the
store operations and the gate the core asks for, a tool's attempt, a reconnect tool's
status and a tool's fence, each answered as the core's report.

``Runtime`` (``runtime``) builds one from its ports and hands it to each ``Drive``
(``runtime_drive``) it begins; neither module needs the other's internals.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, assert_never

import attrs

from runkernel.adapters.drive.actions import CheckStatus, Fence, RunCall
from runkernel.adapters.drive.events import RuntimeEvent, ToolRaised
from runkernel.adapters.drive.invocation import invocation_scope
from runkernel.adapters.drive.port_inputs import tool_outcome
from runkernel.adapters.drive.ports import (
    Failed, GatePort, HookPort, IdSource, Lost, ModelPort, Observer, StatusReply, Tool, ToolRegistry, ToolReply,
    fence_of,
)
from runkernel.adapters.drive.protocol import AskGate, CallEnded, Fenced, Operation, Status
from runkernel.adapters.drive.store_ops import StoreOps
from runkernel.errors import RunkernelError
from runkernel.kernel.policies import RecoveryMode
from runkernel.kernel.protocol import OperationStatus, ToolFailure
from runkernel.kernel.state import TypedError

#: How often one runtime asks a reconnect tool about an operation that is still running
#: before it stops driving and leaves the call to a later drive.
MAX_STATUS_POLLS = 5


@attrs.frozen
class StartedCall:
    """A tool's attempt about to run: its ``RunCall`` (with the lease epoch) and its tool
    (None: no tool of that name, and the call fails unrun)."""

    action: RunCall
    tool: Tool | None


def run_started(started: StartedCall) -> ToolReply | Exception:
    """Run the attempt's tool body, on any thread: what it returned, or the ``Exception``
    it raised (the runtime's own refusals, ``RunkernelError``, and anything that is not
    an ``Exception`` propagate)."""
    if started.tool is None:
        return Lost()  # never reported: ``call_ended`` fails the unknown tool unrun
    with invocation_scope(started.action):  # the tool runs the RunCall a push host is handed
        try:
            return started.tool.run(started.action)
        except RunkernelError:
            raise  # the runtime's own refusal, not the tool's outcome
        except Exception as error:
            return error


class RuntimePorts:
    """What a pull-mode ``Drive`` calls to answer the core: one per ``Runtime``, shared
    by its drives (the status polls it counts are the runtime's)."""

    def __init__(
        self,
        ops: StoreOps,
        model: ModelPort,
        tools: ToolRegistry,
        gate: GatePort,
        hooks: HookPort,
        observer: Observer,
        ids: IdSource,
        on_event: Callable[[RuntimeEvent], None],
        *,
        calls_together: bool = True,
    ) -> None:
        self.ops, self.model, self.tools, self.gate = ops, model, tools, gate
        #: whether a concurrent group's tools run at once (``runtime_group``)
        self.calls_together = calls_together
        self.hooks, self.observer, self.ids, self.on_event = hooks, observer, ids, on_event
        self._polls: dict[str, int] = {}

    def perform(self, op: Operation) -> Any:
        """Carry out one of the core's operations other than handing out an action."""
        if isinstance(op, AskGate):
            return self.gate.check(op.run_id, op.call)
        return self.ops.perform(op)

    def run_call(self, action: RunCall) -> CallEnded:
        """Run the tool's attempt (its Executing commit is durable) under the lease
        re-checked with its margin (W1); a tool that raised is reported (``ToolRaised``)."""
        started = self.begin_call(action)
        return self.call_ended(started, run_started(started))

    def begin_call(self, action: RunCall) -> StartedCall:
        """What comes before a tool's attempt, on the drive's own thread: its tool, and
        the lease re-checked with its margin (W1), whose epoch the call carries."""
        tool = self.tools.get(action.tool)
        return StartedCall(action if tool is None else self.ops.before_run_call(action), tool)

    def call_ended(self, started: StartedCall, ran: ToolReply | Exception) -> CallEnded:
        """The report of an attempt that ``run_started`` ran, on the drive's own thread:
        a raised exception is reported (``ToolRaised``), then the AfterTool hook."""
        action, tool = started.action, started.tool
        if tool is None:
            failure = ToolFailure({"type": "UnknownTool", "message": f"no tool named {action.tool!r}"})
            return CallEnded(action.call_id, failure, None, None)
        reply = self._raised(action, tool.policy.recovery.mode, ran) if isinstance(ran, Exception) else ran
        reaction = self.hooks.after_tool(action.run_id, action.call_id, action.attempt, reply)
        return CallEnded(action.call_id, tool_outcome(reply, self.ids), None, reaction)

    def _raised(self, action: RunCall, mode: RecoveryMode, error: Exception) -> ToolReply:
        """A tool that raised: its exception is reported, and the call is a retryable
        error for a replay tool, an unknown outcome otherwise (see ``ToolRaised``)."""
        typed = TypedError(type(error).__name__, str(error))
        self.on_event(ToolRaised(action.run_id, action.call_id, action.attempt, typed))
        match mode:
            case RecoveryMode.REPLAY:
                return Failed({"type": typed.type, "message": typed.message}, retryable=True)
            case RecoveryMode.RECONNECT | RecoveryMode.INDETERMINATE:
                return Lost()
            case _:
                assert_never(mode)

    def check_status(self, action: CheckStatus) -> Status | None:
        """Ask a reconnect tool about its operation, with the lease epoch (W5); None
        (stop driving) once it was asked ``MAX_STATUS_POLLS`` times by this runtime: a
        later drive asks again."""
        polled = self._polls.get(action.operation_id, 0)
        if polled >= MAX_STATUS_POLLS:
            return None
        self._polls[action.operation_id] = polled + 1
        tool = self.tools.get(action.tool)
        if tool is None:
            return Status(action.call_id, OperationStatus.UNKNOWN, None)
        action = attrs.evolve(action, lease_epoch=self.ops.lease_epoch(action.run_id))
        reply: StatusReply = tool.status(action.operation_id, action.lease_epoch)
        return Status(action.call_id, reply.status, reply.value)

    def fence(self, action: Fence) -> Fenced:
        """W5: the tool's ``fence(operation_id, lease_epoch)`` before the commit that
        makes its call terminal; whatever it raises fails the drive, nothing committed."""
        fence = fence_of(self.tools.tools[action.tool])
        assert fence is not None, "a Fence is handed out only for a tool with a fence"
        action = attrs.evolve(action, lease_epoch=self.ops.lease_epoch(action.run_id))
        fence(action.operation_id, action.lease_epoch)
        return Fenced(action.call_id)


__all__ = ["MAX_STATUS_POLLS", "RuntimePorts", "StartedCall", "run_started"]
