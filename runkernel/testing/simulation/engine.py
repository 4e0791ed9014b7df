"""Run one scenario against a store, crashing where told, recovering with fresh runtimes.

The engine plays every role outside the runtime: it starts the Run, kills the runtime
at the chosen boundaries, starts a fresh one that knows nothing but the store, and at
each wait acts as the operator (including forged, stale, wrong-kind and wrong-payload
commands, which must all be refused). What it saw goes to ``invariants.check_run``.
"""

from __future__ import annotations

import collections
from collections.abc import Callable

from attrs import define, field

from runkernel.adapters.drive.inbox import submit_end, submit_resume
from runkernel.adapters.drive.ports import Staging, ToolRegistry, ToolReply
from runkernel.adapters.drive.runtime import ModelFailed, Recovered, RunOutcome, Runtime, RuntimeEvent
from runkernel.adapters.stores.serial import resume_to_inbox
from runkernel.adapters.stores.contract import Store, StoreUnavailable
from runkernel.adapters.worker.apps import HostOptions, RuntimeApp, app_runtime
from runkernel.kernel.protocol import (
    Hook,
    Approve,
    DelegationResult,
    Deny,
    EndRequest,
    ExternalResult,
    ProvideInput,
    ResumeCommand,
    ResumePayload,
    TimerFired,
)
from runkernel.kernel.delegation import executing_delegations
from runkernel.kernel.rules import Rejection, Rule
from runkernel.kernel.state import (
    ActiveToolBatch,
    Awaiting,
    CallAwaiting,
    Delegation,
    EndCause,
    Ended,
    Message,
    ResumeTicket,
    RunSnapshot,
    Staged,
    TypedError,
    Wait,
)
from runkernel.kernel.values import EndCauseKind, JsonValue, Role, WaitKind
from runkernel.testing.crash import (
    Boundary,
    CrashAtEncounters,
    CrashingStore,
    Position,
    SimulatedCrash,
    crashing_tools,
)
from runkernel.testing.fixed import CountingIds
from runkernel.testing.scripted import ScriptedGate, ScriptedModel, ScriptedTool, StepScript, World
from runkernel.testing.simulation.scenarios import (
    ANSWER,
    CANCEL,
    DENY,
    FAIL_RUN,
    LET_EXPIRE,
    SIM_NOW,
    STOP,
    Scenario,
)

MAX_ROUNDS = 60
#: The app the simulated Runs record at activation.
SIMULATE_APP = "simulate"


class SimHooks:
    """Hooks that stage: BeforeInference stages the step it saw and hands request-only
    context (never committed); AfterTool reacts to every reply."""

    def before_inference(self, run_id: str, step: int, staged: JsonValue) -> Staging:
        return Staging(Staged({"step": step, "before": staged}), context={"request_only": f"{run_id}:{step}"})

    def after_tool(self, run_id: str, call_id: str, attempt: int, reply: ToolReply) -> JsonValue:
        return {"reacted_to": call_id, "attempt": attempt}


class CountingObserver:
    """Counts what was observed; nothing here is ever read as truth."""

    def __init__(self) -> None:
        self.hooks = 0
        self.deltas = 0
        self.notifications: list[ResumeTicket] = []
        self.published = 0

    def hook(self, run_id: str, hook: Hook, call_id: str | None) -> None:
        self.hooks += 1

    def delta(self, run_id: str, data: JsonValue) -> None:
        self.deltas += 1

    def notify(self, run_id: str, ticket: ResumeTicket, wait: Wait) -> None:
        self.notifications.append(ticket)

    def publish(self, run_id: str, batch: ActiveToolBatch) -> None:
        self.published += 1


@define
class Trial:
    """Everything one simulated scenario produced, for the invariant checks and report."""

    scenario: Scenario
    thread_ids: list[str]
    run_ids: list[str]
    world: World
    crashes: list[tuple[Boundary, Position]] = field(factory=list)
    events: list[tuple[RuntimeEvent, int]] = field(factory=list)
    refusals: collections.Counter[str] = field(factory=collections.Counter)
    problems: list[str] = field(factory=list)
    store_failures: int = 0
    boundaries_seen: int = 0
    forged_in_inbox: list[str] = field(factory=list)


_PAYLOADS: dict[WaitKind, ResumePayload] = {
    WaitKind.APPROVAL: Approve(),
    WaitKind.INPUT: ProvideInput("42"),
    WaitKind.EXTERNAL: ExternalResult({"answer": "from outside"}),
    WaitKind.DELEGATION: DelegationResult("child result"),
    WaitKind.SCHEDULED: TimerFired(),
}


class ScenarioRun:
    """Plays one scenario to its end on ``store``."""

    def __init__(self, store: Store, scenario: Scenario, index: int, targets: tuple[int, ...], seed: int = 0) -> None:
        self.store = store
        self.scenario = scenario
        self.thread_id = f"sim-{index:05d}-{scenario.name}"
        self.run_id = f"run-{index:05d}"
        self.world = World.new(store)
        self.plan = CrashAtEncounters(targets)
        tools = {
            spec.name: ScriptedTool(
                spec.name,
                self.world,
                mode=spec.mode,
                max_attempts=spec.max_attempts,
                retry_attempts=spec.retry_attempts,
                replies=spec.replies,
                status_script=spec.status_script,
                delegation=spec.delegation,
                concurrent=spec.concurrent,
            )
            for spec in scenario.tools
        }
        self.registry = ToolRegistry(
            tools, max_steps=scenario.max_steps, on_indeterminate=scenario.on_indeterminate
        )
        # the runtimes' store and tools die where the plan says; the engine's own reads
        # and commands go to ``store`` itself, so they pass no boundary
        self.crashing_store = CrashingStore(store, self.plan)
        self.crashing_store.fail_checkpoints = scenario.checkpoint_failures
        self.crashing_tools = crashing_tools(self.registry, self.plan)
        self.scripts: dict[str, tuple[StepScript, ...]] = {self.run_id: scenario.steps}
        self.model = ScriptedModel(self.scripts, self.world)
        self.gate = ScriptedGate(scenario.gate)
        self.observer = CountingObserver()
        self.ids = CountingIds(f"{index:05d}", seed)
        self.trial = Trial(scenario, [self.thread_id], [self.run_id], self.world)
        #: children of a cancelled parent that are played after it ended
        self.leftover_children: list[Delegation] = []

    def _runtime(self) -> Runtime:
        """A fresh process's runtime, built as a worker builds one for its app: the
        scripted ports (fresh hooks: a process that died kept none), dying where the
        plan says."""
        hooks = SimHooks() if self.scenario.hooks else None
        app = RuntimeApp(SIMULATE_APP, self.model, self.crashing_tools, self.gate, self.observer, hooks)
        host = HostOptions(ids=self.ids, clock=lambda: SIM_NOW, on_event=self._event, calls_together=False)
        # the simulator judges the kernel's commits before the store does
        return app_runtime(app, self.crashing_store, host, self_check=True)

    def _event(self, event: RuntimeEvent) -> None:
        self.trial.events.append((event, len(self.world.executions)))
        if isinstance(event, ModelFailed):
            # the scripted model never fails: a model error here is the simulator's own
            # (it would end the Run failed, and nothing else would say why)
            self.trial.problems.append(
                f"run {event.run_id} step {event.step}: the scripted model raised "
                f"{event.error.type}: {event.error.message}"
            )

    def _attempt(self, action: Callable[[Runtime], RunOutcome]) -> RunOutcome | None:
        try:
            return action(self._runtime())
        except SimulatedCrash as crash:
            self.trial.crashes.append((crash.boundary, crash.position))
            return None
        except StoreUnavailable:
            self.trial.store_failures += 1
            return None

    def play(self) -> Trial:
        self._play_run(self.thread_id, self.run_id)
        for child in self.leftover_children:
            if self.store.run(child.run_id) is not None and child.thread_id not in self.trial.thread_ids:
                self.trial.thread_ids.append(child.thread_id)
                self.trial.run_ids.append(child.run_id)
                self._play_run(child.thread_id, child.run_id)
        if self.scenario.follow_up:
            second = f"{self.run_id}-b"
            self.scripts[second] = (StepScript("follow-up", end=EndCauseKind.COMPLETED),)
            self.trial.run_ids.append(second)
            self._play_run(self.thread_id, second)
        self.trial.boundaries_seen = self.plan.seen
        return self.trial

    def _play_run(self, thread_id: str, run_id: str) -> RunSnapshot | None:
        task = (Message(Role.USER, f"task for {run_id}"),)
        if self.store.run(run_id) is not None:  # a child its parent already activated
            outcome = self._attempt(lambda rt: rt.drive(run_id))
        else:
            outcome = self._attempt(lambda rt: rt.start(thread_id, run_id, task))
        waits = 0
        last_resume: ResumeCommand | None = None
        for _ in range(MAX_ROUNDS):
            if outcome is None:
                if self.store.run(run_id) is None:
                    outcome = self._attempt(lambda rt: rt.start(thread_id, run_id, task))
                else:
                    outcome = self._attempt(lambda rt: rt.drive(run_id))
                continue
            state = outcome.snapshot
            if last_resume is not None:
                self._expect_repeat_refused(last_resume, state)
            if isinstance(state.state, Ended):
                self._expect(submit_end(self.store, run_id, _end(CANCEL)), {Rule.RUN_ENDED}, "cancel after end")
                return state
            if isinstance(state.state, Awaiting):
                action = self.scenario.operator[waits] if waits < len(self.scenario.operator) else ANSWER
                waits += 1
                self._adversary(state)
                last_resume = self._operate(state, action)
            elif state.open_batch is not None and executing_delegations(state.open_batch):
                self._run_children(state)  # a quiet parent: its children run, then it wakes
            outcome = None
        self.trial.problems.append(f"run {run_id} did not end within {MAX_ROUNDS} rounds (stuck)")
        return None

    # --- the operator ----------------------------------------------------------------

    def _operate(self, state: RunSnapshot, action: str) -> ResumeCommand | None:
        assert isinstance(state.state, Awaiting)
        ticket = state.state.ticket
        if action in (CANCEL, STOP, FAIL_RUN):
            self._expect(submit_end(self.store, state.run_id, _end(action)), set(), f"{action} while awaiting")
            return None
        if action == LET_EXPIRE:
            return None
        payload: ResumePayload
        if action == DENY:
            payload = Deny("operator said no")
        elif ticket.wait is WaitKind.DELEGATION:
            payload = DelegationResult(self._run_child(state))
        else:
            payload = _PAYLOADS[ticket.wait]
        command = ResumeCommand(state.run_id, ticket.ticket_id, ticket.wait, payload)
        self._expect(submit_resume(self.store, command), set(), "valid resume")
        return command

    def _run_children(self, state: RunSnapshot) -> None:
        """Play the children of the parent's running concurrent delegations (each may
        crash too: the crash plan is shared), the first one only when the scenario
        cancels the parent while the others still run."""
        assert state.open_batch is not None
        running = executing_delegations(state.open_batch)
        for index, call in enumerate(running):
            child = call.delegation
            assert child is not None
            if self.store.run(child.run_id) is None:
                return  # not activated yet (a crash came first): the parent's recovery does it
            if child.thread_id not in self.trial.thread_ids:
                self.trial.thread_ids.append(child.thread_id)
                self.trial.run_ids.append(child.run_id)
            self.scripts.setdefault(child.run_id, (StepScript(f"child {index} done", end=EndCauseKind.COMPLETED),))
            self._play_run(child.thread_id, child.run_id)
            if self.scenario.cancel_while_delegating and index == 0 and len(running) > 1:
                self._expect(submit_end(self.store, state.run_id, _end(CANCEL)), set(), "cancel while delegating")
                # the others are cancelled through their inboxes once the parent ends
                self.leftover_children += [c.delegation for c in running[1:] if c.delegation is not None]
                return

    def _run_child(self, state: RunSnapshot) -> str:
        batch = state.open_batch
        assert isinstance(state.state, Awaiting) and batch is not None
        call = batch.call(state.state.ticket.call_id)
        assert call is not None and isinstance(call.status, CallAwaiting)
        assert call.delegation is not None  # fixed by its Executing commit, derived from the operation id
        child_thread, child_run = call.delegation.thread_id, call.delegation.run_id
        self.scripts.setdefault(child_run, (StepScript("child done", end=EndCauseKind.COMPLETED),))
        if child_thread not in self.trial.thread_ids:
            self.trial.thread_ids.append(child_thread)
            self.trial.run_ids.append(child_run)
        final = self._play_run(child_thread, child_run)
        return "child ended" if final is None else f"child {child_run} ended"

    def _adversary(self, state: RunSnapshot) -> None:
        """Commands that must all be refused, with nothing committed."""
        assert isinstance(state.state, Awaiting)
        ticket = state.state.ticket
        forged = ResumeCommand(state.run_id, self.ids.forged_ticket_id(), ticket.wait, _PAYLOADS[ticket.wait])
        self._expect(submit_resume(self.store, forged), {Rule.TICKET_MISMATCH}, "forged ticket")
        other = next(k for k in WaitKind if k is not ticket.wait)
        wrong_kind = ResumeCommand(state.run_id, ticket.ticket_id, other, _PAYLOADS[other])
        self._expect(submit_resume(self.store, wrong_kind), {Rule.WAIT_KIND_MISMATCH}, "wrong wait kind")
        wrong_payload = ResumeCommand(state.run_id, ticket.ticket_id, ticket.wait, _PAYLOADS[other])
        self._expect(submit_resume(self.store, wrong_payload), {Rule.PAYLOAD_TYPE}, "wrong payload")
        elsewhere = ResumeCommand("run-nobody", ticket.ticket_id, ticket.wait, _PAYLOADS[ticket.wait])
        self._expect(submit_resume(self.store, elsewhere), {Rule.WRONG_RUN}, "another run")
        # Straight into the inbox, skipping pre-validation: the runtime must refuse it.
        self.store.put_command(state.run_id, resume_to_inbox(forged))
        self.trial.forged_in_inbox.append(forged.digest())

    def _expect_repeat_refused(self, command: ResumeCommand, state: RunSnapshot) -> None:
        result = submit_resume(self.store, command)
        if isinstance(result, Rejection):
            allowed = {Rule.ALREADY_APPLIED}
            self._expect(result, allowed, "repeated resume")
            stale = ResumeCommand(command.run_id, command.ticket_id, command.kind, Deny("changed my mind"))
            if command.payload != stale.payload:
                self._expect(submit_resume(self.store, stale), {Rule.STALE_COMMAND}, "stale resume")
        elif not (isinstance(state.state, Awaiting) and state.state.ticket.ticket_id == command.ticket_id):
            self.trial.problems.append("a repeated resume was accepted for a ticket no longer awaited (I14)")

    def _expect(self, result: Rejection | int, rules: set[Rule], what: str) -> None:
        if isinstance(result, Rejection):
            self.trial.refusals[result.rule.value] += 1
            if result.rule not in rules:
                self.trial.problems.append(f"{what}: refused with {result}, expected {sorted(r.value for r in rules) or 'acceptance'}")
        elif rules:
            self.trial.problems.append(f"{what}: accepted, expected refusal {sorted(r.value for r in rules)} (I14)")


def _end(action: str) -> EndRequest:
    if action == STOP:
        return EndRequest(EndCause(EndCauseKind.STOPPED))
    if action == FAIL_RUN:
        return EndRequest(EndCause(EndCauseKind.FAILED, TypedError("OperatorFailure", "failed on purpose")))
    return EndRequest(EndCause(EndCauseKind.CANCELLED))


def recoveries(trial: Trial) -> list[Recovered]:
    return [event for event, _ in trial.events if isinstance(event, Recovered)]
