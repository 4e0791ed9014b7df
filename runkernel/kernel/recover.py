"""``recover(committed state, policies)``: the recovery decision table.

A pure function of committed state (invariant I11). It settles an open batch before
any inference, keeps terminal calls, never turns Executing back into Requested and
never shows a half-finished batch to inference.
"""

from __future__ import annotations

import enum
from typing import assert_never

import attrs
from attrs import frozen

from runkernel.kernel.effects_plan import next_step_effects
from runkernel.kernel.history import NO_HISTORY, History
from runkernel.kernel.planning import check_decision, end_run, execute_effect, redeliver, settle
from runkernel.kernel.policies import IndeterminateChoice, Policies, RecoveryMode
from runkernel.kernel.delegation import executing_delegations, next_to_gate
from runkernel.kernel.protocol import Decision, Effect, NotifyWait, QueryStatus, RunGate, StartChild
from runkernel.kernel.state import (
    ActiveToolBatch,
    Awaiting,
    CallAwaiting,
    CallExecuting,
    CallIndeterminate,
    CallRequested,
    EndCause,
    Ended,
    ParentCall,
    Running,
    RunSnapshot,
    ToolCall,
    is_terminal,
)
from runkernel.kernel.values import EndCauseKind, IndeterminateReason


class RecoveryRow(enum.Enum):
    """The six rows of the recovery decision table, in the design's order."""

    RUNNING_NO_OPEN_BATCH = "running_no_open_batch"
    CALL_REQUESTED = "call_requested"
    CALL_EXECUTING = "call_executing"
    CALL_AWAITING = "call_awaiting"
    PARTLY_TERMINAL = "some_calls_terminal_batch_open"
    ENDED = "ended"


@frozen
class RecoveryRule:
    """One row of the table as docs/spec.md words it."""

    row: RecoveryRow
    frontier: str
    runtime_action: str
    external_action: str


#: The six-row recovery table as data, one ``RecoveryRule`` per row (docs and
#: tests are generated from it).
RECOVERY_TABLE: tuple[RecoveryRule, ...] = (
    RecoveryRule(
        RecoveryRow.RUNNING_NO_OPEN_BATCH,
        "`Running`, no open ToolBatch",
        "continue with the next Step",
        "none",
    ),
    RecoveryRule(
        RecoveryRow.CALL_REQUESTED,
        "a call in `Requested`",
        "run the gate, commit `Executing`, then enter the executor",
        "none",
    ),
    RecoveryRule(
        RecoveryRow.CALL_EXECUTING,
        "a call in `Executing`",
        "apply the fixed `ToolRecoveryPolicy`: replay, reconnect or indeterminate",
        "only where reconciliation is needed",
    ),
    RecoveryRule(
        RecoveryRow.CALL_AWAITING,
        "a call in `Awaiting`",
        "accept only a command that matches the committed ticket and wait kind",
        "supply the requested typed approval or input",
    ),
    RecoveryRule(
        RecoveryRow.PARTLY_TERMINAL,
        "some calls terminal, batch still open",
        "resume the remaining calls, keep the terminal ones",
        "none",
    ),
    RecoveryRule(
        RecoveryRow.ENDED,
        "`Ended`",
        "return or redeliver the terminus; never reopen the Run",
        "none",
    ),
)


#: What a group adds to the table (the seed's rows stay word for word): how each row
#: reads when the open batch holds a group (``runkernel spec``).
GROUP_RECOVERY: tuple[str, ...] = (
    "`call_executing` with a group of concurrent ordinary calls: every member found Executing is settled by "
    "its own committed policy, in one recovery commit (replay: Executing{n+1}, or "
    "Indeterminate(attempts_exhausted) past its maximum; indeterminate: Indeterminate(outcome_unknown)); "
    "the replayed members then run together again, and a reconnect member's status is asked without "
    "starting anything. When the host ends Runs on an Indeterminate call, that commit ends the Run instead "
    "and closes every open call.",
    "`call_executing` with a group of terminal-only delegations: each member reconnects against the store "
    "(its child's terminus completes it, a child never activated is activated with the same attempt).",
    "`call_requested` or `some_calls_terminal_batch_open` at a group that has not started: the gate round "
    "starts again from its first Requested member (allows are never committed); the members the gate allows "
    "start together, in one commit, and only then are their executors started.",
    "`call_awaiting` on a group member: the member waits alone, like an ordinary call; once it is terminal "
    "the rest of its group takes a new gate round.",
    "A Run's end closes every open call of the group at once (Executing -> Indeterminate(outcome_unknown)); "
    "results are published in call order in every case.",
)


@frozen
class RecoveryDecision:
    """Which row applied and what to do (a Decision, possibly with a commit)."""

    row: RecoveryRow
    decision: Decision


def classify(state: RunSnapshot) -> RecoveryRow:
    """The row of the recovery table that matches the committed frontier."""
    if isinstance(state.state, Ended):
        return RecoveryRow.ENDED
    batch = state.open_batch
    if batch is None:
        return RecoveryRow.RUNNING_NO_OPEN_BATCH
    statuses = [call.status for call in batch.calls]
    if any(isinstance(s, CallExecuting) for s in statuses):
        return RecoveryRow.CALL_EXECUTING
    if any(isinstance(s, CallAwaiting) for s in statuses):
        return RecoveryRow.CALL_AWAITING
    if any(is_terminal(s) for s in statuses):
        return RecoveryRow.PARTLY_TERMINAL
    return RecoveryRow.CALL_REQUESTED


def recover(
    state: RunSnapshot,
    policies: Policies = Policies(),
    *,
    self_check: bool = False,
    history: History = NO_HISTORY,
) -> RecoveryDecision:
    """Decide how the Run continues from its committed state alone. ``self_check``
    judges every commit of the plan against ``state`` and ``history`` (see ``decide``)."""
    row = classify(state)
    decision = _plan(row, state, policies)
    if self_check:
        check_decision(state, history, decision)
    return RecoveryDecision(row, decision)


def _plan(row: RecoveryRow, state: RunSnapshot, policies: Policies) -> Decision:
    if row is RecoveryRow.ENDED:
        return redeliver(state)
    if row is RecoveryRow.RUNNING_NO_OPEN_BATCH:
        if policies.max_steps is not None and state.step >= policies.max_steps:
            return end_run(state, state.batch, EndCause(EndCauseKind.STEP_LIMIT))
        return Decision(state, next_step_effects(state))
    batch = state.open_batch
    assert batch is not None
    call = batch.first_open_call()
    if call is None:
        # Every call is terminal but the batch was never finalized: finalize it now.
        return settle(state, batch, policies)
    if row is RecoveryRow.CALL_AWAITING:
        # the waiting call may be a group member after Requested ones (its gate round)
        assert isinstance(state.state, Awaiting)
        waiting = batch.call(state.state.ticket.call_id)
        assert waiting is not None and isinstance(waiting.status, CallAwaiting)
        return Decision(state, (NotifyWait(state.state.ticket, waiting.status.wait),))
    if row is RecoveryRow.CALL_EXECUTING and executing_delegations(batch):
        # reconnect against the store: an ended child completes the call, a running one
        # keeps the parent quiet, one never activated is activated (same attempt, same ids)
        effects: tuple[Effect, ...] = tuple(
            StartChild(
                c.call_id,
                c.status.attempt,
                c.delegation,
                ParentCall(state.thread_id, state.run_id, c.call_id),
                c.arguments,
                state.input_for(c.call_id),
            )
            for c in executing_delegations(batch)
            if c.delegation is not None and isinstance(c.status, CallExecuting)
        )
        upcoming = next_to_gate(batch, policies)
        return Decision(state, effects + ((RunGate(upcoming),) if upcoming is not None else ()))
    if row is RecoveryRow.CALL_EXECUTING:
        assert isinstance(state.state, Running)
        return _recover_executing(state, batch, policies)
    assert isinstance(call.status, CallRequested)
    return Decision(state, (RunGate(call),))


def _recover_executing(state: RunSnapshot, batch: ActiveToolBatch, policies: Policies) -> Decision:
    """Each call found Executing (one ordinary call, or the members of a group of
    concurrent calls) by its own committed policy (I11), in one recovery commit:
    replay commits Executing{n+1} and runs again (Indeterminate(attempts_exhausted) past
    its maximum), reconnect asks the tool's status without starting anything,
    indeterminate commits Indeterminate(outcome_unknown)."""
    moved = batch
    runs: list[tuple[ToolCall, int]] = []
    queries: list[QueryStatus] = []
    unknown = False
    for call in batch.calls:
        if not isinstance(call.status, CallExecuting):
            continue
        attempt = call.status.attempt
        # the policy committed with the batch, not this worker's configuration (I11)
        recovery = call.policy_or(policies.for_tool(call.tool)).recovery
        match recovery.mode:
            case RecoveryMode.REPLAY:
                if attempt >= recovery.max_attempts:
                    exhausted = CallIndeterminate(attempt, IndeterminateReason.ATTEMPTS_EXHAUSTED)
                    moved, unknown = moved.replace_call(attrs.evolve(call, status=exhausted)), True
                else:
                    runs.append((call, attempt + 1))
            case RecoveryMode.RECONNECT:
                queries.append(QueryStatus(call.call_id, call.tool, call.operation_id, attempt))
            case RecoveryMode.INDETERMINATE:
                lost = CallIndeterminate(attempt, IndeterminateReason.OUTCOME_UNKNOWN)
                moved, unknown = moved.replace_call(attrs.evolve(call, status=lost)), True
            case _:
                assert_never(recovery.mode)
    if unknown and policies.on_indeterminate is IndeterminateChoice.END_RUN:
        # the Run ends in this commit: nothing runs again, every open call is closed
        return settle(state, moved, policies)
    effects: list[Effect] = []
    for call, attempt in runs:
        moved = moved.replace_call(attrs.evolve(call, status=CallExecuting(attempt)))
        effects.append(execute_effect(call, attempt, state.input_for(call.call_id)))
    if moved is batch:
        return Decision(state, tuple(queries))
    return settle(state, moved, policies, follow_up=tuple(effects) + tuple(queries))
