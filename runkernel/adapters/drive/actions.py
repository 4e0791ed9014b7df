"""What the push-mode driver hands its host, what the host answers, and the driver's errors.

An *action* says what the host must do next; every method of ``Driver`` (and of
``AsyncDriver``) returns one. Which answer each action expects:

====================  ==========================================================
action                the host answers with
====================  ==========================================================
``Infer``             ``inferred(content, calls, end=...)`` (the model's complete reply);
                      ``checkpoint(partial)`` while it streams (best effort);
                      ``inference_failed(error)`` if the model call raised
``RunCall``           ``call_returned``, ``call_failed``, ``call_lost`` or ``call_scheduled``
``RunCalls``          one of those per call, in any order, as each call ends
``CheckStatus``       ``status(call_id, OperationStatus..., value)``
``Fence``             ``fenced(call_id)`` once the tool's downstream took the fence
``WaitFor``           ``resume(payload)``; or ``next_action()`` later, which applies a
                      command queued in the store's inbox (``runkernel resume``); or
                      nothing, for a call answered ahead (``answer_ahead``)
``ChildrenRunning``   ``next_action()`` once a child may have ended (each is a Run of
                      its own, driven by whoever drives Runs of its app)
``Done``              nothing: the Run is Ended (``next_action()`` returns it again)
====================  ==========================================================

``end(...)`` / ``cancel()`` are accepted in answer to any action but ``Done`` and
``Fence`` (a fence precedes a commit already decided).
"""

from __future__ import annotations

from typing import TypeAlias, assert_never

import attrs
from attrs import frozen

from runkernel.adapters.drive.message_log import MessagesSoFar
from runkernel.errors import DriverError, DriverStopped, HostProtocolError, UnknownTool
from runkernel.kernel.protocol import ExternalResult, ProvideInput, ResumePayload
from runkernel.kernel.state import Delegation, EndCause, Message, ResumeTicket, ToolCall, Wait
from runkernel.kernel.values import JsonValue, WaitKind

#: The step limit a driver applies when the host names none: a model that never says
#: "done" ends the Run with ``step_limit`` instead of looping until killed.
DEFAULT_MAX_STEPS = 50


#: A read-only window on the Thread's messages as they were when an action was handed
#: out: the runtime's own view of its message log, so handing it out costs nothing
#: whatever the length of the history.
HistoryView = MessagesSoFar


# --- actions (driver -> host) -------------------------------------------------------


@frozen
class Infer:
    """Ask the model for step ``step`` with ``messages`` (the whole Thread, in order);
    answer with ``inferred``, or with ``inference_failed(error)`` if the model call
    raised. ``partial`` is what a host saved with ``checkpoint`` for this step before a
    crash: best effort, never truth (a streaming host may resume from it or ignore it).

    After a transient model error the same ``Infer`` comes again with ``attempt`` one
    higher and ``retry_after`` the seconds to wait before calling the model (nothing was
    committed; see ``runkernel.adapters.drive.model_errors``). The host's StepStart and
    BeforeInference hooks may run again for each attempt: what a failed attempt staged
    was never committed, and ``staged`` is still the committed state."""

    run_id: str
    step: int
    messages: HistoryView = attrs.field(eq=False)
    partial: JsonValue = None
    #: the Run's committed staged hook state, for the host's StepStart/BeforeInference
    staged: JsonValue = attrs.field(default=None, eq=False)
    #: which attempt of this model call this is, in this driver's hands (1 first)
    attempt: int = 1
    #: seconds to wait before this attempt (0 but after a transient model error)
    retry_after: float = 0.0


@frozen
class RunCall:
    """Run attempt ``attempt`` of a call. Its ``Executing{attempt}`` is already durable.

    ``operation_id`` is the same for every attempt of the call: pass it downstream as the
    idempotency key. ``resume_value`` is an operator's committed answer to an input wait.
    Answer with ``call_returned``, ``call_failed``, ``call_lost`` or ``call_scheduled``
    (or ``call_delegated`` if it has a ``delegation``).
    """

    run_id: str
    call_id: str
    tool: str
    arguments: JsonValue
    operation_id: str
    attempt: int
    resume_value: JsonValue = None
    #: the fencing token when a worker's lease drives the Run (pass it downstream beside
    #: ``operation_id``); None without leases
    lease_epoch: int | None = None
    #: the child Run a sequential delegation hands its work to (a tool declared
    #: ``ToolPolicy(sequential_delegation=True)``: its Executing commit fixed it, derived
    #: from the Run and ``operation_id``); answer ``call_delegated`` once the work is
    #: handed over. None for every other tool.
    delegation: Delegation | None = None


@frozen
class RunCalls:
    """Run the calls of a concurrent group together (tools declared
    ``ToolPolicy.replay(concurrent=True)`` and the like): each ``RunCall`` in ``calls``
    has its ``Executing{attempt}`` durable already. Start them all, then answer each with
    ``call_returned``, ``call_failed``, ``call_lost`` or ``call_scheduled`` as it ends, in
    any order.

    Until every call is answered, each answer returns a ``RunCalls`` again: the calls
    still unanswered, in call order, with the same ``RunCall`` values, plus a new
    attempt of a call whose failure its retry policy retries. So start each
    ``(call_id, attempt)`` once (``to_start(previous)`` says which are new), and report
    the rest as they end. A host that runs one call at a time still works: run and answer
    the calls of the action in order, then handle the action the last answer returned.
    """

    run_id: str
    calls: tuple[RunCall, ...]

    def to_start(self, previous: Action | None) -> tuple[RunCall, ...]:
        """The calls of this action to start now: those the action handed out before
        it (``previous``: a ``RunCalls``, anything else, or None) did not list with the
        same attempt."""
        known = {(c.call_id, c.attempt) for c in previous.calls} if isinstance(previous, RunCalls) else set()
        return tuple(c for c in self.calls if (c.call_id, c.attempt) not in known)


@frozen
class CheckStatus:
    """Ask a reconnect tool what became of ``operation_id`` without starting anything;
    answer with ``status``. For ``running`` the driver asks again: how long to wait
    between questions, or when to give up and come back later, is the host's choice."""

    run_id: str
    call_id: str
    tool: str
    operation_id: str
    attempt: int
    #: the fencing token when a worker's lease drives the Run: ask
    #: ``status(operation_id, lease_epoch)``, so the downstream learns the new epoch
    #: before it is asked to start anything; None without leases
    lease_epoch: int | None = None


@frozen
class Fence:
    """Before the driver commits a terminal result for a call it found Executing and did
    not start (recovery's outcome, or the Run's end by a cancel, stop or failure), tell
    the downstream of ``tool`` that ``operation_id`` is fenced at ``lease_epoch``: a
    downstream that keeps the highest epoch per operation then refuses a start with a
    lower one (a worker that stalled between its lease re-check and its effect). Handed
    out only for the tools named in the driver's ``fences``. Answer with
    ``fenced(call_id)``; if the fence failed, answer nothing and stop driving: nothing
    is committed, and the Run is picked up again later. The fence's answer never
    changes what is committed."""

    run_id: str
    call_id: str
    tool: str
    operation_id: str
    #: the fencing token of the lease driving the Run (None without leases)
    lease_epoch: int | None = None


@frozen
class WaitFor:
    """The Run is Awaiting ``ticket`` (durable): show ``call`` to whoever must answer
    (approval, input, an external answer) or wait for the timer in ``wait.due_at``.
    Answer with ``resume(payload)``, or call ``next_action()`` later to apply a command
    that arrived through the store's inbox (``runkernel resume``) or an expired deadline.
    """

    run_id: str
    ticket: ResumeTicket
    wait: Wait
    call: ToolCall

    @property
    def request(self) -> JsonValue:
        """What the hold asked, to show whoever answers (an approval prompt, an input's
        question): the JSON the gate gave with ``Hold``, committed with the wait, so the
        same after a crash; None when it gave none."""
        return self.wait.request


@frozen
class ChildRun:
    """The child Run of a concurrent delegation: ``call_id`` of the parent's batch
    delegated ``arguments`` (the child's first user message) to the Run ``run_id`` in
    Thread ``thread_id`` (both derived from the parent Run and the call's operation id)."""

    call_id: str
    tool: str
    arguments: JsonValue
    thread_id: str
    run_id: str


@frozen
class ChildrenRunning:
    """The Run is quiet: its only open work is concurrent delegations, and each one's child
    Run (``children``, activated and durable) is still running. Nothing here is for the
    host to execute: a child is an ordinary Run (of the driver's ``app``), driven by a
    worker or by the host with a driver of its own (``pick_up(child.run_id)``). Call
    ``next_action()`` once a child may have ended: the driver completes each call whose
    child has ended with the child's terminus, then goes on. ``end()``/``cancel()`` ends
    the parent: calls whose child has ended complete, the others become Indeterminate and
    their children are sent a cancel. A worker releases the Run's lease here."""

    run_id: str
    children: tuple[ChildRun, ...]


@frozen
class Done:
    """The Run is Ended with ``cause``. ``final`` is the content of its last assistant
    message (or None); ``redelivery`` says the terminus was committed earlier."""

    run_id: str
    thread_id: str
    cause: EndCause
    final: JsonValue
    redelivery: bool = False


Action: TypeAlias = Infer | RunCall | RunCalls | CheckStatus | Fence | WaitFor | ChildrenRunning | Done


@frozen
class Answer:
    """A value that answers a call's wait, given before the host knows which kind of wait
    its ticket is (a framework that collects answers by call id): an input wait resumes
    with ``ProvideInput(value)``, any other with ``ExternalResult(value)``."""

    value: JsonValue

    def payload(self, wait: WaitFor) -> ResumePayload:
        """The resume payload this answer is for ``wait``."""
        kind = wait.wait.kind
        match kind:
            case WaitKind.INPUT:
                return ProvideInput(self.value)
            case WaitKind.EXTERNAL | WaitKind.APPROVAL | WaitKind.DELEGATION | WaitKind.SCHEDULED:
                return ExternalResult(self.value)
            case _:
                assert_never(kind)


@frozen
class CallRequest:
    """One tool call of the model's reply. Ids the host leaves out are minted by the
    driver; give ``operation_id`` only if it is stable and unique within the Run."""

    tool: str
    arguments: JsonValue
    call_id: str | None = None
    operation_id: str | None = None


__all__ = [
    "DEFAULT_MAX_STEPS",
    "Action",
    "Answer",
    "CallRequest",
    "CheckStatus",
    "ChildRun",
    "ChildrenRunning",
    "Done",
    "DriverError",
    "Fence",
    "DriverStopped",
    "HistoryView",
    "HostProtocolError",
    "Infer",
    "RunCall",
    "RunCalls",
    "UnknownTool",
    "WaitFor",
]
