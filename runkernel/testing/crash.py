"""Crash injection from the outside: a store whose writer dies around a commit, and tools
whose process dies right after their effect.

No production class takes a crash switch. A test kills a host (a ``Runtime``, a
``Driver``, a ``Worker``) by giving it a ``CrashingStore`` (and, for the pull-mode
runtime, tools wrapped by ``crashing_tools``); a *plan* says where to die. A boundary
*kind* says when relative to a write the crash happens; a *position* says which of a
Step's commit points it is (``Position``, "Commit points of a Step"):

- ``Boundary.BEFORE_WRITE``: the commit never reached the store;
- ``Boundary.AFTER_WRITE``: it is durable, but its writer died before it heard so (the
  acknowledgement was lost);
- ``Boundary.AFTER_EFFECT``: a tool's effect happened downstream, and its outcome was
  never committed (always at ``Position.CALL_RESULT``).

``SimulatedCrash`` is a ``BaseException``, like ``SystemExit``: no ``except Exception``
of runkernel or of the host turns the death of a process into an outcome (a tool that
"raised", a failed drive). After it, throw the host away; a fresh one continues from
the store alone.
"""

from __future__ import annotations

import enum
import threading
from collections.abc import Callable, Iterable
from typing import Any, Protocol

from runkernel.adapters.drive.actions import RunCall
from runkernel.adapters.drive.ports import StatusReply, Tool, ToolRegistry, ToolReply, fence_of
from runkernel.adapters.drive.events import Position, position_of
from runkernel.adapters.stores.contract import Checkpoint, Lease, Settlement, Store, StoreUnavailable, append_to
from runkernel.kernel.policies import ToolPolicy
from runkernel.kernel.state import RunSnapshot, ThreadCommit


class Boundary(enum.Enum):
    """When, relative to a write, the crash happens."""

    BEFORE_WRITE = "before_write"
    AFTER_WRITE = "after_write_before_ack"
    AFTER_EFFECT = "after_tool_effect"


class SimulatedCrash(BaseException):
    """The injected death of a process. Nothing after it happens in that process: a
    ``BaseException`` (as ``SystemExit`` is), so it passes every ``except Exception``
    and every handler of runkernel's own errors (it is no ``RunkernelError``)."""

    def __init__(self, boundary: Boundary, position: Position) -> None:
        super().__init__(f"crash {boundary.value} at {position.value}")
        self.boundary = boundary
        self.position = position


class CrashPlan(Protocol):
    """Where to die: asked at every boundary a host passes, in order."""

    def crash_here(self, boundary: Boundary, position: Position) -> bool:
        """True to crash at this boundary."""
        ...


class NeverCrash:
    """A plan that never fires (a crash-free baseline through the same wrappers)."""

    def crash_here(self, boundary: Boundary, position: Position) -> bool:
        """Never."""
        return False


class CrashAt:
    """Fires at boundaries of one kind at one position: lets ``skip`` such boundaries
    pass, then fires at the next ``times`` ones (a write retried as it is meets the
    same boundary again). ``fired`` counts the crashes."""

    def __init__(self, boundary: Boundary, position: Position, *, skip: int = 0, times: int = 1) -> None:
        self.boundary, self.position = boundary, position
        self.skip = skip
        self.left = times
        self.fired = 0

    def crash_here(self, boundary: Boundary, position: Position) -> bool:
        """True at the chosen kind and position, once ``skip`` of them passed, while
        crashes are left."""
        if self.left == 0 or (boundary, position) != (self.boundary, self.position):
            return False
        if self.skip > 0:
            self.skip -= 1
            return False
        self.left -= 1
        self.fired += 1
        return True


class CrashAtEncounters:
    """Fires at the listed encounter indices (0-based) of every boundary a Run passes,
    counting every kind and position: the plan of a crash sweep, which first counts the
    boundaries a crash-free run passes (``seen`` with no targets), then crashes at each
    index in turn. ``fired`` lists where it fired."""

    def __init__(self, targets: Iterable[int] = ()) -> None:
        self.targets = frozenset(targets)
        self.seen = 0
        self.fired: list[tuple[Boundary, Position]] = []
        self._lock = threading.Lock()  # a worker's slots ask from threads of their own

    def crash_here(self, boundary: Boundary, position: Position) -> bool:
        """True at a listed index; counts every boundary asked about (each index once,
        whichever thread asks)."""
        with self._lock:
            hit = self.seen in self.targets
            self.seen += 1
            if hit:
                self.fired.append((boundary, position))
            return hit


#: What a dying write raises, given where it died: the writer's death by default, or a
#: store failure (``StoreUnavailable``, ``CommitConflict``) the writer lives through.
Failure = Callable[[Boundary, Position], BaseException]


class CrashingStore:
    """Any store, whose writer dies (or whose write fails) at the plan's boundaries:
    before a commit lands (``BEFORE_WRITE``), or after it landed but before the writer
    heard back (``AFTER_WRITE``). Every other call is passed through unchanged; give
    it to a ``Runtime``, a ``Driver`` or a ``Worker`` in place of the store.

    A commit's position is named from the store's latest snapshot of its Run (no
    snapshot: its activation), so a commit that would conflict is named as the store
    sees it. ``failure`` makes what a dying write raises (``SimulatedCrash`` by
    default); ``store`` is the wrapped store, for reads that must not count.

    While ``fail_writes`` is set, every append raises ``StoreUnavailable`` once the plan
    was asked before it (nothing is written); while ``fail_checkpoints`` is set, every
    checkpoint write does (a checkpoint is best effort: only partial recovery is lost)."""

    def __init__(self, store: Store, plan: CrashPlan = NeverCrash(), failure: Failure = SimulatedCrash) -> None:
        self.store = store
        self.plan = plan
        self.failure = failure
        self.fail_writes = False
        self.fail_checkpoints = False

    def append(
        self,
        commit: ThreadCommit,
        settle: Settlement | None = None,
        *,
        lease: Lease | None = None,
        release: bool = False,
        trace_context: str | None = None,
    ) -> RunSnapshot:
        """The wrapped store's ``append``, between the plan's two write boundaries (a
        ``release`` and a ``trace_context`` passed on only when given, so a wrapped store
        that takes neither still works)."""
        position = position_of(self.store.run(commit.run_id), commit)
        if self.plan.crash_here(Boundary.BEFORE_WRITE, position):
            raise self.failure(Boundary.BEFORE_WRITE, position)
        if self.fail_writes:
            raise StoreUnavailable("writes are failing (injected)")
        stored = append_to(self.store, commit, settle, lease=lease, release=release, trace_context=trace_context)
        if self.plan.crash_here(Boundary.AFTER_WRITE, position):
            raise self.failure(Boundary.AFTER_WRITE, position)
        return stored

    def reopen(self) -> CrashingStore:
        """The wrapped store reopened, under the same plan (whose count its slots share)."""
        return CrashingStore(self.store.reopen(), self.plan, self.failure)

    def save_checkpoint(self, checkpoint: Checkpoint) -> None:
        """The wrapped store's, unless ``fail_checkpoints`` says it fails."""
        if self.fail_checkpoints:
            raise StoreUnavailable("checkpoint writes are failing (injected)")
        self.store.save_checkpoint(checkpoint)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.store, name)


class _CrashAfterEffect:
    """One tool, whose process dies once its effect happened (its ``run`` returned or
    raised), before the outcome reaches a commit."""

    def __init__(self, tool: Tool, plan: CrashPlan) -> None:
        self.tool = tool
        self.plan = plan
        #: the tool's own fence, if it has one (W5): a wrapper adds none
        self.fence = fence_of(tool)

    @property
    def policy(self) -> ToolPolicy:
        return self.tool.policy

    def run(self, invocation: RunCall) -> ToolReply:
        try:
            return self.tool.run(invocation)
        finally:
            if self.plan.crash_here(Boundary.AFTER_EFFECT, Position.CALL_RESULT):
                raise SimulatedCrash(Boundary.AFTER_EFFECT, Position.CALL_RESULT)

    def status(self, operation_id: str, lease_epoch: int | None = None) -> StatusReply:
        reply: StatusReply = self.tool.status(operation_id, lease_epoch)
        return reply


def crashing_tools(registry: ToolRegistry, plan: CrashPlan) -> ToolRegistry:
    """``registry``'s tools, with the same policies, step limit and Indeterminate
    choice, each asking ``plan`` at ``AFTER_EFFECT`` once its attempt ran (returned or
    raised): the boundary where an effect happened and its outcome is not committed."""
    policies = registry.policies
    wrapped = {name: _CrashAfterEffect(tool, plan) for name, tool in registry.tools.items()}
    return ToolRegistry(wrapped, max_steps=policies.max_steps, on_indeterminate=policies.on_indeterminate)


__all__ = [
    "Boundary",
    "CrashAt",
    "CrashAtEncounters",
    "CrashPlan",
    "CrashingStore",
    "Failure",
    "NeverCrash",
    "Position",
    "SimulatedCrash",
    "crashing_tools",
    "position_of",
]
