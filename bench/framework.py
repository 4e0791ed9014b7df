"""The benchmark's data model: samples, groups of interleaved sides, rows and goals.

A *group* prepares what its sides share and then runs all its sides once per round,
in order (A, B, A, B, ...), so every ratio compares figures taken in the same window of
this shared, drifting machine. A *row* reads one side as runkernel's figure and
optionally another as the peer's or limit's, turns each round into one value (a
ratio, or a count per unit), and judges the median of those values against its goal.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Mapping
from pathlib import Path

from attrs import field, frozen

from bench.profiles import Work


@frozen
class Sample:
    """One side's figure in one round: wall seconds for ``units`` of work, plus counts."""

    seconds: float
    units: int = 1
    counts: Mapping[str, float] = field(factory=dict)

    @property
    def per_unit(self) -> float:
        """Seconds per unit of work."""
        return max(self.seconds, 1e-9) / max(self.units, 1)


Measure = Callable[[], Sample]


@frozen
class Sizes:
    """How big and how many: the full run, or ``--quick``."""

    quick: bool
    agent_steps: tuple[int, ...]
    agent_rounds: Mapping[int, int]
    agent_repeat: Mapping[int, int]
    commit_rounds: int
    commits_per_round: int
    history_target: int
    history_budget: float
    simulate_runs: int
    trace_runs: int
    micro_rounds: int
    micro_seconds: float
    model_states: int
    stateful_examples: int
    budget: float
    """Seconds after which a group runs no further round (each group gets one)."""
    latency_runs: tuple[int, ...]
    """The latency group's N: Runs drained by one process per side and round."""
    latency_sleep: float
    """Seconds each model and tool call of the latency group's Runs waits."""
    latency_rounds: int


FULL = Sizes(
    quick=False,
    agent_steps=(10, 100, 1000),
    agent_rounds={10: 5, 100: 3, 1000: 3},
    agent_repeat={10: 6, 100: 1, 1000: 1},
    commit_rounds=7,
    commits_per_round=300,
    history_target=100_000,
    history_budget=30.0,
    simulate_runs=300,
    trace_runs=2000,
    micro_rounds=5,
    micro_seconds=0.3,
    model_states=50_000,
    stateful_examples=100,
    budget=540.0,
    latency_runs=(20, 200),
    latency_sleep=0.5,
    latency_rounds=3,
)

QUICK = Sizes(
    quick=True,
    agent_steps=(3, 6, 12),
    agent_rounds={3: 2, 6: 2, 12: 2},
    agent_repeat={3: 1, 6: 1, 12: 1},
    commit_rounds=2,
    commits_per_round=20,
    history_target=200,
    history_budget=2.0,
    simulate_runs=12,
    trace_runs=12,
    micro_rounds=2,
    micro_seconds=0.02,
    model_states=500,
    stateful_examples=2,
    budget=120.0,
    latency_runs=(3, 6),
    latency_sleep=0.05,
    latency_rounds=1,
)


class Prepared:
    """A group once set up: its sides, and notes it learned while preparing."""

    def __init__(
        self,
        sides: Mapping[str, Measure],
        notes: Mapping[str, str] | None = None,
        *,
        first_round_only: frozenset[str] = frozenset(),
        profiles: Mapping[str, Work] | None = None,
    ) -> None:
        self.sides = dict(sides)
        self.notes: dict[str, str] = dict(notes or {})
        self.first_round_only = first_round_only
        """Sides too costly to repeat (a traced run): measured in the first round only."""
        self.profiles = dict(profiles or {})
        """One unit of a runkernel side's work, by side name, profiled after the rounds
        (``bench.profiles``): a row that misses its goal shows where that side's time went."""


@frozen
class Group:
    """Sides measured together in interleaved rounds."""

    name: str
    prepare: Callable[[Sizes, Path], Prepared]
    rounds: Callable[[Sizes], int]


@frozen
class SideRef:
    """One side of one group."""

    group: str
    side: str


@frozen
class Goal:
    """``value op threshold``; the threshold may depend on the samples (counted figures)."""

    op: str
    threshold: float | Callable[[list[Sample], list[Sample]], float]
    text: str

    def limit(self, a: list[Sample], b: list[Sample]) -> float:
        """The threshold for these samples."""
        return self.threshold(a, b) if callable(self.threshold) else self.threshold

    def met(self, value: float, a: list[Sample], b: list[Sample]) -> bool:
        """Whether ``value`` meets the goal."""
        limit = self.limit(a, b)
        return value >= limit if self.op == ">=" else value <= limit


Value = Callable[[Sample, Sample | None], float]
Show = Callable[[Sample], str]


@frozen
class Row:
    """One line of RESULTS.md."""

    name: str
    a: SideRef
    b: SideRef | None
    value: Value
    value_text: str
    goal: Goal | None
    show_a: Show
    show_b: Show | None = None
    limit: str = ""
    """When the row misses its goal: what limits it today and what would lift it."""


@frozen
class SideResult:
    """A side's samples over the rounds, or why it has none."""

    samples: list[Sample]
    missing: str | None = None
    error: str | None = None


def values(row: Row, a: SideResult, b: SideResult | None) -> list[float]:
    """The row's value in each round where both sides have a sample."""
    if b is None:
        return [row.value(sample, None) for sample in a.samples]
    return [row.value(x, y) for x, y in zip(a.samples, b.samples, strict=False)]


def median(numbers: list[float]) -> float:
    """The median (there is always at least one)."""
    return statistics.median(numbers)


# --- the usual values and figures -----------------------------------------------------


def speedup(a: Sample, b: Sample | None) -> float:
    """How many times less time per unit runkernel (a) takes than the peer (b)."""
    assert b is not None
    return b.per_unit / a.per_unit


def growth(a: Sample, b: Sample | None) -> float:
    """Time per unit of the large case (a) over the small one (b)."""
    assert b is not None
    return a.per_unit / b.per_unit


def count_ratio(key: str) -> Value:
    """``a.counts[key] / b.counts[key]``, or per unit of a alone when there is no b."""

    def value(a: Sample, b: Sample | None) -> float:
        if b is None:
            return a.counts[key] / max(a.units, 1)
        return a.counts[key] / max(b.counts[key], 1e-12)

    return value


def count_per(key: str, per: str) -> Value:
    """``a.counts[key] / a.counts[per]``."""

    def value(a: Sample, b: Sample | None) -> float:
        return a.counts[key] / max(a.counts[per], 1e-12)

    return value


def duration(seconds: float) -> str:
    """A short human duration."""
    if seconds >= 1:
        return f"{seconds:.2f} s"
    if seconds >= 1e-3:
        return f"{seconds * 1e3:.2f} ms"
    return f"{seconds * 1e6:.1f} µs"


def per_unit_time(unit: str) -> Show:
    """``1.23 ms/step (4,567 steps in 5.6 s)``."""

    def show(sample: Sample) -> str:
        return f"{duration(sample.per_unit)}/{unit}"

    return show


def rate(unit: str) -> Show:
    """``12,345 units/s``."""

    def show(sample: Sample) -> str:
        return f"{sample.units / max(sample.seconds, 1e-9):,.0f} {unit}/s"

    return show


def count_figure(key: str, label: str, per_unit: str | None = None, digits: int = 2) -> Show:
    """A count from the sample, optionally per unit of work."""

    def show(sample: Sample) -> str:
        number = sample.counts[key]
        if per_unit is not None:
            return f"{number / max(sample.units, 1):,.{digits}f} {label}/{per_unit}"
        return f"{number:,.0f} {label}"

    return show
