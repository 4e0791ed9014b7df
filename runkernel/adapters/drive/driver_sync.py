# generated from runkernel/adapters/drive/driver_async.py by tools/async_to_sync.py, do not edit:
# change runkernel/adapters/drive/driver_async.py and run `python tools/async_to_sync.py`
"""The push-mode driver for synchronous hosts, ``Driver``: ``driver.py`` says how the
two shells are made from one source."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from typing import Any

from runkernel.adapters.drive.actions import Action, CallRequest, CheckStatus, DriverError
from runkernel.adapters.drive.core import DriverCore
from runkernel.adapters.drive.shell import Shell, end_report, inferred_report
from runkernel.adapters.drive.protocol import (
    AskGate,
    CallEnded,
    Fenced,
    Hand,
    InferenceFailed,
    Operation,
    Partial,
    Poll,
    Report,
    Resume,
    Status,
)
from runkernel.adapters.drive.ports import StatusReply
from runkernel.kernel.protocol import (
    OperationStatus,
    ResumePayload,
    ToolDelegated,
    ToolFailure,
    ToolOutcomeLost,
    ToolOutput,
    ToolScheduled,
)
from runkernel.kernel.state import Message, Staged, TypedError
from runkernel.kernel.values import EndCauseKind, JsonValue

import time


class Driver(Shell):
    """The push-mode driver for synchronous hosts.

    ``Driver(store, tools={"search": ToolPolicy.replay(), "send_email": "indeterminate"})``;
    every tool the model may call needs its policy (an unknown one is ``UnknownTool``).
    ``max_steps`` defaults to ``DEFAULT_MAX_STEPS``; ``gate`` defaults to allowing every
    call (the ``gate`` attribute may be replaced between calls, e.g. by a host that
    knows its gate only once its own run started); ``ids`` mints run, thread, batch,
    call, operation and ticket ids the host does not give (``SecretIds``: from
    ``secrets``); ``clock`` gives "now" for approval deadlines. ``app`` is recorded on
    the activation of each Run it starts and of each child Run it activates for a
    concurrent delegation, with ``app_version`` beside it (default: the digest of
    ``tools``, their names and policies: ``runkernel.adapters.worker.apps.version_of``). ``on_event`` is told what the driver did, as the pull-mode
    runtime's is (``Acknowledged`` commits, ``CommandSettled``, ``Recovered``,
    ``CheckpointLost``, ``CommitRetried``). One driver drives one Run at a time; each
    method returns the next ``Action``. A refused answer raises ``HostProtocolError``
    and changes nothing. ``transient(error)`` says which exceptions of a model call are
    worth another attempt (default ``transient_model_error``: timeouts, dropped
    connections, HTTP 408/409/429/5xx) and ``model_attempts`` how many attempts of one
    model call a Run gets in this driver's hands (see ``inference_failed``). ``fences``
    names the tools whose downstream takes a fence (W5): for those, before a commit makes
    terminal a call this driver found Executing and did not start, it hands out
    ``Fence`` (answer ``fenced``); ``CheckStatus`` and ``RunCall`` carry the lease epoch
    for every tool. ``telemetry`` is told what each drive does
    (``runkernel.integrations.otel.OpenTelemetry()`` for traces and metrics); the default
    records nothing.
    """

    def start(
        self, messages: Sequence[Message | str], *, thread_id: str | None = None, run_id: str | None = None
    ) -> Action:
        """Activate a new Run (strings are user messages) and return its first action."""
        run, steps, core = self._opening(messages, thread_id, run_id)
        self._open(run, steps, core)
        return self._advance(None)

    def pick_up(self, run_id: str) -> Action:
        """Continue a Run from the store alone (after a crash, in another process)."""
        core = DriverCore(self.settings)
        self._open(run_id, core.pick_up(run_id), core, picking_up=True)
        return self._advance(None)

    def next_action(self) -> Action:
        """What to do now: applies inbox commands and expired deadlines first; after
        ``ChildrenRunning``, completes each call whose child Run has ended."""
        return self._advance(Poll())

    def inferred(
        self,
        content: JsonValue,
        calls: Sequence[CallRequest] = (),
        *,
        end: EndCauseKind | None = None,
        metadata: JsonValue = None,
        staged: Staged | None = None,
    ) -> Action:
        """Answer ``Infer``: the model's reply (text, optionally ending the Run, or calls).

        ``staged`` is what the host's StepStart/BeforeInference hooks staged for this Step
        (``Staged(None)`` clears it, None leaves it unchanged): committed with the reply.
        Their request-only context goes to the host's own model request, never here."""
        return self._advance(inferred_report(content, calls, end, metadata, staged))

    def inference_failed(self, error: BaseException) -> Action:
        """Answer ``Infer``: the model call raised ``error``. Nothing is committed for it.
        A transient error (``transient(error)``) with attempts left returns the same
        ``Infer`` with ``attempt`` one higher and ``retry_after``, the seconds to wait
        before calling the model again (the lease, if a worker's, renewed first if due);
        otherwise the Run ends ``failed`` with the error (its type's name and message)
        and ``Done`` is returned. The count of attempts is this driver's, never
        committed: a new driver that picks the Run up starts it again."""
        return self._advance(InferenceFailed(error))

    def checkpoint(self, partial: JsonValue) -> Action:
        """While ``Infer`` stands: save the model's output so far, best effort (a failed
        write loses only partial recovery). Returns the same ``Infer``."""
        return self._advance(Partial(partial))

    def call_returned(
        self, call_id: str, value: JsonValue, *, metadata: JsonValue = None, reaction: JsonValue = None
    ) -> Action:
        """Answer ``RunCall`` (or one call of ``RunCalls``): the tool returned ``value``; ``reaction`` is the host's
        AfterTool answer, committed with the result and immutable like it."""
        return self._advance(CallEnded(call_id, ToolOutput(value), metadata, reaction))

    def call_failed(
        self,
        call_id: str,
        error: JsonValue,
        *,
        retryable: bool = False,
        metadata: JsonValue = None,
        reaction: JsonValue = None,
    ) -> Action:
        """Answer ``RunCall`` (or one call of ``RunCalls``): the tool failed; ``retryable`` lets its retry policy try again.
        ``reaction`` is committed only if this failure ends the call (not with a retry)."""
        return self._advance(CallEnded(call_id, ToolFailure(error, retryable), metadata, reaction))

    def call_lost(self, call_id: str, *, reaction: JsonValue = None) -> Action:
        """Answer ``RunCall`` (or one call of ``RunCalls``): nobody can tell what happened (the call becomes Indeterminate)."""
        return self._advance(CallEnded(call_id, ToolOutcomeLost(), None, reaction))

    def call_scheduled(self, call_id: str, due_at: str) -> Action:
        """Answer ``RunCall`` (or one call of ``RunCalls``): run this call again at ``due_at`` (a durable timer wait)."""
        return self._advance(CallEnded(call_id, ToolScheduled(self.settings.ids.ticket_id(), due_at), None))

    def call_delegated(self, call_id: str, *, reaction: JsonValue = None) -> Action:
        """Answer ``RunCall`` of a sequential delegation: its work is handed to the child
        Run in ``RunCall.delegation``; the Run waits for the child's answer (``WaitFor``,
        resumed with ``DelegationResult``). A tool without a ``delegation`` (not declared
        ``sequential_delegation=True``) fails with ``UndeclaredDelegation``."""
        return self._advance(CallEnded(call_id, ToolDelegated(self.settings.ids.ticket_id()), None, reaction))

    def status(self, call_id: str, status: OperationStatus, value: JsonValue = None) -> Action:
        """Answer ``CheckStatus`` with the tool's ``status(operation_id, lease_epoch)``."""
        return self._advance(Status(call_id, status, value))

    def fenced(self, call_id: str) -> Action:
        """Answer ``Fence``: the tool's downstream took ``fence(operation_id,
        lease_epoch)`` for ``call_id``; the commit it preceded is written now. A fence
        that failed is answered by nothing: drop the driver (or ``pick_up`` later) and
        nothing is committed."""
        return self._advance(Fenced(call_id))

    def ask_status(
        self,
        status: Callable[[str, int | None], StatusReply],
        *,
        interval: float = 0.2,
        asks: int | None = None,
    ) -> Action:
        """Answer the standing ``CheckStatus`` with ``status(operation_id, lease_epoch)``,
        and ask again every ``interval`` seconds while the tool says the call is still
        running, at most ``asks`` times (None: until it says something else). Returns the
        next action (the same ``CheckStatus`` if the asks ran out); ``DriverError`` if no
        ``CheckStatus`` stands."""
        first = self._standing_check()
        action: Action = first
        call_id, asked = first.call_id, 0
        while isinstance(action, CheckStatus) and action.call_id == call_id and (asks is None or asked < asks):
            if asked:  # it said running: give it time
                time.sleep(interval)
            reply = status(action.operation_id, action.lease_epoch)
            asked += 1
            action = self.status(action.call_id, reply.status, reply.value)
        return action

    def resume(self, payload: ResumePayload) -> Action:
        """Answer ``WaitFor`` with a typed payload (``Approve()``, ``Deny(reason)``, ...)."""
        return self._advance(Resume(payload))

    def end(self, kind: EndCauseKind = EndCauseKind.STOPPED, error: TypedError | None = None) -> Action:
        """End the Run now (stop, cancel, or failure with ``error``), whatever it was doing;
        a running child Run's call closes Indeterminate and the child is sent a cancel."""
        return self._advance(end_report(kind, error))

    def cancel(self) -> Action:
        """The client abandons the Run."""
        return self._advance(end_report(EndCauseKind.CANCELLED, None))

    def _advance(self, answer: Report | None) -> Action:
        action = self._advance_once(answer)
        while (payload := self._ahead_for(action)) is not None:
            action = self._advance_once(Resume(payload))
        return action

    def _advance_once(self, answer: Report | None) -> Action:
        with self._one_call():
            steps, op = self._first(answer)
            while not isinstance(op, Hand):
                with self._performing():
                    result = self._perform(op)
                op = self._send(steps, result)
            return self._handed(op)

    def _perform(self, op: Operation) -> Any:
        if isinstance(op, AskGate):
            answer = self.gate.check(op.run_id, op.call)
            if inspect.isawaitable(answer):
                if inspect.iscoroutine(answer):
                    answer.close()  # never awaited: say so once, not in a RuntimeWarning
                raise DriverError("the gate returned an awaitable: use AsyncDriver for an async gate")
            return answer
        return self._perform_store(op)


__all__ = ["Driver"]
