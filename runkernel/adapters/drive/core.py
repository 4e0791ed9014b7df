"""The one effect interpreter: a sans-IO generator per Run that every host drives.

The core never touches a store, a gate or the host itself. It *yields* what it needs
(``Append`` a commit, ``ReadPickUp``, ``Pending`` inbox commands, ``AskGate``, ``Hand`` an
action to the host, ...) and is sent the answer, the way psycopg's protocol generators
yield "wait for read". The push-mode ``Driver`` performs those operations synchronously
and ``AsyncDriver`` awaits them; the pull-mode ``Runtime`` answers each handed-out action
by calling its ports. None of them holds effect logic of its own (their store operations
are one ``StoreOps``), so the modes cannot drift.

Every decision comes from the kernel: ``decide`` for what the host reports, ``recover``
when a Run is picked up or reaches a quiet point. An operation that follows an ``Append``
is only yielded once the store acknowledged it, so an action that touches the world
(run attempt n, begin a wait) is handed out only after its commit is durable.

This module is the loop and its state; a host's report to the kernel is ``reports``, a
handed-out action is built by ``handed``, W5's fences are ``fencing``, the configuration
is ``settings``, and a quiet point is ``pending``, ``children``, ``delegations`` and
``group_calls``.

Why this module is long: it is the one effect loop every host shares; splitting the loop
from the questions it asks would only pass its state around.
"""

from __future__ import annotations

from collections.abc import Generator, Sequence
from typing import Any, assert_never

import attrs

from runkernel.adapters.drive.actions import (
    Action, CheckStatus, ChildrenRunning, Done, DriverError, HostProtocolError, Infer, RunCall, RunCalls, WaitFor,
)
from runkernel.adapters.drive import handed
from runkernel.adapters.drive.delegations import is_quiet
from runkernel.adapters.drive.children import children_running, ended_children, start_child
from runkernel.adapters.drive.protocol import (
    Append, AskGate, CallEnded, CancelOwed, Compact, DropCheckpoint, Hand, InferenceFailed, Inferred, KeepLease,
    Observe, Operation, Partial, Pending, ReadCommands, Poll, ReadHead, ReadMessages, ReadLookups, ReadPickUp, ReadTrace,
    Report, SaveCheckpoint, SendCancel, Settle, Steps, Tell,
)
from runkernel.adapters.drive.model_errors import model_backoff, model_error
from runkernel.adapters.drive.fencing import fence
from runkernel.adapters.drive.group_calls import later_starts, unanswered
from runkernel.adapters.drive.pending import due_timer, exact_outcomes, expiry, has_deadline, needs_settled_commands, next_command
from runkernel.adapters.drive.port_inputs import gate_verdict
from runkernel.adapters.drive.reports import HeldMetadata, report_input
from runkernel.adapters.drive.ports import GateAnswer
from runkernel.adapters.drive.settings import Settings
from runkernel.adapters.drive.events import ModelFailed, Recovered
from runkernel.adapters.stores.contract import Checkpoint, InboxEntry, Settlement, UnknownRun
from runkernel.adapters.stores.folded_reads import PickUp
from runkernel.kernel.decide import decide
from runkernel.kernel.history import NO_HISTORY, History
from runkernel.kernel.protocol import (
    Activate, CancelChild, Commit, Decision, DeliverTerminus, EndRequest, Execute, Input, NotifyWait, PublishResults,
    QueryStatus, RequestInference, RunGate, RunHook, StartChild,
)
from runkernel.kernel.recover import RecoveryDecision, recover
from runkernel.kernel.rules import Rejection
from runkernel.kernel.state import Awaiting, EndCause, Ended, Message, RunSnapshot, ThreadCommit, ThreadHead
from runkernel.kernel.values import EndCauseKind, JsonValue, Role


class DriverCore:
    """One Run's progress, from one start or pick-up until a store call fails."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.policies = settings.policies
        self.state: RunSnapshot | None = None
        self.history: list[Message] = []
        self.final: JsonValue = None
        self.entry: InboxEntry | None = None
        self.lookups: History = NO_HISTORY
        self.terminus: DeliverTerminus | None = None
        self.metadata = HeldMetadata()
        self.saved: Checkpoint | None = None  # read once at pick-up
        self.checkpointed = False  # a checkpoint may exist until the next inference commits
        #: calls whose child this core found running since the host last asked: while
        #: they are all the open work, the Run is quiet (asking again is the host's poll)
        self.children_running: set[str] = set()
        #: failed attempts in a row of the model call the Run stands at: never committed,
        #: so another core (a take-over, a new driver) starts again from none
        self.model_failures = 0
        #: the attempts of the open batch (``started_in``) this core handed out as
        #: ``RunCall`` (``(call_id, attempt)``): the calls it started, which need no fence
        #: before their terminal commit; kept for one batch, so it never grows with the Run
        self.started: set[tuple[str, int]] = set()
        self.started_in: str | None = None
        #: nothing handed out since: the next look at the inbox may be what the pick-up
        #: read, or what the store saw in the commit of this version (``folded_reads``)
        self.inbox_look: list[InboxEntry] | int | None = None
        #: the calls of a group handed out together (``RunCalls``) and not answered yet,
        #: by call id: handed out again until each is answered (``group_calls``)
        self.handed_together: dict[str, RunCall] = {}

    # --- openings -------------------------------------------------------------------

    def start(self, thread_id: str, run_id: str, messages: tuple[Message, ...]) -> Steps:
        """Activate a new Run in a Thread, then drive it."""
        yield from self._observed(run_id, None, self._start(thread_id, run_id, messages), start=True)

    def pick_up(self, run_id: str) -> Steps:
        """Continue a Run from the store alone: exactly what ``recover`` authorizes."""
        telemetry = self.settings.telemetry
        context: str | None = (yield ReadTrace(run_id)) if telemetry.reads_trace else None
        yield from self._observed(run_id, context, self._pick_up(run_id), start=False)

    def _observed(self, run_id: str, trace_context: str | None, steps: Steps, *, start: bool) -> Steps:
        """``steps``, one drive for the telemetry: it ends when the generator does
        (returned, raised, or closed by its host)."""
        telemetry = self.settings.telemetry
        telemetry.drive_began(run_id, trace_context, start=start)
        try:
            yield from steps
        finally:
            telemetry.drive_ended(run_id)

    def _start(self, thread_id: str, run_id: str, messages: tuple[Message, ...]) -> Steps:
        head: ThreadHead | None = yield ReadHead(thread_id)
        if head is not None and head.active_run_id is not None:
            raise DriverError(
                f"thread {thread_id!r} has a Run that is not Ended ({head.active_run_id!r}): "
                "pick that one up instead"
            )
        if head is not None:
            self._took_history((yield ReadMessages(thread_id)))
        decision = decide(None, Activate(
            thread_id, run_id, head.version if head else 0, messages, self.settings.app,
            app_version=self.settings.app_version,
        ))
        if isinstance(decision, Rejection):
            raise HostProtocolError(f"can't start run {run_id!r}: {decision}", decision)
        self.lookups = yield ReadLookups(run_id)
        yield from self._drive(decision)

    def _pick_up(self, run_id: str) -> Steps:
        picked: PickUp = yield ReadPickUp(run_id)  # one round trip on PostgreSQL
        state = picked.snapshot
        if state is None:
            raise UnknownRun(f"no committed state for run {run_id!r}")
        # a child's owed cancel is queued first, then read and applied like any command
        self.inbox_look = list(picked.pending) if picked.parent is None else None
        if picked.parent is not None:
            yield CancelOwed(run_id)
        self._took_history(picked.messages)
        self.lookups = yield ReadLookups(run_id)
        self.saved = picked.checkpoint
        self.checkpointed = self.saved is not None
        self.state = state
        if self.checkpointed and isinstance(state.state, Ended):
            # a crash came between the end commit and the checkpoint's cleanup
            self.checkpointed, self.saved = False, None
            yield DropCheckpoint(run_id)
        plan = self._recover(state)
        yield Tell(Recovered(plan.row, state))
        yield from self._drive(plan.decision)

    def _took_history(self, messages: Sequence[Message]) -> None:
        self.history = list(messages)
        for message in reversed(self.history):
            if message.role is Role.ASSISTANT:
                self.final = message.content
                break

    # --- the effect loop ------------------------------------------------------------

    def _drive(self, decision: Decision) -> Steps:
        while True:
            following: Decision | None = None
            for index, effect in enumerate(decision.effects):
                match effect:
                    case Commit():
                        yield from self._commit(effect.commit, decision.state)
                    case RunHook() | PublishResults() | NotifyWait():
                        yield Observe(decision.state.run_id, effect)
                    case DeliverTerminus():
                        self.terminus = effect
                    case RequestInference():
                        if not (yield from self._commands_waiting()):
                            following = yield from self._ask(self._infer(effect.step))
                        break
                    case RunGate():
                        if not (yield from self._commands_waiting()):
                            following = yield from self._gate(effect)
                        break
                    case Execute():
                        starts = [effect, *later_starts(decision.effects, index)]
                        following = yield from self._ask(self._run_calls(starts))
                        break
                    case QueryStatus():
                        # a group's other queries: recover() plans each again once this one is answered
                        if not (yield from self._commands_waiting()):
                            following = yield from self._ask(handed.check_status(self._snapshot(), effect))
                        break
                    case StartChild():
                        state, app = self._snapshot(), self.settings.app
                        following = yield from start_child(
                            effect, state, self.policies, self.lookups, app, self_check=self.settings.self_check,
                            app_version=self.settings.app_version,
                        )
                        if following is not None:
                            break
                        self.children_running.add(effect.call_id)
                    case CancelChild():
                        yield SendCancel(effect.child)
                    case _:
                        assert_never(effect)
            if following is None:
                following = yield from self._quiet_point()
            decision = following

    def _quiet_point(self) -> Generator[Operation, Any, Decision]:
        """Nothing queued: apply an inbox command, an expired deadline, or what
        ``recover`` plans; an Awaiting or Ended Run hands its wait or terminus."""
        while True:
            state = self._snapshot()
            running = unanswered(self.handed_together, state)
            if running:  # their executors run: nothing is planned for them again
                answered = yield from self._ask(RunCalls(state.run_id, running))
                if answered is not None:
                    return answered
                continue
            picked = yield from self._next_command(state)
            if picked is not None:
                return picked
            if state.open_batch is not None and is_quiet(state.open_batch, self.policies, self.children_running):
                answered = yield from self._ask(children_running(state))
                if answered is not None:
                    return answered
                self.children_running.clear()  # asked again: recover() reconnects to each child
                continue
            if isinstance(state.state, Awaiting):
                expired = self._expiry(state)
                if expired is not None:
                    return expired
            if isinstance(state.state, Ended):
                yield Compact(state.run_id)  # every command is settled: keep only the applied
            if isinstance(state.state, (Awaiting, Ended)):
                action = handed.wait_for(state) if isinstance(state.state, Awaiting) else handed.done(state, self.final, self.terminus)
                answered = yield from self._ask(action)
                if answered is not None:
                    return answered
                continue
            return self._recover(state).decision

    def _recover(self, state: RunSnapshot) -> RecoveryDecision:
        if not self.settings.self_check:
            plan = recover(state, self.policies)
        else:
            plan = recover(state, self.policies, self_check=True, history=self.lookups)
        self.settings.telemetry.recovered(state.run_id, plan)
        return plan

    def _commit(self, commit: ThreadCommit, expected: RunSnapshot) -> Generator[Operation, Any, None]:
        commit = self.metadata.put_on(commit)
        yield from fence(self.state, commit, self.started, self.settings.fences)
        # a commit that leaves the Run Awaiting or Ended makes it quiet: its lease goes
        # with it (a command that turns up afterwards takes the lease again)
        quiet = isinstance(commit.disposition, (Awaiting, Ended))
        # the inbox command this commit applies is settled in the commit's own transaction
        settle = None if self.entry is None else Settlement(self.entry.entry_id, "applied")
        stored: RunSnapshot = yield Append(commit, settle, self.state, self.entry, quiet)
        self.entry = None
        if stored != expected:
            raise DriverError(f"store and kernel disagree after version {commit.version}")
        self.state = stored
        self.inbox_look = stored.version
        self.history.extend(commit.messages)
        inference_done = isinstance(commit.disposition, Ended) or any(
            m.role is Role.ASSISTANT for m in commit.messages
        )
        if self.checkpointed and inference_done:
            self.checkpointed, self.saved = False, None
            yield DropCheckpoint(commit.run_id)
        for message in commit.messages:
            if message.role is Role.ASSISTANT:
                self.final = message.content

    # --- asking the host ------------------------------------------------------------

    def _ask(self, action: Action) -> Generator[Operation, Any, Decision | None]:
        """Hand ``action`` until the host's report is accepted by the kernel. None means
        "go to the quiet point" (a poll that found a command, or a wait or terminus)."""
        refused: DriverError | None = None
        telemetry = self.settings.telemetry
        telemetry.handed(action)
        while True:
            self.inbox_look = None  # the host may take its time: look at the inbox again
            report: Report = yield Hand(action, refused)
            refused = None
            if isinstance(report, Poll):
                if isinstance(action, (WaitFor, ChildrenRunning, Done)):
                    return None
                if isinstance(action, (Infer, CheckStatus)) and (yield from self._commands_waiting()):
                    return None  # the command goes first; recover() plans this again
                continue
            if isinstance(report, Partial) and isinstance(action, Infer):
                self.checkpointed = True
                yield SaveCheckpoint(Checkpoint(action.run_id, action.step, report.data))
                continue
            made: Input | DriverError
            if isinstance(report, InferenceFailed) and isinstance(action, Infer):
                retry = yield from self._model_failed(action, report.error)
                telemetry.reported(action, report, None)
                if retry is not None:
                    action = retry  # the same question again, after a wait; nothing committed
                    telemetry.handed(action)
                    continue
                made = EndRequest(EndCause(EndCauseKind.FAILED, model_error(report.error)))
            else:
                made = report_input(
                    action, report, self.policies, self.settings.ids, refuse_unknown_tools=self.settings.refuse_unknown_tools
                )
            if isinstance(made, DriverError):
                refused = made
                telemetry.reported(action, report, str(made))
                continue
            if isinstance(made, EndRequest):
                made = attrs.evolve(made, child_termini=(yield from ended_children(self._snapshot())))
            verdict = self._decide(made)
            if isinstance(verdict, Rejection):
                refused = HostProtocolError(f"refused {type(report).__name__.lower()}: {verdict}", verdict, action)
                telemetry.reported(action, report, str(refused))
                continue
            telemetry.reported(action, report, None)
            if isinstance(action, RunCalls) and isinstance(report, CallEnded):
                self.handed_together.pop(report.call_id, None)
            self.metadata.keep(report)
            if isinstance(report, Inferred):
                self.model_failures = 0
            return verdict

    def _model_failed(self, action: Infer, error: BaseException) -> Generator[Operation, Any, Infer | None]:
        """A model call raised: the same ``Infer`` to hand again after a backoff while the
        error is transient and attempts are left, else None (the Run ends failed)."""
        self.model_failures += 1
        settings, failures = self.settings, self.model_failures
        retry = settings.transient(error) and failures < settings.model_attempts
        retry_after = model_backoff(failures) if retry else None
        yield Tell(ModelFailed(action.run_id, action.step, action.attempt, model_error(error), retry_after))
        if retry_after is None:
            return None
        yield KeepLease(action.run_id)  # the wait commits nothing that would renew it
        return attrs.evolve(action, attempt=failures + 1, retry_after=retry_after)

    def _decide(self, made: Input) -> Decision | Rejection:
        return decide(self._snapshot(), made, self.policies, self.lookups, self_check=self.settings.self_check)

    def _gate(self, effect: RunGate) -> Generator[Operation, Any, Decision]:
        """The gate's answer for one call. In a group's gate round an Allow is held, not
        committed: the decision then carries only the next member's ``RunGate`` (with the
        allows so far), and the state is the one already committed."""
        state, call = self._snapshot(), effect.call
        self.inbox_look = None
        answer: GateAnswer = yield AskGate(state.run_id, call)
        made = attrs.evolve(gate_verdict(call.call_id, answer, self.settings.ids), allowed=effect.allowed)
        verdict = self._decide(made)
        if isinstance(verdict, Rejection):
            raise HostProtocolError(f"the gate's answer for call {call.call_id!r} was refused: {verdict}", verdict)
        return verdict

    # --- inbox and deadlines --------------------------------------------------------

    def _commands_waiting(self) -> Generator[Operation, Any, bool]:
        return bool((yield from self._pending(self._snapshot().run_id)))

    def _pending(self, run_id: str) -> Generator[Operation, Any, list[InboxEntry]]:
        """The pending commands (right after a commit, maybe as the commit saw them)."""
        look, self.inbox_look = self.inbox_look, None
        if isinstance(look, list):
            return look
        pending: list[InboxEntry] = yield Pending(run_id, look)
        return pending

    def _next_command(self, state: RunSnapshot) -> Generator[Operation, Any, Decision | None]:
        pending = yield from self._pending(state.run_id)
        if not pending:
            return None
        termini = yield from ended_children(state)
        verdict = next_command(state, pending, self.policies, self.lookups, termini, self_check=self.settings.self_check)
        refused = verdict.refused
        if needs_settled_commands(refused):
            commands: list[InboxEntry] = yield ReadCommands(state.run_id)
            refused = exact_outcomes(refused, commands)
        for entry, outcome in refused:
            yield Settle(entry, outcome)
        if verdict.accepted is None:
            return None
        decision, self.entry = verdict.accepted
        return decision

    def _expiry(self, state: RunSnapshot) -> Decision | None:
        """An expired approval's deny, or a due timer's resume."""
        now, check = self.settings.clock(), self.settings.self_check
        if has_deadline(state):
            return expiry(state, now, self.policies, self.lookups, self_check=check)
        return due_timer(state, now, self.policies, self.lookups, self_check=check)

    # --- actions --------------------------------------------------------------------

    def _snapshot(self) -> RunSnapshot:
        assert self.state is not None, "the Run's first commit comes before any question"
        return self.state

    def _infer(self, step: int) -> Infer:
        return handed.infer(self._snapshot(), step, self.history, self.saved, self.model_failures + 1)

    def _run_calls(self, starts: Sequence[Execute]) -> RunCall | RunCalls:
        """One start alone is a ``RunCall``; several, or one beside calls handed out
        together and not answered yet, are one ``RunCalls`` with them."""
        state = self._snapshot()
        running = unanswered(self.handed_together, state)
        calls = [self._run_call(effect) for effect in starts]
        if len(calls) == 1 and not running:
            return calls[0]
        self.handed_together.update((call.call_id, call) for call in calls)
        return RunCalls(state.run_id, unanswered(self.handed_together, state))

    def _run_call(self, effect: Execute) -> RunCall:
        state = self._snapshot()
        batch = state.open_batch
        if batch is not None and batch.batch_id != self.started_in:
            self.started, self.started_in = set(), batch.batch_id
            self.handed_together.clear()
        self.started.add((effect.call_id, effect.attempt))
        return handed.run_call(state, effect)


__all__ = ["DriverCore", "Settings"]
