"""The reference runtime end to end: every scenario crashed at every boundary it passes."""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from pathlib import Path

import attrs
import pytest

from runkernel.adapters.stores.memory import MemoryStore
from runkernel.adapters.drive.ports import Returned, StatusReply, ToolRegistry, ToolReply
from runkernel import RunCall
from runkernel.adapters.drive.runtime import Runtime
from runkernel.adapters.stores.sqlite import SqliteStore
from runkernel.adapters.stores.contract import Lease, Settlement, Store, StoreUnavailable
from runkernel.kernel.planning import settle
from runkernel.kernel.policies import Policies, ToolPolicy
from runkernel.kernel.protocol import Decision
from runkernel.kernel.recover import RecoveryRow
from runkernel.kernel.state import (
    CallCompleted,
    CallRequested,
    Ended,
    Message,
    RunSnapshot,
    ThreadCommit,
    ThreadHead,
    ToolResult,
)
from runkernel.kernel.validate import NO_TICKETS_SEEN, Accepted, validate_commit
from runkernel.kernel.values import EndCauseKind, ResultKind, Role
from runkernel.testing import Boundary, Position, ScriptedModel, StepScript, position_of
from runkernel.testing.simulation.engine import ScenarioRun
from runkernel.testing.simulation.history import Outline
from runkernel.testing.simulation.invariants import check_run
from runkernel.testing.simulation.scenarios import Scenario, catalogue
from runkernel.testing.simulation.simulate import baselines, format_report, simulate

SCENARIOS = catalogue()


def baseline(scenario: Scenario) -> tuple[int, Outline]:
    """The scenario played once without crashes: how many crash boundaries it passes, and
    the outline crashed plays are compared with. Played inside the first test that needs
    it, never at import: a behaviour bug fails the tests that name the scenario instead
    of stopping the collection."""
    return _baseline(scenario.name)


@functools.cache
def _baseline(name: str) -> tuple[int, Outline]:
    return baselines(tuple(s for s in SCENARIOS if s.name == name))[name]


def play(store: Store, scenario: Scenario, targets: tuple[int, ...]) -> list[str]:
    trial = ScenarioRun(store, scenario, 7, targets).play()
    return check_run(store, trial, baseline(scenario)[1])


@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda s: s.name)
def test_every_scenario_ends_cleanly_without_crashes(scenario: Scenario) -> None:
    store = MemoryStore()
    assert play(store, scenario, ()) == []
    for run_id in store.thread_ids():
        assert store.thread_head(run_id) is not None


@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda s: s.name)
def test_a_crash_at_every_boundary_is_recovered(scenario: Scenario) -> None:
    for target in range(baseline(scenario)[0]):
        store = MemoryStore()
        problems = play(store, scenario, (target,))
        assert problems == [], f"crash at boundary {target}: {problems}"


@pytest.mark.parametrize("scenario", SCENARIOS[::4], ids=lambda s: s.name)
def test_a_second_crash_during_recovery_is_recovered(scenario: Scenario) -> None:
    total = baseline(scenario)[0]
    for first in range(0, total, 2):
        store = MemoryStore()
        problems = play(store, scenario, (first, first + 1, first + 3))
        assert problems == [], f"crashes at {first}, {first + 1}, {first + 3}: {problems}"


def test_crashes_reach_every_boundary_kind_and_commit_position() -> None:
    report = simulate(MemoryStore(), 32 * 12, seed=3)
    assert report.violations == []
    kinds = {kind for kind, _ in report.crashes}
    positions = {position for _, position in report.crashes}
    assert kinds == {b.value for b in Boundary}
    expected = {p.value for p in Position} - {Position.PROGRESS.value}
    assert expected <= positions, expected - positions
    assert "verdict: PASS" in format_report(report)


def test_simulation_is_deterministic_from_its_seed() -> None:
    first = simulate(MemoryStore(), 64, seed=11)
    second = simulate(MemoryStore(), 64, seed=11)
    assert first.crashes == second.crashes
    assert first.commits == second.commits
    assert first.recoveries == second.recoveries


def test_simulation_on_sqlite(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "sim.db")
    report = simulate(store, 96, seed=5)
    assert report.violations == []
    assert report.commits == sum(len(list(store.commits(t))) for t in store.thread_ids())
    store.close()


class FlakyStore(MemoryStore):
    """Fails the n-th append, as a database restart would."""

    def __init__(self, fail_at: int) -> None:
        super().__init__()
        self.appends = 0
        self.fail_at = fail_at

    def append(
        self,
        commit: ThreadCommit,
        settle: Settlement | None = None,
        *,
        lease: Lease | None = None,
        release: bool = False,
        trace_context: str | None = None,
    ) -> RunSnapshot:
        self.appends += 1
        if self.appends == self.fail_at:
            raise StoreUnavailable("database restarted")
        return super().append(commit, settle, lease=lease, release=release, trace_context=trace_context)


@pytest.mark.parametrize("fail_at", range(1, 9))
def test_store_write_failures_are_recovered_like_crashes(fail_at: int) -> None:
    scenario = next(s for s in SCENARIOS if s.name == "approval_allowed")
    store = FlakyStore(fail_at)
    trial = ScenarioRun(store, scenario, 3, ()).play()
    assert check_run(store, trial) == []
    assert trial.store_failures == 1
    snapshot = store.run(trial.run_ids[0])
    assert snapshot is not None and isinstance(snapshot.state, Ended)


def test_position_names_each_commit_point() -> None:
    store = MemoryStore()
    scenario = next(s for s in SCENARIOS if s.name == "approval_allowed")
    trial = ScenarioRun(store, scenario, 1, ()).play()
    log = list(store.commits(trial.thread_ids[0]))
    positions = []
    previous: RunSnapshot | None = None
    head: ThreadHead | None = None
    for commit in log:
        positions.append(position_of(previous, commit))
        verdict = validate_commit(head, previous, commit, ticket_seen=NO_TICKETS_SEEN)
        assert isinstance(verdict, Accepted)
        head, previous = verdict.head, verdict.run
    assert positions[0] is Position.ACTIVATION
    assert Position.BATCH_OPEN in positions
    assert Position.CALL_WAIT in positions
    assert Position.RESUME in positions
    assert positions[-1] is Position.END


def test_a_legal_but_wrong_recovery_is_caught_by_the_crash_free_comparison(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Blocking a Requested call on recovery commits only legal edges (I1 holds), but the
    history then differs from the crash-free one by more than a recovery edge (I12)."""
    recover_module = sys.modules["runkernel.kernel.recover"]  # the package re-exports recover()
    original: Callable[[RecoveryRow, RunSnapshot, Policies], Decision] = recover_module._plan

    def blocks_requested_calls(row: RecoveryRow, state: RunSnapshot, policies: Policies) -> Decision:
        batch = state.open_batch
        call = batch.first_open_call() if batch else None
        if batch is not None and call is not None and isinstance(call.status, CallRequested):
            blocked = CallCompleted(0, ToolResult(ResultKind.BLOCKED, "skipped on recovery"))
            return settle(state, batch.replace_call(attrs.evolve(call, status=blocked)), policies)
        return original(row, state, policies)

    monkeypatch.setattr(recover_module, "_plan", blocks_requested_calls)
    scenario = next(s for s in SCENARIOS if s.name == "one_call_indeterminate_tool")
    store = MemoryStore()
    trial = ScenarioRun(store, scenario, 1, (3,)).play()  # crash after the batch is written
    assert trial.crashes
    problems = check_run(store, trial, baseline(scenario)[1])
    assert any(p.startswith("I12") and "blocked" in p for p in problems), problems
    assert not any(p.startswith("I1-") for p in problems), problems


class NanTool:
    """A tool whose output cannot be committed as JSON."""

    policy = ToolPolicy()

    def run(self, invocation: RunCall) -> ToolReply:
        return Returned({"ratio": float("nan")})

    def status(self, operation_id: str, lease_epoch: int | None) -> StatusReply:
        raise AssertionError("not a reconnect tool")


def test_a_tool_output_that_is_not_json_completes_the_call_as_an_error() -> None:
    store = MemoryStore()
    model = ScriptedModel({"r1": (StepScript("calc", (("nan", {}),)), StepScript("done", end=EndCauseKind.COMPLETED))})
    final = Runtime(store, model, ToolRegistry({"nan": NanTool()})).start("t1", "r1", (Message(Role.USER, "go"),))
    assert isinstance(final.snapshot.state, Ended)
    batch = next(c.batch for c in store.commits("t1") if c.batch is not None and c.batch.finalized)
    status = batch.calls[0].status
    assert isinstance(status, CallCompleted) and status.result.kind is ResultKind.ERROR
    assert status.result.value["type"] == "NotJson"
