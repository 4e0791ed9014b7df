"""Commands from outside a runtime: pre-validate against committed facts, then enqueue.

Whoever applies a resume must be able to run the call next (the resume commit moves it
to Executing), so the CLI and other processes never commit a resume themselves: they
put it in the store's inbox and the runtime that drives the Run applies it.

Queued commands apply in the order they were queued (oldest first, by command number):
at its next quiet point the runtime tries each pending one, settles every one the
kernel refuses with its refusal, and applies the first it accepts; the rest wait for
the next quiet point. ``queue_resume`` and ``queue_end`` (what ``runkernel resume``,
``cancel`` and the console use) queue a command only once: one identical to a command
still pending is answered ``AlreadyQueued`` and nothing new is queued. A wait takes one
answer: a different answer for a ticket that has one pending is ``AlreadyAnswered``,
decided by the store's unique key on the pending answer, so of racing answers exactly
one is queued.
"""

from __future__ import annotations

from attrs import frozen

from runkernel.adapters.drive.pending import ALREADY_APPLIED_BY as ALREADY_APPLIED_BY
from runkernel.adapters.drive.pending import APPLIED_OUTCOMES as APPLIED_OUTCOMES
from runkernel.adapters.stores.serial import answer_name, end_to_inbox, resume_to_inbox
from runkernel.adapters.stores.contract import AnswerPending, Store
from runkernel.kernel.decide import check_resume
from runkernel.kernel.protocol import EndRequest, ResumeCommand
from runkernel.kernel.rules import Rejection, Rule
from runkernel.kernel.state import Awaiting, Ended
from runkernel.kernel.values import AWAITING_END_CAUSES


def submit_resume(store: Store, command: ResumeCommand) -> Rejection | int:
    """``queue_resume``, answered as a number: the command queued now or the identical
    one already pending; a different answer already pending for the ticket is a
    ``stale-command`` rejection naming it."""
    result = queue_resume(store, command)
    if isinstance(result, AlreadyQueued):
        return result.entry_id
    if isinstance(result, AlreadyAnswered):
        return Rejection(Rule.STALE_COMMAND, str(result))
    return result


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



@frozen
class AlreadyQueued:
    """A command identical to one still pending in the inbox: nothing new was queued;
    ``entry_id`` is the pending command's number."""

    entry_id: int


@frozen
class AlreadyAnswered:
    """The ticket already has a different answer pending (command ``entry_id``, an
    ``answer`` such as ``approve``): a wait takes one answer, so nothing was queued."""

    entry_id: int
    answer: str

    def __str__(self) -> str:
        return f"already answered by command {self.entry_id} ({self.answer})"


def queue_resume(store: Store, command: ResumeCommand) -> Rejection | AlreadyQueued | AlreadyAnswered | int:
    """Pre-validate a resume against the committed ticket and queue it: the one function
    through which the CLI and the console queue an answer. A wait takes one answer,
    decided by the store atomically (``AnswerPending``): the same command already
    pending is ``AlreadyQueued``, a different one ``AlreadyAnswered``; nothing new is
    queued for either."""
    snapshot = store.run(command.run_id)
    if snapshot is None:
        return Rejection(Rule.WRONG_RUN, f"no committed run {command.run_id!r}")
    refused = check_resume(snapshot, command, store.history(command.run_id))
    if refused is not None:
        return refused
    body = resume_to_inbox(command)
    try:
        return store.put_command(command.run_id, body)
    except AnswerPending as pending:
        entry = store.inbox_entry(pending.entry_id)
        if entry is not None and entry.body == body:
            return AlreadyQueued(pending.entry_id)
        return AlreadyAnswered(pending.entry_id, answer_name(entry.body if entry is not None else None))


def queue_end(store: Store, run_id: str, request: EndRequest) -> Rejection | AlreadyQueued | int:
    """``submit_end``, but a request identical to one still pending is not queued again."""
    body = end_to_inbox(request)
    for entry in store.pending_commands(run_id):
        if entry.body == body:
            return AlreadyQueued(entry.entry_id)
    return submit_end(store, run_id, request)


def ticket_of_call(store: Store, run_id: str, call_id: str) -> Rejection | str:
    """The committed ticket id of the wait ``call_id`` owns (``runkernel resume --call``):
    the Run must be Awaiting, under a ticket of that call; else a typed rejection."""
    snapshot = store.run(run_id)
    if snapshot is None:
        return Rejection(Rule.WRONG_RUN, f"no committed run {run_id!r}")
    state = snapshot.state
    if not isinstance(state, Awaiting):
        now = "Ended" if isinstance(state, Ended) else "Running"
        return Rejection(Rule.RUN_NOT_AWAITING, f"run {run_id!r} is {now}: no call of it waits for an answer")
    if state.ticket.call_id != call_id:
        return Rejection(
            Rule.TICKET_MISMATCH,
            f"call {call_id!r} does not wait: run {run_id!r} awaits call {state.ticket.call_id!r} "
            f"({state.ticket.wait.value}, ticket {state.ticket.ticket_id})",
        )
    return state.ticket.ticket_id
