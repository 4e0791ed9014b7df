"""What CrossHair said about each contract, as ``proofs/crosshair_check.py`` reports it:
the status of each postcondition and how a contract is judged from them.
"""

from __future__ import annotations

import dataclasses

# Statuses of one postcondition (strings so workers can send them as JSON).
CONFIRMED = "confirmed"
SEARCHED = "searched"
VIOLATED = "violated"
PRE_UNSAT = "pre_unsat"
NOT_CHECKED = "not_checked"
WORKER_ERROR = "worker_error"

FAILING = frozenset({VIOLATED, PRE_UNSAT, NOT_CHECKED, WORKER_ERROR})


@dataclasses.dataclass
class ConditionResult:
    """What CrossHair said about one postcondition."""

    condition: str
    status: str
    iterations: int = 0
    confirmed_paths: int = 0
    exhausted: bool = False
    cpu_seconds: float = 0.0
    hit_time_cap: bool = False
    detail: str = ""


@dataclasses.dataclass
class FunctionResult:
    """All postconditions of one contract, plus how the worker went."""

    name: str
    expected_posts: int
    conditions: list[ConditionResult] = dataclasses.field(default_factory=list)
    error: str = ""
    wall_seconds: float = 0.0

    @property
    def status(self) -> str:
        if self.error:
            return WORKER_ERROR
        if len(self.conditions) < self.expected_posts or not self.conditions:
            return NOT_CHECKED
        for status in (VIOLATED, PRE_UNSAT, NOT_CHECKED, WORKER_ERROR, SEARCHED):
            if any(c.status == status for c in self.conditions):
                return status
        return CONFIRMED

    @property
    def iterations(self) -> int:
        return sum(c.iterations for c in self.conditions)

    def describe(self) -> str:
        posts = len(self.conditions)
        status = self.status
        if status == CONFIRMED:
            return f"confirmed over all paths ({posts} post, {self.iterations} iterations)"
        if status == SEARCHED:
            confirmed = sum(c.status == CONFIRMED for c in self.conditions)
            capped = sum(c.hit_time_cap for c in self.conditions)
            extra = f"; {confirmed}/{posts} post confirmed" if confirmed else ""
            extra += f"; {capped} post stopped by the time cap" if capped else ""
            return f"searched ({self.iterations} iterations, no counterexample{extra})"
        if status == VIOLATED:
            bad = next(c for c in self.conditions if c.status == VIOLATED)
            return f"VIOLATED: {bad.condition!r}: {bad.detail}"
        if status == PRE_UNSAT:
            return "FAILED: Unable to meet precondition (nothing was checked)"
        if status == NOT_CHECKED:
            if len(self.conditions) < self.expected_posts:
                return (
                    f"FAILED: not checked ({len(self.conditions)} of {self.expected_posts} "
                    "post conditions analyzed)"
                )
            bad = next(c for c in self.conditions if c.status == NOT_CHECKED)
            return f"FAILED: not checked ({bad.condition!r}: {bad.detail})"
        return f"FAILED: {self.error}"
