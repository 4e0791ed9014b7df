"""The one effect interpreter: a sans-IO generator per Run that every host drives.

The core never touches a store, a gate or the host itself. It *yields* what it needs
(``Append`` a commit, ``ReadRun``, ``Pending`` inbox commands, ``AskGate``, ``Hand`` an
action to the host, ...) and is sent the answer, the way psycopg's protocol generators
yield "wait for read". The push-mode ``Driver`` performs those operations synchronously
and ``AsyncDriver`` awaits them; the pull-mode ``Runtime`` answers each handed-out action
by calling its ports. None of them holds effect logic of its own (their store operations
are one ``StoreOps``), so the modes cannot drift.

Every decision comes from the kernel: ``decide`` for what the host reports, ``recover``
when a Run is picked up or reaches a quiet point. An operation that follows an ``Append``
is only yielded once the store acknowledged it, so an action that touches the world
(run attempt n, begin a wait) is handed out only after its commit is durable.
"""

from __future__ import annotations

from collections.abc import Generator, Mapping
from typing import Any, assert_never

import attrs
from attrs import frozen

from runkernel.adapters.drive.actions import (
    Action,
    CheckStatus,
    ChildrenRunning,
    Done,
    DriverError,
    Fence,
    HistoryView,
    HostProtocolError,
    Infer,
    MetadataUnsupported,
    RunCall,
    UnknownTool,
    WaitFor,
)
from runkernel.adapters.drive.delegations import is_quiet
from runkernel.adapters.drive.children import children_running, ended_children, start_child
from runkernel.adapters.drive.protocol import (
    Append,
    AskGate,
    CallEnded,
    Compact,
    DropCheckpoint,
    End,
    Fenced,
    Hand,
    InferenceFailed,
    Inferred,
    KeepLease,
    LoadCheckpoint,
    Observe,
    Operation,
    Partial,
    Pending,
    ReadCommands,
    Poll,
    ReadHead,
    ReadMessages,
    ReadLookups,
    ReadRun,
    Report,
    Resume,
    SaveCheckpoint,
    SendCancel,
    Settle,
    Status,
    Steps,
    Tell,
)
from runkernel.adapters.drive.model_errors import (
    DEFAULT_MODEL_ATTEMPTS,
    TransientPredicate,
    model_backoff,
    model_error,
    transient_model_error,
)
from runkernel.adapters.drive.fencing import calls_to_fence
from runkernel.adapters.drive.pending import due_timer, exact_outcomes, expiry, has_deadline, needs_settled_commands, next_command
from runkernel.adapters.drive.port_inputs import gate_verdict
from runkernel.adapters.drive.ports import Clock, GateAnswer, IdSource
from runkernel.adapters.drive.events import ModelFailed, Recovered
from runkernel.adapters.stores.contract import Checkpoint, InboxEntry, Settlement, UnknownRun
from runkernel.kernel.decide import decide
from runkernel.kernel.history import NO_HISTORY, History
from runkernel.kernel.policies import Policies
from runkernel.kernel.protocol import (
    Activate,
    CancelChild,
    Commit,
    Decision,
    DeliverTerminus,
    EndRequest,
    Execute,
    InferenceResult,
    Input,
    NotifyWait,
    ProposedCall,
    PublishResults,
    QueryStatus,
    RequestInference,
    ResumeCommand,
    RunGate,
    RunHook,
    StartChild,
    StatusReport,
    ToolDelegated,
    ToolFailure,
    ToolFinished,
)
from runkernel.kernel.recover import RecoveryDecision, recover
from runkernel.kernel.rules import Rejection
from runkernel.kernel.state import (
    Awaiting,
    CallAwaiting,
    EndCause,
    Ended,
    Message,
    RunSnapshot,
    ThreadCommit,
    ThreadHead,
    ToolCall,
)
from runkernel.kernel.values import EndCauseKind, JsonValue, Role

#: Whether this build's ``Message`` carries host metadata (the judge's codec adds it).
MESSAGE_HAS_METADATA = "metadata" in attrs.fields_dict(Message)


@frozen
class Settings:
    """What a driver was configured with; shared by every core it makes."""

    policies: Policies
    ids: IdSource
    clock: Clock
    #: the application recorded on the activation of each Run this driver starts, and of
    #: each child Run it activates for a concurrent delegation (a worker of that app
    #: drives the child)
    app: str | None = None
    #: make ``decide`` and ``recover`` judge each commit they build before the store
    #: judges it again (tests and the simulator; off in production)
    self_check: bool = False
    #: refuse a model reply that calls a tool without a declared policy (``UnknownTool``);
    #: off, such a call is committed and its host fails it
    refuse_unknown_tools: bool = True
    #: which exceptions of a model call are worth another attempt (``model_errors``)
    transient: TransientPredicate = transient_model_error
    #: attempts of one model call in this driver's hands before the Run ends ``failed``
    model_attempts: int = DEFAULT_MODEL_ATTEMPTS
    #: the tools whose downstream takes a fence (W5): before a commit makes terminal a
    #: call of one of them that this core found Executing and did not start, it hands
    #: out ``Fence`` and commits only once the host answers ``fenced``
    fences: frozenset[str] = frozenset()


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
        self.assistant_metadata: JsonValue = None
        self.tool_metadata: dict[str, JsonValue] = {}
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

    # --- openings -------------------------------------------------------------------

    def start(self, thread_id: str, run_id: str, messages: tuple[Message, ...]) -> Steps:
        """Activate a new Run in a Thread, then drive it."""
        head: ThreadHead | None = yield ReadHead(thread_id)
        if head is not None and head.active_run_id is not None:
            raise DriverError(
                f"thread {thread_id!r} has a Run that is not Ended ({head.active_run_id!r}): "
                "pick that one up instead"
            )
        if head is not None:
            yield from self._read_history(thread_id)
        decision = decide(None, Activate(thread_id, run_id, head.version if head else 0, messages, self.settings.app))
        if isinstance(decision, Rejection):
            raise HostProtocolError(f"can't start run {run_id!r}: {decision}", decision)
        self.lookups = yield ReadLookups(run_id)
        yield from self._drive(decision)

    def pick_up(self, run_id: str) -> Steps:
        """Continue a Run from the store alone: exactly what ``recover`` authorizes."""
        state: RunSnapshot | None = yield ReadRun(run_id)
        if state is None:
            raise UnknownRun(f"no committed state for run {run_id!r}")
        yield from self._read_history(state.thread_id)
        self.lookups = yield ReadLookups(run_id)
        self.saved = yield LoadCheckpoint(run_id)
        self.checkpointed = self.saved is not None
        self.state = state
        if self.checkpointed and isinstance(state.state, Ended):
            # a crash came between the end commit and the checkpoint's cleanup
            self.checkpointed, self.saved = False, None
            yield DropCheckpoint(run_id)
        plan = self._recover(state)
        yield Tell(Recovered(plan.row, state))
        yield from self._drive(plan.decision)

    def _read_history(self, thread_id: str) -> Generator[Operation, Any, None]:
        messages: list[Message] = yield ReadMessages(thread_id)
        self.history = list(messages)
        for message in reversed(self.history):
            if message.role is Role.ASSISTANT:
                self.final = message.content
                break

    # --- the effect loop ------------------------------------------------------------

    def _drive(self, decision: Decision) -> Steps:
        while True:
            following: Decision | None = None
            for effect in decision.effects:
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
                        following = yield from self._ask(self._run_call(effect))
                        break
                    case QueryStatus():
                        if not (yield from self._commands_waiting()):
                            following = yield from self._ask(self._check_status(effect))
                        break
                    case StartChild():
                        state, app = self._snapshot(), self.settings.app
                        following = yield from start_child(
                            effect, state, self.policies, self.lookups, app, self_check=self.settings.self_check
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
                action = self._wait_for(state) if isinstance(state.state, Awaiting) else self._done(state)
                answered = yield from self._ask(action)
                if answered is not None:
                    return answered
                continue
            return self._recover(state).decision

    def _recover(self, state: RunSnapshot) -> RecoveryDecision:
        if not self.settings.self_check:
            return recover(state, self.policies)
        return recover(state, self.policies, self_check=True, history=self.lookups)

    def _commit(self, commit: ThreadCommit, expected: RunSnapshot) -> Generator[Operation, Any, None]:
        commit = self._with_metadata(commit)
        yield from self._fence(commit)
        # the inbox command this commit applies is settled in the commit's own transaction
        settle = None if self.entry is None else Settlement(self.entry.entry_id, "applied")
        stored: RunSnapshot = yield Append(commit, settle, self.state, self.entry)
        self.entry = None
        if stored != expected:
            raise DriverError(f"store and kernel disagree after version {commit.version}")
        self.state = stored
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

    def _fence(self, commit: ThreadCommit) -> Generator[Operation, Any, None]:
        """W5: hand out a ``Fence`` for each call ``commit`` makes terminal that this
        core found Executing and did not start, and return once the host fenced each.
        A host that cannot fence answers nothing: the commit is never written."""
        for call in calls_to_fence(self.state, commit, self.started, self.settings.fences):
            action = Fence(commit.run_id, call.call_id, call.tool, call.operation_id)
            refused: DriverError | None = None
            while True:
                report: Report = yield Hand(action, refused)
                if isinstance(report, Fenced) and report.call_id == call.call_id:
                    break
                refused = None if isinstance(report, Poll) else HostProtocolError(
                    f"Fence expects {_EXPECTED[Fence]}, not {_REPORT_NAMES[type(report)]}", None, action
                )

    # --- asking the host ------------------------------------------------------------

    def _ask(self, action: Action) -> Generator[Operation, Any, Decision | None]:
        """Hand ``action`` until the host's report is accepted by the kernel. None means
        "go to the quiet point" (a poll that found a command, or a wait or terminus)."""
        refused: DriverError | None = None
        while True:
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
                if retry is not None:
                    action = retry  # the same question again, after a wait; nothing committed
                    continue
                made = EndRequest(EndCause(EndCauseKind.FAILED, model_error(report.error)))
            else:
                made = self._input(action, report)
            if isinstance(made, DriverError):
                refused = made
                continue
            if isinstance(made, EndRequest):
                made = attrs.evolve(made, child_termini=(yield from ended_children(self._snapshot())))
            verdict = self._decide(made)
            if isinstance(verdict, Rejection):
                refused = HostProtocolError(f"refused {type(report).__name__.lower()}: {verdict}", verdict, action)
                continue
            self._keep_metadata(report)
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

    def _input(self, action: Action, report: Report) -> Input | DriverError:
        """The kernel input a report stands for, if it answers ``action``."""
        if isinstance(report, End):
            return EndRequest(report.cause)
        if isinstance(report, (Inferred, CallEnded)) and report.metadata is not None and not MESSAGE_HAS_METADATA:
            return MetadataUnsupported("this runkernel's Message has no metadata field")
        match action, report:
            case Infer(), Inferred():
                return self._inference(report)
            case RunCall(), CallEnded() if report.call_id == action.call_id:
                outcome = report.outcome
                if isinstance(outcome, ToolDelegated) and action.delegation is None:
                    # the pull-mode runtime's answer too: only a declared tool has a child
                    outcome = ToolFailure({
                        "type": "UndeclaredDelegation",
                        "message": f"tool {action.tool!r} delegated but is not declared a sequential delegation",
                    })
                return ToolFinished(action.call_id, action.attempt, outcome, report.reaction)
            case CheckStatus(), Status() if report.call_id == action.call_id:
                return StatusReport(action.call_id, action.attempt, report.status, report.value)
            case WaitFor(), Resume():
                ticket = action.ticket
                return ResumeCommand(action.run_id, ticket.ticket_id, ticket.wait, report.payload)
        return HostProtocolError(
            f"{type(action).__name__} expects {_EXPECTED[type(action)]}, "
            f"not {_REPORT_NAMES[type(report)]}"
            + (f" for call {getattr(report, 'call_id')!r}" if isinstance(report, (CallEnded, Status)) else ""),
            None,
            action,
        )

    def _inference(self, report: Inferred) -> InferenceResult | DriverError:
        unknown = sorted({c.tool for c in report.calls} - set(self.policies.tools))
        if unknown and self.settings.refuse_unknown_tools:
            return UnknownTool(
                f"no policy for tool(s) {', '.join(map(repr, unknown))}: declare each tool's "
                "recovery policy (Driver(store, tools={name: ToolPolicy(...)}))"
            )
        if not report.calls:
            return InferenceResult(report.content, end=report.end, staged=report.staged)
        ids = self.settings.ids
        calls = tuple(
            ProposedCall(
                c.call_id or ids.new_id("call"), c.tool, c.arguments, c.operation_id or ids.new_id("op")
            )
            for c in report.calls
        )
        return InferenceResult(report.content, calls, ids.new_id("batch"), report.end, report.staged)

    def _gate(self, effect: RunGate) -> Generator[Operation, Any, Decision]:
        """The gate's answer for one call. In a group's gate round an Allow is held, not
        committed: the decision then carries only the next member's ``RunGate`` (with the
        allows so far), and the state is the one already committed."""
        state, call = self._snapshot(), effect.call
        answer: GateAnswer = yield AskGate(state.run_id, call)
        made = attrs.evolve(gate_verdict(call.call_id, answer, self.settings.ids), allowed=effect.allowed)
        verdict = self._decide(made)
        if isinstance(verdict, Rejection):
            raise HostProtocolError(f"the gate's answer for call {call.call_id!r} was refused: {verdict}", verdict)
        return verdict

    # --- inbox and deadlines --------------------------------------------------------

    def _commands_waiting(self) -> Generator[Operation, Any, bool]:
        pending: list[InboxEntry] = yield Pending(self._snapshot().run_id)
        return bool(pending)

    def _next_command(self, state: RunSnapshot) -> Generator[Operation, Any, Decision | None]:
        pending: list[InboxEntry] = yield Pending(state.run_id)
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
        saved = self.saved
        partial = saved.data if saved is not None and saved.step == step else None
        state = self._snapshot()
        return Infer(state.run_id, step, HistoryView(self.history), partial, state.staged, self.model_failures + 1)

    def _run_call(self, effect: Execute) -> RunCall:
        state = self._snapshot()
        batch = state.open_batch
        call = batch.call(effect.call_id) if batch is not None else None
        child = call.delegation if call is not None else None
        if batch is not None and batch.batch_id != self.started_in:
            self.started, self.started_in = set(), batch.batch_id
        self.started.add((effect.call_id, effect.attempt))
        return RunCall(
            state.run_id,
            effect.call_id,
            effect.tool,
            effect.arguments,
            effect.operation_id,
            effect.attempt,
            effect.resume_value,
            delegation=None if child is None or child.concurrent else child,
        )

    def _check_status(self, effect: QueryStatus) -> CheckStatus:
        return CheckStatus(self._snapshot().run_id, effect.call_id, effect.tool, effect.operation_id, effect.attempt)

    def _awaiting_call(self, state: RunSnapshot) -> _AwaitingCall:
        assert isinstance(state.state, Awaiting) and state.open_batch is not None
        call = state.open_batch.call(state.state.ticket.call_id)
        assert call is not None and isinstance(call.status, CallAwaiting)
        return _AwaitingCall(call, call.status)

    def _wait_for(self, state: RunSnapshot) -> WaitFor:
        assert isinstance(state.state, Awaiting)
        awaiting = self._awaiting_call(state)
        return WaitFor(state.run_id, state.state.ticket, awaiting.status.wait, awaiting.call)

    def _done(self, state: RunSnapshot) -> Done:
        assert isinstance(state.state, Ended)
        redelivery = self.terminus.redelivery if self.terminus is not None else True
        return Done(state.run_id, state.thread_id, state.state.cause, self.final, redelivery)

    # --- message metadata -------------------------------------------------------------

    def _keep_metadata(self, report: Report) -> None:
        if isinstance(report, Inferred) and report.metadata is not None:
            self.assistant_metadata = report.metadata
        if isinstance(report, CallEnded) and report.metadata is not None:
            self.tool_metadata[report.call_id] = report.metadata

    def _with_metadata(self, commit: ThreadCommit) -> ThreadCommit:
        """Put the host's metadata on the messages it belongs to (the assistant message of
        the reply it came with, a call's tool-result message when the batch publishes)."""
        if self.assistant_metadata is None and not self.tool_metadata:
            return commit
        messages = []
        for message in commit.messages:
            metadata: JsonValue = None
            if message.role is Role.ASSISTANT and self.assistant_metadata is not None:
                metadata, self.assistant_metadata = self.assistant_metadata, None
            elif message.role is Role.TOOL and message.call_id in self.tool_metadata:
                metadata = self.tool_metadata.pop(message.call_id)
            # keyword by name: before the judge's merge, Message has no such field
            with_metadata: dict[str, Any] = {"metadata": metadata}
            messages.append(message if metadata is None else attrs.evolve(message, **with_metadata))
        return attrs.evolve(commit, messages=tuple(messages))


@frozen
class _AwaitingCall:
    call: ToolCall
    status: CallAwaiting


_EXPECTED: Mapping[type, str] = {
    Infer: "inferred(...) or inference_failed(...)",
    RunCall: "call_returned / call_failed / call_lost / call_scheduled for its call",
    CheckStatus: "status(...) for its call",
    Fence: "fenced(call_id) for its call, once the downstream took the fence",
    WaitFor: "resume(payload), or next_action() to apply a queued command",
    ChildrenRunning: "next_action() once a child may have ended, or end() / cancel()",
    Done: "nothing: the Run is Ended",
}

_REPORT_NAMES: Mapping[type, str] = {
    Inferred: "inferred(...)",
    InferenceFailed: "inference_failed(...)",
    CallEnded: "a call's result",
    Status: "status(...)",
    Fenced: "fenced(...)",
    Resume: "resume(...)",
    End: "end(...)",
    Partial: "checkpoint(...)",
    Poll: "next_action()",
}


__all__ = ["MESSAGE_HAS_METADATA", "DriverCore", "Settings"]
