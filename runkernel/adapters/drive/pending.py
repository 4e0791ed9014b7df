"""What the driver core does at a quiet point with the store's inbox and a wait's
deadline, as pure functions (the core reads the inbox and settles entries).

At a quiet point the pending commands are tried oldest first: each one the kernel
refuses is settled with its refusal, and the first one it accepts is applied; its entry
is settled "applied" only once the commit is acknowledged. An approval whose deadline
has passed is applied as a deny.
"""

from __future__ import annotations

import attrs
from attrs import frozen

from runkernel.adapters.drive.events import ALREADY_COMMITTED, refusal_outcome
from runkernel.adapters.stores.serial import inbox_to_input
from runkernel.adapters.stores.contract import InboxEntry
from runkernel.kernel.codec import TraceFormatError
from runkernel.kernel.decide import decide
from runkernel.kernel.policies import Policies
from runkernel.kernel.protocol import ChildTerminus, DeadlinePassed, Decision, EndRequest, ResumeCommand, TimerFired
from runkernel.kernel.resume import has_passed
from runkernel.kernel.values import WaitKind
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
    state: RunSnapshot,
    pending: list[InboxEntry],
    policies: Policies,
    history: History = NO_HISTORY,
    termini: tuple[ChildTerminus, ...] = (),
    *,
    self_check: bool = False,
) -> InboxVerdict:
    """Try the pending commands oldest first, up to the first the kernel accepts. An end
    request carries ``termini``: those the Run's running children already committed."""
    refused: list[tuple[InboxEntry, str]] = []
    for entry in pending:
        try:
            command = inbox_to_input(entry.body)
        except TraceFormatError as error:
            refused.append((entry, f"refused: malformed command: {error}"))
            continue
        if isinstance(command, EndRequest) and termini:
            command = attrs.evolve(command, child_termini=termini)
        verdict = decide(state, command, policies, history, self_check=self_check)
        if isinstance(verdict, Rejection):
            refused.append((entry, refusal_outcome(state, command, verdict)))
            continue
        return InboxVerdict(tuple(refused), (verdict, entry))
    return InboxVerdict(tuple(refused), None)


#: The outcome of a duplicate: refused, naming the command that was applied.
ALREADY_APPLIED_BY = "refused: already applied by command {entry_id}"

#: Outcomes of a command that was applied (settled after its commit, or found
#: committed after a crash came between its commit and its settlement).
APPLIED_OUTCOMES = ("applied", ALREADY_COMMITTED)


def _applied_before(entry: InboxEntry, command: ResumeCommand | EndRequest, commands: list[InboxEntry]) -> str:
    """``applied before`` if no other of the Run's ``commands`` was settled as the
    application of ``command`` (its commit was written before a crash), and otherwise
    ``refused: already applied by command N`` naming that command."""
    for other in commands:
        if other.entry_id != entry.entry_id and other.outcome in APPLIED_OUTCOMES and _same(other, command):
            return ALREADY_APPLIED_BY.format(entry_id=other.entry_id)
    return ALREADY_COMMITTED


def needs_settled_commands(refused: tuple[tuple[InboxEntry, str], ...]) -> bool:
    """Whether an outcome of ``next_command`` must be made exact with the Run's
    settled commands (``exact_outcomes``): only a command found already applied."""
    return any(outcome == ALREADY_COMMITTED for _, outcome in refused)


def exact_outcomes(
    refused: tuple[tuple[InboxEntry, str], ...], commands: list[InboxEntry]
) -> tuple[tuple[InboxEntry, str], ...]:
    """``next_command``'s refusals with each "applied before" made exact, given the
    Run's ``commands`` (see ``_applied_before``)."""
    exact: list[tuple[InboxEntry, str]] = []
    for entry, outcome in refused:
        if outcome == ALREADY_COMMITTED:
            command = inbox_to_input(entry.body)  # it parsed once already
            assert isinstance(command, (ResumeCommand, EndRequest))
            outcome = _applied_before(entry, command, commands)
        exact.append((entry, outcome))
    return tuple(exact)


def _same(entry: InboxEntry, command: ResumeCommand | EndRequest) -> bool:
    try:
        return inbox_to_input(entry.body) == command
    except TraceFormatError:
        return False


def has_deadline(state: RunSnapshot) -> bool:
    """Whether the Run is Awaiting a call whose wait carries a deadline."""
    if not isinstance(state.state, Awaiting) or state.open_batch is None:
        return False
    call = state.open_batch.call(state.state.ticket.call_id)
    return call is not None and isinstance(call.status, CallAwaiting) and call.status.wait.expires_at is not None


def due_timer(
    state: RunSnapshot, now: str, policies: Policies, history: History = NO_HISTORY, *, self_check: bool = False
) -> Decision | None:
    """The resume a due timer becomes at ``now`` (a scheduled wait whose ``due_at``
    passed resumes its call, as its ticket's timer command would), or None."""
    if not isinstance(state.state, Awaiting) or state.open_batch is None:
        return None
    call = state.open_batch.call(state.state.ticket.call_id)
    if call is None or not isinstance(call.status, CallAwaiting):
        return None
    wait = call.status.wait
    if wait.kind is not WaitKind.SCHEDULED or not has_passed(wait.due_at, now):
        return None
    fired = ResumeCommand(state.run_id, state.state.ticket.ticket_id, WaitKind.SCHEDULED, TimerFired())
    verdict = decide(state, fired, policies, history, self_check=self_check)
    return None if isinstance(verdict, Rejection) else verdict


def expiry(
    state: RunSnapshot, now: str, policies: Policies, history: History = NO_HISTORY, *, self_check: bool = False
) -> Decision | None:
    """The deny an expired approval becomes at ``now``, or None (none expired)."""
    if not has_deadline(state):
        return None
    assert isinstance(state.state, Awaiting)
    expired = DeadlinePassed(state.state.ticket.ticket_id, now)
    verdict = decide(state, expired, policies, history, self_check=self_check)
    return None if isinstance(verdict, Rejection) else verdict


__all__ = [
    "ALREADY_APPLIED_BY",
    "APPLIED_OUTCOMES",
    "InboxVerdict",
    "due_timer",
    "exact_outcomes",
    "expiry",
    "has_deadline",
    "needs_settled_commands",
    "next_command",
]
