"""Crashes of a worker with slots, swept (Workers and leases: many Runs in flight; the
crash tester's boundaries): one worker drives RUNS Runs at once in as many slots, each Run
a batch of a replay, a reconnect and an indeterminate call, and its drives interleave.
The sweep first counts the boundaries a crash-free worker passes (every write before it
lands, after it landed and before its writer heard, every tool's effect before its
outcome is committed: the same count in any interleaving), then, for each index in turn,
a fresh store and a worker that dies at that boundary (``CrashingStore`` and
``crashing_tools`` under one ``CrashAtEncounters`` plan, which the slots share), whichever
Run reaches it: the other drives in flight are cut with it. A worker started again (a new
id, once the dead one's leases expired by the store's clock) finishes every Run.

After each case: every Run Ended and its trace legal (``check_commits``); every executor
start was committed as Executing first (I5); no call whose outcome was committed before
the crash is started again; a reconnect or indeterminate call is started again only after
a reconnect status said ``not_found`` (I9); every call the model asked for is terminal,
and every start downstream belongs to one of them. The drives interleave by
construction: each Run's first inference waits until every Run is at its own (a barrier
that only opens when all RUNS are in flight). Counts are printed, never durations.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import attrs
import pytest

from runkernel.adapters.drive.ports import InferenceRequest, ModelReply, ToolRegistry
from runkernel.adapters.stores.contract import Store
from runkernel.adapters.stores.memory import MemoryStore
from runkernel.adapters.stores.sqlite import SqliteStore
from runkernel.adapters.worker.apps import RuntimeApp
from runkernel.adapters.worker.loop import Worker
from runkernel.kernel.policies import RecoveryMode
from runkernel.kernel.protocol import Activate
from runkernel.kernel.state import Ended, Message, is_terminal
from runkernel.kernel.values import EndCauseKind, Role
from runkernel.specs.checker import Verdict, check_commits
from runkernel.testing import (
    CountingIds,
    CrashAtEncounters,
    CrashingStore,
    ManualClock,
    ScriptedModel,
    ScriptedTool,
    SimulatedCrash,
    StepScript,
    World,
    crashing_tools,
    step,
)

RUNS = 3
LEASE = 30.0  # seconds of the store's clock; the test moves the clock past it before a restart
TOOLS = {"lookup": RecoveryMode.REPLAY, "reserve": RecoveryMode.RECONNECT, "pay": RecoveryMode.INDETERMINATE}
SCRIPT = (StepScript("booking", calls=tuple((tool, {"n": 1}) for tool in TOOLS)), StepScript("done", end=EndCauseKind.COMPLETED))
HANG = 60.0  # seconds: a barrier that never opens fails the case instead of hanging it


class _Together:
    """The model, whose first inference of each Run waits until every Run is at its own
    (first life only): all RUNS drives in flight at once, so their commits interleave."""

    def __init__(self, inner: ScriptedModel, together: threading.Barrier | None) -> None:
        self.inner, self.together = inner, together

    def infer(self, request: InferenceRequest) -> ModelReply:
        if self.together is not None and request.step == 1:
            self.together.wait(HANG)
        return self.inner.infer(request)


@attrs.frozen
class Case:
    """What one case saw."""

    fired: list[tuple[str, str]]
    in_flight_peak: int
    starts: int
    started_again: int


def _open(kind: str, tmp: Path, clock: ManualClock) -> Store:
    if kind == "memory":
        return MemoryStore(clock=clock)
    return SqliteStore(tmp / "runs.db", clock=clock)


def _app(world: World, together: threading.Barrier | None, grouped: bool) -> RuntimeApp:
    tools = ToolRegistry(
        {name: ScriptedTool(name, world, mode=mode, concurrent=grouped) for name, mode in TOOLS.items()}
    )
    model = _Together(ScriptedModel({f"r{n}": SCRIPT for n in range(RUNS)}, world), together)
    return RuntimeApp("sweep", model, tools)


def _case(kind: str, tmp: Path, targets: tuple[int, ...], grouped: bool) -> tuple[Case, int]:
    """One case: a worker that dies at the encounters ``targets`` (none: the crash-free
    count), then a worker started again; what it saw, and how many boundaries were passed."""
    tmp.mkdir(parents=True)
    clock = ManualClock(1000.0)
    store = _open(kind, tmp, clock)
    for n in range(RUNS):
        decision = step(None, Activate(f"t{n}", f"r{n}", 0, (Message(Role.USER, "book"),), "sweep"))
        assert decision.commit is not None
        store.append(decision.commit)
    world = World.new(store)
    plan = CrashAtEncounters(targets)
    app = _app(world, threading.Barrier(RUNS), grouped)
    crashing = RuntimeApp(app.name, app.model, crashing_tools(app.tools, plan))
    first = Worker(CrashingStore(store, plan), crashing, worker_id="life-1", lease_duration=LEASE, concurrency=RUNS,
                   ids=CountingIds("a"))
    died = False
    try:
        report = first.run_once()
    except SimulatedCrash:
        died = True
        report = first.report
    assert died == bool(targets), f"planned {targets}, fired {plan.fired}"
    # the outcomes committed before the crash: never started again
    finished = {
        call.operation_id
        for n in range(RUNS)
        for snapshot in (store.run(f"r{n}"),)
        if snapshot is not None and snapshot.batch is not None
        for call in snapshot.batch.calls
        if is_terminal(call.status)
    }
    before = len(world.executions)
    if died:
        clock.now += LEASE + 1  # the dead worker's leases expire by the store's clock
        again = Worker(store, _app(world, None, grouped), worker_id="life-2", lease_duration=LEASE, concurrency=RUNS,
                       ids=CountingIds("b"))
        again.run_once()
    _check(store, world, finished, before)
    starts = Counter(e.operation_id for e in world.executions)
    store.close()
    fired = [(b.value, p.value) for b, p in plan.fired]
    return Case(fired, report.in_flight_peak, len(world.executions), sum(n - 1 for n in starts.values())), plan.seen


def _check(store: Store, world: World, finished: set[str], before: int) -> None:
    calls: dict[str, tuple[str, object]] = {}  # each call's last status, and its operation id, by call id
    for n in range(RUNS):
        snapshot = store.run(f"r{n}")
        assert snapshot is not None and isinstance(snapshot.state, Ended), (f"r{n}", snapshot)
        commits = list(store.commits(f"t{n}"))
        assert check_commits(commits).verdict is Verdict.LEGAL, f"r{n}"
        for commit in commits:
            for call in commit.batch.calls if commit.batch is not None else ():
                calls[call.call_id] = (call.operation_id, call.status)
    assert all(e.committed_first for e in world.executions), "an executor started before its Executing commit (I5)"
    again = [e for e in world.executions[before:] if e.operation_id in finished]
    assert again == [], f"a call whose outcome was committed ran again: {again}"
    modes = {e.operation_id: TOOLS[e.tool] for e in world.executions}
    starts = Counter(e.operation_id for e in world.executions)
    twice = [
        op for op, count in starts.items()
        if count > 1 and modes[op] is not RecoveryMode.REPLAY and op not in world.not_found_answered
    ]
    assert twice == [], f"a reconnect or indeterminate call ran again with no not_found (I9): {twice}"
    assert len(calls) == RUNS * len(TOOLS), sorted(calls)
    assert all(is_terminal(status) for _, status in calls.values()), calls  # type: ignore[arg-type]
    assert set(starts) <= {op for op, _ in calls.values()}, "a start downstream belongs to no call"


@pytest.fixture(params=["memory", "sqlite"])
def kind(request: pytest.FixtureRequest) -> Iterator[str]:
    yield request.param


@pytest.mark.parametrize("grouped", [False, True], ids=["calls in order", "calls together"])
def test_a_worker_with_slots_killed_at_every_boundary_finishes_every_run_once(
    kind: str, grouped: bool, tmp_path: Path
) -> None:
    """``calls together``: the three tools are declared concurrent, so each Run's batch
    is a group whose tools run at once in threads of its slot's drive, beside the other
    slots'."""
    baseline, boundaries = _case(kind, tmp_path / "count", (), grouped)
    assert baseline.in_flight_peak == RUNS and baseline.started_again == 0
    cases = [_case(kind, tmp_path / f"crash-{index}", (index,), grouped)[0] for index in range(boundaries)]
    fired = Counter(where for case in cases for where in case.fired)
    print(
        f"\nslots crash sweep [{kind}, {'calls together' if grouped else 'calls in order'}]: {RUNS} Runs in {RUNS}"
        f" slots ({len(TOOLS)} calls each: replay, reconnect, "
        f"indeterminate), boundaries a crash-free worker passes {boundaries}, cases {len(cases)} (one crash each, "
        f"then a worker started again), crashes by boundary {dict(sorted(fired.items()))}, in-flight peak at the "
        f"crash {Counter(c.in_flight_peak for c in cases)}, starts {sum(c.starts for c in cases)}, "
        f"started again (replays, and reconnects after not_found) {sum(c.started_again for c in cases)}"
    )
    assert all(len(case.fired) == 1 for case in cases), "a case did not crash exactly once"
    assert max(c.in_flight_peak for c in cases) == RUNS
