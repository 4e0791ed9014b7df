"""The push-mode driver for asyncio hosts, ``AsyncDriver``: ``driver.py`` says how the
two shells are made from one source."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from typing import Any

from runkernel.adapters.drive.actions import Action, CallRequest, CheckStatus, DriverError
from runkernel.adapters.drive.core import DriverCore
from runkernel.adapters.drive.shell import MaybeAwaitable, Shell, end_report, inferred_report
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

if True:  # ASYNC
    import asyncio

    from runkernel.adapters.drive.store_thread import off_loop
else:
    import time


class AsyncDriver(Shell):
    """The push-mode driver for asyncio hosts: the gate may be async; store
    calls run off the event loop, on one thread kept for the store (``store_thread``), and
    ``on_event`` is called there (``loop.call_soon_threadsafe`` reaches the loop from it).

    ``AsyncDriver(store, tools={"search": ToolPolicy.replay(), "send_email": "indeterminate"})``;
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

    async def start(
        self, messages: Sequence[Message | str], *, thread_id: str | None = None, run_id: str | None = None
    ) -> Action:
        """Activate a new Run (strings are user messages) and return its first action."""
        run, steps, core = self._opening(messages, thread_id, run_id)
        self._open(run, steps, core)
        return await self._advance(None)

    async def pick_up(self, run_id: str) -> Action:
        """Continue a Run from the store alone (after a crash, in another process)."""
        core = DriverCore(self.settings)
        self._open(run_id, core.pick_up(run_id), core, picking_up=True)
        return await self._advance(None)

    async def next_action(self) -> Action:
        """What to do now: applies inbox commands and expired deadlines first; after
        ``ChildrenRunning``, completes each call whose child Run has ended."""
        return await self._advance(Poll())

    async def inferred(
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
        return await self._advance(inferred_report(content, calls, end, metadata, staged))

    async def inference_failed(self, error: BaseException) -> Action:
        """Answer ``Infer``: the model call raised ``error``. Nothing is committed for it.
        A transient error (``transient(error)``) with attempts left returns the same
        ``Infer`` with ``attempt`` one higher and ``retry_after``, the seconds to wait
        before calling the model again (the lease, if a worker's, renewed first if due);
        otherwise the Run ends ``failed`` with the error (its type's name and message)
        and ``Done`` is returned. The count of attempts is this driver's, never
        committed: a new driver that picks the Run up starts it again."""
        return await self._advance(InferenceFailed(error))

    async def checkpoint(self, partial: JsonValue) -> Action:
        """While ``Infer`` stands: save the model's output so far, best effort (a failed
        write loses only partial recovery). Returns the same ``Infer``."""
        return await self._advance(Partial(partial))

    async def call_returned(
        self, call_id: str, value: JsonValue, *, metadata: JsonValue = None, reaction: JsonValue = None
    ) -> Action:
        """Answer ``RunCall`` (or one call of ``RunCalls``): the tool returned ``value``; ``reaction`` is the host's
        AfterTool answer, committed with the result and immutable like it."""
        return await self._advance(CallEnded(call_id, ToolOutput(value), metadata, reaction))

    async def call_failed(
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
        return await self._advance(CallEnded(call_id, ToolFailure(error, retryable), metadata, reaction))

    async def call_lost(self, call_id: str, *, reaction: JsonValue = None) -> Action:
        """Answer ``RunCall`` (or one call of ``RunCalls``): nobody can tell what happened (the call becomes Indeterminate)."""
        return await self._advance(CallEnded(call_id, ToolOutcomeLost(), None, reaction))

    async def call_scheduled(self, call_id: str, due_at: str) -> Action:
        """Answer ``RunCall`` (or one call of ``RunCalls``): run this call again at ``due_at`` (a durable timer wait)."""
        return await self._advance(CallEnded(call_id, ToolScheduled(self.settings.ids.ticket_id(), due_at), None))

    async def call_delegated(self, call_id: str, *, reaction: JsonValue = None) -> Action:
        """Answer ``RunCall`` of a sequential delegation: its work is handed to the child
        Run in ``RunCall.delegation``; the Run waits for the child's answer (``WaitFor``,
        resumed with ``DelegationResult``). A tool without a ``delegation`` (not declared
        ``sequential_delegation=True``) fails with ``UndeclaredDelegation``."""
        return await self._advance(CallEnded(call_id, ToolDelegated(self.settings.ids.ticket_id()), None, reaction))

    async def status(self, call_id: str, status: OperationStatus, value: JsonValue = None) -> Action:
        """Answer ``CheckStatus`` with the tool's ``status(operation_id, lease_epoch)``."""
        return await self._advance(Status(call_id, status, value))

    async def fenced(self, call_id: str) -> Action:
        """Answer ``Fence``: the tool's downstream took ``fence(operation_id,
        lease_epoch)`` for ``call_id``; the commit it preceded is written now. A fence
        that failed is answered by nothing: drop the driver (or ``pick_up`` later) and
        nothing is committed."""
        return await self._advance(Fenced(call_id))

    async def ask_status(
        self,
        status: Callable[[str, int | None], MaybeAwaitable[StatusReply]],
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
                if True:  # ASYNC
                    await asyncio.sleep(interval)
                else:
                    time.sleep(interval)
            reply = status(action.operation_id, action.lease_epoch)
            if True:  # ASYNC
                reply = await reply if inspect.isawaitable(reply) else reply
            asked += 1
            action = await self.status(action.call_id, reply.status, reply.value)
        return action

    async def resume(self, payload: ResumePayload) -> Action:
        """Answer ``WaitFor`` with a typed payload (``Approve()``, ``Deny(reason)``, ...)."""
        return await self._advance(Resume(payload))

    async def end(self, kind: EndCauseKind = EndCauseKind.STOPPED, error: TypedError | None = None) -> Action:
        """End the Run now (stop, cancel, or failure with ``error``), whatever it was doing;
        a running child Run's call closes Indeterminate and the child is sent a cancel."""
        return await self._advance(end_report(kind, error))

    async def cancel(self) -> Action:
        """The client abandons the Run."""
        return await self._advance(end_report(EndCauseKind.CANCELLED, None))

    async def _advance(self, answer: Report | None) -> Action:
        action = await self._advance_once(answer)
        while (payload := self._ahead_for(action)) is not None:
            action = await self._advance_once(Resume(payload))
        return action

    async def _advance_once(self, answer: Report | None) -> Action:
        with self._one_call():
            if True:  # ASYNC
                # the kernel's decisions read the Run's history from the store: off the loop too
                steps, op = await off_loop(self.store, self._first, answer)
            else:
                steps, op = self._first(answer)
            while not isinstance(op, Hand):
                with self._performing():
                    result = await self._perform(op)
                if True:  # ASYNC
                    op = await off_loop(self.store, self._send, steps, result)
                else:
                    op = self._send(steps, result)
            if True:  # ASYNC
                # handing out a tool's start re-checks its lease with the store (W1)
                return await off_loop(self.store, self._handed, op)
            else:
                return self._handed(op)

    async def _perform(self, op: Operation) -> Any:
        if isinstance(op, AskGate):
            answer = self.gate.check(op.run_id, op.call)
            if inspect.isawaitable(answer):
                if True:  # ASYNC
                    return await answer
                else:
                    if inspect.iscoroutine(answer):
                        answer.close()  # never awaited: say so once, not in a RuntimeWarning
                    raise DriverError("the gate returned an awaitable: use AsyncDriver for an async gate")
            return answer
        if True:  # ASYNC
            return await off_loop(self.store, self._perform_store, op)
        else:
            return self._perform_store(op)


__all__ = ["AsyncDriver"]
