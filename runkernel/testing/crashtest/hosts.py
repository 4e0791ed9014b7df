"""Play one scenario of a user's app against a store, dying at one chosen boundary and
recovering with fresh hosts that know nothing but the store, until the scenario's Run
and every child Run of its delegations have ended; record what the world saw (the
counting and dying wrappers are in ``watch``).

Each round acts on one Run: the last one found that has not ended, so a delegation's
children (found from the ``delegation`` their parent's Executing commits fixed, once
activated) run before their quiet parent is driven again, as a worker's poll finds
them. A wait is answered through the store's inbox as the scenario says (its answers
serve the waits of the Run and of its children in the order they come); a timer is not
answered: the clock moves to its due time and the next drive fires it, as a worker's
does.
"""

from __future__ import annotations

import asyncio

from runkernel.adapters.drive.events import Recovered, RunOutcome, RuntimeEvent
from runkernel.adapters.drive.inbox import submit_end, submit_resume
from runkernel.adapters.drive.ports import ToolRegistry
from runkernel.adapters.stores.contract import Store
from runkernel.adapters.worker.apps import (
    AsyncPushApp, HostOptions, PushApp, RuntimeApp, WorkerApp, app_async_driver, app_driver, app_runtime, version_of,
)
from runkernel.kernel.decide import decide
from runkernel.kernel.protocol import Activate, EndRequest, ResumeCommand
from runkernel.kernel.rules import Rejection
from runkernel.kernel.state import Awaiting, CallAwaiting, EndCause, Ended, Message, Running, RunSnapshot
from runkernel.kernel.values import EndCauseKind, Role, WaitKind
from runkernel.testing.crash import SimulatedCrash
from runkernel.testing.crashtest.scenario import Scenario, TurnsModel, default_payload
from runkernel.testing.crashtest.watch import (
    LabelledStore,
    Played,
    SweepPlan,
    Watch,
    WatchedAsyncDriver,
    WatchedDriver,
    WatchedTool,
)
from runkernel.testing.fixed import CountingIds, ManualClock

#: Drives (and answered waits) one Run may take before the play is called stuck.
MAX_ROUNDS = 60
#: Child Runs one play may find before it is called runaway (a child that delegates again).
MAX_RUNS = 50
#: The recovery "row" of a crash before the Run's first commit: it is started anew.
NOTHING_COMMITTED = "nothing_committed"


class Player:
    """Plays ``scenario`` of ``app`` on ``store`` with fresh fixed ids and clock, dying
    where ``plan`` says, until its Run and every child Run have ended (or it is stuck)."""

    def __init__(
        self, app: WorkerApp, scenario: Scenario, store: Store, plan: SweepPlan, *, seed: int, thread_id: str, run_id: str
    ) -> None:
        self.app, self.scenario, self.store, self.plan = app, scenario, store, plan
        self.ids = CountingIds("ct", seed)
        self.clock = ManualClock()
        self.played = Played(thread_id, run_id)
        #: every Run found so far by its key (parents before their children), and back
        self.known: dict[str, tuple[str, str]] = {"": (thread_id, run_id)}
        self.keys: dict[str, str] = {run_id: ""}
        self.watch = Watch(self.played, store, plan, self.named)
        self.crashing = LabelledStore(store, plan, self.named)
        self.messages = tuple(Message(Role.USER, text) for text in scenario.messages)
        self._runner: asyncio.Runner | None = None
        #: the next drive is the first after the crash: its recovery row is reported
        self._after_crash = False

    def named(self, run_id: str) -> str:
        """How a boundary's label names the Run: nothing for the scenario's Run,
        ``child research[1.0] `` for the child of step 1's first call (a research)."""
        if run_id not in self.keys:
            self._discover()
        key = self.keys.get(run_id, run_id)
        return f"child {key} " if key else ""

    def _discover(self) -> None:
        """Find the children the known Runs' committed calls name (their ``delegation``
        is fixed by the call's Executing commit, before the child is activated)."""
        queue = list(self.known.items())
        while queue:
            key, (thread_id, run_id) = queue.pop(0)
            for commit in self.store.commits(thread_id):
                if commit.run_id != run_id or commit.batch is None:
                    continue
                for index, call in enumerate(commit.batch.calls):
                    child = call.delegation
                    if child is None or child.run_id in self.keys:
                        continue
                    place = f"{call.tool}[{commit.batch.step}.{index}]"
                    child_key = f"{key}/{place}" if key else place
                    self.keys[child.run_id] = child_key
                    self.known[child_key] = (child.thread_id, child.run_id)
                    queue.append((child_key, (child.thread_id, child.run_id)))

    def _next(self) -> tuple[str, str] | None:
        """The Run to act on (its key and id): the last one found that has not ended
        (a child before its parent); None when all have."""
        self._discover()
        for key, (_thread_id, run_id) in reversed(self.known.items()):
            snapshot = self.store.run(run_id)
            if snapshot is None and key:
                continue  # a child not activated yet: its parent's drive activates it
            if snapshot is None or not isinstance(snapshot.state, Ended):
                return key, run_id
        return None

    def play(self) -> Played:
        answered: set[str] = set()
        waits = rounds = 0
        try:
            while (found := self._next()) is not None:
                key, run_id = found
                rounds += 1
                if len(self.known) > MAX_RUNS:
                    self.played.errors.append(f"more than {MAX_RUNS} Runs (children delegating without end?)")
                    break
                if rounds > MAX_ROUNDS * len(self.known):
                    self.played.errors.append(f"the Runs did not end within {rounds - 1} drives (stuck)")
                    break
                snapshot = self.store.run(run_id)
                state = snapshot.state if snapshot is not None else None
                if isinstance(state, Awaiting) and state.ticket.ticket_id not in answered:
                    assert snapshot is not None
                    answered.add(state.ticket.ticket_id)
                    if state.ticket.wait is WaitKind.SCHEDULED:
                        self._timer(snapshot)
                        continue
                    refused = self._answer(snapshot, waits)
                    waits += 1
                    if refused is not None:
                        self.played.errors.append(f"the scenario's answer to wait {waits} was refused: {refused}")
                        break
                    continue
                try:
                    snapshot = self._drive(key, run_id)
                except SimulatedCrash:
                    self.played.crashed = self._after_crash = True
                    continue
                except Exception as error:  # the host, a port or the store raised: report it
                    self.played.errors.append(f"{type(error).__name__}: {error}")
                    break
                state = snapshot.state if snapshot is not None else None
                if isinstance(state, Awaiting) and state.ticket.ticket_id in answered:
                    if not self.store.pending_commands(run_id):
                        self.played.errors.append(f"{self.named(run_id)}wait {state.ticket.wait.value}: the answer was not applied")
                        break
                elif isinstance(state, Running):
                    self.clock.advance(1.0)  # still Running (a tool said running, children run): time passes
        finally:
            if self._runner is not None:
                self._runner.close()
        self.played.final = self.store.run(self.played.run_id)
        self.played.runs = {key: ids for key, ids in self.known.items() if self.store.run(ids[1]) is not None}
        return self.played

    # --- one drive, by the app's kind ---------------------------------------------------

    def _drive(self, key: str, run_id: str) -> RunSnapshot | None:
        first = self.store.run(run_id) is None  # only the scenario's own Run is started here
        if isinstance(self.app, RuntimeApp):
            if first and self._after_crash:  # nothing of the Run was committed: it starts anew
                self._after_crash = False
                self.played.recovered.append(NOTHING_COMMITTED)
            outcome = self._pull(first, run_id)
            return outcome.snapshot
        if first:
            self._activate()
        self._push(run_id)
        return self.store.run(run_id)

    def _event(self, event: RuntimeEvent) -> None:
        self.played.events.append(event)
        if isinstance(event, Recovered) and self._after_crash:
            self._after_crash = False
            self.played.recovered.append(event.row.value)

    def _pull(self, first: bool, run_id: str) -> RunOutcome:
        app = self.app
        assert isinstance(app, RuntimeApp)
        model = app.model
        if self.scenario.turns is not None:  # they script the scenario's Run; children ask the app's model
            model = TurnsModel(self.scenario.turns, run_id=self.played.run_id, others=app.model)
        registry = app.tools
        policies = registry.policies
        tools = ToolRegistry(
            {name: WatchedTool(name, tool, self.watch) for name, tool in registry.tools.items()},
            max_steps=policies.max_steps,
            on_indeterminate=policies.on_indeterminate,
        )
        runtime = app_runtime(app, self.crashing, self._host(), model=model, tools=tools)
        if first:
            return runtime.start(self.played.thread_id, run_id, self.messages)
        return runtime.drive(run_id)

    def _host(self) -> HostOptions:
        """The crash tester's own options for each host it builds: fixed ids and clock."""
        return HostOptions(ids=self.ids, clock=self.clock.iso, on_event=self._event, calls_together=False)

    def _activate(self) -> None:
        head = self.store.thread_head(self.played.thread_id)
        activation = Activate(
            self.played.thread_id, self.played.run_id, head.version if head else 0, self.messages, self.app.name,
            app_version=version_of(self.app),
        )
        decision = decide(None, activation)
        if isinstance(decision, Rejection) or decision.commit is None:
            raise RuntimeError(f"the activation was refused: {decision}")
        self.crashing.append(decision.commit)

    def _push(self, run_id: str) -> None:
        app = self.app
        if isinstance(app, AsyncPushApp):
            async_driver = app_async_driver(app, self.crashing, self._host(), WatchedAsyncDriver)  # as the worker does
            async_driver.watch, async_driver.handed = self.watch, {}
            if self._runner is None:
                self._runner = asyncio.Runner()
            self._runner.run(app.drive(async_driver, run_id))
        else:
            assert isinstance(app, PushApp)
            driver = app_driver(app, self.crashing, self._host(), WatchedDriver)
            driver.watch, driver.handed = self.watch, {}
            app.serve(driver, driver.pick_up(run_id))

    def _timer(self, snapshot: RunSnapshot) -> None:
        """Move the clock to a scheduled wait's due time: the next drive fires it."""
        state = snapshot.state
        assert isinstance(state, Awaiting) and snapshot.open_batch is not None
        call = snapshot.open_batch.call(state.ticket.call_id)
        if call is not None and isinstance(call.status, CallAwaiting) and call.status.wait.due_at is not None:
            now = self.clock.now
            self.clock.set(call.status.wait.due_at)
            self.clock.now = max(now, self.clock.now)

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


__all__ = ["MAX_ROUNDS", "MAX_RUNS", "NOTHING_COMMITTED", "Player", "play"]
