"""What a model-checking search found (``Result``), and its printed summary.

Split from ``model_check.py``, which re-exports these names.
"""

from __future__ import annotations

import dataclasses
import json
import resource

from runkernel.kernel.values import JsonValue
from runkernel.testing import Boundary, Position

from mc_config import GROUP_TOOLS, TOOLS, Profile

@dataclasses.dataclass
class Counterexample:
    invariant: str
    message: str
    choices: list[str]
    """Labels of the choices from the initial state; the last one is where it failed."""
    trace: list[dict[str, JsonValue]]
    """The committed log along the path (``runkernel/2`` lines); with ``offending`` the last
    line is the commit the kernel emitted that broke the invariant."""
    offending: bool


@dataclasses.dataclass(frozen=True)
class Level:
    """One BFS level: the states first reached at ``depth`` (the frontier expanded next)."""

    depth: int
    frontier: int
    states: int
    """States known once this level was reached (cumulative)."""
    transitions: int
    """Transitions taken to reach it (cumulative)."""
    seconds: float
    """Wall-clock time from the start of the search until this level was complete."""


def peak_memory_mib() -> float:
    """This process's peak resident memory (Linux reports ``ru_maxrss`` in KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


@dataclasses.dataclass
class Result:
    profile: str
    verdict: str
    """``ok``, ``violation`` or ``capped``."""
    states: int
    transitions: int
    max_depth: int
    seconds: float
    final_states: int
    crash_points: dict[str, int]
    counterexample: Counterexample | None = None
    counters: dict[str, int] = dataclasses.field(default_factory=dict)
    """Other tallies, e.g. how many commands the kernel had to (and did) refuse."""
    levels: list[Level] = dataclasses.field(default_factory=list)
    """The frontier per depth, in order; on a cap, the last is the one left unexpanded."""
    stopped: str = ""
    """Why a capped search stopped: the state cap or the time limit."""
    peak_mib: float = 0.0
    hash_compaction: bool = False

    @property
    def exit_code(self) -> int:
        return {"ok": 0, "violation": 1}.get(self.verdict, 2)


def summary(result: Result, profile: Profile) -> str:
    lines = [
        f"runkernel bounded model check, profile {profile.name}: up to {profile.max_calls} call(s) per "
        f"tool step, {profile.tool_steps} tool step(s) "
        f"{'at step 1' if profile.tool_step_first_only else 'at any step'}, {profile.max_steps} steps, "
        f"{profile.max_crashes} crash(es), {profile.waits_per_call} wait(s) per call, tools "
        f"{'/'.join(GROUP_TOOLS) + ' (one concurrent group)' if profile.groups else '/'.join(TOOLS)}, "
        f"indeterminate results {profile.on_indeterminate.value}"
        + (", hash compaction" if profile.hash_compaction else ""),
        f"states explored: {result.states:,}",
        f"transitions:     {result.transitions:,}",
        f"max depth:       {result.max_depth}",
        f"final states:    {result.final_states:,}",
        *(f"{name}: {n:,}" for name, n in result.counters.items()),
        f"seconds:         {result.seconds:.1f}",
        f"peak memory:     {result.peak_mib:,.0f} MiB",
        "crash points covered (boundary @ position: transitions):",
    ]
    lines += [f"  {point.replace('@', ' @ ')}: {n:,}" for point, n in result.crash_points.items()]
    possible = [f"{b.value}@{p.value}" for b in (Boundary.BEFORE_WRITE, Boundary.AFTER_WRITE) for p in Position]
    possible.append(f"{Boundary.AFTER_EFFECT.value}@{Position.CALL_RESULT.value}")
    missing = [p.replace("@", " @ ") for p in possible if p not in result.crash_points]
    if missing and profile.max_crashes:
        lines.append(f"  never reached within the bound: {', '.join(missing)}")
    if result.verdict == "ok":
        lines.append("verdict: OK - every invariant holds in every reachable state (exhaustive within the bound)")
    elif result.verdict == "capped":
        lines.append(
            f"verdict: CAPPED - stopped at {result.states:,} states by {result.stopped or 'a cap'} before "
            "exhausting the bound; this is NOT a proof"
        )
    else:
        cx = result.counterexample
        assert cx is not None
        lines.append(f"verdict: VIOLATION of {cx.invariant}: {cx.message}")
        lines.append(f"shortest counterexample ({len(cx.choices)} choices):")
        lines += [f"  {i}. {choice}" for i, choice in enumerate(cx.choices, 1)]
        tail = " (the last line is the offending commit)" if cx.offending else ""
        lines.append(f"committed log, runkernel/2{tail}:")
        lines += [json.dumps(line, sort_keys=True) for line in cx.trace]
    return "\n".join(lines)
