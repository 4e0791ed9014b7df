"""``runkernel simulate``: many scripted Runs, crashed at every boundary, then judged.

Each scenario is first played once without crashes on a memory store to count the
boundaries it passes; the runs that follow crash it at boundary indices that cycle
through that count (and every third run crashes a second time during recovery), so a
default run reaches every boundary kind at every position the scenarios have.
"""

from __future__ import annotations

import collections
import random
from collections.abc import Callable

from attrs import define, field

from runkernel.testing.crash import Boundary, Position
from runkernel.adapters.stores.memory import MemoryStore
from runkernel.adapters.drive.runtime import Acknowledged, Recovered
from runkernel.adapters.stores.contract import Store
from runkernel.kernel.recover import RecoveryRow
from runkernel.kernel.state import CallIndeterminate, ThreadCommit
from runkernel.testing.simulation.engine import ScenarioRun, Trial
from runkernel.testing.simulation.failfast import EnvironmentFailure, FailFastStore
from runkernel.testing.simulation.history import Outline, outline
from runkernel.testing.simulation.invariants import check_run, thread_logs
from runkernel.testing.simulation.scenarios import Scenario, catalogue


@define
class Report:
    """What a simulation saw, summed over all runs."""

    runs: int = 0
    runs_with_crash: int = 0
    commits: int = 0
    acknowledged: int = 0
    crashes: collections.Counter[tuple[str, str]] = field(factory=collections.Counter)
    recoveries: collections.Counter[str] = field(factory=collections.Counter)
    executions: int = 0
    indeterminate_calls: int = 0
    refusals: collections.Counter[str] = field(factory=collections.Counter)
    scenarios: collections.Counter[str] = field(factory=collections.Counter)
    violations: list[str] = field(factory=list)
    thread_ids: list[str] = field(factory=list)
    #: why the simulation stopped before its last run: the store failed (the
    #: environment, never counted as a violation), or it was interrupted
    store_failure: str | None = None
    interrupted: bool = False

    @property
    def complete(self) -> bool:
        """Every run asked for was played and judged."""
        return self.store_failure is None and not self.interrupted

    def add(self, trial: Trial, logs: dict[str, list[ThreadCommit]], problems: list[str]) -> None:
        self.runs += 1
        self.scenarios[trial.scenario.name] += 1
        self.runs_with_crash += bool(trial.crashes)
        for boundary, position in trial.crashes:
            self.crashes[(boundary.value, position.value)] += 1
        for event, _ in trial.events:
            if isinstance(event, Recovered):
                self.recoveries[event.row.value] += 1
            elif isinstance(event, Acknowledged):
                self.acknowledged += 1
        self.executions += len(trial.world.executions)
        self.refusals.update(trial.refusals)
        for thread_id, log in logs.items():
            self.commits += len(log)
            final_calls = {
                call.call_id: call.status
                for commit in log
                if commit.batch is not None
                for call in commit.batch.calls
            }
            self.indeterminate_calls += sum(isinstance(s, CallIndeterminate) for s in final_calls.values())
            self.thread_ids.append(thread_id)
        self.violations += [f"{trial.scenario.name} ({trial.thread_ids[0]}): {p}" for p in problems]


def baselines(scenarios: tuple[Scenario, ...], seed: int = 0) -> dict[str, tuple[int, Outline]]:
    """Each scenario played once without crashes: how many crash boundaries it passes,
    and the outline of its history that crashed runs are compared with (I12)."""
    found = {}
    for scenario in scenarios:
        store = MemoryStore()
        trial = ScenarioRun(store, scenario, 0, (), seed).play()
        found[scenario.name] = (
            max(trial.boundaries_seen, 1),
            outline(store.commits(trial.thread_ids[0]), trial.run_ids[0]),
        )
    return found


def boundary_counts(scenarios: tuple[Scenario, ...]) -> dict[str, int]:
    """How many crash boundaries each scenario passes when nothing crashes."""
    return {name: count for name, (count, _) in baselines(scenarios).items()}


Progress = Callable[[int, int, Report], None]


def simulate(store: Store, runs: int, seed: int, progress: Progress | None = None) -> Report:
    """Play ``runs`` scenario runs on ``store`` and check every invariant after each.

    The first failure of the store stops the simulation (``Report.store_failure``) and
    Ctrl-C does too (``Report.interrupted``); the report then holds the runs judged so
    far, and the run in flight is neither counted nor judged."""
    report = Report()
    try:
        _play(FailFastStore(store).store(), runs, seed, progress, report)
    except EnvironmentFailure as failure:
        report.store_failure = str(failure)
    except KeyboardInterrupt:
        report.interrupted = True
    return report


def _play(store: Store, runs: int, seed: int, progress: Progress | None, report: Report) -> None:
    scenarios = catalogue()
    found = baselines(scenarios, seed)
    counts = {name: count for name, (count, _) in found.items()}
    rng = random.Random(seed)
    offsets = {s.name: rng.randrange(counts[s.name]) for s in scenarios}
    for index in range(runs):
        scenario = scenarios[index % len(scenarios)]
        round_number = index // len(scenarios)
        targets: tuple[int, ...] = ()
        if round_number > 0:
            total = counts[scenario.name]
            first = (offsets[scenario.name] + round_number - 1) % total
            targets = (first,)
            if round_number % 3 == 0:
                targets += (first + 1 + rng.randrange(total),)
        trial = ScenarioRun(store, scenario, index, targets, seed).play()
        logs = thread_logs(store, trial)
        report.add(trial, logs, check_run(store, trial, found[scenario.name][1], logs))
        if progress is not None:
            progress(index + 1, runs, report)


def format_report(report: Report) -> str:
    """The end-of-run table."""
    lines = [
        "runkernel simulate report",
        "",
        f"  runs                 {report.runs:>8}   ({len(report.scenarios)} scenarios, "
        f"{report.runs_with_crash} with crashes)",
        f"  threads              {len(report.thread_ids):>8}",
        f"  commits              {report.commits:>8}   ({report.acknowledged} acknowledged to a runtime)",
        f"  crashes              {sum(report.crashes.values()):>8}",
        f"  recoveries           {sum(report.recoveries.values()):>8}",
        f"  tool executions      {report.executions:>8}",
        f"  indeterminate calls  {report.indeterminate_calls:>8}",
        f"  refused commands     {sum(report.refusals.values()):>8}",
        f"  violations           {len(report.violations):>8}",
        "",
        "crashes by boundary kind and position:",
    ]
    positions = [p.value for p in Position if any(k[1] == p.value for k in report.crashes)]
    kinds = [b.value for b in Boundary]
    header = f"  {'position':<16}" + "".join(f"{k:>24}" for k in kinds)
    lines.append(header)
    for position in positions:
        row = "".join(f"{report.crashes.get((k, position), 0):>24}" for k in kinds)
        lines.append(f"  {position:<16}{row}")
    lines += ["", "recoveries by row of the recovery table:"]
    for recovery_row in RecoveryRow:
        name = recovery_row.value
        lines.append(f"  {name:<34}{report.recoveries.get(name, 0):>8}")
    lines += ["", "refused commands by rule:"]
    for rule, count in sorted(report.refusals.items()):
        lines.append(f"  {rule:<34}{count:>8}")
    if report.violations:
        lines += ["", "violations:"]
        lines += [f"  {v}" for v in report.violations[:50]]
        if len(report.violations) > 50:
            lines.append(f"  ... and {len(report.violations) - 50} more")
    lines.append("")
    if report.store_failure is not None:
        lines.append(f"verdict: INCOMPLETE, the store failed after {report.runs} runs: {report.store_failure}")
    elif report.interrupted:
        lines.append(f"verdict: INCOMPLETE, interrupted after {report.runs} runs")
    else:
        lines.append("verdict: " + ("PASS, zero violations" if not report.violations else "FAIL"))
    return "\n".join(lines) + "\n"
