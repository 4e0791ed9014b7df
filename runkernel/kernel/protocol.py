"""Inputs the kernel is fed; with the effects it asks the host to carry out and its
``Decision`` (defined in ``effects``, re-exported here: one vocabulary).

Ids, times and outcomes arrive in inputs: the kernel never makes them up.
"""

from __future__ import annotations

import enum
from typing import TypeAlias

import attrs
from attrs import frozen

from runkernel.kernel.canonical import jcs_digest
# the effects and the Decision live in ``effects``; one vocabulary, imported from here too
from runkernel.kernel.effects import (
    Hook as Hook,
    HOOK_ANSWERS as HOOK_ANSWERS,
    Commit as Commit,
    RunHook as RunHook,
    RequestInference as RequestInference,
    RunGate as RunGate,
    Execute as Execute,
    QueryStatus as QueryStatus,
    StartChild as StartChild,
    CancelChild as CancelChild,
    NotifyWait as NotifyWait,
    PublishResults as PublishResults,
    DeliverTerminus as DeliverTerminus,
    Effect as Effect,
    Decision as Decision,
)
from runkernel.kernel.state import (
    EndCause,
    Message,
    ParentCall,
    Staged,
    non_negative,
)
from runkernel.kernel.values import EndCauseKind, JsonValue, WaitKind, instant


def _check_id(name: str, value: str) -> None:
    """Ids the host makes up end in committed state: non-empty and valid Unicode."""
    if not value:
        raise ValueError(f"{name} must not be empty")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError(f"{name} must be valid Unicode, got {value!r}") from None


def _valid_id(_instance: object, attribute: attrs.Attribute[str], value: str) -> None:
    _check_id(attribute.name, value)


def _valid_optional_id(
    _instance: object, attribute: attrs.Attribute[str | None], value: str | None
) -> None:
    if value is not None:
        _check_id(attribute.name, value)


def _valid_instant(_instance: object, attribute: attrs.Attribute[str], value: str) -> None:
    instant(value)  # raises ValueError naming the problem


def _valid_optional_instant(
    _instance: object, attribute: attrs.Attribute[str | None], value: str | None
) -> None:
    if value is not None:
        instant(value)


# --- inputs -------------------------------------------------------------------------


@frozen
class Activate:
    """RunActivation: an input, never a durable Created state."""

    thread_id: str = attrs.field(validator=_valid_id)
    run_id: str = attrs.field(validator=_valid_id)
    expected_version: int = attrs.field(validator=non_negative)
    messages: tuple[Message, ...]
    #: the application the Run belongs to (recorded on the activation line)
    app: str | None = None
    #: a child Run's activation names the parent call it was delegated by (I15)
    parent: ParentCall | None = None
    #: the version of the application's code, recorded beside ``app`` (``app_version``)
    app_version: str | None = None


@frozen
class ProposedCall:
    """A call of the model's tool-use block, with the operation id the host fixed for it."""

    call_id: str
    tool: str
    arguments: JsonValue
    operation_id: str


@frozen
class InferenceResult:
    """One complete inference result: text, or a complete tool-call batch.

    ``end`` set on a text-only result commits that EndCause with the message.
    ``staged`` is what StepStart and BeforeInference answered for this Step: committed
    as the Run's staged state with this result (None: leave it unchanged). The hooks'
    request-only context went to the inference request only and is never an input.
    """

    content: JsonValue
    calls: tuple[ProposedCall, ...] = ()
    batch_id: str | None = None
    end: EndCauseKind | None = None
    staged: Staged | None = None


@frozen
class Allow:
    """Gate verdict: run the executor."""


@frozen
class Block:
    """Gate verdict: complete the call at once as blocked."""

    reason: JsonValue


@frozen
class Supply:
    """Gate verdict: a plugin supplies the result without running the tool."""

    value: JsonValue


@frozen
class RequireWait:
    """Gate verdict: wait for approval, input, an external answer or a timer."""

    kind: WaitKind
    ticket_id: str = attrs.field(validator=_valid_id)
    request: JsonValue = None
    expires_at: str | None = attrs.field(default=None, validator=_valid_optional_instant)
    due_at: str | None = None


GateOutcome: TypeAlias = Allow | Block | Supply | RequireWait


@frozen
class GateVerdict:
    """Answer of the permission and Plugin gate for one call. ``allowed`` is copied from
    the ``RunGate`` it answers: the earlier members of the call's group that the gate
    allowed in this round (an Allow is never committed on its own, see
    ``CONCURRENCY_RULE``)."""

    call_id: str
    verdict: GateOutcome
    allowed: tuple[str, ...] = ()


@frozen
class ToolOutput:
    """The tool returned a value."""

    value: JsonValue


@frozen
class ToolFailure:
    """The tool returned an error; ``retryable`` lets the retry policy try again."""

    error: JsonValue
    retryable: bool = False


@frozen
class ToolDelegated:
    """The tool handed its work to the call's child Run (the one its Executing commit
    fixed in the call's ``delegation``) and waits for it to talk back."""

    ticket_id: str = attrs.field(validator=_valid_id)


@frozen
class ToolScheduled:
    """The tool asks to be run again at ``due_at`` (a durable backoff)."""

    ticket_id: str = attrs.field(validator=_valid_id)
    due_at: str


@frozen
class ToolOutcomeLost:
    """The executor cannot tell what happened (a timeout after the effect may have run)."""


ToolOutcome: TypeAlias = ToolOutput | ToolFailure | ToolDelegated | ToolScheduled | ToolOutcomeLost


@frozen
class ToolFinished:
    """What attempt ``attempt`` of a call ended with.

    ``reaction`` is AfterTool's answer for this attempt: committed with the call's
    terminal result (None: no reaction). An attempt that does not end the call (a retry,
    a wait) commits no reaction: like any staging that is not committed it is lost, and
    AfterTool answers again after the attempt that ends the call.
    """

    call_id: str
    attempt: int
    outcome: ToolOutcome
    reaction: JsonValue = None


class OperationStatus(enum.Enum):
    """The answers of a reconnect tool's ``status(operation_id, lease_epoch)``."""

    DONE = "done"
    FAILED = "failed"
    RUNNING = "running"
    NOT_FOUND = "not_found"
    UNKNOWN = "unknown"


@frozen
class StatusReport:
    """A reconnect tool's answer about an operation. ``value`` is the result or error.

    For ``running`` the host asks again later. The call is never parked as a scheduled
    wait: the only way out of such a wait is a resume to ``Executing{n+1}``, which
    would start the executor again while the first operation still runs (I9).
    """

    call_id: str
    attempt: int
    status: OperationStatus
    value: JsonValue = None


@frozen
class Approve:
    """Resume payload of an approval wait: go ahead."""


@frozen
class Deny:
    """Resume payload of an approval wait: complete the call as denied."""

    reason: JsonValue = None


@frozen
class ProvideInput:
    """Resume payload of an input wait: the executor runs with this value."""

    value: JsonValue


@frozen
class ExternalResult:
    """Resume payload of an external wait: the answer completes the call."""

    value: JsonValue


@frozen
class DelegationResult:
    """Resume payload of a delegation wait: the child Run's answer completes the call."""

    value: JsonValue


@frozen
class TimerFired:
    """Resume payload of a scheduled wait: run the executor again."""


ResumePayload: TypeAlias = (
    Approve | Deny | ProvideInput | ExternalResult | DelegationResult | TimerFired
)

#: Which payload types each wait kind accepts.
PAYLOADS_BY_WAIT: dict[WaitKind, tuple[type, ...]] = {
    WaitKind.APPROVAL: (Approve, Deny),
    WaitKind.INPUT: (ProvideInput,),
    WaitKind.EXTERNAL: (ExternalResult,),
    WaitKind.DELEGATION: (DelegationResult,),
    WaitKind.SCHEDULED: (TimerFired,),
}

PAYLOAD_NAMES: dict[type, str] = {
    Approve: "approve",
    Deny: "deny",
    ProvideInput: "input",
    ExternalResult: "external",
    DelegationResult: "delegation",
    TimerFired: "timer",
}


@frozen
class ResumeCommand:
    """A typed resume for one ticket. Accepted only if the Run is Awaiting that ticket."""

    run_id: str
    ticket_id: str
    kind: WaitKind
    payload: ResumePayload

    def to_json(self) -> dict[str, JsonValue]:
        payload: dict[str, JsonValue] = {"type": PAYLOAD_NAMES[type(self.payload)]}
        payload.update(attrs.asdict(self.payload))
        return {
            "run_id": self.run_id,
            "ticket_id": self.ticket_id,
            "kind": self.kind.value,
            "payload": payload,
        }

    def digest(self) -> str:
        """Lowercase hex SHA-256 of the command's RFC 8785 canonical form (what the
        ``resumed`` event carries); raises ``NotIJson`` for a command outside I-JSON."""
        return jcs_digest(self.to_json())


@frozen
class ChildEnded:
    """A concurrent delegation's child Run ended: ``terminus`` is its committed terminus
    (``{"thread_id", "run_id", "cause", "final"}``), the call's result (I15)."""

    call_id: str
    attempt: int
    terminus: JsonValue


@frozen
class ChildTerminus:
    """The committed terminus of a call's child, read when the parent ends first."""

    call_id: str
    terminus: JsonValue


@frozen
class DeadlinePassed:
    """The host's clock says ``now`` (UTC ISO-8601): an expired approval becomes a deny."""

    ticket_id: str = attrs.field(validator=_valid_id)
    now: str = attrs.field(validator=_valid_instant)


@frozen
class EndRequest:
    """Cancel (client), stop (host or operator) or failure: end the Run now.

    ``child_termini`` are the committed termini of children of Executing concurrent
    delegations that already ended: those calls complete with them; the others become
    Indeterminate(outcome_unknown) and their children are sent a cancel."""

    cause: EndCause
    child_termini: tuple[ChildTerminus, ...] = ()


Input: TypeAlias = (
    Activate
    | InferenceResult
    | GateVerdict
    | ToolFinished
    | StatusReport
    | ResumeCommand
    | DeadlinePassed
    | EndRequest
    | ChildEnded
)
