"""What a runtime reports while it drives: outcomes, events and its one protocol error,
which commit point each acknowledged commit is, and how a refused inbox command is
settled."""

from __future__ import annotations

import enum

from attrs import frozen

from runkernel.adapters.stores.contract import InboxEntry
from runkernel.errors import RuntimeProtocolError as RuntimeProtocolError
from runkernel.kernel.protocol import EndRequest, ResumeCommand
from runkernel.kernel.recover import RecoveryRow
from runkernel.kernel.rules import Rejection, Rule
from runkernel.kernel.state import (
    RESUMED_EVENT,
    Awaiting,
    CallCompleted,
    CallExecuting,
    CallIndeterminate,
    Ended,
    RunSnapshot,
    ThreadCommit,
    TypedError,
)
from runkernel.kernel.values import Role


class Position(enum.Enum):
    """Which commit point of a Step a commit is ("Commit points of a Step"):
    named in each ``Acknowledged`` event, and where ``runkernel.testing``'s crash plans
    aim."""

    ACTIVATION = "activation"
    INFERENCE_TEXT = "inference_text"
    BATCH_OPEN = "batch_open"
    CALL_START = "call_start"
    CALL_RETRY = "call_retry"
    CALL_WAIT = "call_wait"
    CALL_RESULT = "call_result"
    FINALIZE = "finalize"
    RESUME = "resume"
    END = "end"
    PROGRESS = "progress"


def position_of(prev: RunSnapshot | None, commit: ThreadCommit) -> Position:
    """Name the commit point ``commit`` stands for, given its Run's snapshot before it
    (None: the Run has no commit yet, so this is its activation)."""
    if prev is None:
        return Position.ACTIVATION
    if isinstance(commit.disposition, Ended):
        return Position.END
    if any(e.type == RESUMED_EVENT for e in commit.events):
        return Position.RESUME
    assistants = [m for m in commit.messages if m.role is Role.ASSISTANT]
    if assistants:
        return Position.BATCH_OPEN if assistants[0].tool_calls else Position.INFERENCE_TEXT
    if isinstance(commit.disposition, Awaiting):
        return Position.CALL_WAIT
    batch = commit.batch
    if batch is not None and batch.finalized and prev.open_batch is not None:
        return Position.FINALIZE
    if batch is not None and prev.batch is not None:
        for old, new in zip(prev.batch.calls, batch.calls):
            if old.status == new.status:
                continue
            if isinstance(new.status, CallExecuting):
                return Position.CALL_START if new.status.attempt == 1 else Position.CALL_RETRY
            if isinstance(new.status, (CallCompleted, CallIndeterminate)):
                return Position.CALL_RESULT
    return Position.PROGRESS


@frozen
class RunOutcome:
    """Where driving stopped: the Run is Ended, Awaiting, or still Running (polling)."""

    run_id: str
    snapshot: RunSnapshot

    @property
    def status(self) -> str:
        return type(self.snapshot.state).__name__.lower()


@frozen
class Recovered:
    """Reported to ``on_event`` when a runtime starts from committed state."""

    row: RecoveryRow
    snapshot: RunSnapshot


@frozen
class Acknowledged:
    """Reported after a commit is acknowledged by the store."""

    commit: ThreadCommit
    position: Position


@frozen
class CommandSettled:
    """Reported when an inbox command is applied or refused."""

    entry: InboxEntry
    outcome: str


@frozen
class CheckpointLost:
    """A best-effort checkpoint write failed; only partial recovery is lost."""

    run_id: str
    error: str


@frozen
class CommitRetried:
    """A leased commit's write failed (its reply may have been lost) and is retried as
    it is: the store adopts it if it had landed (W4)."""

    commit: ThreadCommit
    error: str


@frozen
class ToolRaised:
    """A tool raised instead of returning a ``ToolReply``. What happened downstream is
    unknown, so the call's outcome is taken as lost (Indeterminate, its operation id for
    reconciliation), except for a replay tool, whose exception is a retryable error under
    its fixed retry policy. Return ``Failed`` for errors known to have changed nothing."""

    run_id: str
    call_id: str
    attempt: int
    error: TypedError


@frozen
class ModelFailed:
    """A model call for step ``step`` raised (attempt ``attempt`` of that call in this
    driver's hands). Nothing was committed for it. ``retry_after`` is the wait before the
    next attempt of a transient error; None when the Run ends ``failed`` with ``error``
    (not transient, or the attempts ran out)."""

    run_id: str
    step: int
    attempt: int
    error: TypedError
    retry_after: float | None


RuntimeEvent = Recovered | Acknowledged | CommandSettled | CheckpointLost | CommitRetried | ToolRaised | ModelFailed


ALREADY_COMMITTED = "applied before: already committed"


def refusal_outcome(state: RunSnapshot, command: ResumeCommand | EndRequest, rejection: Rejection) -> str:
    """How a refused inbox command is settled. A command whose commit was written before
    a crash (so it was never settled) is recorded as applied before, not as refused."""
    if rejection.rule is Rule.ALREADY_APPLIED:
        return ALREADY_COMMITTED
    ended = state.state
    if isinstance(command, EndRequest) and isinstance(ended, Ended) and ended.cause == command.cause:
        return ALREADY_COMMITTED
    return f"refused: {rejection}"
