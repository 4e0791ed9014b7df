"""Pure translations from a port's vocabulary to kernel inputs, shared by the drivers.

The ports (``ports.py``) speak without ids (``Permit``, ``Hold``, ``Delegated``,
...), because a gate or a tool should not have to mint tickets; the driver that asks
them supplies the ids, and these functions make the kernel input.
"""

from __future__ import annotations

from typing import assert_never

from runkernel.adapters.drive.ports import (
    Delegated,
    Failed,
    GateAnswer,
    Hold,
    IdSource,
    Lost,
    Permit,
    Provide,
    Refuse,
    Returned,
    Scheduled,
    ToolReply,
)
from runkernel.kernel.protocol import (
    Allow,
    Block,
    GateVerdict,
    RequireWait,
    Supply,
    ToolDelegated,
    ToolFailure,
    ToolOutcome,
    ToolOutcomeLost,
    ToolOutput,
    ToolScheduled,
)
from runkernel.kernel.values import json_problem


def gate_verdict(call_id: str, answer: GateAnswer, ids: IdSource) -> GateVerdict:
    """The kernel's ``GateVerdict`` for a gate's answer; a wait's ticket comes from ``ids``
    (only a wait mints one)."""
    match answer:
        case Permit():
            return GateVerdict(call_id, Allow())
        case Refuse():
            return GateVerdict(call_id, Block(answer.reason))
        case Provide():
            return GateVerdict(call_id, Supply(answer.value))
        case Hold():
            wait = RequireWait(answer.kind, ids.ticket_id(), answer.request, answer.expires_at, answer.due_at)
            return GateVerdict(call_id, wait)
        case _:
            assert_never(answer)


def tool_outcome(reply: ToolReply, ids: IdSource) -> ToolOutcome:
    """The kernel's outcome for a tool's reply; a delegation's or a timer's ticket comes
    from ``ids``. A value or error that is not JSON fails the call (``NotJson``)."""
    outcome: ToolOutcome
    match reply:
        case Returned():
            outcome = ToolOutput(reply.value)
        case Failed():
            outcome = ToolFailure(reply.error, reply.retryable)
        case Delegated():
            outcome = ToolDelegated(ids.ticket_id())
        case Scheduled():
            outcome = ToolScheduled(ids.ticket_id(), reply.due_at)
        case Lost():
            outcome = ToolOutcomeLost()
        case _:
            assert_never(reply)
    carried = outcome.value if isinstance(outcome, ToolOutput) else getattr(outcome, "error", None)
    problem = json_problem(carried)
    if problem is not None:
        return ToolFailure({"type": "NotJson", "message": f"the tool returned a value that is not JSON: {problem}"})
    return outcome


__all__ = ["gate_verdict", "tool_outcome"]
