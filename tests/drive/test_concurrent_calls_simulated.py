"""``runkernel simulate``'s scenarios of concurrent groups, each played with one crash at
every boundary it passes (the starts and ends of the group among them): every
invariant holds after every Run, and every exported Thread is a legal trace."""

from __future__ import annotations

import pytest

from runkernel.adapters.stores.memory import MemoryStore
from runkernel.kernel.state import CallExecuting
from runkernel.testing.simulation.engine import ScenarioRun
from runkernel.testing.simulation.invariants import check_run, thread_logs
from runkernel.testing.simulation.scenarios import catalogue
from runkernel.testing.simulation.simulate import Report, baselines

GROUP_SCENARIOS = ("concurrent_calls", "gated_call_in_group", "concurrent_calls_after_delegations")
SCENARIOS = {s.name: s for s in catalogue() if s.name in GROUP_SCENARIOS}


def test_the_catalogue_holds_the_group_scenarios() -> None:
    assert sorted(SCENARIOS) == sorted(GROUP_SCENARIOS)


@pytest.mark.parametrize("name", GROUP_SCENARIOS)
def test_a_crash_at_every_boundary_of_a_group_scenario_keeps_every_invariant(name: str) -> None:
    scenario = SCENARIOS[name]
    found = baselines((scenario,))
    count, outline = found[name]
    report = Report()
    together = 0
    for target in range(count):
        store = MemoryStore()
        trial = ScenarioRun(store, scenario, target, (target,), 0).play()
        logs = thread_logs(store, trial)
        report.add(trial, logs, check_run(store, trial, outline, logs))
        together += any(
            commit.batch is not None and sum(isinstance(c.status, CallExecuting) for c in commit.batch.calls) > 1
            for log in logs.values()
            for commit in log
        )
    print(f"{name}: {count} boundaries, {sum(report.crashes.values())} crashes, {report.commits} commits, "
          f"{sum(report.recoveries.values())} recoveries, {report.indeterminate_calls} Indeterminate calls")
    assert report.violations == []
    assert sum(report.crashes.values()) == count  # one crash at each boundary
    assert together > 0  # members were Executing together
