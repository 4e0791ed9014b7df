"""The actions the core hands its host, built from the committed state and what the
core read: what the host sees of each question (``actions``), with nothing decided here.
"""

from __future__ import annotations

from runkernel.adapters.drive.actions import CheckStatus, Done, HistoryView, Infer, RunCall, WaitFor
from runkernel.adapters.stores.contract import Checkpoint
from runkernel.kernel.protocol import DeliverTerminus, Execute, QueryStatus
from runkernel.kernel.state import Awaiting, CallAwaiting, Ended, Message, RunSnapshot
from runkernel.kernel.values import JsonValue


def infer(state: RunSnapshot, step: int, history: list[Message], saved: Checkpoint | None, attempt: int) -> Infer:
    """Ask the model for Step ``step``, with the checkpoint saved for that Step if any;
    ``history`` is the core's log, viewed without a copy."""
    partial = saved.data if saved is not None and saved.step == step else None
    return Infer(state.run_id, step, HistoryView(history), partial, state.staged, attempt)


def run_call(state: RunSnapshot, effect: Execute) -> RunCall:
    """Run attempt ``effect.attempt`` of a call; a sequential delegation's child rides along."""
    batch = state.open_batch
    call = batch.call(effect.call_id) if batch is not None else None
    child = call.delegation if call is not None else None
    return RunCall(
        state.run_id,
        effect.call_id,
        effect.tool,
        effect.arguments,
        effect.operation_id,
        effect.attempt,
        effect.resume_value,
        delegation=None if child is None or child.concurrent else child,
    )


def check_status(state: RunSnapshot, effect: QueryStatus) -> CheckStatus:
    return CheckStatus(state.run_id, effect.call_id, effect.tool, effect.operation_id, effect.attempt)


def wait_for(state: RunSnapshot) -> WaitFor:
    """The wait an Awaiting Run stands in, with the call that waits."""
    assert isinstance(state.state, Awaiting) and state.open_batch is not None
    call = state.open_batch.call(state.state.ticket.call_id)
    assert call is not None and isinstance(call.status, CallAwaiting)
    return WaitFor(state.run_id, state.state.ticket, call.status.wait, call)


def done(state: RunSnapshot, final: JsonValue, terminus: DeliverTerminus | None) -> Done:
    """An Ended Run's terminus; redelivered unless this drive delivered it first."""
    assert isinstance(state.state, Ended)
    redelivery = terminus.redelivery if terminus is not None else True
    return Done(state.run_id, state.thread_id, state.state.cause, final, redelivery)


__all__ = ["check_status", "done", "infer", "run_call", "wait_for"]
