"""The reference runtime: carries out the kernel's effects against a store and ports.

It holds no truth of its own. Every decision comes from ``decide`` or ``recover`` on
the latest committed snapshot; every effect that touches the world happens only after
the commit the kernel put before it is acknowledged. A runtime that crashes is thrown
away, and a fresh one continues from the store alone with ``drive``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import assert_never

import attrs

from runkernel.adapters.crash import (
    Boundary,
    CrashPlan,
    NeverCrash,
    Position,
    SimulatedCrash,
    position_of,
)
from runkernel.adapters.message_log import MessageLog
from runkernel.adapters.ports import (
    AllowAll,
    Clock,
    Delegate,
    Failed,
    GatePort,
    Hold,
    HookPort,
    IdSource,
    InferenceRequest,
    Lost,
    ModelPort,
    NoHooks,
    NullObserver,
    Observer,
    Permit,
    Provide,
    Refuse,
    Returned,
    Schedule,
    SecretIds,
    ToolInvocation,
    ToolRegistry,
    ToolReply,
    utc_now,
)
from runkernel.adapters.runtime_events import (
    ALREADY_COMMITTED,
    Acknowledged,
    CheckpointLost,
    CommandSettled,
    CommitRetried,
    Recovered,
    ToolRaised,
    RunOutcome,
    RuntimeEvent,
    RuntimeProtocolError,
)
from runkernel.adapters.delegations import (
    cancel_child,
    cancel_if_parent_ended,
    child_activation,
    child_termini,
    find_child,
    is_quiet,
)
from runkernel.adapters.inbox import exact_refusal
from runkernel.adapters.pending import due_timer
from runkernel.adapters.invocation import invocation_scope
from runkernel.adapters.worker_lease import APPEND_RETRIES, LeaseKeeper
from runkernel.adapters.serial import inbox_to_input
from runkernel.adapters.store import (
    Checkpoint,
    InboxEntry,
    Settlement,
    Store,
    StoreUnavailable,
    UnknownRun,
)
from runkernel.errors import RunkernelError
from runkernel.kernel.codec import TraceFormatError
from runkernel.kernel.decide import decide
from runkernel.kernel.protocol import (
    Activate,
    Allow,
    Block,
    CancelChild,
    ChildEnded,
    Commit,
    DeadlinePassed,
    Decision,
    DeliverTerminus,
    Effect,
    EndRequest,
    Execute,
    GateVerdict,
    InferenceResult,
    Input,
    NotifyWait,
    OperationStatus,
    ProposedCall,
    PublishResults,
    QueryStatus,
    RequestInference,
    RequireWait,
    ResumeCommand,
    RunGate,
    RunHook,
    StartChild,
    StatusReport,
    Supply,
    ToolDelegated,
    ToolFailure,
    ToolFinished,
    ToolOutcome,
    ToolOutcomeLost,
    ToolOutput,
    ToolScheduled,
)
from runkernel.kernel.recover import RecoveryDecision, recover
from runkernel.kernel.resume import has_passed
from runkernel.kernel.policies import RecoveryMode, ToolPolicy
from runkernel.kernel.rules import Rejection
from runkernel.kernel.state import (
    Awaiting,
    CallAwaiting,
    CallExecuting,
    Delegation,
    Ended,
    Message,
    RunSnapshot,
    ThreadCommit,
    TypedError,
)
from runkernel.kernel.values import JsonValue, Role, WaitKind, json_problem

MAX_STATUS_POLLS = 5


class Drive:
    """One runtime's progress on one Run, one effect at a time.

    ``step()`` carries out exactly one effect (or, with nothing queued, takes the next
    decision at a quiet point) and says whether driving is over for now.
    """

    def __init__(
        self, runtime: Runtime, state: RunSnapshot | None, decision: Decision, messages: MessageLog
    ) -> None:
        self.runtime = runtime
        self.state = state
        self.decision = decision
        #: the Thread's messages, read once at pick-up and grown by each acknowledged commit
        self.messages = messages
        self.index = 0
        self.entry: InboxEntry | None = None
        self.outcome: RunOutcome | None = None

    def interrupt(self) -> None:
        """Drop the rest of the current decision's effects (recover() can replan them)."""
        self.index = len(self.decision.effects)

    def step(self) -> bool:
        """Advance by one effect. True once driving has stopped (see ``outcome``)."""
        if self.outcome is not None:
            return True
        if self.index < len(self.decision.effects):
            effect = self.decision.effects[self.index]
            self.index += 1
            produced = self.runtime.carry_out(self, effect)
            if produced is not None:
                self.state = self.decision.state
                history = self.runtime.store.history(self.state.run_id)
                verdict = decide(
                    self.state, produced, self.runtime.policies, history, self_check=self.runtime.self_check
                )
                if isinstance(verdict, Rejection):
                    raise RuntimeProtocolError(verdict)
                self._follow(verdict, None)
            return False
        state = self.decision.state
        self.state = state
        follow = self.runtime.quiet_point(state)
        if follow is None:
            self.outcome = RunOutcome(state.run_id, state)
            return True
        self._follow(*follow)
        return False

    def _follow(self, decision: Decision, entry: InboxEntry | None) -> None:
        self.decision, self.index, self.entry = decision, 0, entry

    def run(self) -> RunOutcome:
        """Step until driving stops."""
        while not self.step():
            pass
        assert self.outcome is not None
        return self.outcome


class _Stream:
    def __init__(self, runtime: Runtime, run_id: str, step: int) -> None:
        self.runtime, self.run_id, self.step = runtime, run_id, step

    def delta(self, data: JsonValue) -> None:
        self.runtime.observer.delta(self.run_id, data)

    def checkpoint(self, partial: JsonValue) -> None:
        self.runtime.checkpointed.add(self.run_id)  # a failed write may still have landed
        try:
            self.runtime.store.save_checkpoint(Checkpoint(self.run_id, self.step, partial))
        except StoreUnavailable as error:
            self.runtime.on_event(CheckpointLost(self.run_id, str(error)))


class Runtime:
    """Drives Runs: one instance per process of control; throw it away after a crash."""

    def __init__(
        self,
        store: Store,
        model: ModelPort,
        tools: ToolRegistry,
        *,
        gate: GatePort | None = None,
        observer: Observer | None = None,
        ids: IdSource | None = None,
        clock: Clock = utc_now,
        crash: CrashPlan | None = None,
        on_event: Callable[[RuntimeEvent], None] | None = None,
        self_check: bool = False,
        leases: LeaseKeeper | None = None,
        app: str | None = None,
        hooks: HookPort | None = None,
    ) -> None:
        """``hooks`` answer StepStart/BeforeInference (staged state, request-only context)
        and AfterTool (a reaction). ``self_check`` makes ``decide`` and ``recover`` judge
        each commit they build before the store judges it again (tests and the simulator;
        off in production). With ``leases`` (a worker's), every Run is leased before it is
        driven, every commit names the lease, and every executor start re-checks it (W1); a
        lost lease or a lost commit raises out of ``drive``, so driving stops at once.
        ``app`` is recorded on the activation of each Run ``start`` begins."""
        self.store = store
        self.model = model
        self.tools = tools
        self.policies = tools.policies
        self.gate = gate or AllowAll()
        self.observer = observer or NullObserver()
        self.ids = ids or SecretIds()
        self.clock = clock
        self.crash = crash or NeverCrash()
        self.on_event = on_event or (lambda _event: None)
        self.self_check = self_check
        self.leases = leases
        self.app = app
        self.hooks = hooks or NoHooks()
        self.terminus: DeliverTerminus | None = None
        self._polls: dict[str, int] = {}
        #: (parent run, call) of concurrent delegations whose child this drive saw running
        self._watched: set[tuple[str, str]] = set()
        #: Runs that may have a stream checkpoint in the store (saved or found by this
        #: runtime): only those get a delete, so a Step without one writes nothing extra
        self.checkpointed: set[str] = set()

    # --- entry points -------------------------------------------------------------

    def start(self, thread_id: str, run_id: str, messages: tuple[Message, ...]) -> RunOutcome:
        """Activate a new Run in a Thread and drive it until it waits or ends."""
        return self.begin_start(thread_id, run_id, messages).run()

    def drive(self, run_id: str) -> RunOutcome:
        """Continue a Run from committed facts alone (recovery), until it waits or ends."""
        return self.begin_drive(run_id).run()

    def begin_start(self, thread_id: str, run_id: str, messages: tuple[Message, ...]) -> Drive:
        """A Drive that activates a new Run; advance it with ``step()``."""
        head = self.store.thread_head(thread_id)
        decision = decide(None, Activate(thread_id, run_id, head.version if head else 0, messages, self.app))
        assert isinstance(decision, Decision)
        earlier = self.store.messages(thread_id) if head is not None else ()
        return Drive(self, None, decision, MessageLog(earlier))

    def begin_drive(self, run_id: str) -> Drive:
        """A Drive that recovers a Run from the store alone; advance it with ``step()``.
        With leases, the Run's lease is taken first (``LeaseHeld`` if another worker
        holds it), so the state read next cannot change under this worker."""
        if self.leases is not None and self.leases.held(run_id) is None:
            self.leases.take(run_id)
        cancel_if_parent_ended(self.store, run_id)  # applied from the inbox like any cancel
        state = self.store.run(run_id)
        if state is None:
            raise UnknownRun(f"no committed state for run {run_id!r}")
        if self.store.load_checkpoint(run_id) is not None:
            # left by a runtime that died: deleted when its step is committed, or now if
            # the crash hit between the end commit and the checkpoint cleanup
            self.checkpointed.add(run_id)
            if isinstance(state.state, Ended):
                self._drop_checkpoint(run_id)
        self._watched = {key for key in self._watched if key[0] != run_id}  # ask the store again
        plan = self._recover(state)
        self.on_event(Recovered(plan.row, state))
        return Drive(self, state, plan.decision, MessageLog(self.store.messages(state.thread_id)))

    def quiet_point(self, state: RunSnapshot) -> tuple[Decision, InboxEntry | None] | None:
        """Nothing queued: apply an inbox command, expire a wait, or plan the next step."""
        if isinstance(state.state, Ended):
            # an Ended run refuses every command: this settles what is left in the inbox
            accepted = self._next_command(state)
            assert accepted is None, "decide accepted a command for an Ended run"
            self.store.compact_commands(state.run_id)  # keep only what was applied
            return None
        command = self._next_command(state)
        if command is not None:
            return command
        if isinstance(state.state, Awaiting):
            expired = self._expiry(state)
            return None if expired is None else (expired, None)
        if state.open_batch is not None and self._quiet_parent(state):
            return None  # only running children remain: a child's end wakes this Run
        call = state.open_batch.first_open_call() if state.open_batch else None
        if call is not None and isinstance(call.status, CallExecuting):
            if self._polls.get(call.operation_id, 0) >= MAX_STATUS_POLLS:
                return None  # a reconnect tool still running: leave it for a later drive
        return self._recover(state).decision, None

    def _quiet_parent(self, state: RunSnapshot) -> bool:
        """Whether the Run's only open work is concurrent delegations whose children
        this runtime found running (it asks the store once per drive)."""
        assert state.open_batch is not None
        watched = {call_id for run_id, call_id in self._watched if run_id == state.run_id}
        return is_quiet(state.open_batch, self.policies, watched)

    def _recover(self, state: RunSnapshot) -> RecoveryDecision:
        if not self.self_check:
            return recover(state, self.policies)
        return recover(state, self.policies, self_check=True, history=self.store.history(state.run_id))

    def carry_out(self, drive: Drive, effect: Effect) -> Input | None:
        """Carry out one effect; an effect that asks the world returns its answer as input."""
        decision = drive.decision
        run_id = decision.state.run_id
        match effect:
            case Commit():
                entry = drive.entry
                settle = Settlement(entry.entry_id, "applied") if entry is not None else None
                self._commit(drive.state, effect.commit, decision.state, settle)
                drive.messages.extend(effect.commit.messages)
                drive.state = decision.state
                if entry is not None:
                    # settled in the commit's own transaction: no crash falls in between
                    self.on_event(CommandSettled(entry, "applied"))
                    drive.entry = None
            case RunHook():
                self.observer.hook(run_id, effect.hook, effect.call_id)
            case RequestInference():
                if self.store.pending_commands(run_id):
                    drive.interrupt()  # apply the command first; recover() replans this
                    return None
                return self._infer(decision.state, effect, drive.messages)
            case RunGate():
                if self.store.pending_commands(run_id):
                    drive.interrupt()
                    return None
                return self._gate(decision.state, effect)
            case Execute():
                return self._execute(decision.state, effect)
            case QueryStatus():
                polled = self._polls.get(effect.operation_id, 0)
                if self.store.pending_commands(run_id) or polled >= MAX_STATUS_POLLS:
                    # a command goes first; an operation still running after the poll
                    # limit is left for a later drive (quiet_point stops driving)
                    drive.interrupt()
                    return None
                return self._query(effect)
            case NotifyWait():
                self.observer.notify(run_id, effect.ticket, effect.wait)
            case PublishResults():
                self.observer.publish(run_id, effect.batch)
            case DeliverTerminus():
                self.terminus = effect
            case StartChild():
                return self._start_child(effect)
            case CancelChild():
                cancel_child(self.store, effect.child.run_id)
            case _:
                assert_never(effect)
        return None

    def _commit(
        self,
        prev: RunSnapshot | None,
        commit: ThreadCommit,
        expected: RunSnapshot,
        settle: Settlement | None = None,
    ) -> None:
        """One durable transaction: the commit, with the inbox command it applies settled."""
        position = position_of(prev, commit)
        if self.crash.crash_here(Boundary.BEFORE_WRITE, position):
            raise SimulatedCrash(Boundary.BEFORE_WRITE, position)
        stored = self._append(commit, settle)
        if stored != expected:
            raise AssertionError(f"store and kernel disagree after version {commit.version}")
        if self.crash.crash_here(Boundary.AFTER_WRITE, position):
            raise SimulatedCrash(Boundary.AFTER_WRITE, position)
        self.on_event(Acknowledged(commit, position))
        if position in (Position.INFERENCE_TEXT, Position.BATCH_OPEN, Position.END):
            self._drop_checkpoint(commit.run_id)

    def _append(self, commit: ThreadCommit, settle: Settlement | None) -> RunSnapshot:
        """The store write. Under a lease, a write whose reply was lost (the store
        became unavailable) is retried as it is: the store adopts it if it had landed
        (W4) or writes it now, never twice."""
        if self.leases is None:
            return self.store.append(commit, settle)
        for _ in range(APPEND_RETRIES):
            lease = self.leases.for_commit(commit.run_id)
            try:
                return self.store.append(commit, settle, lease=lease)
            except StoreUnavailable as error:
                self.on_event(CommitRetried(commit, str(error)))
        return self.store.append(commit, settle, lease=self.leases.for_commit(commit.run_id))

    def _drop_checkpoint(self, run_id: str) -> None:
        """Best effort: a checkpoint left behind names a step that has passed, so no
        inference ever uses it."""
        if run_id not in self.checkpointed:
            return
        self.checkpointed.discard(run_id)
        try:
            self.store.delete_checkpoint(run_id)
        except StoreUnavailable as error:
            self.on_event(CheckpointLost(run_id, str(error)))

    # --- effects that produce inputs -------------------------------------------------

    def _infer(self, state: RunSnapshot, effect: RequestInference, messages: MessageLog) -> Input:
        saved = self.store.load_checkpoint(state.run_id)
        if saved is not None:
            self.checkpointed.add(state.run_id)
        partial = saved.data if saved is not None and saved.step == effect.step else None
        staging = self.hooks.before_inference(state.run_id, effect.step, state.staged)
        request = InferenceRequest(
            state.thread_id,
            state.run_id,
            effect.step,
            messages.so_far(),
            partial,
            _Stream(self, state.run_id, effect.step),
            staging.context,
        )
        reply = self.model.infer(request)
        if not reply.calls:
            return InferenceResult(reply.content, end=reply.end, staged=staging.staged)
        calls = tuple(
            ProposedCall(
                call.call_id or self.ids.new_id("call"),
                call.tool,
                call.arguments,
                self.ids.new_id("op"),
            )
            for call in reply.calls
        )
        return InferenceResult(reply.content, calls, self.ids.new_id("batch"), staged=staging.staged)

    def _gate(self, state: RunSnapshot, effect: RunGate) -> Input:
        answer = self.gate.check(state.run_id, effect.call)
        match answer:
            case Permit():
                return GateVerdict(effect.call.call_id, Allow(), effect.allowed)
            case Refuse():
                return GateVerdict(effect.call.call_id, Block(answer.reason), effect.allowed)
            case Provide():
                return GateVerdict(effect.call.call_id, Supply(answer.value), effect.allowed)
            case Hold():
                wait = RequireWait(
                    answer.kind, self.ids.ticket_id(), answer.request, answer.expires_at, answer.due_at
                )
                return GateVerdict(effect.call.call_id, wait, effect.allowed)
            case _:
                assert_never(answer)

    def _execute(self, state: RunSnapshot, effect: Execute) -> Input:
        tool = self.tools.get(effect.tool)
        outcome: ToolOutcome
        reaction: JsonValue = None
        if tool is None:
            outcome = ToolFailure({"type": "UnknownTool", "message": f"no tool named {effect.tool!r}"})
        else:
            # W1: the lease is re-checked, with its margin, immediately before the start
            lease = self.leases.before_executor(state.run_id) if self.leases is not None else None
            invocation = ToolInvocation(
                state.run_id,
                effect.call_id,
                effect.operation_id,
                effect.attempt,
                effect.arguments,
                effect.resume_value,
                None if lease is None else lease.epoch,
                _delegation_of(state, effect.call_id),
            )
            with invocation_scope(invocation):
                try:
                    reply = tool.run(invocation)
                except (SimulatedCrash, RunkernelError):
                    raise  # the runtime's own death or refusal, not the tool's outcome
                except Exception as error:
                    reply = self._raised(state.run_id, effect, tool.policy, error)
            reaction = self.hooks.after_tool(state.run_id, effect.call_id, effect.attempt, reply)
            match reply:
                case Returned():
                    outcome = ToolOutput(reply.value)
                case Failed():
                    outcome = ToolFailure(reply.error, reply.retryable)
                case Delegate() if invocation.delegation is not None:
                    outcome = ToolDelegated(self.ids.ticket_id())
                case Delegate():
                    outcome = ToolFailure({
                        "type": "UndeclaredDelegation",
                        "message": f"tool {effect.tool!r} delegated but is not declared a sequential delegation",
                    })
                case Schedule():
                    outcome = ToolScheduled(self.ids.ticket_id(), reply.due_at)
                case Lost():
                    outcome = ToolOutcomeLost()
                case _:
                    assert_never(reply)
        carried = outcome.value if isinstance(outcome, ToolOutput) else getattr(outcome, "error", None)
        problem = json_problem(carried)
        if problem is not None:
            outcome = ToolFailure({"type": "NotJson", "message": f"the tool returned a value that is not JSON: {problem}"})
        if self.crash.crash_here(Boundary.AFTER_EFFECT, Position.CALL_RESULT):
            raise SimulatedCrash(Boundary.AFTER_EFFECT, Position.CALL_RESULT)
        return ToolFinished(effect.call_id, effect.attempt, outcome, reaction)

    def _raised(self, run_id: str, effect: Execute, policy: ToolPolicy, error: Exception) -> ToolReply:
        """A tool that raised: its exception is reported, and the call is a retryable
        error for a replay tool, an unknown outcome otherwise (see ``ToolRaised``)."""
        typed = TypedError(type(error).__name__, str(error))
        self.on_event(ToolRaised(run_id, effect.call_id, effect.attempt, typed))
        if policy.recovery.mode is RecoveryMode.REPLAY:
            return Failed({"type": typed.type, "message": typed.message}, retryable=True)
        return Lost()

    def _query(self, effect: QueryStatus) -> Input:
        self._polls[effect.operation_id] = self._polls.get(effect.operation_id, 0) + 1
        tool = self.tools.get(effect.tool)
        if tool is None:
            return StatusReport(effect.call_id, effect.attempt, OperationStatus.UNKNOWN)
        reply = tool.status(effect.operation_id)
        return StatusReport(effect.call_id, effect.attempt, reply.status, reply.value)

    # --- concurrent delegations ---------------------------------------------------

    def _child_terminus(self, child: Delegation) -> JsonValue | None:
        """The child's committed terminus, or None while it has not ended."""
        return find_child(self.store, child).terminus

    def _start_child(self, effect: StartChild) -> Input | None:
        """The executor of a concurrent delegation: activate its child (by its fixed
        identity, so doing it again after a crash is the same effect), or report the
        child's terminus if it has ended; a running child leaves the parent quiet."""
        self._watched.add((effect.parent.run_id, effect.call_id))
        if self.store.run(effect.child.run_id) is None:
            if self.leases is not None:
                # W1: the activation is the delegation's executor, started only under a
                # lease still valid past its margin (as the push driver does)
                self.leases.before_executor(effect.parent.run_id)
            head = self.store.thread_head(effect.child.thread_id)
            # the parent's app: its workers drive the child too
            activation = decide(None, child_activation(effect, head.version if head else 0, self.app))
            if isinstance(activation, Rejection):
                raise RuntimeProtocolError(activation)
            assert activation.commit is not None
            self._commit(None, activation.commit, activation.state)
            return None
        ended = self._child_terminus(effect.child)
        if ended is None:
            return None
        return ChildEnded(effect.call_id, effect.attempt, ended)

    def _with_child_termini(
        self, state: RunSnapshot, command: ResumeCommand | EndRequest
    ) -> ResumeCommand | EndRequest:
        """An end request carries the termini its running children already committed."""
        if not isinstance(command, EndRequest) or state.open_batch is None:
            return command
        found = child_termini(self.store, state.open_batch)
        return attrs.evolve(command, child_termini=found) if found else command

    # --- inbox and deadlines ------------------------------------------------------

    def _next_command(self, state: RunSnapshot) -> tuple[Decision, InboxEntry] | None:
        for entry in self.store.pending_commands(state.run_id):
            try:
                command = inbox_to_input(entry.body)
            except TraceFormatError as error:
                self._settle(entry, f"refused: malformed command: {error}")
                continue
            command = self._with_child_termini(state, command)
            history = self.store.history(state.run_id)
            verdict = decide(state, command, self.policies, history, self_check=self.self_check)
            if isinstance(verdict, Rejection):
                self._settle(entry, exact_refusal(self.store, state, entry, command, verdict))
                continue
            return verdict, entry
        return None

    def _settle(self, entry: InboxEntry, outcome: str) -> None:
        self.store.settle_command(entry.entry_id, outcome)
        self.on_event(CommandSettled(entry, outcome))

    def _expiry(self, state: RunSnapshot) -> Decision | None:
        assert isinstance(state.state, Awaiting)
        batch = state.open_batch
        call = batch.call(state.state.ticket.call_id) if batch else None
        if call is None or not isinstance(call.status, CallAwaiting):
            return None
        now = self.clock()
        wait = call.status.wait
        if wait.kind is WaitKind.SCHEDULED:
            # the push-mode driver fires due timers with the same function
            return due_timer(state, now, self.policies, self.store.history(state.run_id))
        if not has_passed(wait.expires_at, now):
            return None
        expired = DeadlinePassed(state.state.ticket.ticket_id, now)
        history = self.store.history(state.run_id)
        verdict = decide(state, expired, self.policies, history, self_check=self.self_check)
        return None if isinstance(verdict, Rejection) else verdict


def _delegation_of(state: RunSnapshot, call_id: str) -> Delegation | None:
    """The child a sequential delegation's Executing commit fixed (None for others)."""
    call = state.open_batch.call(call_id) if state.open_batch is not None else None
    return None if call is None or call.delegation is None or call.delegation.concurrent else call.delegation


__all__ = [
    "ALREADY_COMMITTED",
    "MAX_STATUS_POLLS",
    "Acknowledged",
    "CheckpointLost",
    "CommandSettled",
    "CommitRetried",
    "Drive",
    "Recovered",
    "RunOutcome",
    "Runtime",
    "RuntimeEvent",
    "RuntimeProtocolError",
]
