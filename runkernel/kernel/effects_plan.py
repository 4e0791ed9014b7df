"""Small pure helpers shared by ``decide`` and ``recover``: closing and publishing a batch."""

from __future__ import annotations

import attrs

from runkernel.kernel.protocol import Effect, Hook, RequestInference, RunHook
from runkernel.kernel.state import (
    ActiveToolBatch,
    CallAwaiting,
    CallCompleted,
    CallExecuting,
    CallIndeterminate,
    CallRequested,
    CallStatus,
    Message,
    RunSnapshot,
)
from runkernel.kernel.values import IndeterminateReason, JsonValue, Role


def closed_status(status: CallStatus) -> CallStatus:
    """The status a call gets when its Run ends: terminal ones are kept."""
    match status:
        case CallRequested():
            return CallIndeterminate(0, IndeterminateReason.RUN_ENDED)
        case CallExecuting():
            return CallIndeterminate(status.attempt, IndeterminateReason.OUTCOME_UNKNOWN)
        case CallAwaiting():
            reason = (
                IndeterminateReason.RUN_ENDED
                if status.attempt == 0
                else IndeterminateReason.OUTCOME_UNKNOWN
            )
            return CallIndeterminate(status.attempt, reason)
        case _:
            return status


def close_batch(batch: ActiveToolBatch) -> ActiveToolBatch:
    """Every call terminal and the batch finalized: what an ending commit carries."""
    calls = tuple(attrs.evolve(c, status=closed_status(c.status)) for c in batch.calls)
    return ActiveToolBatch(batch.batch_id, batch.step, True, calls)


def tool_result_content(status: CallStatus, operation_id: str) -> JsonValue:
    """The tool-result message body the model sees for a terminal call: one shape per
    outcome kind, told apart by ``kind``.

    - a completed call: ``{"kind": K, "value": V}``, K one of ``output``, ``error``,
      ``denied`` (V the deny's reason or null), ``blocked``, ``supplied``, ``external``;
    - an Indeterminate call: ``{"kind": "indeterminate", "reason": R, "operation_id": O}``,
      R one of ``run_ended``, ``outcome_unknown``, ``attempts_exhausted``, and O the id
      to reconcile the call by downstream.

    Traces written before 0.2 carry ``{"indeterminate": R, "operation_id": O}`` for an
    Indeterminate call; the judge never reads a tool message's content, so both stay legal.
    """
    if isinstance(status, CallCompleted):
        return {"kind": status.result.kind.value, "value": status.result.value}
    if isinstance(status, CallIndeterminate):
        return {"kind": "indeterminate", "reason": status.reason.value, "operation_id": operation_id}
    raise ValueError("only terminal calls publish a result")


def publish_messages(batch: ActiveToolBatch) -> tuple[Message, ...]:
    """One tool-result message per call, in call order."""
    return tuple(
        Message(Role.TOOL, tool_result_content(c.status, c.operation_id), call_id=c.call_id)
        for c in batch.calls
    )


def next_step_effects(state: RunSnapshot) -> tuple[Effect, ...]:
    """Start the next Step: hooks, then the inference request."""
    return (
        RunHook(Hook.STEP_START),
        RunHook(Hook.BEFORE_INFERENCE),
        RequestInference(state.run_id, state.step + 1),
    )
