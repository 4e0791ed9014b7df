"""The world around the runtime in the stateful test (``runtime_harness.py``): the
tools with their fixed recovery and retry policies, the gate that answers as each
call's arguments say, and the armed crash plan.
"""

from __future__ import annotations

from runkernel.adapters.drive.ports import GateAnswer, Hold, Permit, Provide, Refuse, ToolRegistry, ToolReply
from runkernel import RunCall
from runkernel.kernel.policies import IndeterminateChoice, RecoveryMode
from runkernel.kernel.state import ToolCall
from runkernel.kernel.values import WaitKind
from runkernel.testing import OK, TRUTH, Boundary, Position, ScriptedTool, World

PAST = "2026-01-01T00:00:00.000000Z"
NOW = "2026-06-01T00:00:00.000000Z"
FUTURE = "2027-01-01T00:00:00.000000Z"

#: Effects a crash or write-failure rule runs through looking for its boundary.
REACH = 60

# --- tools, gate, crash plan ---------------------------------------------------------


class ToolSpec:
    """Name, recovery mode, retry attempts, replay bound and status script of a tool."""

    def __init__(
        self,
        name: str,
        mode: RecoveryMode,
        *,
        retry: int = 1,
        max_attempts: int = 3,
        status: tuple[str, ...] = (TRUTH,),
    ) -> None:
        self.name, self.mode, self.retry, self.max_attempts, self.status = name, mode, retry, max_attempts, status


_R, _C, _I = RecoveryMode.REPLAY, RecoveryMode.RECONNECT, RecoveryMode.INDETERMINATE
TOOL_SPECS: tuple[ToolSpec, ...] = (
    ToolSpec("replay", _R),
    ToolSpec("replay_retry", _R, retry=2, max_attempts=2),
    ToolSpec("indeterminate", _I),
    ToolSpec("indeterminate_retry", _I, retry=3),
    ToolSpec("reconnect", _C),
    ToolSpec("reconnect_retry", _C, retry=2),
    ToolSpec("reconnect_running", _C, status=("running", TRUTH)),
    ToolSpec("reconnect_unknown", _C, status=("unknown",)),
    ToolSpec("reconnect_failed", _C, status=("failed",)),
    ToolSpec("reconnect_done", _C, status=("done",)),
)


#: The terminal-only delegation tool: its calls of a batch run together, each with a
#: child Run (its executor is the child's activation, never ``run``).
DELEGATE_TOOL = "delegate"


class ArgumentTool(ScriptedTool):
    """A ScriptedTool whose per-attempt behaviours come with each call's arguments."""

    def run(self, invocation: RunCall) -> ToolReply:
        arguments = invocation.arguments
        replies = arguments.get("replies") if isinstance(arguments, dict) else None
        self.replies = tuple(replies) if replies else (OK,)
        return super().run(invocation)


def build_registry(world: World, max_steps: int | None, choice: IndeterminateChoice) -> ToolRegistry:
    tools = {
        spec.name: ArgumentTool(
            spec.name,
            world,
            mode=spec.mode,
            max_attempts=spec.max_attempts,
            retry_attempts=spec.retry,
            status_script=spec.status,
            sequential_delegation=True,  # a call's arguments may make any tool delegate
        )
        for spec in TOOL_SPECS
    }
    tools[DELEGATE_TOOL] = ArgumentTool(DELEGATE_TOOL, world, delegation=True)
    return ToolRegistry(tools, max_steps=max_steps, on_indeterminate=choice)


#: Gate answers a call can carry in its arguments (``"gate"``).
GATE_ANSWERS = (
    "permit",
    "refuse",
    "provide",
    "hold:approval",
    "hold:approval:expired",
    "hold:approval:later",
    "hold:input",
    "hold:external",
    "hold:scheduled",
)


class ArgumentGate:
    """Answers each call as its arguments say (``permit`` when they say nothing)."""

    def check(self, run_id: str, call: ToolCall) -> GateAnswer:
        arguments = call.arguments
        answer = arguments.get("gate", "permit") if isinstance(arguments, dict) else "permit"
        if answer == "refuse":
            return Refuse({"reason": "gate says no"})
        if answer == "provide":
            return Provide({"supplied_by": "plugin"})
        if isinstance(answer, str) and answer.startswith("hold:"):
            parts = answer.split(":")
            kind = WaitKind(parts[1])
            expires = {"expired": PAST, "later": FUTURE}.get(parts[2]) if len(parts) > 2 else None
            due = FUTURE if kind is WaitKind.SCHEDULED else None
            return Hold(kind, {"asked": call.call_id}, expires_at=expires, due_at=due)
        return Permit()


class ArmedCrash:
    """Crashes at a boundary of an armed kind (any position), once per arming, after
    letting ``skip`` earlier boundaries of that kind pass. Each kind is armed on its own."""

    def __init__(self) -> None:
        self.armed: dict[Boundary, int] = {}
        self.fired: list[tuple[Boundary, Position]] = []

    def arm(self, boundary: Boundary, skip: int) -> None:
        # a tool effect is rare next to writes: crash at the very next one
        self.armed[boundary] = 0 if boundary is Boundary.AFTER_EFFECT else skip

    def crash_here(self, boundary: Boundary, position: Position) -> bool:
        skip = self.armed.get(boundary)
        if skip is None:
            return False
        if skip > 0:
            self.armed[boundary] = skip - 1
            return False
        del self.armed[boundary]
        self.fired.append((boundary, position))
        return True
