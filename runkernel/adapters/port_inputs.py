"""Pure translations from a port's vocabulary to kernel inputs, shared by the drivers.

The ports (``adapters/ports.py``) speak without ids (``Permit``, ``Hold``, ...), because a
gate or a tool should not have to mint tickets; the driver that asks them supplies the
ids, and these functions make the kernel input.
"""

from __future__ import annotations

from typing import assert_never

from runkernel.adapters.ports import GateAnswer, Hold, Permit, Provide, Refuse
from runkernel.kernel.protocol import Allow, Block, GateVerdict, RequireWait, Supply


def gate_verdict(call_id: str, answer: GateAnswer, ticket_id: str) -> GateVerdict:
    """The kernel's ``GateVerdict`` for a gate's answer; ``ticket_id`` is used by a wait."""
    match answer:
        case Permit():
            return GateVerdict(call_id, Allow())
        case Refuse():
            return GateVerdict(call_id, Block(answer.reason))
        case Provide():
            return GateVerdict(call_id, Supply(answer.value))
        case Hold():
            wait = RequireWait(answer.kind, ticket_id, answer.request, answer.expires_at, answer.due_at)
            return GateVerdict(call_id, wait)
        case _:
            assert_never(answer)


__all__ = ["gate_verdict"]
