"""What a crash test watches in one play, without changing the user's code: which
boundaries the Run passed (``SweepPlan``, and the ``Encounter`` it names each by), the
executor starts the world saw (``Start``, gathered in ``Played``), and the wrappers that
count and die: each tool of a pull-mode app (its ``run`` is one start; the process dies
right after it at ``AFTER_EFFECT`` when the plan says so), the push-mode driver handed to
the host (each ``RunCall`` the host acted on, i.e. reported the outcome of, is one start,
and it dies right then when the plan says so), and the store, whose writes die in a
``CrashingStore`` that names the commit it is about to write.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from attrs import define, field, frozen

from runkernel.adapters.drive.actions import Action, RunCall, RunCalls
from runkernel.adapters.drive.driver import AsyncDriver, Driver
from runkernel.adapters.drive.events import RuntimeEvent
from runkernel.adapters.drive.ports import StatusReply, Tool, ToolReply
from runkernel.adapters.drive.protocol import CallEnded, Report
from runkernel.adapters.stores.contract import Lease, Settlement, Store
from runkernel.kernel.policies import ToolPolicy
from runkernel.kernel.protocol import OperationStatus
from runkernel.kernel.state import CallExecuting, RunSnapshot, ThreadCommit
from runkernel.testing.crash import Boundary, CrashingStore, Position, SimulatedCrash

#: How a play names the Run of a commit in a boundary's label (``""`` for the Run the
#: scenario starts, ``"child research[1.0] "`` for a delegation's child): from its run id.
Naming = Callable[[str], str]


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
    #: every Run the play drove, by its key (``""``: the scenario's Run; a delegation's
    #: child: its parent call's place, ``research[1.0]``): (thread id, run id)
    runs: dict[str, tuple[str, str]] = field(factory=dict)
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


class LabelledStore(CrashingStore):
    """A ``CrashingStore`` that tells the plan which commit it is about to write."""

    def __init__(self, store: Store, plan: SweepPlan, naming: Naming) -> None:
        super().__init__(store, plan)
        self.sweep, self.naming = plan, naming

    def append(
        self,
        commit: ThreadCommit,
        settle: Settlement | None = None,
        *,
        lease: Lease | None = None,
        release: bool = False,
        trace_context: str | None = None,
    ) -> RunSnapshot:
        named = self.naming(commit.run_id)
        self.sweep.where = f"{named}v{commit.version}{_tool_of(self.store.run(commit.run_id), commit)}"
        return super().append(commit, settle, lease=lease, release=release, trace_context=trace_context)


def _tool_of(before: RunSnapshot | None, commit: ThreadCommit) -> str:
    """`` (tool)`` when the commit changes one call's status, else nothing."""
    if before is None or before.batch is None or commit.batch is None:
        return ""
    for old, new in zip(before.batch.calls, commit.batch.calls):
        if old.status != new.status:
            return f" ({new.tool})"
    return ""


class Watch:
    """Counts executor starts and dies after an effect when the plan says so."""

    def __init__(self, played: Played, store: Store, plan: SweepPlan, naming: Naming) -> None:
        self.played, self.store, self.plan, self.naming = played, store, plan, naming

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
        named = self.naming(invocation.run_id) if invocation is not None else ""
        self.plan.where = f"{named}{tool}{attempt}"
        if self.plan.crash_here(Boundary.AFTER_EFFECT, Position.CALL_RESULT):
            raise SimulatedCrash(Boundary.AFTER_EFFECT, Position.CALL_RESULT)


class WatchedTool:
    """One tool of a pull-mode app: each ``run`` is a start; its status is passed on."""

    def __init__(self, name: str, tool: Tool, watch: Watch) -> None:
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
        reply: StatusReply = self.tool.status(operation_id, lease_epoch)
        if reply.status is OperationStatus.NOT_FOUND:
            self.watch.played.not_found.add(operation_id)
        return reply

    def __getattr__(self, name: str) -> Any:
        # the tool's optional ``fence`` (and anything else a host looks for) is its own
        if name == "tool":
            raise AttributeError(name)
        return getattr(self.tool, name)


class WatchedDriver(Driver):
    """The push-mode driver a host is handed: counts each ``RunCall`` the host acted on
    (reported an outcome for) and dies after the effect when the host reports it."""

    watch: Watch
    handed: dict[str, RunCall]

    def _advance(self, answer: Report | None) -> Action:
        if isinstance(answer, CallEnded):
            call = self.handed.pop(answer.call_id, None)
            if call is not None:  # the host acted on it: one start (a standing action is handed out again)
                self.watch.started(call.tool, call)
            self.watch.effect_done(call.tool if call else "?", call)
        action = super()._advance(answer)
        _handed(self.handed, action)
        return action


class WatchedAsyncDriver(AsyncDriver):
    """``WatchedDriver`` for asyncio hosts."""

    watch: Watch
    handed: dict[str, RunCall]

    async def _advance(self, answer: Report | None) -> Action:
        if isinstance(answer, CallEnded):
            call = self.handed.pop(answer.call_id, None)
            if call is not None:  # the host acted on it: one start (a standing action is handed out again)
                self.watch.started(call.tool, call)
            self.watch.effect_done(call.tool if call else "?", call)
        action = await super()._advance(answer)
        _handed(self.handed, action)
        return action


def _handed(handed: dict[str, RunCall], action: Action) -> None:
    """Keep the calls ``action`` hands out (a group's, each one), until acted on."""
    if isinstance(action, RunCall):
        handed[action.call_id] = action
    elif isinstance(action, RunCalls):
        handed.update((call.call_id, call) for call in action.calls)


__all__ = [
    "Encounter",
    "LabelledStore",
    "Naming",
    "Played",
    "Start",
    "SweepPlan",
    "Watch",
    "WatchedAsyncDriver",
    "WatchedDriver",
    "WatchedTool",
]
