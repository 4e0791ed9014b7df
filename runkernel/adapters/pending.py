"""What a driver does at a quiet point with the store's inbox and a wait's deadline, as
pure functions both drivers can share (the caller reads the inbox and settles entries).

At a quiet point the pending commands are tried oldest first: each one the kernel
refuses is settled with its refusal, and the first one it accepts is applied; its entry
is settled "applied" only once the commit is acknowledged. An approval whose deadline
has passed is applied as a deny.
"""

from __future__ import annotations

from attrs import frozen

from runkernel.adapters.runtime_events import refusal_outcome
from runkernel.adapters.serial import inbox_to_input
from runkernel.adapters.store import InboxEntry
from runkernel.kernel.codec import TraceFormatError
from runkernel.kernel.decide import decide
from runkernel.kernel.policies import Policies
from runkernel.kernel.protocol import DeadlinePassed, Decision
from runkernel.kernel.history import NO_HISTORY, History
from runkernel.kernel.rules import Rejection
from runkernel.kernel.state import Awaiting, CallAwaiting, RunSnapshot


@frozen
class InboxVerdict:
    """How the pending commands are settled: ``refused`` (entry, outcome) pairs to record
    now, and the ``accepted`` command's decision and entry, if one applies."""

    refused: tuple[tuple[InboxEntry, str], ...]
    accepted: tuple[Decision, InboxEntry] | None


def next_command(
    state: RunSnapshot, pending: list[InboxEntry], policies: Policies, history: History = NO_HISTORY
) -> InboxVerdict:
    """Try the pending commands oldest first, up to the first the kernel accepts."""
    refused: list[tuple[InboxEntry, str]] = []
    for entry in pending:
        try:
            command = inbox_to_input(entry.body)
        except TraceFormatError as error:
            refused.append((entry, f"refused: malformed command: {error}"))
            continue
        verdict = decide(state, command, policies, history)
        if isinstance(verdict, Rejection):
            refused.append((entry, refusal_outcome(state, command, verdict)))
            continue
        return InboxVerdict(tuple(refused), (verdict, entry))
    return InboxVerdict(tuple(refused), None)


def has_deadline(state: RunSnapshot) -> bool:
    """Whether the Run is Awaiting a call whose wait carries a deadline."""
    if not isinstance(state.state, Awaiting) or state.open_batch is None:
        return False
    call = state.open_batch.call(state.state.ticket.call_id)
    return call is not None and isinstance(call.status, CallAwaiting) and call.status.wait.expires_at is not None


def expiry(state: RunSnapshot, now: str, policies: Policies) -> Decision | None:
    """The deny an expired approval becomes at ``now``, or None (none expired)."""
    if not has_deadline(state):
        return None
    assert isinstance(state.state, Awaiting)
    verdict = decide(state, DeadlinePassed(state.state.ticket.ticket_id, now), policies)
    return None if isinstance(verdict, Rejection) else verdict


__all__ = ["InboxVerdict", "expiry", "has_deadline", "next_command"]
