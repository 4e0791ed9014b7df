"""Effects the kernel asks the host to carry out, and its ``Decision``: the next
committed state and the effects, in order. Effects are carried out in order; an effect
after a ``Commit`` may only happen once that commit is acknowledged, which is how
"persist before the external effect" is kept. The inputs the kernel is fed are
``protocol``'s (which re-exports these names: one vocabulary).
"""

from __future__ import annotations

import enum
from typing import TypeAlias

from attrs import frozen

from runkernel.kernel.state import (
    ActiveToolBatch, Delegation, EndCause, ParentCall, ResumeTicket, RunSnapshot, ThreadCommit, ToolCall, Wait,
)
from runkernel.kernel.values import JsonValue


class Hook(enum.Enum):
    """The hooks. As effects they observe; what they answer comes back inside an
    input: StepStart and BeforeInference's staged state in ``InferenceResult.staged``,
    AfterTool's reaction in ``ToolFinished.reaction``."""

    STEP_START = "StepStart"
    BEFORE_INFERENCE = "BeforeInference"
    AFTER_INFERENCE = "AfterInference"
    STEP_END = "StepEnd"
    AFTER_TOOL = "AfterTool"


#: What each hook may answer and how the answer is committed (``runkernel spec``).
HOOK_ANSWERS: tuple[tuple[Hook, str], ...] = (
    (Hook.STEP_START, "staged state (JSON): committed as the Run's typed `staged` state with the Step's next commit"),
    (
        Hook.BEFORE_INFERENCE,
        "staged state, as StepStart; and request-only context: passed to that one inference request, never "
        "committed, never in a trace, absent after recovery until the hook runs again",
    ),
    (Hook.AFTER_INFERENCE, "nothing: it observes"),
    (Hook.STEP_END, "nothing: it observes"),
    (
        Hook.AFTER_TOOL,
        "a reaction (JSON): committed with the call's terminal result and immutable like it; an attempt that "
        "does not end the call commits none",
    ),
)


@frozen
class Commit:
    """Write this ThreadCommit; everything after it waits for the acknowledgement."""

    commit: ThreadCommit


@frozen
class RunHook:
    """Call a hook."""

    hook: Hook
    call_id: str | None = None


@frozen
class RequestInference:
    """Ask the model for the result of step ``step``; answer with ``InferenceResult``."""

    run_id: str
    step: int


@frozen
class RunGate:
    """Run the permission and Plugin gate for a call; answer with ``GateVerdict``,
    copying ``allowed`` into it (a group member's gate round: the call ids of the
    earlier members the gate allowed, not yet committed)."""

    call: ToolCall
    allowed: tuple[str, ...] = ()


@frozen
class Execute:
    """Start attempt ``attempt``; ``operation_id`` is the idempotency key of every attempt."""

    call_id: str
    tool: str
    arguments: JsonValue
    operation_id: str
    attempt: int
    resume_value: JsonValue = None


@frozen
class QueryStatus:
    """Ask a reconnect tool about an operation without starting anything."""

    call_id: str
    tool: str
    operation_id: str
    attempt: int


@frozen
class StartChild:
    """The executor of a concurrent delegation: make sure its child Run exists, by its
    fixed identity. Activate it if it was never activated (the same attempt and ids
    after a crash: activation is checked on identity); answer ``ChildEnded`` if it has
    ended; otherwise the child runs and the parent stays quiet."""

    call_id: str
    attempt: int
    child: Delegation
    parent: ParentCall
    arguments: JsonValue
    #: the committed input answer of the member's gate wait (an input wait resumed with
    #: ``ProvideInput``), given to the child after its arguments; None without one
    resume_value: JsonValue = None


@frozen
class CancelChild:
    """The parent ended first: send the child Run a cancel through its inbox."""

    child: Delegation


@frozen
class NotifyWait:
    """Send the wait's request (approval prompt, input request, timer, child watch)."""

    ticket: ResumeTicket
    wait: Wait


@frozen
class PublishResults:
    """The batch is finalized: its ordered results may be shown to subscribers."""

    batch: ActiveToolBatch


@frozen
class DeliverTerminus:
    """Return the Run's terminus to the caller (again, on recovery)."""

    cause: EndCause
    redelivery: bool = False


Effect: TypeAlias = (
    Commit
    | RunHook
    | RequestInference
    | RunGate
    | Execute
    | QueryStatus
    | NotifyWait
    | PublishResults
    | DeliverTerminus
    | StartChild
    | CancelChild
)


@frozen
class Decision:
    """The next committed state (after any Commit in ``effects``) and the effects, in order."""

    state: RunSnapshot
    effects: tuple[Effect, ...]

    @property
    def commit(self) -> ThreadCommit | None:
        for effect in self.effects:
            if isinstance(effect, Commit):
                return effect.commit
        return None


__all__ = [
    "HOOK_ANSWERS",
    "CancelChild",
    "Commit",
    "Decision",
    "DeliverTerminus",
    "Effect",
    "Execute",
    "Hook",
    "NotifyWait",
    "PublishResults",
    "QueryStatus",
    "RequestInference",
    "RunGate",
    "RunHook",
    "StartChild",
]
