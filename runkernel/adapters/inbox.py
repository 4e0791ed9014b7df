"""Commands from outside a runtime: pre-validate against committed facts, then enqueue.

Whoever applies a resume must be able to run the call next (the resume commit moves it
to Executing), so the CLI and other processes never commit a resume themselves: they
put it in the store's inbox and the runtime that drives the Run applies it.
"""

from __future__ import annotations

from runkernel.adapters.runtime_events import ALREADY_COMMITTED, refusal_outcome
from runkernel.adapters.serial import end_to_inbox, inbox_to_input, resume_to_inbox
from runkernel.adapters.store import InboxEntry, Store
from runkernel.kernel.codec import TraceFormatError
from runkernel.kernel.decide import check_resume
from runkernel.kernel.protocol import EndRequest, ResumeCommand
from runkernel.kernel.rules import Rejection, Rule
from runkernel.kernel.state import Awaiting, Ended, RunSnapshot
from runkernel.kernel.values import AWAITING_END_CAUSES


def submit_resume(store: Store, command: ResumeCommand) -> Rejection | int:
    """Enqueue a resume that matches the committed ticket; else its typed rejection."""
    snapshot = store.run(command.run_id)
    if snapshot is None:
        return Rejection(Rule.WRONG_RUN, f"no committed run {command.run_id!r}")
    refused = check_resume(snapshot, command, store.history(command.run_id))
    if refused is not None:
        return refused
    return store.put_command(command.run_id, resume_to_inbox(command))


def submit_end(store: Store, run_id: str, request: EndRequest) -> Rejection | int:
    """Enqueue a cancel, stop or failure for a Run that is not Ended."""
    snapshot = store.run(run_id)
    if snapshot is None:
        return Rejection(Rule.WRONG_RUN, f"no committed run {run_id!r}")
    if isinstance(snapshot.state, Ended):
        return Rejection(
            Rule.RUN_ENDED, f"run {run_id!r} is Ended ({snapshot.state.cause.kind.value})"
        )
    if isinstance(snapshot.state, Awaiting) and request.cause.kind not in AWAITING_END_CAUSES:
        return Rejection(
            Rule.AWAITING_END,
            f"an Awaiting run ends only by cancel, stop or failure, not {request.cause.kind.value!r}",
        )
    return store.put_command(run_id, end_to_inbox(request))


#: The outcome of a duplicate: refused, naming the command that was applied.
ALREADY_APPLIED_BY = "refused: already applied by command {entry_id}"

#: Outcomes of a command that was applied (settled after its commit, or found
#: committed after a crash came between its commit and its settlement).
APPLIED_OUTCOMES = ("applied", ALREADY_COMMITTED)


def exact_refusal(
    store: Store, state: RunSnapshot, entry: InboxEntry, command: ResumeCommand | EndRequest, rejection: Rejection
) -> str:
    """How a refused inbox command is settled, exactly: ``refused: RULE: ...``; or, when
    the committed state already holds what it asks, ``applied before`` if no other
    command was settled as its application (its commit was written before a crash), and
    otherwise ``refused: already applied by command N`` naming that command."""
    outcome = refusal_outcome(state, command, rejection)
    if outcome != ALREADY_COMMITTED:
        return outcome
    for other in store.commands(entry.run_id):
        if other.entry_id != entry.entry_id and other.outcome in APPLIED_OUTCOMES and _same(other, command):
            return ALREADY_APPLIED_BY.format(entry_id=other.entry_id)
    return ALREADY_COMMITTED


def _same(entry: InboxEntry, command: ResumeCommand | EndRequest) -> bool:
    try:
        return inbox_to_input(entry.body) == command
    except TraceFormatError:
        return False
