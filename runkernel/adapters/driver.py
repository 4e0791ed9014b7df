"""The push-mode driver: for hosts that call the model and the tools themselves.

The host says what happened and gets back what to do next (``Infer``, ``RunCall``,
``CheckStatus``, ``WaitFor``, ``Done``); the driver commits through the store in between.
``Driver`` is for synchronous hosts, ``AsyncDriver`` for asyncio ones; both are thin
shells around the one sans-IO core in ``driver_core.py`` and differ only in how they
carry out its operations (an async shell awaits an async gate).

A driver holds no truth of its own. After a crash, a fresh driver's ``pick_up(run_id)``
continues from the store alone and hands out exactly what ``recover`` authorizes: a
replay attempt (its Executing{n+1} already durable), a reconnect status question, the
wait again, or the terminus again. If a store call fails while it drives, the driver
forgets what it believed (``DriverStopped``) and its next ``next_action()`` picks the
Run up again the same way.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Mapping, Sequence
from typing import Any, Protocol

from runkernel.adapters.driver_actions import (
    DEFAULT_MAX_STEPS,
    Action,
    CallRequest,
    DriverError,
    DriverStopped,
    HistoryView,
)
from runkernel.adapters.driver_core import (
    Append,
    AskGate,
    CallEnded,
    DriverCore,
    DropCheckpoint,
    End,
    Hand,
    Inferred,
    LoadCheckpoint,
    Operation,
    Partial,
    Pending,
    Poll,
    ReadHead,
    ReadMessages,
    ReadRun,
    Report,
    Resume,
    SaveCheckpoint,
    Settings,
    Settle,
    Status,
    Steps,
)
from runkernel.adapters.ports import (
    AllowAll,
    Clock,
    GateAnswer,
    IdSource,
    SecretIds,
    utc_now,
)
from runkernel.adapters.store import Store, StoreError, StoreUnavailable
from runkernel.kernel.policies import IndeterminateChoice, Policies, ToolPolicy
from runkernel.kernel.protocol import (
    OperationStatus,
    ResumePayload,
    ToolFailure,
    ToolOutcomeLost,
    ToolOutput,
    ToolScheduled,
)
from runkernel.kernel.state import EndCause, Message, RunSnapshot, ToolCall, TypedError
from runkernel.kernel.values import EndCauseKind, JsonValue, Role


class AnyGate(Protocol):
    """A permission gate: ``check`` answers ``Permit``, ``Refuse``, ``Provide`` or ``Hold``
    (an ``AsyncDriver`` also accepts a coroutine that returns one)."""

    def check(self, run_id: str, call: ToolCall) -> GateAnswer | Awaitable[GateAnswer]: ...


def _settings(
    tools: Mapping[str, ToolPolicy],
    max_steps: int | None,
    on_indeterminate: IndeterminateChoice,
    ids: IdSource | None,
    clock: Clock,
) -> Settings:
    for name, policy in tools.items():
        if not isinstance(policy, ToolPolicy):
            raise ValueError(f"tool {name!r}: expected a ToolPolicy, got {type(policy).__name__}")
    if max_steps is not None and max_steps < 1:
        raise ValueError(f"max_steps must be >= 1 or None, got {max_steps}")
    policies = Policies(tools=dict(tools), max_steps=max_steps, on_indeterminate=on_indeterminate)
    return Settings(policies, ids or SecretIds(), clock)


def _messages(messages: Sequence[Message | str]) -> tuple[Message, ...]:
    return tuple(Message(Role.USER, m) if isinstance(m, str) else m for m in messages)


class _Shell:
    """What both shells share: configuration, the live generator and the report makers.
    Subclasses only say how an operation is carried out (``_advance``)."""

    def __init__(
        self,
        store: Store,
        tools: Mapping[str, ToolPolicy],
        *,
        gate: AnyGate | None = None,
        max_steps: int | None = DEFAULT_MAX_STEPS,
        on_indeterminate: IndeterminateChoice = IndeterminateChoice.PUBLISH,
        ids: IdSource | None = None,
        clock: Clock = utc_now,
    ) -> None:
        self.store = store
        self.settings = _settings(tools, max_steps, on_indeterminate, ids, clock)
        self.gate: AnyGate = gate or AllowAll()
        self._core: DriverCore | None = None
        self._steps: Steps | None = None
        self._run_id: str | None = None
        self._action: Action | None = None
        #: best-effort checkpoint writes that failed (nothing else is lost with them)
        self.checkpoints_lost = 0

    # --- what the host may read -----------------------------------------------------

    @property
    def run_id(self) -> str | None:
        """The Run this driver drives (None before ``start`` or ``pick_up``)."""
        return self._run_id

    @property
    def snapshot(self) -> RunSnapshot | None:
        """The latest snapshot this driver saw acknowledged (None when it holds none)."""
        return self._core.state if self._core is not None else None

    @property
    def messages(self) -> HistoryView:
        """The Thread's messages as committed so far (read once, then kept)."""
        history = self._core.history if self._core is not None else []
        return HistoryView(history, len(history))

    @property
    def action(self) -> Action | None:
        """The action last handed out, which still stands."""
        return self._action

    # --- plumbing -------------------------------------------------------------------

    def _open(self, run_id: str, opening: Steps, core: DriverCore) -> None:
        self._close()
        self._run_id, self._core, self._steps = run_id, core, opening

    def _close(self) -> None:
        if self._steps is not None:
            self._steps.close()
        self._steps, self._action = None, None

    def _forget(self) -> None:
        """Drop everything this driver believed; the next ``next_action()`` picks up."""
        self._close()
        self._core = None

    def _stopped(self, error: StoreError) -> DriverStopped:
        self._forget()
        return DriverStopped(f"stopped driving run {self._run_id!r}: {error}; next_action() picks it up again")

    def _steps_for(self, answer: Report | None) -> tuple[Steps, Report | None]:
        """The live generator and what to send it; after a failure, a poll opens a fresh
        pick-up of the same Run (which starts by being sent None)."""
        if self._steps is not None:
            return self._steps, answer
        if self._run_id is None:
            raise DriverError("no Run yet: call start() or pick_up() first")
        if not isinstance(answer, Poll):
            raise DriverStopped(
                f"this driver stopped driving run {self._run_id!r}; call next_action() to pick it up again"
            )
        core = DriverCore(self.settings)
        self._open(self._run_id, core.pick_up(self._run_id), core)
        assert self._steps is not None
        return self._steps, None

    def _send(self, steps: Steps, value: object) -> Operation:
        try:
            return steps.send(value)
        except BaseException:
            self._forget()
            raise

    def _handed(self, hand: Hand) -> Action:
        self._action = hand.action
        if hand.refused is not None:
            raise hand.refused
        return hand.action

    def _perform_store(self, op: Operation) -> Any:
        store = self.store
        match op:
            case Append():
                return store.append(op.commit)
            case ReadRun():
                return store.run(op.run_id)
            case ReadHead():
                return store.thread_head(op.thread_id)
            case ReadMessages():
                return store.messages(op.thread_id)
            case Pending():
                return store.pending_commands(op.run_id)
            case Settle():
                store.settle_command(op.entry_id, op.outcome)
                return None
            case LoadCheckpoint():
                return store.load_checkpoint(op.run_id)
            case SaveCheckpoint():
                try:
                    store.save_checkpoint(op.checkpoint)
                except StoreUnavailable:
                    self.checkpoints_lost += 1  # best effort: only partial recovery is lost
                return None
            case DropCheckpoint():
                try:
                    store.delete_checkpoint(op.run_id)
                except StoreUnavailable:
                    pass  # a stale checkpoint is never truth; the next save replaces it
                return None
        raise AssertionError(f"not a store operation: {op!r}")

    def _opening(
        self, messages: Sequence[Message | str], thread_id: str | None, run_id: str | None
    ) -> tuple[str, Steps, DriverCore]:
        ids = self.settings.ids
        run = run_id or ids.new_id("run")
        core = DriverCore(self.settings)
        return run, core.start(thread_id or ids.new_id("thread"), run, _messages(messages)), core


def _inferred(
    content: JsonValue,
    calls: Sequence[CallRequest],
    end: EndCauseKind | None,
    metadata: JsonValue,
) -> Report:
    return Inferred(content, tuple(calls), end, metadata)


def _end(kind: EndCauseKind, error: TypedError | None) -> Report:
    return End(EndCause(kind, error))


class Driver(_Shell):
    """The push-mode driver for synchronous hosts.

    ``Driver(store, tools={"search": ToolPolicy(ToolRecoveryPolicy(RecoveryMode.REPLAY))})``;
    every tool the model may call needs its policy (an unknown one is ``UnknownTool``).
    ``max_steps`` defaults to ``DEFAULT_MAX_STEPS``; ``gate`` defaults to allowing every
    call; ``ids`` mints run, thread, batch, call, operation and ticket ids the host does
    not give (``SecretIds``: from ``secrets``); ``clock`` gives "now" for approval
    deadlines. One driver drives one Run at a time; each method returns the next
    ``Action``. A refused answer raises ``HostProtocolError`` and changes nothing.
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
        self._open(run_id, core.pick_up(run_id), core)
        return self._advance(None)

    def next_action(self) -> Action:
        """What to do now: applies inbox commands and expired deadlines first."""
        return self._advance(Poll())

    def inferred(
        self,
        content: JsonValue,
        calls: Sequence[CallRequest] = (),
        *,
        end: EndCauseKind | None = None,
        metadata: JsonValue = None,
    ) -> Action:
        """Answer ``Infer``: the model's reply (text, optionally ending the Run, or calls)."""
        return self._advance(_inferred(content, calls, end, metadata))

    def checkpoint(self, partial: JsonValue) -> Action:
        """While ``Infer`` stands: save the model's output so far, best effort (a failed
        write loses only partial recovery). Returns the same ``Infer``."""
        return self._advance(Partial(partial))

    def call_returned(self, call_id: str, value: JsonValue, *, metadata: JsonValue = None) -> Action:
        """Answer ``RunCall``: the tool returned ``value``."""
        return self._advance(CallEnded(call_id, ToolOutput(value), metadata))

    def call_failed(
        self, call_id: str, error: JsonValue, *, retryable: bool = False, metadata: JsonValue = None
    ) -> Action:
        """Answer ``RunCall``: the tool failed; ``retryable`` lets its retry policy try again."""
        return self._advance(CallEnded(call_id, ToolFailure(error, retryable), metadata))

    def call_lost(self, call_id: str) -> Action:
        """Answer ``RunCall``: nobody can tell what happened (the call becomes Indeterminate)."""
        return self._advance(CallEnded(call_id, ToolOutcomeLost(), None))

    def call_scheduled(self, call_id: str, due_at: str) -> Action:
        """Answer ``RunCall``: run this call again at ``due_at`` (a durable timer wait)."""
        return self._advance(CallEnded(call_id, ToolScheduled(self.settings.ids.ticket_id(), due_at), None))

    def status(self, call_id: str, status: OperationStatus, value: JsonValue = None) -> Action:
        """Answer ``CheckStatus`` with the tool's ``status(operation_id)``."""
        return self._advance(Status(call_id, status, value))

    def resume(self, payload: ResumePayload) -> Action:
        """Answer ``WaitFor`` with a typed payload (``Approve()``, ``Deny(reason)``, ...)."""
        return self._advance(Resume(payload))

    def end(self, kind: EndCauseKind = EndCauseKind.STOPPED, error: TypedError | None = None) -> Action:
        """End the Run now (stop, cancel, or failure with ``error``), whatever it was doing."""
        return self._advance(_end(kind, error))

    def cancel(self) -> Action:
        """The client abandons the Run."""
        return self._advance(_end(EndCauseKind.CANCELLED, None))

    def _advance(self, answer: Report | None) -> Action:
        steps, first = self._steps_for(answer)
        op = self._send(steps, first)
        while not isinstance(op, Hand):
            try:
                result = self._perform(op)
            except StoreError as error:
                raise self._stopped(error) from error
            except BaseException:
                self._forget()
                raise
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


class AsyncDriver(_Shell):
    """The push-mode driver for asyncio hosts: ``Driver``'s methods, awaitable.

    It runs the same core as ``Driver``; the gate may be async. Store calls are short
    local writes and run inline.
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
        self._open(run_id, core.pick_up(run_id), core)
        return await self._advance(None)

    async def next_action(self) -> Action:
        """What to do now: applies inbox commands and expired deadlines first."""
        return await self._advance(Poll())

    async def inferred(
        self,
        content: JsonValue,
        calls: Sequence[CallRequest] = (),
        *,
        end: EndCauseKind | None = None,
        metadata: JsonValue = None,
    ) -> Action:
        """Answer ``Infer``: the model's reply (text, optionally ending the Run, or calls)."""
        return await self._advance(_inferred(content, calls, end, metadata))

    async def checkpoint(self, partial: JsonValue) -> Action:
        """While ``Infer`` stands: save the model's output so far, best effort (a failed
        write loses only partial recovery). Returns the same ``Infer``."""
        return await self._advance(Partial(partial))

    async def call_returned(self, call_id: str, value: JsonValue, *, metadata: JsonValue = None) -> Action:
        """Answer ``RunCall``: the tool returned ``value``."""
        return await self._advance(CallEnded(call_id, ToolOutput(value), metadata))

    async def call_failed(
        self, call_id: str, error: JsonValue, *, retryable: bool = False, metadata: JsonValue = None
    ) -> Action:
        """Answer ``RunCall``: the tool failed; ``retryable`` lets its retry policy try again."""
        return await self._advance(CallEnded(call_id, ToolFailure(error, retryable), metadata))

    async def call_lost(self, call_id: str) -> Action:
        """Answer ``RunCall``: nobody can tell what happened (the call becomes Indeterminate)."""
        return await self._advance(CallEnded(call_id, ToolOutcomeLost(), None))

    async def call_scheduled(self, call_id: str, due_at: str) -> Action:
        """Answer ``RunCall``: run this call again at ``due_at`` (a durable timer wait)."""
        return await self._advance(CallEnded(call_id, ToolScheduled(self.settings.ids.ticket_id(), due_at), None))

    async def status(self, call_id: str, status: OperationStatus, value: JsonValue = None) -> Action:
        """Answer ``CheckStatus`` with the tool's ``status(operation_id)``."""
        return await self._advance(Status(call_id, status, value))

    async def resume(self, payload: ResumePayload) -> Action:
        """Answer ``WaitFor`` with a typed payload (``Approve()``, ``Deny(reason)``, ...)."""
        return await self._advance(Resume(payload))

    async def end(self, kind: EndCauseKind = EndCauseKind.STOPPED, error: TypedError | None = None) -> Action:
        """End the Run now (stop, cancel, or failure with ``error``), whatever it was doing."""
        return await self._advance(_end(kind, error))

    async def cancel(self) -> Action:
        """The client abandons the Run."""
        return await self._advance(_end(EndCauseKind.CANCELLED, None))

    async def _advance(self, answer: Report | None) -> Action:
        steps, first = self._steps_for(answer)
        op = self._send(steps, first)
        while not isinstance(op, Hand):
            try:
                result = await self._perform(op)
            except StoreError as error:
                raise self._stopped(error) from error
            except BaseException:
                self._forget()
                raise
            op = self._send(steps, result)
        return self._handed(op)

    async def _perform(self, op: Operation) -> Any:
        if isinstance(op, AskGate):
            answer = self.gate.check(op.run_id, op.call)
            if inspect.isawaitable(answer):
                return await answer
            return answer
        return self._perform_store(op)


__all__ = ["AnyGate", "AsyncDriver", "Driver"]
