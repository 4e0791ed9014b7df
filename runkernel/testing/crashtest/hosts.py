"""Play one scenario of a user's app against a store, dying at one chosen boundary and
recovering with fresh hosts that know nothing but the store; record what the world saw.

The user's code is not changed: executor starts are counted around it. In pull mode each
tool of the app's registry is wrapped (its ``run`` is one start; the process dies right
after it at ``AFTER_EFFECT`` when the plan says so); in push mode the driver handed to
the host counts each ``RunCall`` the host acted on (it reported the call's outcome) and
dies right then, at ``AFTER_EFFECT``, when the plan says so. Writes die in a ``CrashingStore``.
"""

from __future__ import annotations

import asyncio
from typing import Any

from attrs import define, field, frozen

from runkernel.adapters.drive.actions import Action, RunCall
from runkernel.adapters.drive.driver import AsyncDriver, Driver
from runkernel.adapters.drive.fencing import ask_status
from runkernel.adapters.drive.events import Recovered, RunOutcome, RuntimeEvent
from runkernel.adapters.drive.inbox import submit_end, submit_resume
from runkernel.adapters.drive.ports import StatusReply, Tool, ToolRegistry, ToolReply
from runkernel.adapters.drive.protocol import CallEnded, Report
from runkernel.adapters.drive.runtime import Runtime
from runkernel.adapters.stores.contract import Lease, Settlement, Store
from runkernel.adapters.worker.apps import AsyncPushApp, PushApp, RuntimeApp, WorkerApp
from runkernel.adapters.worker.loop import _DRIVER_OPTIONS as DRIVER_OPTIONS  # what a push app may set
from runkernel.kernel.decide import decide
from runkernel.kernel.policies import ToolPolicy
from runkernel.kernel.protocol import Activate, EndRequest, OperationStatus, ResumeCommand
from runkernel.kernel.rules import Rejection
from runkernel.kernel.state import (
    Awaiting,
    CallExecuting,
    EndCause,
    Ended,
    Message,
    RunSnapshot,
    ThreadCommit,
)
from runkernel.kernel.values import EndCauseKind, Role
from runkernel.testing.crash import Boundary, CrashingStore, Position, SimulatedCrash
from runkernel.testing.crashtest.scenario import Scenario, TurnsModel, default_payload
from runkernel.testing.fixed import CountingIds, ManualClock

#: Drives (and answered waits) one scenario may take before it is called stuck.
MAX_ROUNDS = 60
#: The recovery "row" of a crash before the Run's first commit: it is started anew.
NOTHING_COMMITTED = "nothing_committed"


@frozen
class Encounter:
    """One boundary a Run passed: its kind, its commit point, and where (``v3`` and the
    tool a call's commit concerns, or the tool whose effect just happened)."""

    boundary: Boundary
    position: Position
    where: str

    def label(self) -> str:
        """``v4 (pay) call_start, before_write`` or ``pay attempt 1, after_tool_effect``:
        how the report names it."""
        if self.boundary is Boundary.AFTER_EFFECT:
            return f"{self.where}, {self.boundary.value}"
        return f"{self.where} {self.position.value}, {self.boundary.value}"


class SweepPlan:
    """A crash plan that records every boundary it is asked about and fires at the
    ``target``-th one (0-based; None: never)."""

    def __init__(self, target: int | None = None) -> None:
        self.target = target
        self.seen: list[Encounter] = []
        self.where = ""
        self.fired: Encounter | None = None

    def crash_here(self, boundary: Boundary, position: Position) -> bool:
        """True at the target encounter."""
        encounter = Encounter(boundary, position, self.where)
        hit = len(self.seen) == self.target
        self.seen.append(encounter)
        if hit:
            self.fired = encounter
        return hit


@frozen
class Start:
    """One executor start the world saw."""

    tool: str
    operation_id: str
    attempt: int
    committed_first: bool
    #: the encounter count when it started (what came before it in the trial)
    at: int


@define
class Played:
    """What one play of a scenario produced."""

    thread_id: str
    run_id: str
    starts: list[Start] = field(factory=list)
    events: list[RuntimeEvent] = field(factory=list)
    #: rows of the recoveries that followed the crash (the first drive after it)
    recovered: list[str] = field(factory=list)
    #: operation ids a reconnect tool's status answered ``not_found`` for
    not_found: set[str] = field(factory=set)
    #: what went wrong that is no crash: the host or a port raised, a refused answer
    errors: list[str] = field(factory=list)
    crashed: bool = False
    final: RunSnapshot | None = None


class _LabelledStore(CrashingStore):
    """A ``CrashingStore`` that tells the plan which commit it is about to write."""

    def __init__(self, store: Store, plan: SweepPlan) -> None:
        super().__init__(store, plan)
        self.sweep = plan

    def append(self, commit: ThreadCommit, settle: Settlement | None = None, *, lease: Lease | None = None) -> RunSnapshot:
        self.sweep.where = f"v{commit.version}{_tool_of(self.store.run(commit.run_id), commit)}"
        return super().append(commit, settle, lease=lease)


def _tool_of(before: RunSnapshot | None, commit: ThreadCommit) -> str:
    """`` (tool)`` when the commit changes one call's status, else nothing."""
    if before is None or before.batch is None or commit.batch is None:
        return ""
    for old, new in zip(before.batch.calls, commit.batch.calls):
        if old.status != new.status:
            return f" ({new.tool})"
    return ""


class _Watch:
    """Counts executor starts and dies after an effect when the plan says so."""

    def __init__(self, played: Played, store: Store, plan: SweepPlan) -> None:
        self.played, self.store, self.plan = played, store, plan

    def started(self, tool: str, invocation: RunCall) -> None:
        snapshot = self.store.run(invocation.run_id)
        batch = snapshot.batch if snapshot is not None else None
        call = batch.call(invocation.call_id) if batch is not None else None
        committed = (
            call is not None
            and batch is not None
            and not batch.finalized
            and call.status == CallExecuting(invocation.attempt)
        )
        start = Start(tool, invocation.operation_id, invocation.attempt, committed, len(self.plan.seen))
        self.played.starts.append(start)

    def effect_done(self, tool: str, invocation: RunCall | None) -> None:
        attempt = f" attempt {invocation.attempt}" if invocation is not None else ""
        self.plan.where = f"{tool}{attempt}"
        if self.plan.crash_here(Boundary.AFTER_EFFECT, Position.CALL_RESULT):
            raise SimulatedCrash(Boundary.AFTER_EFFECT, Position.CALL_RESULT)


class _WatchedTool:
    """One tool of a pull-mode app: each ``run`` is a start; its status is passed on."""

    def __init__(self, name: str, tool: Tool, watch: _Watch) -> None:
        self.name, self.tool, self.watch = name, tool, watch

    @property
    def policy(self) -> ToolPolicy:
        return self.tool.policy

    def run(self, invocation: RunCall) -> ToolReply:
        self.watch.started(self.name, invocation)
        try:
            return self.tool.run(invocation)
        finally:
            self.watch.effect_done(self.name, invocation)

    def status(self, operation_id: str, lease_epoch: int | None = None) -> StatusReply:
        owner = f"tool {self.name!r}'s status"
        reply: StatusReply = ask_status(self.tool.status, operation_id, lease_epoch, owner=owner)
        if reply.status is OperationStatus.NOT_FOUND:
            self.watch.played.not_found.add(operation_id)
        return reply

    def __getattr__(self, name: str) -> Any:
        # the tool's optional ``fence`` (and anything else a host looks for) is its own
        if name == "tool":
            raise AttributeError(name)
        return getattr(self.tool, name)


class _WatchedDriver(Driver):
    """The push-mode driver a host is handed: counts each ``RunCall`` the host acted on
    (reported an outcome for) and dies after the effect when the host reports it."""

    watch: _Watch
    handed: dict[str, RunCall]

    def _advance(self, answer: Report | None) -> Action:
        if isinstance(answer, CallEnded):
            call = self.handed.pop(answer.call_id, None)
            if call is not None:  # the host acted on it: one start (a standing action is handed out again)
                self.watch.started(call.tool, call)
            self.watch.effect_done(call.tool if call else "?", call)
        action = super()._advance(answer)
        if isinstance(action, RunCall):
            self.handed[action.call_id] = action
        return action


class _WatchedAsyncDriver(AsyncDriver):
    """``_WatchedDriver`` for asyncio hosts."""

    watch: _Watch
    handed: dict[str, RunCall]

    async def _advance(self, answer: Report | None) -> Action:
        if isinstance(answer, CallEnded):
            call = self.handed.pop(answer.call_id, None)
            if call is not None:  # the host acted on it: one start (a standing action is handed out again)
                self.watch.started(call.tool, call)
            self.watch.effect_done(call.tool if call else "?", call)
        action = await super()._advance(answer)
        if isinstance(action, RunCall):
            self.handed[action.call_id] = action
        return action


class Player:
    """Plays ``scenario`` of ``app`` on ``store`` with fresh fixed ids and clock, dying
    where ``plan`` says, until the Run ends (or is stuck)."""

    def __init__(
        self, app: WorkerApp, scenario: Scenario, store: Store, plan: SweepPlan, *, seed: int, thread_id: str, run_id: str
    ) -> None:
        self.app, self.scenario, self.store, self.plan = app, scenario, store, plan
        self.ids = CountingIds("ct", seed)
        self.clock = ManualClock()
        self.played = Played(thread_id, run_id)
        self.watch = _Watch(self.played, store, plan)
        self.crashing = _LabelledStore(store, plan)
        self.messages = tuple(Message(Role.USER, text) for text in scenario.messages)
        self._runner: asyncio.Runner | None = None
        #: the next drive is the first after the crash: its recovery row is reported
        self._after_crash = False

    def play(self) -> Played:
        run_id = self.played.run_id
        answered: set[str] = set()
        waits = 0
        try:
            for _ in range(MAX_ROUNDS):
                try:
                    snapshot = self._drive()
                except SimulatedCrash:
                    self.played.crashed = self._after_crash = True
                    continue
                except Exception as error:  # the host, a port or the store raised: report it
                    self.played.errors.append(f"{type(error).__name__}: {error}")
                    break
                self.played.final = snapshot
                state = snapshot.state if snapshot is not None else None
                if state is None or isinstance(state, Ended):
                    break
                if isinstance(state, Awaiting):
                    assert snapshot is not None
                    ticket = state.ticket
                    if ticket.ticket_id in answered:
                        if not self.store.pending_commands(run_id):
                            self.played.errors.append(f"the answer to wait {waits} was not applied")
                            break
                        continue
                    answered.add(ticket.ticket_id)
                    refused = self._answer(snapshot, waits)
                    waits += 1
                    if refused is not None:
                        self.played.errors.append(f"the scenario's answer to wait {waits} was refused: {refused}")
                        break
                else:
                    self.clock.advance(1.0)  # still Running (a tool said running): time passes
            else:
                self.played.errors.append(f"the Run did not end within {MAX_ROUNDS} drives (stuck)")
        finally:
            if self._runner is not None:
                self._runner.close()
        self.played.final = self.store.run(run_id)
        return self.played

    # --- one drive, by the app's kind ---------------------------------------------------

    def _drive(self) -> RunSnapshot | None:
        first = self.store.run(self.played.run_id) is None
        if isinstance(self.app, RuntimeApp):
            if first and self._after_crash:  # nothing of the Run was committed: it starts anew
                self._after_crash = False
                self.played.recovered.append(NOTHING_COMMITTED)
            outcome = self._pull(first)
            return outcome.snapshot
        if first:
            self._activate()
        self._push()
        return self.store.run(self.played.run_id)

    def _event(self, event: RuntimeEvent) -> None:
        self.played.events.append(event)
        if isinstance(event, Recovered) and self._after_crash:
            self._after_crash = False
            self.played.recovered.append(event.row.value)

    def _pull(self, first: bool) -> RunOutcome:
        app = self.app
        assert isinstance(app, RuntimeApp)
        model = TurnsModel(self.scenario.turns) if self.scenario.turns is not None else app.model
        registry = app.tools
        policies = registry.policies
        tools = ToolRegistry(
            {name: _WatchedTool(name, tool, self.watch) for name, tool in registry.tools.items()},
            max_steps=policies.max_steps,
            on_indeterminate=policies.on_indeterminate,
        )
        runtime = Runtime(
            self.crashing,
            model,
            tools,
            gate=app.gate,
            observer=app.observer,
            hooks=app.hooks,
            transient=app.transient,
            model_attempts=app.model_attempts,
            ids=self.ids,
            clock=self.clock.iso,
            on_event=self._event,
            app=app.name,
        )
        if first:
            return runtime.start(self.played.thread_id, self.played.run_id, self.messages)
        return runtime.drive(self.played.run_id)

    def _activate(self) -> None:
        head = self.store.thread_head(self.played.thread_id)
        activation = Activate(
            self.played.thread_id, self.played.run_id, head.version if head else 0, self.messages, self.app.name
        )
        decision = decide(None, activation)
        if isinstance(decision, Rejection) or decision.commit is None:
            raise RuntimeError(f"the activation was refused: {decision}")
        self.crashing.append(decision.commit)

    def _push(self) -> None:
        app = self.app
        options: dict[str, Any] = {k: getattr(app, k) for k in DRIVER_OPTIONS if hasattr(app, k)}  # as the worker does
        options.update(ids=self.ids, clock=self.clock.iso, app=app.name, on_event=self._event)
        if isinstance(app, AsyncPushApp):
            async_driver = _WatchedAsyncDriver(self.crashing, app.tools, **options)
            async_driver.watch, async_driver.handed = self.watch, {}
            if self._runner is None:
                self._runner = asyncio.Runner()
            self._runner.run(app.drive(async_driver, self.played.run_id))
        else:
            assert isinstance(app, PushApp)
            driver = _WatchedDriver(self.crashing, app.tools, **options)
            driver.watch, driver.handed = self.watch, {}
            app.serve(driver, driver.pick_up(self.played.run_id))

    def _answer(self, snapshot: RunSnapshot, index: int) -> str | None:
        state = snapshot.state
        assert isinstance(state, Awaiting)
        answer = self.scenario.answer(index)
        run_id = snapshot.run_id
        if answer is not None and answer.kind == "cancel":
            result = submit_end(self.store, run_id, EndRequest(EndCause(EndCauseKind.CANCELLED)))
        else:
            payload = answer.payload() if answer is not None else default_payload(state.ticket.wait)
            if payload is None:
                return f"a {state.ticket.wait.value} wait is answered by its child Run, not by a scenario"
            command = ResumeCommand(run_id, state.ticket.ticket_id, state.ticket.wait, payload)
            result = submit_resume(self.store, command)
        return str(result) if isinstance(result, Rejection) else None


def play(
    app: WorkerApp, scenario: Scenario, store: Store, target: int | None, *, seed: int, thread_id: str, run_id: str
) -> tuple[Played, SweepPlan]:
    """Play ``scenario`` once, crashing at encounter ``target`` (None: never)."""
    plan = SweepPlan(target)
    played = Player(app, scenario, store, plan, seed=seed, thread_id=thread_id, run_id=run_id).play()
    return played, plan

__all__ = ["MAX_ROUNDS", "NOTHING_COMMITTED", "Encounter", "Played", "Player", "Start", "SweepPlan", "play"]
