"""Commands from outside a runtime: pre-validate against committed facts, then enqueue.

Whoever applies a resume must be able to run the call next (the resume commit moves it
to Executing), so the CLI and other processes never commit a resume themselves: they
put it in the store's inbox and the runtime that drives the Run applies it.

Queued commands apply in the order they were queued (oldest first, by command number):
at its next quiet point the runtime tries each pending one, settles every one the
kernel refuses with its refusal, and applies the first it accepts; the rest wait for
the next quiet point. ``queue_resume`` and ``queue_end`` (what ``runkernel resume`` and
``cancel`` use) queue a command only once: one identical to a command still pending is
answered ``AlreadyQueued`` and nothing new is queued.
"""

from __future__ import annotations

from attrs import frozen

from runkernel.adapters.drive.pending import ALREADY_APPLIED_BY as ALREADY_APPLIED_BY
from runkernel.adapters.drive.pending import APPLIED_OUTCOMES as APPLIED_OUTCOMES
from runkernel.adapters.stores.serial import end_to_inbox, resume_to_inbox
from runkernel.adapters.stores.contract import Store
from runkernel.kernel.decide import check_resume
from runkernel.kernel.protocol import EndRequest, ResumeCommand
from runkernel.kernel.rules import Rejection, Rule
from runkernel.kernel.state import Awaiting, Ended
from runkernel.kernel.values import JsonValue
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



@frozen
class AlreadyQueued:
    """A command identical to one still pending in the inbox: nothing new was queued;
    ``entry_id`` is the pending command's number."""

    entry_id: int


def queue_resume(store: Store, command: ResumeCommand) -> Rejection | AlreadyQueued | int:
    """``submit_resume``, but a command identical to one still pending is not queued
    again: ``AlreadyQueued`` names the pending one."""
    snapshot = store.run(command.run_id)
    if snapshot is None:
        return Rejection(Rule.WRONG_RUN, f"no committed run {command.run_id!r}")
    refused = check_resume(snapshot, command, store.history(command.run_id))
    if refused is not None:
        return refused
    return _put_once(store, command.run_id, resume_to_inbox(command))


def queue_end(store: Store, run_id: str, request: EndRequest) -> Rejection | AlreadyQueued | int:
    """``submit_end``, but a request identical to one still pending is not queued again."""
    body = end_to_inbox(request)
    for entry in store.pending_commands(run_id):
        if entry.body == body:
            return AlreadyQueued(entry.entry_id)
    return submit_end(store, run_id, request)


def _put_once(store: Store, run_id: str, body: JsonValue) -> AlreadyQueued | int:
    for entry in store.pending_commands(run_id):
        if entry.body == body:
            return AlreadyQueued(entry.entry_id)
    return store.put_command(run_id, body)


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
