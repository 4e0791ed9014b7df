"""Typed committed state: calls, the ActiveToolBatch, RunState, messages and commits.

Every class is frozen and slotted; validators make shapes that the design forbids
impossible to construct (an Awaiting Run without a ticket, a failed cause without an
error, a Requested call with an attempt). Legality *between* states lives in
``validate.py``; these classes only guarantee that a single state is well formed.

Why this module is long: it is the one vocabulary of committed state that every kernel
module, store and trace reads; its classes refer to each other (a commit holds a batch
holds calls holds statuses), and splitting them would only move the imports around.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from typing import TypeAlias

import attrs
from attrs import frozen

from runkernel.kernel.policies import ToolPolicy
from runkernel.kernel.values import (
    EndCauseKind,
    IndeterminateReason,
    JsonValue,
    ResultKind,
    Role,
    WaitKind,
)


def non_negative(_instance: object, attribute: attrs.Attribute[int], value: int) -> None:
    """attrs validator: the field is an integer >= 0."""
    if value < 0:
        raise ValueError(f"{attribute.name} must be >= 0, got {value}")


def _positive(_instance: object, attribute: attrs.Attribute[int], value: int) -> None:
    if value < 1:
        raise ValueError(f"{attribute.name} must be >= 1, got {value}")


def _non_empty(_instance: object, attribute: attrs.Attribute[str], value: str) -> None:
    if not value:
        raise ValueError(f"{attribute.name} must not be empty")


# --- calls -----------------------------------------------------------------------


@frozen
class Wait:
    """A typed wait owned by an Awaiting call.

    ``correlation`` equals the ``ticket_id`` of the Run's ResumeTicket. A delegation's
    child Run id, a timer's due time and an approval deadline live in fields of their
    own, never in the correlation.

    ``request`` is the JSON a gate gave with its hold (an approval prompt, the question
    an input wait asks), committed so whoever answers sees it, also after a crash; None
    when none was given. It is shown, never judged: it takes no part in equality, so no
    rule of commit validation (nor ``check-trace``) can depend on its value.
    """

    kind: WaitKind
    correlation: str = attrs.field(validator=_non_empty)
    child: str | None = None
    due_at: str | None = None
    expires_at: str | None = None
    request: JsonValue = attrs.field(default=None, eq=False)


@frozen
class ToolResult:
    """A committed terminal result of a call."""

    kind: ResultKind
    value: JsonValue


@frozen
class CallRequested:
    """Persisted; no executor attempt recorded."""

    @property
    def attempt(self) -> int:
        return 0


@frozen
class CallExecuting:
    """Attempt ``attempt`` was committed: its external effect may have started."""

    attempt: int = attrs.field(validator=_positive)


@frozen
class CallAwaiting:
    """The call owns a typed wait. ``attempt`` is 0 when no attempt ever started."""

    attempt: int = attrs.field(validator=non_negative)
    wait: Wait


@frozen
class CallCompleted:
    """Terminal: a committed result."""

    attempt: int = attrs.field(validator=non_negative)
    result: ToolResult


@frozen
class CallIndeterminate:
    """Terminal: the outcome cannot be determined safely."""

    attempt: int = attrs.field(validator=non_negative)
    reason: IndeterminateReason


CallStatus: TypeAlias = (
    CallRequested | CallExecuting | CallAwaiting | CallCompleted | CallIndeterminate
)
TerminalStatus: TypeAlias = CallCompleted | CallIndeterminate


def is_terminal(status: CallStatus) -> bool:
    """Completed and Indeterminate are the terminal call states."""
    return isinstance(status, (CallCompleted, CallIndeterminate))


def has_unknown_outcome(batch: ActiveToolBatch) -> bool:
    """Whether a call's effect could not be determined (what ``outcome_unknown`` ends on)."""
    return any(
        isinstance(c.status, CallIndeterminate) and c.status.reason is not IndeterminateReason.RUN_ENDED
        for c in batch.calls
    )


@frozen
class Delegation:
    """A delegation's child Run: a Thread of its own and a Run id, both derived from the
    parent Run id and the call's operation id, fixed by the call's Executing commit.
    ``concurrent`` marks a terminal-only delegation (it runs beside the other calls of
    its group and consumes nothing from its child but the terminus)."""

    thread_id: str = attrs.field(validator=_non_empty)
    run_id: str = attrs.field(validator=_non_empty)
    concurrent: bool


def is_concurrent_delegation(call: ToolCall) -> bool:
    """Whether the call started as a terminal-only (concurrent) delegation."""
    return call.delegation is not None and call.delegation.concurrent


@frozen
class ToolCall:
    """One durable call of a batch. ``operation_id`` is fixed for every attempt.

    ``policy`` is the tool's recovery and retry policy, fixed by the commit that opens
    the batch: every worker recovers and retries the call the same way whatever its own
    configuration (I11). ``None`` only for calls of traces written by runtimes that do
    not record it; runkernel always does.
    """

    call_id: str
    tool: str
    arguments: JsonValue
    operation_id: str
    status: CallStatus
    policy: ToolPolicy | None = None
    #: AfterTool's answer, committed with the call's terminal result and immutable like
    #: it (None: no reaction). Never carried by a call that is not terminal.
    reaction: JsonValue = attrs.field(default=None, hash=False)
    #: the child Run of a delegation, fixed from its Executing commit on (None: none)
    delegation: Delegation | None = None

    def __attrs_post_init__(self) -> None:  # one call, not one validator per field: decoding builds many
        if not self.call_id:
            raise ValueError("call_id must not be empty")
        if not self.tool:
            raise ValueError("tool must not be empty")
        if not self.operation_id:
            raise ValueError("operation_id must not be empty")

    def same_identity(self, other: ToolCall) -> bool:
        """True when both describe the same call (everything but the status and the
        reaction, which arrive with the terminal result)."""
        return (
            self.call_id == other.call_id
            and self.tool == other.tool
            and self.arguments == other.arguments
            and self.operation_id == other.operation_id
            and self.policy == other.policy
        )

    def with_status(self, status: CallStatus) -> ToolCall:
        """This call moved to ``status``, everything else kept (plain construction: on
        the kernel's hot path, where ``attrs.evolve``'s field walk costs more than the
        move itself)."""
        return ToolCall(
            self.call_id, self.tool, self.arguments, self.operation_id, status, self.policy,
            self.reaction, self.delegation,
        )

    def policy_or(self, fallback: ToolPolicy) -> ToolPolicy:
        """The committed policy, or ``fallback`` for a call committed without one."""
        return self.policy if self.policy is not None else fallback


@frozen
class ActiveToolBatch:
    """The Run-scoped batch of one Step. ``finalized`` is the publication barrier."""

    batch_id: str
    step: int
    finalized: bool
    calls: tuple[ToolCall, ...]

    def __attrs_post_init__(self) -> None:  # one call, not one validator per field
        if not self.batch_id:
            raise ValueError("batch_id must not be empty")
        if self.step < 1:
            raise ValueError(f"step must be >= 1, got {self.step}")
        calls = self.calls
        if not calls:
            raise ValueError("a batch holds one or more calls")
        if len(calls) > 1:  # one call is unique alone
            if len({call.call_id for call in calls}) != len(calls):
                raise ValueError("call ids of a batch must be unique")
            if len({call.operation_id for call in calls}) != len(calls):
                raise ValueError("operation ids of a batch must be unique")

    @property
    def is_open(self) -> bool:
        return not self.finalized

    def call(self, call_id: str) -> ToolCall | None:
        for candidate in self.calls:
            if candidate.call_id == call_id:
                return candidate
        return None

    def all_terminal(self) -> bool:
        return all(is_terminal(call.status) for call in self.calls)

    def first_open_call(self) -> ToolCall | None:
        """The first call that is not terminal: the only one allowed to progress."""
        for candidate in self.calls:
            if not is_terminal(candidate.status):
                return candidate
        return None

    def replace_call(self, call: ToolCall) -> ActiveToolBatch:
        calls = tuple(call if c.call_id == call.call_id else c for c in self.calls)
        return ActiveToolBatch(self.batch_id, self.step, self.finalized, calls)

    def finalize(self) -> ActiveToolBatch:
        """This batch marked finalized (the publication barrier)."""
        return ActiveToolBatch(self.batch_id, self.step, True, self.calls)


# --- run state -------------------------------------------------------------------


@frozen
class TypedError:
    """A failure carried by ``EndCause(failed)``."""

    type: str = attrs.field(validator=_non_empty)
    message: str


@frozen
class EndCause:
    """Why a Run ended. ``error`` is present if and only if the kind is ``failed``."""

    kind: EndCauseKind
    error: TypedError | None = None

    def __attrs_post_init__(self) -> None:
        if (self.kind is EndCauseKind.FAILED) != (self.error is not None):
            raise ValueError("an EndCause carries an error if and only if it is 'failed'")


@frozen
class ResumeTicket:
    """The one typed correlation an Awaiting Run accepts a resume for."""

    ticket_id: str = attrs.field(validator=_non_empty)
    wait: WaitKind
    call_id: str = attrs.field(validator=_non_empty)


@frozen
class Running:
    """Committed RunState: the Run makes progress."""


@frozen
class Awaiting:
    """Committed RunState: the Run waits on exactly one ticket."""

    ticket: ResumeTicket


@frozen
class Ended:
    """Committed RunState: absorbing, with exactly one cause."""

    cause: EndCause


RunState: TypeAlias = Running | Awaiting | Ended
#: The disposition a ThreadCommit declares has exactly the shape of a RunState.
RunDisposition: TypeAlias = RunState


# --- messages and events ---------------------------------------------------------


@frozen
class ToolUse:
    """One entry of an assistant message's tool-use block."""

    call_id: str
    tool: str
    arguments: JsonValue

    def __attrs_post_init__(self) -> None:  # cheaper than a validator per field, also for msgspec
        if not self.call_id:
            raise ValueError("call_id must not be empty")
        if not self.tool:
            raise ValueError("tool must not be empty")


@frozen
class Message:
    """A committed message. Tool messages name their call; only assistants use tools.

    ``metadata`` is the host's own JSON for the message (a framework's message fields,
    a tool result's host content): kept verbatim in commits and traces, never judged.
    """

    role: Role
    content: JsonValue
    tool_calls: tuple[ToolUse, ...] | None = None
    call_id: str | None = None
    metadata: JsonValue = attrs.field(default=None, hash=False)

    def __attrs_post_init__(self) -> None:
        if self.tool_calls is not None and self.role is not Role.ASSISTANT:
            raise ValueError("only an assistant message carries tool_calls")
        if (self.role is Role.TOOL) != (self.call_id is not None):
            raise ValueError("a message names a call_id if and only if it is a tool message")


@frozen
class Event:
    """A lifecycle fact in a commit, e.g. ``activated``, ``resumed``, ``attempt_failed``."""

    type: str = attrs.field(validator=_non_empty)
    data: Mapping[str, JsonValue] = attrs.field(factory=dict, hash=False)


RESUMED_EVENT = "resumed"


@frozen
class Staged:
    """The Run's staged hook state as a commit sets it (``value`` None clears it).

    StepStart and BeforeInference answer with it; it is committed with the Step's next
    commit. A commit without a ``Staged`` leaves the Run's staged state unchanged.
    """

    value: JsonValue = attrs.field(hash=False)


@frozen
class ParentCall:
    """The call of a parent Run that a child Run was activated for (I15)."""

    thread_id: str = attrs.field(validator=_non_empty)
    run_id: str = attrs.field(validator=_non_empty)
    call_id: str = attrs.field(validator=_non_empty)


@frozen
class ForkedFrom:
    """Where a fork's first commit came from: the source Thread, its Run and the Thread
    version the fork was taken at (the source is never changed)."""

    thread_id: str = attrs.field(validator=_non_empty)
    run_id: str = attrs.field(validator=_non_empty)
    version: int = attrs.field(validator=_positive)


class EdgeKind(enum.Enum):
    """The kinds of commit whose edge ``decide`` names, so the store may judge them by it."""

    #: Running -> Running: one inference result without tool calls, no open batch
    TEXT_STEP = "text_step"
    #: Running -> Running: one inference result with tool calls and its new batch
    NEW_BATCH = "new_batch"
    #: Running -> Running: one call of the open batch takes one Tool-call edge (the batch
    #: may be finalized and published in the same commit)
    CALL_MOVE = "call_move"


@frozen
class NamedEdge:
    """The edge a kernel-made commit claims to take (``call`` indexes the batch's call
    for ``CALL_MOVE``). A claim, not a verdict: the store checks that the commit *is*
    that edge before it judges the commit by it, and judges it in full otherwise."""

    kind: EdgeKind
    call: int = -1


@frozen
class ThreadCommit:
    """One validated write: identity, expected version, disposition, deltas, state."""

    thread_id: str
    run_id: str
    expected_version: int
    step: int
    disposition: RunDisposition
    batch: ActiveToolBatch | None
    messages: tuple[Message, ...] = ()
    events: tuple[Event, ...] = ()
    #: the application the Run belongs to, named on its activation line (workers drive
    #: only their app's Runs); None elsewhere
    app: str | None = None
    #: the staged hook state this commit sets; None leaves it unchanged
    staged: Staged | None = None
    #: on a child Run's activation commit only: the parent call that delegated to it
    parent: ParentCall | None = None
    #: on a fork's first commit only: the source Thread, Run and version it was taken at
    forked_from: ForkedFrom | None = None
    #: the version of the Run's application, beside ``app`` on its activation line only
    #: (workers drive only the versions they may); None elsewhere, and on Runs activated
    #: before versions existed
    app_version: str | None = None
    #: the edge ``decide`` named for this commit (kernel-made commits only; None
    #: elsewhere): never encoded, never compared, and checked before it is relied on
    edge: NamedEdge | None = attrs.field(default=None, eq=False, repr=False)

    def __attrs_post_init__(self) -> None:  # one call, not one validator per field: decoding builds many
        if not self.thread_id:
            raise ValueError("thread_id must not be empty")
        if not self.run_id:
            raise ValueError("run_id must not be empty")
        if self.expected_version < 0:
            raise ValueError(f"expected_version must be >= 0, got {self.expected_version}")
        if self.step < 0:
            raise ValueError(f"step must be >= 0, got {self.step}")

    @property
    def version(self) -> int:
        """The Thread version this commit creates."""
        return self.expected_version + 1


@frozen
class AppliedResume:
    """A resume that was committed, remembered to answer repeats."""

    ticket_id: str
    digest: str


@frozen
class ProvidedInput:
    """The operator's answer to a call's input wait, as committed by its resume.

    Every later attempt of that call (a retry, a replay on recovery) runs with it too.
    """

    call_id: str
    value: JsonValue = attrs.field(hash=False)


@frozen
class RunSnapshot:
    """Latest committed state of one Run: what recovery and validation read.

    Messages are not part of it (they are deltas in the commit log), nor is anything
    that grows with the Run's history (used tickets, closed batches, applied resumes:
    see ``kernel/history.py``); everything here is bounded by the size of one batch.
    """

    thread_id: str
    run_id: str
    version: int
    step: int
    state: RunState
    batch: ActiveToolBatch | None
    provided_inputs: tuple[ProvidedInput, ...] = ()
    #: the Run's committed staged hook state (JSON; None when nothing is staged)
    staged: JsonValue = attrs.field(default=None, hash=False)

    def input_for(self, call_id: str) -> JsonValue:
        """The committed input answer for a call of the open batch, or None."""
        for provided in self.provided_inputs:
            if provided.call_id == call_id:
                return provided.value
        return None

    @property
    def open_batch(self) -> ActiveToolBatch | None:
        """The batch if it is not finalized yet."""
        if self.batch is not None and self.batch.is_open:
            return self.batch
        return None


@frozen
class ThreadHead:
    """Latest committed version of a Thread and its Run that is not Ended, if any."""

    thread_id: str
    version: int
    active_run_id: str | None
