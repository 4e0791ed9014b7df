"""The second half of I12: a crashed history differs from the crash-free one of the same
scenario only by recovery edges (a replayed attempt, a reconnected result, an
Indeterminate call) and by what follows from the facts such an edge commits.

Scenarios are deterministic scripts, so their crash-free history is a fixed baseline.
Histories are compared as outlines: per step, the calls with their tools, arguments
and how each ended, then the Run's end cause.
"""

from __future__ import annotations

import json
from collections.abc import Iterable

from attrs import frozen

from runkernel.kernel.state import CallCompleted, CallIndeterminate, Ended, ThreadCommit
from runkernel.kernel.values import EndCauseKind, IndeterminateReason, ResultKind

_RECOVERY_REASONS = frozenset({IndeterminateReason.OUTCOME_UNKNOWN, IndeterminateReason.ATTEMPTS_EXHAUSTED})
_TOOL_RESULTS = frozenset({ResultKind.OUTPUT, ResultKind.ERROR})


@frozen
class CallFate:
    """How one call of a finalized batch ended."""

    tool: str
    arguments: str
    fate: str

    @property
    def indeterminate_reason(self) -> IndeterminateReason | None:
        kind, _, detail = self.fate.partition(":")
        return IndeterminateReason(detail) if kind == "indeterminate" else None

    @property
    def result_kind(self) -> ResultKind | None:
        kind, _, detail = self.fate.partition(":")
        return ResultKind(detail) if kind == "completed" else None


@frozen
class Outline:
    """A Run's history reduced to what a crash may not change."""

    steps: tuple[tuple[CallFate, ...], ...]
    end: EndCauseKind | None


def outline(log: Iterable[ThreadCommit], run_id: str) -> Outline:
    """Each step's calls as they were finalized (text steps have none), and the end,
    from a Thread's commit log."""
    steps: dict[int, tuple[CallFate, ...]] = {}
    end: EndCauseKind | None = None
    for commit in log:
        if commit.run_id != run_id:
            continue
        steps.setdefault(commit.step, ())
        batch = commit.batch
        if batch is not None and batch.finalized:
            fates = []
            for call in batch.calls:
                status = call.status
                if isinstance(status, CallCompleted):
                    fate = f"completed:{status.result.kind.value}"
                elif isinstance(status, CallIndeterminate):
                    fate = f"indeterminate:{status.reason.value}"
                else:
                    fate = "open"
                fates.append(CallFate(call.tool, json.dumps(call.arguments, sort_keys=True), fate))
            steps[batch.step] = tuple(fates)
        if isinstance(commit.disposition, Ended):
            end = commit.disposition.cause.kind
    return Outline(tuple(steps[s] for s in sorted(steps) if s > 0), end)


def recovery_differences(baseline: Outline, crashed: Outline, recovered: frozenset[tuple[int, int]]) -> list[str]:
    """Every way ``crashed`` differs from ``baseline`` that no recovery edge explains.

    ``recovered`` holds the (step, index) of every call a recovery found Executing. The
    first call whose fate differs must be one of them, ending in a recovery edge (an
    Indeterminate outcome, or a tool result from a replay or a reconnect); from there
    on the Run continues from other facts, so the rest of the history is not compared.
    """
    for number, (before, after) in enumerate(zip(baseline.steps, crashed.steps), start=1):
        if [(c.tool, c.arguments) for c in before] != [(c.tool, c.arguments) for c in after]:
            return [f"I12 step {number}: the calls differ from the crash-free history"]
        for index, (old, new) in enumerate(zip(before, after)):
            if old.fate == new.fate:
                continue
            by_recovery = new.indeterminate_reason in _RECOVERY_REASONS or new.result_kind in _TOOL_RESULTS
            if (number, index) in recovered and by_recovery:
                return []
            return [
                f"I12 step {number} call {index} ({new.tool}): {new.fate} where the crash-free "
                f"history has {old.fate}, and no recovery edge explains it"
            ]
    problems = []
    if len(baseline.steps) != len(crashed.steps):
        problems.append(f"I12 {len(crashed.steps)} steps where the crash-free history has {len(baseline.steps)}")
    if baseline.end != crashed.end:
        ended = crashed.end.value if crashed.end else "not ended"
        problems.append(f"I12 ended {ended} where the crash-free history ended {baseline.end}")
    return problems
