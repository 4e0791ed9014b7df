"""The reference runtime (pull mode): a host of the one effect interpreter.

It holds no truth and no effect logic of its own. It drives the push-mode driver's core
(``DriverCore``): the core decides with ``decide`` and ``recover``, applies inbox
commands and expired deadlines, commits before any effect that touches the world, and
hands out actions; this host answers each action by calling a port (``Infer`` the model,
with the hooks and stream checkpoints; ``RunCall`` the tool; ``CheckStatus`` the tool's
status, with the lease epoch; ``Fence`` the tool's optional fence (W5); the gate
through the core's ``AskGate``) and stops where the core would wait (``WaitFor``,
``ChildrenRunning``, ``Done``). Store operations go through the same
``StoreOps`` as the push driver's. Each drive of one Run is a ``Drive``
(``runtime_drive``), stepped one effect at a time; this module holds the ports' calls. A
runtime that crashes is thrown away, and a fresh one continues from the store alone with
``drive``. Tests kill it by wrapping its store and tools
(``runkernel.testing.CrashingStore``, ``crashing_tools``), never through a switch of its
own.

A model call that raises is reported to the core (``InferenceFailed``), which decides as
for a push host (``model_errors``): a transient error commits nothing and the same
``Infer`` comes back with a backoff, which a ``Drive`` takes as a step of its own
(``pause``: ``run()`` sleeps it, a worker sets the Run aside meanwhile, its lease kept,
and drives others); otherwise the Run ends ``failed`` with the error. The hooks
(StepStart/BeforeInference) run again before each attempt: what a failed attempt staged
was never committed.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, assert_never

import attrs

from runkernel.adapters.drive.actions import (
    CheckStatus,
    ChildrenRunning,
    Done,
    Fence,
    HostProtocolError,
    Infer,
    RunCall,
    WaitFor,
)
from runkernel.adapters.drive.core import DriverCore
from runkernel.adapters.drive.runtime_drive import Drive
from runkernel.adapters.drive.settings import Settings
from runkernel.adapters.drive.protocol import AskGate, CallEnded, Fenced, InferenceFailed, Operation, Status
from runkernel.adapters.drive.store_ops import StoreOps
from runkernel.adapters.drive.fencing import ask_status
from runkernel.adapters.drive.invocation import invocation_scope
from runkernel.adapters.drive.model_errors import (
    DEFAULT_MODEL_ATTEMPTS,
    TransientPredicate,
    checked_attempts,
    transient_model_error,
)
from runkernel.adapters.drive.port_inputs import tool_outcome
from runkernel.adapters.drive.ports import (
    AllowAll, Clock, Failed, GatePort, HookPort, IdSource, Lost, ModelPort, NoHooks, NullObserver, Observer,
    SecretIds, StatusReply, ToolRegistry, ToolReply, fence_of, utc_now,
)
from runkernel.adapters.drive.events import (
    ALREADY_COMMITTED,
    Acknowledged,
    CheckpointLost,
    CommandSettled,
    CommitRetried,
    ModelFailed,
    Recovered,
    RunOutcome,
    RuntimeEvent,
    RuntimeProtocolError,
    ToolRaised,
)
from runkernel.adapters.stores.contract import Store
from runkernel.adapters.drive.lease_keeper import LeaseKeeper
from runkernel.adapters.drive.telemetry import NO_TELEMETRY, Telemetry
from runkernel.errors import RunkernelError
from runkernel.kernel.policies import RecoveryMode
from runkernel.kernel.protocol import OperationStatus, ResumePayload, ToolFailure, ToolOutcome
from runkernel.kernel.state import Message, TypedError
from runkernel.kernel.values import JsonValue

#: How often one runtime asks a reconnect tool about an operation that is still running
#: before it stops driving and leaves the call to a later drive.
MAX_STATUS_POLLS = 5

class Runtime:
    """The pull-mode runtime: it drives Runs by calling the host's ports, answering each
    action the push-mode core hands out (``Infer``: the model's ``infer``; ``RunCall``:
    the tool's ``run``, given that very ``RunCall``; ``CheckStatus``: the tool's
    ``status``; the gate's ``check``), and stops where a push-mode host would wait
    (``WaitFor``, ``ChildrenRunning``, ``Done``). One instance per process of control;
    throw it away after a crash and continue with ``drive(run_id)``."""

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
        on_event: Callable[[RuntimeEvent], None] | None = None,
        self_check: bool = False,
        leases: LeaseKeeper | None = None,
        app: str | None = None,
        hooks: HookPort | None = None,
        transient: TransientPredicate = transient_model_error,
        model_attempts: int = DEFAULT_MODEL_ATTEMPTS,
        telemetry: Telemetry | None = None,
    ) -> None:
        """``hooks`` answer StepStart/BeforeInference (staged state, request-only context)
        and AfterTool (a reaction). ``self_check`` is a debug option, off by default:
        ``decide`` and ``recover`` judge each commit they build with ``validate_commit``
        before the store judges it again, so a kernel bug raises ``KernelBug`` where the
        commit was built instead of ``IllegalCommit`` from the store; it changes nothing
        a correct kernel does, and costs one more validation per commit. With ``leases`` (a worker's), every Run is leased before it is
        driven, every commit names the lease, and every executor start re-checks it (W1); a
        lost lease or a lost commit raises out of ``drive``, so driving stops at once.
        ``app`` is recorded on the activation of each Run ``start`` begins.
        ``transient(error)`` says which exceptions the model raises are worth another
        attempt (default ``transient_model_error``: timeouts, dropped connections, HTTP
        408/409/429/5xx), ``model_attempts`` how many attempts of one model call a Run
        gets in this runtime's drive before it ends ``failed`` with the error.
        ``telemetry`` is told what each drive does (``runkernel.integrations.otel``'s
        ``OpenTelemetry`` for traces and metrics); the default records nothing."""
        self.store = store
        self.model = model
        self.tools = tools
        self.policies = tools.policies
        self.gate = gate or AllowAll()
        self.observer = observer or NullObserver()
        self.ids = ids or SecretIds()
        self.clock = clock
        self.on_event = on_event or (lambda _event: None)
        self.self_check = self_check
        self.leases = leases
        self.app = app
        self.hooks = hooks or NoHooks()
        # a tool the model names without a registered one is committed, and its call fails
        self.settings = Settings(
            self.policies,
            self.ids,
            clock,
            app,
            self_check=self_check,
            refuse_unknown_tools=False,
            transient=transient,
            model_attempts=checked_attempts(model_attempts),
            fences=frozenset(name for name, tool in tools.tools.items() if fence_of(tool) is not None),
            telemetry=telemetry or NO_TELEMETRY,
        )
        self.ops = StoreOps(
            store, leases, lambda event: self.on_event(event), self.observer, telemetry=self.settings.telemetry
        )
        self._polls: dict[str, int] = {}

    # --- entry points -------------------------------------------------------------

    def start(self, thread_id: str, run_id: str, messages: tuple[Message, ...]) -> RunOutcome:
        """Activate a new Run in a Thread and drive it until it waits or ends."""
        return self.begin_start(thread_id, run_id, messages).run()

    def drive(self, run_id: str) -> RunOutcome:
        """Continue a Run from committed facts alone (recovery), until it waits or ends."""
        return self.begin_drive(run_id).run()

    def resume(self, run_id: str, payload: ResumePayload) -> RunOutcome:
        """Answer the Run's standing wait in-process (``Approve()``, ``Deny(reason)``,
        ``ProvideInput(value)``, ...) and drive it on until it waits again or ends, as
        ``Driver.resume`` does in push mode. A payload the wait does not take raises
        ``RuntimeProtocolError`` (the kernel's rejection), and a Run that waits for
        nothing raises ``HostProtocolError``; either commits nothing. From outside the
        process, queue it instead (``runkernel resume``), for whoever drives the Run."""
        drive = self.begin_drive(run_id)
        drive.resume_with = payload
        return drive.run()

    def begin_start(self, thread_id: str, run_id: str, messages: tuple[Message, ...]) -> Drive:
        """A Drive that activates a new Run; advance it with ``step()``."""
        core = DriverCore(self.settings)
        return Drive(self, run_id, core, core.start(thread_id, run_id, messages))

    def begin_drive(self, run_id: str) -> Drive:
        """A Drive that recovers a Run from the store alone; advance it with ``step()``.
        With leases, the Run's lease is taken first (``LeaseHeld`` if another worker
        holds it), so the state read next cannot change under this worker."""
        self.ops.lease(run_id, picking_up=True)
        core = DriverCore(self.settings)
        return Drive(self, run_id, core, core.pick_up(run_id))

    # --- the ports ------------------------------------------------------------------

    def _perform(self, op: Operation) -> Any:
        """Carry out one of the core's operations other than handing out an action."""
        if isinstance(op, AskGate):
            return self.gate.check(op.run_id, op.call)
        return self.ops.perform(op)

    def _run_call(self, action: RunCall) -> CallEnded:
        """Run the tool's attempt (its Executing commit is durable) under the lease
        re-checked with its margin (W1); a tool that raised is reported (``ToolRaised``)."""
        tool = self.tools.get(action.tool)
        outcome: ToolOutcome
        reaction: JsonValue = None
        if tool is None:
            outcome = ToolFailure({"type": "UnknownTool", "message": f"no tool named {action.tool!r}"})
        else:
            action = self.ops.before_run_call(action)
            with invocation_scope(action):  # the tool runs the RunCall a push host is handed
                try:
                    reply = tool.run(action)
                except RunkernelError:
                    raise  # the runtime's own refusal, not the tool's outcome
                except Exception as error:
                    reply = self._raised(action, tool.policy.recovery.mode, error)
            reaction = self.hooks.after_tool(action.run_id, action.call_id, action.attempt, reply)
            outcome = tool_outcome(reply, self.ids)
        return CallEnded(action.call_id, outcome, None, reaction)

    def _raised(self, action: RunCall, mode: RecoveryMode, error: Exception) -> ToolReply:
        """A tool that raised: its exception is reported, and the call is a retryable
        error for a replay tool, an unknown outcome otherwise (see ``ToolRaised``)."""
        typed = TypedError(type(error).__name__, str(error))
        self.on_event(ToolRaised(action.run_id, action.call_id, action.attempt, typed))
        match mode:
            case RecoveryMode.REPLAY:
                return Failed({"type": typed.type, "message": typed.message}, retryable=True)
            case RecoveryMode.RECONNECT | RecoveryMode.INDETERMINATE:
                return Lost()
            case _:
                assert_never(mode)

    def _check_status(self, action: CheckStatus) -> Status | None:
        """Ask a reconnect tool about its operation, with the lease epoch (W5); None
        (stop driving) once it was asked ``MAX_STATUS_POLLS`` times by this runtime: a
        later drive asks again."""
        polled = self._polls.get(action.operation_id, 0)
        if polled >= MAX_STATUS_POLLS:
            return None
        self._polls[action.operation_id] = polled + 1
        tool = self.tools.get(action.tool)
        if tool is None:
            return Status(action.call_id, OperationStatus.UNKNOWN, None)
        action = attrs.evolve(action, lease_epoch=self.ops.lease_epoch(action.run_id))
        owner = f"tool {action.tool!r}'s status"
        reply: StatusReply = ask_status(tool.status, action.operation_id, action.lease_epoch, owner=owner)
        return Status(action.call_id, reply.status, reply.value)

    def _fence(self, action: Fence) -> Fenced:
        """W5: the tool's ``fence(operation_id, lease_epoch)`` before the commit that
        makes its call terminal; whatever it raises fails the drive, nothing committed."""
        fence = fence_of(self.tools.tools[action.tool])
        assert fence is not None, "a Fence is handed out only for a tool with a fence"
        action = attrs.evolve(action, lease_epoch=self.ops.lease_epoch(action.run_id))
        fence(action.operation_id, action.lease_epoch)
        return Fenced(action.call_id)


__all__ = [
    "ALREADY_COMMITTED",
    "MAX_STATUS_POLLS",
    "Acknowledged",
    "CheckpointLost",
    "CommandSettled",
    "CommitRetried",
    "Drive",
    "ModelFailed",
    "Recovered",
    "RunOutcome",
    "Runtime",
    "RuntimeEvent",
    "RuntimeProtocolError",
]
