"""What the push-mode driver's two shells share: configuration, the live generator of
the core and the report makers; its store operations are one ``StoreOps``
(``store_ops``), the pull-mode runtime's too. Only how an operation is carried out
(awaited or not) differs between ``AsyncDriver`` (``driver_async.py``, written by hand)
and ``Driver`` (``driver_sync.py``, generated from it by ``tools/async_to_sync.py``);
whatever does no I/O lives here, once.
"""

from __future__ import annotations

import contextlib
from types import MappingProxyType

import attrs

from collections.abc import Awaitable, Callable, Collection, Iterator, Mapping, Sequence
from typing import Any, Protocol, TypeAlias, TypeVar

from runkernel.adapters.drive.app_version import tool_table_version
from runkernel.adapters.drive.actions import (
    DEFAULT_MAX_STEPS,
    Action,
    Answer,
    CallRequest,
    CheckStatus,
    DriverError,
    DriverStopped,
    Fence,
    HistoryView,
    RunCall,
    RunCalls,
    WaitFor,
)
from runkernel.adapters.drive.core import DriverCore
from runkernel.adapters.drive.settings import Settings
from runkernel.adapters.drive.store_ops import StoreOps
from runkernel.adapters.drive.protocol import End, Hand, Inferred, Operation, Poll, Report, Steps
from runkernel.adapters.drive.model_errors import (
    DEFAULT_MODEL_ATTEMPTS,
    TransientPredicate,
    checked_attempts,
    transient_model_error,
)
from runkernel.adapters.drive.ports import AllowAll, Clock, GateAnswer, IdSource, SecretIds, utc_now
from runkernel.adapters.drive.events import Acknowledged, CheckpointLost, RuntimeEvent
from runkernel.adapters.stores.contract import Store, StoreError
from runkernel.adapters.drive.lease_keeper import LeaseKeeper
from runkernel.adapters.drive.telemetry import NO_TELEMETRY, Telemetry
from runkernel.kernel.policies import IndeterminateChoice, Policies, ToolPolicy, tool_policies
from runkernel.kernel.protocol import ResumePayload
from runkernel.kernel.state import CallIndeterminate, EndCause, Message, RunSnapshot, Staged, ToolCall, TypedError
from runkernel.kernel.values import EndCauseKind, JsonValue, Role


_T = TypeVar("_T")

#: An ``X`` or an awaitable of one: what an async shell takes from a host callable that
#: may be a coroutine function (the sync shell, generated, takes only ``X``).
MaybeAwaitable: TypeAlias = _T | Awaitable[_T]


class AnyGate(Protocol):
    """A permission gate: ``check`` answers ``Permit``, ``Refuse``, ``Provide`` or ``Hold``
    (an ``AsyncDriver`` also accepts a coroutine that returns one)."""

    def check(self, run_id: str, call: ToolCall) -> GateAnswer | Awaitable[GateAnswer]: ...


def _settings(
    tools: Mapping[str, ToolPolicy | str],
    max_steps: int | None,
    on_indeterminate: IndeterminateChoice,
    ids: IdSource | None,
    clock: Clock,
    app: str | None,
    transient: TransientPredicate,
    model_attempts: int,
    fences: Collection[str] = (),
    telemetry: Telemetry = NO_TELEMETRY,
    app_version: str | None = None,
) -> Settings:
    if max_steps is not None and max_steps < 1:
        raise ValueError(f"max_steps must be >= 1 or None, got {max_steps}")
    policies = Policies(tools=dict(tools), max_steps=max_steps, on_indeterminate=on_indeterminate)
    if isinstance(fences, str):
        raise TypeError(f"fences is a collection of tool names, not the string {fences!r}")
    unknown = sorted(set(fences) - set(policies.tools))
    if unknown:
        raise ValueError(f"fences names tool(s) without a policy: {', '.join(map(repr, unknown))}")
    if app is not None and app_version is None:
        app_version = tool_table_version(policies.tools)  # the default: the tool table's digest
    return Settings(
        policies,
        ids or SecretIds(),
        clock,
        app,
        app_version=app_version if app is not None else None,
        transient=transient,
        model_attempts=checked_attempts(model_attempts),
        fences=frozenset(fences),
        telemetry=telemetry,
    )


def _messages(messages: Sequence[Message | str]) -> tuple[Message, ...]:
    return tuple(Message(Role.USER, m) if isinstance(m, str) else m for m in messages)


class Shell:
    """What both shells share: configuration, the live generator and the report makers.
    Subclasses only say how an operation is carried out (``_advance``)."""

    def __init__(
        self,
        store: Store,
        tools: Mapping[str, ToolPolicy | str],
        *,
        gate: AnyGate | None = None,
        max_steps: int | None = DEFAULT_MAX_STEPS,
        on_indeterminate: IndeterminateChoice = IndeterminateChoice.PUBLISH,
        ids: IdSource | None = None,
        clock: Clock = utc_now,
        leases: LeaseKeeper | None = None,
        app: str | None = None,
        on_event: Callable[[RuntimeEvent], None] | None = None,
        transient: TransientPredicate = transient_model_error,
        model_attempts: int = DEFAULT_MODEL_ATTEMPTS,
        fences: Collection[str] = (),
        telemetry: Telemetry | None = None,
        app_version: str | None = None,
    ) -> None:
        # leases: a worker's LeaseKeeper (see StoreOps); a RunCall is handed out only
        # after the lease is re-checked with its margin (W1), carrying its epoch, and a
        # CheckStatus or Fence carries the epoch too (W5). fences: the tools whose
        # downstream takes a fence (a Fence is handed out for those only). telemetry:
        # told what each drive does (runkernel.integrations.otel)
        self.store = store
        self.leases = leases
        self.on_event = on_event
        telemetry = telemetry or NO_TELEMETRY
        self.ops = StoreOps(store, leases, self._event, telemetry=telemetry)
        self.settings = _settings(
            tools, max_steps, on_indeterminate, ids, clock, app, transient, model_attempts, fences, telemetry,
            app_version,
        )
        self.gate: AnyGate = gate or AllowAll()
        self._core: DriverCore | None = None
        self._steps: Steps | None = None
        self._run_id: str | None = None
        self._action: Action | None = None
        self._busy = False
        self._ahead: dict[str, ResumePayload | Answer] = {}
        #: best-effort checkpoint writes that failed (nothing else is lost with them)
        self.checkpoints_lost = 0
        #: commits the store acknowledged for this driver
        self.commits = 0

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
        return HistoryView(history)

    @property
    def action(self) -> Action | None:
        """The action last handed out, which still stands."""
        return self._action

    def call(self, call_id: str) -> ToolCall | None:
        """Call ``call_id`` of the Run's batch as last committed (None if it has none)."""
        snapshot = self.snapshot
        batch = snapshot.batch if snapshot is not None else None
        return batch.call(call_id) if batch is not None else None

    @property
    def unreconciled(self) -> tuple[str, ...]:
        """The operation ids of the batch's Indeterminate calls: what to reconcile downstream."""
        snapshot = self.snapshot
        calls = snapshot.batch.calls if snapshot is not None and snapshot.batch is not None else ()
        return tuple(c.operation_id for c in calls if isinstance(c.status, CallIndeterminate))

    # --- tools learned while the Run goes on --------------------------------------

    def declare_tools(self, tools: Mapping[str, ToolPolicy | str]) -> None:
        """Give tools learned while the Run goes on their policies (an MCP server's tools,
        listed as the agent runs). Each call's policy is committed with its batch, so
        declare a tool before reporting the model reply that calls it; a tool declared
        again takes its new policy for later batches (calls committed keep theirs)."""
        policies = self.settings.policies
        declared = attrs.evolve(policies, tools={**policies.tools, **tool_policies(tools)})
        self.settings = attrs.evolve(self.settings, policies=declared)
        if self._core is not None:  # the Run in hand decides its next batch with them
            self._core.settings, self._core.policies = self.settings, declared

    # --- answers given ahead --------------------------------------------------------

    def answer_ahead(self, answers: Mapping[str, ResumePayload | Answer]) -> None:
        """Answers, by call id, to waits not handed out yet (a framework that shows the
        host several waits of one batch at once and gets their answers together). The
        Run commits one ticket at a time, in call order: when a ``WaitFor`` for one of
        these calls comes up, after any command queued in the store's inbox, the driver
        resumes it with its answer instead of handing it out."""
        self._ahead.update(answers)

    @property
    def answers_ahead(self) -> Mapping[str, ResumePayload | Answer]:
        """The answers given ahead that no wait has taken yet."""
        return MappingProxyType(self._ahead)

    def _ahead_for(self, action: Action) -> ResumePayload | None:
        if not isinstance(action, WaitFor) or action.call.call_id not in self._ahead:
            return None
        answer = self._ahead.pop(action.call.call_id)
        return answer.payload(action) if isinstance(answer, Answer) else answer

    # --- plumbing -------------------------------------------------------------------

    @contextlib.contextmanager
    def _one_call(self) -> Iterator[None]:
        """One call at a time: an async host that does not await a call before the next
        would otherwise send a report into the middle of the previous one."""
        if self._busy:
            raise DriverError("the driver is still busy with another call: await each call before the next")
        self._busy = True
        try:
            yield
        finally:
            self._busy = False

    def _open(self, run_id: str, opening: Steps, core: DriverCore, *, picking_up: bool = False) -> None:
        if self._busy:
            raise DriverError("the driver is still busy with another call: await each call before the next")
        self._attach(run_id, opening, core, picking_up=picking_up)

    def _attach(self, run_id: str, opening: Steps, core: DriverCore, *, picking_up: bool = False) -> None:
        self._close()
        self.ops.lease(run_id, picking_up=picking_up)
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
        self._attach(self._run_id, core.pick_up(self._run_id), core, picking_up=True)
        assert self._steps is not None
        return self._steps, None

    def _first(self, answer: Report | None) -> tuple[Steps, Operation]:
        """The live generator and its first operation for ``answer``."""
        steps, first = self._steps_for(answer)
        return steps, self._send(steps, first)

    @contextlib.contextmanager
    def _performing(self) -> Iterator[None]:
        """Around one operation carried out by a shell: a store that fails stops the
        driver (``DriverStopped``); anything else raised makes it forget what it believed."""
        try:
            yield
        except StoreError as error:
            raise self._stopped(error) from error
        except BaseException:
            self._forget()
            raise

    def _standing_check(self) -> CheckStatus:
        """The standing ``CheckStatus`` that ``ask_status`` answers."""
        if not isinstance(self._action, CheckStatus):
            raise DriverError(f"ask_status answers a standing CheckStatus, not {self._action!r}")
        return self._action

    def _send(self, steps: Steps, value: object) -> Operation:
        try:
            return steps.send(value)
        except BaseException:
            self._forget()
            raise

    def _handed(self, hand: Hand) -> Action:
        action = hand.action
        if isinstance(action, RunCalls):
            action = self._calls_handed(action, check=hand.refused is None)
        elif isinstance(action, (RunCall, CheckStatus, Fence)) and hand.refused is None:
            try:
                if isinstance(action, RunCall):
                    action = self.ops.before_run_call(action)
                else:
                    action = attrs.evolve(action, lease_epoch=self.ops.lease_epoch(action.run_id))
            except StoreError as error:
                raise self._stopped(error) from error
        self._action = action
        if hand.refused is not None:
            raise hand.refused
        return action

    def _calls_handed(self, action: RunCalls, *, check: bool) -> RunCalls:
        """``action`` with each call the standing ``RunCalls`` listed as it was handed
        out, and each new one re-checked against the lease (W1, once per start)."""
        standing = self._action
        known = {(c.call_id, c.attempt): c for c in standing.calls} if isinstance(standing, RunCalls) else {}
        calls = []
        for call in action.calls:
            before = known.get((call.call_id, call.attempt))
            if before is None and check:
                try:
                    before = self.ops.before_run_call(call)
                except StoreError as error:
                    raise self._stopped(error) from error
            calls.append(before or call)
        return attrs.evolve(action, calls=tuple(calls))

    def _perform_store(self, op: Operation) -> Any:
        return self.ops.perform(op)

    def _event(self, event: RuntimeEvent) -> None:
        if isinstance(event, Acknowledged):
            self.commits += 1
        elif isinstance(event, CheckpointLost):
            self.checkpoints_lost += 1  # best effort: only partial recovery is lost
        if self.on_event is not None:
            self.on_event(event)

    def _opening(
        self, messages: Sequence[Message | str], thread_id: str | None, run_id: str | None
    ) -> tuple[str, Steps, DriverCore]:
        ids = self.settings.ids
        run = run_id or ids.new_id("run")
        core = DriverCore(self.settings)
        return run, core.start(thread_id or ids.new_id("thread"), run, _messages(messages)), core


def inferred_report(
    content: JsonValue,
    calls: Sequence[CallRequest],
    end: EndCauseKind | None,
    metadata: JsonValue,
    staged: Staged | None = None,
) -> Report:
    return Inferred(content, tuple(calls), end, metadata, staged)


def end_report(kind: EndCauseKind, error: TypedError | None) -> Report:
    return End(EndCause(kind, error))


__all__ = ["AnyGate", "MaybeAwaitable", "Shell", "end_report", "inferred_report"]
