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
(``runtime_drive``), stepped one effect at a time, calling the ports through the
runtime's ``RuntimePorts`` (``runtime_ports``); this module holds the entry points. A
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

from runkernel.adapters.drive.app_version import tool_table_version
from runkernel.adapters.drive.core import DriverCore
from runkernel.adapters.drive.runtime_drive import Drive
from runkernel.adapters.drive.runtime_ports import MAX_STATUS_POLLS, RuntimePorts
from runkernel.adapters.drive.settings import Settings
from runkernel.adapters.drive.store_ops import StoreOps
from runkernel.adapters.drive.model_errors import (
    DEFAULT_MODEL_ATTEMPTS,
    TransientPredicate,
    checked_attempts,
    transient_model_error,
)
from runkernel.adapters.drive.ports import (
    AllowAll, Clock, GatePort, HookPort, IdSource, ModelPort, NoHooks, NullObserver, Observer, SecretIds,
    ToolRegistry, fence_of, utc_now,
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
)
from runkernel.adapters.stores.contract import Store
from runkernel.adapters.drive.lease_keeper import LeaseKeeper
from runkernel.adapters.drive.telemetry import NO_TELEMETRY, Telemetry
from runkernel.kernel.protocol import ResumePayload
from runkernel.kernel.state import Message

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
        calls_together: bool = True,
        app_version: str | None = None,
    ) -> None:
        """``hooks`` answer StepStart/BeforeInference (staged state, request-only context)
        and AfterTool (a reaction). ``self_check`` is a debug option, off by default:
        ``decide`` and ``recover`` judge each commit they build with ``validate_commit``
        before the store judges it again, so a kernel bug raises ``KernelBug`` where the
        commit was built instead of ``IllegalCommit`` from the store; it changes nothing
        a correct kernel does, and costs one more validation per commit. With ``leases`` (a worker's), every Run is leased before it is
        driven, every commit names the lease, and every executor start re-checks it (W1); a
        lost lease or a lost commit raises out of ``drive``, so driving stops at once.
        ``app`` is recorded on the activation of each Run ``start`` begins, with
        ``app_version`` beside it (default: the digest of the tools' names and policies,
        ``runkernel.adapters.drive.app_version.tool_table_version``).
        ``transient(error)`` says which exceptions the model raises are worth another
        attempt (default ``transient_model_error``: timeouts, dropped connections, HTTP
        408/409/429/5xx), ``model_attempts`` how many attempts of one model call a Run
        gets in this runtime's drive before it ends ``failed`` with the error.
        ``telemetry`` is told what each drive does (``runkernel.integrations.otel``'s
        ``OpenTelemetry`` for traces and metrics); the default records nothing.
        ``calls_together``: the calls of a concurrent group (tools declared
        ``concurrent=True``) run at once, each tool in a thread of its own, and are
        committed in call order (the hooks, the gate and every commit stay on the
        drive's thread); False runs them one after another in call order, so every run
        of one program passes the same commit boundaries in the same order (the crash
        tester and ``simulate`` do)."""
        self.store = store
        self.policies = tools.policies
        observer = observer or NullObserver()
        self.ids = ids or SecretIds()
        self.clock = clock
        self.on_event = on_event or (lambda _event: None)
        self.self_check = self_check
        self.leases = leases
        self.app = app
        # a tool the model names without a registered one is committed, and its call fails
        if app is not None and app_version is None:
            app_version = tool_table_version(self.policies.tools)
        self.settings = Settings(
            self.policies,
            self.ids,
            clock,
            app,
            app_version=app_version if app is not None else None,
            self_check=self_check,
            refuse_unknown_tools=False,
            transient=transient,
            model_attempts=checked_attempts(model_attempts),
            fences=frozenset(name for name, tool in tools.tools.items() if fence_of(tool) is not None),
            telemetry=telemetry or NO_TELEMETRY,
        )
        self.ops = StoreOps(
            store, leases, lambda event: self.on_event(event), observer, telemetry=self.settings.telemetry
        )
        #: what each of this runtime's drives calls (the store operations and the ports)
        self.ports = RuntimePorts(
            self.ops, model, tools, gate or AllowAll(), hooks or NoHooks(), observer, self.ids,
            lambda event: self.on_event(event), calls_together=calls_together,
        )

    # --- the ports, as given (fixed at construction: a new port needs a new runtime) -----

    @property
    def model(self) -> ModelPort:
        """The model port."""
        return self.ports.model

    @property
    def tools(self) -> ToolRegistry:
        """The tools, with their policies."""
        return self.ports.tools

    @property
    def gate(self) -> GatePort:
        """The gate asked before each call (``AllowAll`` unless one was given)."""
        return self.ports.gate

    @property
    def hooks(self) -> HookPort:
        """The hooks (``NoHooks`` unless some were given)."""
        return self.ports.hooks

    @property
    def observer(self) -> Observer:
        """Told each commit and streamed delta (``NullObserver`` unless one was given)."""
        return self.ports.observer

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
        return Drive(self.ports, run_id, core, core.start(thread_id, run_id, messages))

    def begin_drive(self, run_id: str) -> Drive:
        """A Drive that recovers a Run from the store alone; advance it with ``step()``.
        With leases, the Run's lease is taken first (``LeaseHeld`` if another worker
        holds it), so the state read next cannot change under this worker."""
        self.ops.lease(run_id, picking_up=True)
        core = DriverCore(self.settings)
        return Drive(self.ports, run_id, core, core.pick_up(run_id))


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
