"""``crashtest(app, scenario)``: the user's own app, crashed at every boundary of its
crash-free Run, each crash recovered from the store alone and judged.

For each scenario: the crash-free Run is played twice on fresh stores with fixed ids
and clock; if the two differ (tool result values aside), the app is not deterministic
and ``NotDeterministic`` names the first commit that differs. A result value both plays
returned alike is *reproduced*: a crashed play must return it again at the same call.
Then one play per boundary that Run and its delegations' child Runs passed (each commit
before its write and after it, before the acknowledgement; each tool after its effect),
each on a fresh store, with the app's ``reset`` called first for its downstream.
"""

from __future__ import annotations

import collections
from collections.abc import Callable, Iterable, Sequence

from attrs import define, field, frozen

from runkernel.adapters.stores.contract import Store
from runkernel.adapters.stores.memory import MemoryStore
from runkernel.adapters.worker.apps import RuntimeApp, WorkerApp
from runkernel.errors import CrashTestRefused, NotDeterministic
from runkernel.kernel.policies import RecoveryMode, ToolPolicy, tool_policy
from runkernel.kernel.state import Ended, ThreadCommit
from runkernel.testing.crashtest.hosts import play
from runkernel.testing.crashtest.judge import ExtraStart, Judge, Logs, Violation
from runkernel.testing.crashtest.places import logs_of, masked, result_values
from runkernel.testing.crashtest.scenario import Scenario
from runkernel.testing.crashtest.watch import Encounter, Played
from runkernel.testing.simulation.history import outline


@frozen
class Trial:
    """One crash and its recovery: where it died, which recovery row the fresh host
    took, how the Run ended, what the model saw of the recovered calls."""

    scenario: str
    index: int
    boundary: str
    kind: str
    position: str
    recovered: tuple[str, ...]
    outcome: str
    model_saw: tuple[str, ...]
    violations: int


@frozen
class ToolStarts:
    """What the world saw of one tool over every crash: its committed policy (its
    recovery mode, or ``delegation`` for a terminal-only delegation, whose executor is
    its child's activation), the most extra starts one operation had, and whether an
    extra start fails the test."""

    tool: str
    policy: str
    at_most_once: bool
    operations: int
    most_extra: int
    failing: bool

    def advice(self) -> str:
        """The line the report prints for the tool."""
        if self.most_extra == 0:
            return f"{self.tool} ({self.policy}): no extra start"
        head = f"{self.tool} ({self.policy}): up to {self.most_extra} extra start{'s' if self.most_extra > 1 else ''} per operation"
        if self.failing:
            return head + " — FAIL: " + ("flagged at-most-once" if self.at_most_once else "only a replay tool may run again")
        return head + " — declare it reconnect or indeterminate if running it twice is not harmless"


@define
class CrashReport:
    """What ``crashtest`` found. ``passed`` is True only when every check held."""

    app: str
    scenarios: list[str] = field(factory=list)
    trials: list[Trial] = field(factory=list)
    violations: list[Violation] = field(factory=list)
    extra_starts: list[ExtraStart] = field(factory=list)
    tools: dict[str, ToolStarts] = field(factory=dict)
    #: recoveries by row of the recovery table (the first drive after each crash)
    recoveries: collections.Counter[str] = field(factory=collections.Counter)
    #: boundaries of each scenario's crash-free Run
    boundaries: dict[str, int] = field(factory=dict)

    @property
    def passed(self) -> bool:
        """No violation (an extra start that fails is a violation)."""
        return not self.violations

    @property
    def crashes(self) -> int:
        """How many crashed plays were judged."""
        return len(self.trials)

    def started_again(self) -> dict[str, int]:
        """Per replay tool that started again after a crash, the most extra starts one
        operation had: allowed (unless flagged at-most-once or ``strict``), and named in
        the verdict, since a tool wrongly declared replay (a payment) passes otherwise."""
        return {
            name: tool.most_extra
            for name, tool in sorted(self.tools.items())
            if tool.policy == RecoveryMode.REPLAY.value and tool.most_extra > 0
        }

    def extra_starts_of(self, tool: str) -> dict[str, int]:
        """Per operation id, the extra starts of ``tool`` seen in any crash (the most)."""
        found: dict[str, int] = {}
        for extra in self.extra_starts:
            if extra.tool == tool:
                found[extra.operation_id] = max(found.get(extra.operation_id, 0), extra.extra)
        return found


#: Told after each play: (plays done, plays in all, what was played).
Progress = Callable[[int, int, str], None]


def crashtest(
    app: WorkerApp,
    scenarios: Scenario | Sequence[Scenario] = (),
    *,
    reset: Callable[[], object] | None = None,
    at_most_once: Iterable[str] = (),
    strict: bool = False,
    seed: int = 0,
    store: Callable[[], Store] | None = None,
    progress: Progress | None = None,
) -> CrashReport:
    """Crash-test ``app`` (a ``RuntimeApp``, a push app or an async push app) on each
    scenario (none: one that approves every wait); ``reset()`` is called before every
    play, to empty the app's downstream test double. ``at_most_once`` names tools for
    which any extra start fails (as does a tool whose ``at_most_once`` is True);
    ``strict`` flags every tool so: any extra start fails, a replay tool's too. Each
    play gets a fresh store from ``store`` (default: a new ``MemoryStore``).

    Raises ``NotDeterministic`` when the crash-free Run does not repeat itself."""
    chosen = (scenarios,) if isinstance(scenarios, Scenario) else tuple(scenarios) or (Scenario(),)
    policies = tool_policies(app)
    flagged = set(at_most_once) | at_most_once_tools(app)
    unknown = sorted(flagged - set(policies))
    if unknown:
        raise CrashTestRefused(f"at-most-once tool {unknown[0]!r} is not a tool of app {app.name!r} ({', '.join(sorted(policies))})")
    if strict:
        flagged = set(policies)
    sequential = sorted(name for name, policy in policies.items() if policy.sequential_delegation)
    if sequential:
        raise CrashTestRefused(
            f"tool {sequential[0]!r} of app {app.name!r} is a sequential delegation: crashtest plays terminal-only "
            "delegations (ToolPolicy(terminal_only_delegation=True)) and their child Runs, not yet a child that talks back"
        )
    if not isinstance(app, RuntimeApp) and any(s.turns is not None for s in chosen):
        raise CrashTestRefused(f"app {app.name!r} calls its own model (push mode): a scenario's turns cannot replace it")
    fresh = store or MemoryStore
    report = CrashReport(app.name, [s.name for s in chosen])

    def once(scenario: Scenario, target: int | None, tag: str) -> tuple[Played, list[Encounter], Store]:
        if reset is not None:
            reset()
        where = fresh()
        played, plan = play(app, scenario, where, target, seed=seed, thread_id=f"crashtest-{tag}", run_id=f"crashtest-{tag}-run")
        return played, plan.seen, where

    baselines: list[tuple[Scenario, Played, Logs, list[Encounter]]] = []
    judges: list[Judge] = []
    for scenario in chosen:
        first, seen, first_store = once(scenario, None, f"{scenario.name}-0")
        first_logs = logs_of(first_store, first)  # read before a reused store is reset
        second, _, second_store = once(scenario, None, f"{scenario.name}-0")
        second_logs = logs_of(second_store, second)
        _same(scenario, first_logs, second_logs)
        if first.errors:
            raise CrashTestRefused(f"scenario {scenario.name}: the crash-free Run failed: {first.errors[0]}")
        report.boundaries[scenario.name] = len(seen)
        baselines.append((scenario, first, first_logs, seen))
        values, again = result_values(first_logs, first.runs), result_values(second_logs, second.runs)
        reproduced = {place: value for place, value in values.items() if again.get(place) == value}
        judges.append(Judge(scenario.name, first, first_logs, policies, flagged, reproduced))
    total = sum(len(seen) for *_, seen in baselines)
    done = 0
    for (scenario, _baseline, logs, seen), judge in zip(baselines, judges):
        for index, encounter in enumerate(seen):
            played, _, where = once(scenario, index, f"{scenario.name}-{index + 1}")
            label = f"#{index + 1} {encounter.label()}"
            violations, extras = judge.judge(played, where, label)
            if not played.crashed:
                violations.append(Violation(scenario.name, label, "no-crash", "the crash-free Run passed this boundary, this play did not (not deterministic?)"))
            report.violations += violations
            report.extra_starts += extras
            report.recoveries.update(played.recovered)
            report.trials.append(_trial(scenario, index, encounter, played, logs_of(where, played), logs, len(violations)))
            done += 1
            if progress is not None:
                progress(done, total, f"{scenario.name} {label}")
    report.tools = _tools(policies, flagged, baselines, report.extra_starts)
    return report


def tool_policies(app: WorkerApp) -> dict[str, ToolPolicy]:
    """Each tool's committed policy, as the app declares it."""
    if isinstance(app, RuntimeApp):
        return {name: tool.policy for name, tool in app.tools.tools.items()}
    return {name: tool_policy(name, policy) for name, policy in app.tools.items()}


def at_most_once_tools(app: WorkerApp) -> set[str]:
    """The tools the app flags ``at_most_once = True`` (pull mode: on the tool object)."""
    if isinstance(app, RuntimeApp):
        return {name for name, tool in app.tools.tools.items() if getattr(tool, "at_most_once", False) is True}
    return set(getattr(app, "at_most_once", ()) or ())


def _same(scenario: Scenario, one: Logs, two: Logs) -> None:
    """Refuse an app whose two crash-free plays differ (tool result values aside: see
    ``masked``), naming the first commit (and the child Run) that differs."""
    if list(one) != list(two):
        raise NotDeterministic(
            f"scenario {scenario.name}: two crash-free plays ran different child Runs "
            f"({', '.join(one) or 'none'} and {', '.join(two) or 'none'}): the app is not deterministic"
        )
    for key in one:
        run = f"child {key}: " if key else ""
        for left, right in zip(map(masked, one[key]), map(masked, two[key])):
            if left != right:
                raise NotDeterministic(
                    f"scenario {scenario.name}: two crash-free plays differ at {run}commit v{left.version} "
                    f"(step {left.step}{_what_differs(left, right)}): "
                    "the app is not deterministic under fixed ids and clock (a real model, the wall clock, randomness?); "
                    "script the model's turns in a scenario"
                )
        if len(one[key]) != len(two[key]):
            raise NotDeterministic(
                f"scenario {scenario.name}: two crash-free plays committed {len(one[key])} and {len(two[key])} "
                f"commits{' in child ' + key if key else ''}: the app is not deterministic under fixed ids and clock"
            )


def _trial(
    scenario: Scenario, index: int, encounter: Encounter, played: Played, crashed: Logs, logs: Logs, violations: int
) -> Trial:
    final = played.final
    outcome = final.state.cause.kind.value if final is not None and isinstance(final.state, Ended) else "not ended"
    saw = []
    before = _fates(logs)
    for place, fate in _fates(crashed).items():
        if before.get(place) != fate:
            saw.append(f"{place}: {fate}")
    return Trial(
        scenario.name,
        index + 1,
        encounter.label(),
        encounter.boundary.value,
        encounter.position.value,
        tuple(played.recovered),
        outcome,
        tuple(saw),
        violations,
    )


def _fates(logs: Logs) -> dict[str, str]:
    """Each finalized call, ``step N tool#I`` (a child's: ``child KEY step N tool#I``),
    with how it ended."""
    found: dict[str, str] = {}
    for key, log in logs.items():
        if not log:
            continue
        run = f"child {key} " if key else ""
        for step, calls in enumerate(outline(log, log[0].run_id).steps, start=1):
            for index, call in enumerate(calls):
                found[f"{run}step {step} {call.tool}#{index}"] = call.fate
    return found


def _what_differs(left: ThreadCommit, right: ThreadCommit) -> str:
    """Which part of two commits differs first, as the report names it."""
    for name in ("messages", "batch", "disposition", "events", "staged"):
        if getattr(left, name, None) != getattr(right, name, None):
            return f", its {name}"
    return ""


def _tools(
    policies: dict[str, ToolPolicy],
    flagged: set[str],
    baselines: list[tuple[Scenario, Played, Logs, list[Encounter]]],
    extras: list[ExtraStart],
) -> dict[str, ToolStarts]:
    operations: collections.Counter[str] = collections.Counter()
    for _scenario, played, _log, _seen in baselines:
        operations.update(tool for tool, _ in {(s.tool, s.operation_id) for s in played.starts})
    found = {}
    for tool, policy in sorted(policies.items()):
        mine = [e for e in extras if e.tool == tool]
        found[tool] = ToolStarts(
            tool,
            "delegation" if policy.terminal_only_delegation else policy.recovery.mode.value,
            tool in flagged,
            operations[tool],
            max((e.extra for e in mine), default=0),
            any(e.failure for e in mine),
        )
    return found


__all__ = ["CrashReport", "CrashTestRefused", "NotDeterministic", "Progress", "ToolStarts", "Trial", "crashtest"]
