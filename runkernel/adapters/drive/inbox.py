"""Commands from outside a runtime: pre-validate against committed facts, then enqueue.

Whoever applies a resume must be able to run the call next (the resume commit moves it
to Executing), so the CLI and other processes never commit a resume themselves: they
put it in the store's inbox and the runtime that drives the Run applies it.
"""

from __future__ import annotations

from runkernel.adapters.drive.pending import ALREADY_APPLIED_BY as ALREADY_APPLIED_BY
from runkernel.adapters.drive.pending import APPLIED_OUTCOMES as APPLIED_OUTCOMES
from runkernel.adapters.stores.serial import end_to_inbox, resume_to_inbox
from runkernel.adapters.stores.contract import Store
from runkernel.kernel.decide import check_resume
from runkernel.kernel.protocol import EndRequest, ResumeCommand
from runkernel.kernel.rules import Rejection, Rule
from runkernel.kernel.state import Awaiting, Ended
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

