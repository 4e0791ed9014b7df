"""Crash injection: where a runtime can die, and how commits are named by position.

A boundary *kind* says when relative to a write the crash happens; a *position* says
which of a Step's commit points it is (DESIGN.md, "Commit points of a Step").
"""

from __future__ import annotations

import enum
from typing import Protocol

from runkernel.kernel.state import (
    RESUMED_EVENT,
    Awaiting,
    CallCompleted,
    CallExecuting,
    CallIndeterminate,
    Ended,
    RunSnapshot,
    ThreadCommit,
)
from runkernel.kernel.values import Role


class Boundary(enum.Enum):
    """When the crash happens."""

    BEFORE_WRITE = "before_write"
    AFTER_WRITE = "after_write_before_ack"
    AFTER_EFFECT = "after_tool_effect"


class Position(enum.Enum):
    """Which commit point a commit is."""

    ACTIVATION = "activation"
    INFERENCE_TEXT = "inference_text"
    BATCH_OPEN = "batch_open"
    CALL_START = "call_start"
    CALL_RETRY = "call_retry"
    CALL_WAIT = "call_wait"
    CALL_RESULT = "call_result"
    FINALIZE = "finalize"
    RESUME = "resume"
    END = "end"
    PROGRESS = "progress"


class SimulatedCrash(Exception):
    """The injected death of a runtime. Nothing after it happens in that runtime."""

    def __init__(self, boundary: Boundary, position: Position) -> None:
        super().__init__(f"crash {boundary.value} at {position.value}")
        self.boundary = boundary
        self.position = position


class CrashPlan(Protocol):
    def crash_here(self, boundary: Boundary, position: Position) -> bool:
        """True to crash at this boundary."""
        ...


class NeverCrash:
    def crash_here(self, boundary: Boundary, position: Position) -> bool:
        return False


class CrashAtEncounter:
    """Crash at the ``target``-th boundary encountered (0-based), counting every kind."""

    def __init__(self, target: int) -> None:
        self.target = target
        self.seen = 0
        self.fired: tuple[Boundary, Position] | None = None

    def crash_here(self, boundary: Boundary, position: Position) -> bool:
        hit = self.fired is None and self.seen == self.target
        self.seen += 1
        if hit:
            self.fired = (boundary, position)
        return hit


def position_of(prev: RunSnapshot | None, commit: ThreadCommit) -> Position:
    """Name the commit point a commit stands for."""
    if prev is None:
        return Position.ACTIVATION
    if isinstance(commit.disposition, Ended):
        return Position.END
    if any(e.type == RESUMED_EVENT for e in commit.events):
        return Position.RESUME
    assistants = [m for m in commit.messages if m.role is Role.ASSISTANT]
    if assistants:
        return Position.BATCH_OPEN if assistants[0].tool_calls else Position.INFERENCE_TEXT
    if isinstance(commit.disposition, Awaiting):
        return Position.CALL_WAIT
    batch = commit.batch
    if batch is not None and batch.finalized and prev.open_batch is not None:
        return Position.FINALIZE
    if batch is not None and prev.batch is not None:
        for old, new in zip(prev.batch.calls, batch.calls):
            if old.status == new.status:
                continue
            if isinstance(new.status, CallExecuting):
                return Position.CALL_START if new.status.attempt == 1 else Position.CALL_RETRY
            if isinstance(new.status, (CallCompleted, CallIndeterminate)):
                return Position.CALL_RESULT
    return Position.PROGRESS
