"""W1 with a lease that is still valid but has less left than the safety margin: nothing
starts. Through a pull-mode ``Runtime``, a push-mode ``Driver`` (both shells) and a
``Worker`` with slots (IN_FLIGHT Runs in flight at once, each under the margin), on the
memory store, SQLite and PostgreSQL.

A worker's lease is brought under its margin in the instant before its Executing commit
is written, and no renewal falls due (the worker's monotonic clock stands still): the
commit itself is legal (the lease is valid), the call is Executing{1} in the store, and
the W1 re-check that follows must refuse to start the executor. On the memory store and
SQLite the store's clock is the test's; PostgreSQL judges leases by the server's clock,
so there the lease is long and the margin nearly as long, and the test waits on the
server's clock until the lease has less left than the margin (a fraction of a second),
with the lease still valid for many seconds after: the outcome never depends on load.
On PostgreSQL the re-check is first answered from the figure the Executing commit read
in its own transaction (``lease_left_in_commit``): that figure is under the margin, so
the store is asked, and the store refuses.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, cast

import pytest

from postgres_support import postgres_url
from push_host import SHELLS, Reply, World, make_shell, play
from runkernel import CallRequest
from runkernel.adapters.drive.actions import DriverStopped, RunCall
from runkernel.adapters.drive.lease_keeper import LeaseKeeper
from runkernel.adapters.drive.ports import InferenceRequest, ModelReply, Returned, StatusReply, ToolRegistry
from runkernel.adapters.drive.runtime import Runtime
from runkernel.adapters.stores.contract import Lease, LeaseLost, Settlement, Store
from runkernel.adapters.worker.apps import RuntimeApp
from runkernel.adapters.worker.loop import Worker
from runkernel.kernel.policies import RecoveryMode, ToolPolicy, ToolRecoveryPolicy
from runkernel.kernel.protocol import Activate, OperationStatus
from runkernel.kernel.state import CallExecuting, Message, RunSnapshot, ThreadCommit
from runkernel.kernel.values import EndCauseKind, Role
from runkernel.specs.checker import Verdict, check_commits
from runkernel.testing import CountingIds, ManualClock, step
from store_interleavings import STORES, open_stores, starts_a_call

__all__ = ["postgres_url"]

#: seconds of store time a lease is granted for, and how much of it must be left when an
#: executor starts: on PostgreSQL the lease passes under the margin LEASE - MARGIN seconds
#: after its grant, and stays valid MARGIN seconds more
LEASE = 30.0
MARGIN = 29.5
#: what the lease has left when its Executing commit is written: valid, under the margin
LEFT = MARGIN - 0.2
SCRIPT = {1: Reply("working", (("replay", {"n": 1}),)), 2: Reply("done", end=EndCauseKind.COMPLETED)}
REPLAY = ToolPolicy(ToolRecoveryPolicy(RecoveryMode.REPLAY, max_attempts=3))
HANG_GUARD = 120.0  # seconds: only so that a broken test fails instead of hanging


class _Lease:
    """The lease of the worker under test, brought under its margin just before its
    Executing commit; what the commit's own check read of it is kept (PostgreSQL)."""

    def __init__(self, store_kind: str, tmp_path: Path, request: pytest.FixtureRequest) -> None:
        self.kind = store_kind
        self.clock = ManualClock(1000.0)  # the store's clock, but on PostgreSQL
        if store_kind == "postgres":
            self.store, self.rival = open_stores(store_kind, tmp_path, request)
        else:
            self.store, self.rival = open_stores(store_kind, tmp_path, request, clock=self.clock)
        # no renewal ever falls due: this worker's monotonic clock stands still
        self.keeper = LeaseKeeper(self.store, "w1", duration=LEASE, margin=MARGIN, monotonic=lambda: 0.0)
        self.store.before_executing = self._under_the_margin
        self.store.after_executing = self._seen_by_the_commit
        self.executing: list[ThreadCommit] = []
        self.left_in_commit: list[float | None] = []

    def _under_the_margin(self, commit: ThreadCommit) -> None:
        lease = self.keeper.held(commit.run_id)
        assert lease is not None
        if self.kind != "postgres":
            self.clock.now = lease.expires_at - LEFT
            return
        while True:  # the server's clock: wait (a fraction of a second) until it is under
            left = lease.expires_at - self.store.store_time()
            if left <= LEFT:
                return
            time.sleep(left - LEFT + 0.01)

    def _seen_by_the_commit(self, commit: ThreadCommit) -> None:
        self.executing.append(commit)
        lease = self.keeper.held(commit.run_id)
        assert lease is not None
        told = getattr(self.store, "lease_left_in_commit", None)
        self.left_in_commit.append(None if told is None else told(lease))

    def held_by_the_store(self) -> Lease | None:
        """The Run's lease as the store holds it now (still valid: the worker's)."""
        return self.rival.current_lease("r1")


def _assert_nothing_started(lease: _Lease, held: Lease, stopped: BaseException | None, starts: int) -> int:
    """What every mode must show; returns the number of commits."""
    assert starts == 0, "the executor started with less lease left than the margin"
    assert isinstance(stopped, LeaseLost), repr(stopped)
    assert "margin" in str(stopped), str(stopped)
    assert lease.store.before_executing is None and len(lease.executing) == 1, "the lease was not brought under"
    if lease.kind == "postgres":
        (figure,) = lease.left_in_commit
        # the commit's own check read the lease under the margin, and still valid
        assert figure is not None and 0 < figure < MARGIN, figure
    assert (lease.keeper.checks, lease.keeper.checks_in_commit) == (1, 0), "the store was asked, and said no"
    assert lease.keeper.held("r1") is None, "the worker dropped the lease it may not use"
    assert lease.held_by_the_store() == held, "the lease is still valid: only the start was withheld"
    state = lease.rival.run("r1")
    assert state is not None and state.open_batch is not None
    (call,) = state.open_batch.calls
    assert call.status == CallExecuting(1), "nothing claims the call ran"
    commits = list(lease.rival.commits("t1"))
    assert commits[-1] == lease.executing[0], "nothing was committed after the Executing commit"
    assert check_commits(commits).verdict is Verdict.LEGAL
    return len(commits)


# --- pull mode -----------------------------------------------------------------------


class _Model:
    def infer(self, request: InferenceRequest) -> ModelReply:
        reply = SCRIPT[request.step]
        return ModelReply(reply.content, tuple(CallRequest(t, a) for t, a in reply.calls), reply.end)


class _Tool:
    policy = REPLAY

    def __init__(self) -> None:
        self.starts: list[int] = []

    def run(self, invocation: RunCall) -> Returned:
        self.starts.append(invocation.attempt)
        return Returned({"ran": invocation.attempt})

    def status(self, operation_id: str, lease_epoch: int | None) -> StatusReply:
        return StatusReply(OperationStatus.NOT_FOUND)


@pytest.mark.parametrize("store_kind", STORES)
def test_a_runtime_starts_no_tool_while_its_lease_has_less_left_than_the_margin(
    store_kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    lease = _Lease(store_kind, tmp_path, request)
    tool = _Tool()
    runtime = Runtime(lease.store, _Model(), ToolRegistry({"replay": tool}), leases=lease.keeper, ids=CountingIds("id"))
    stopped: BaseException | None = None
    held: Lease | None = None
    drive = runtime.begin_start("t1", "r1", (Message(Role.USER, "go"),))
    try:
        while not drive.step():
            held = lease.keeper.held("r1") or held
    except LeaseLost as error:
        stopped = error
    assert held is not None
    commits = _assert_nothing_started(lease, held, stopped, len(tool.starts))
    print(
        f"W1 margin, pull [{store_kind}]: lease {LEASE} s, margin {MARGIN} s, left at the Executing commit "
        f"{lease.left_in_commit[0] if lease.left_in_commit else None}; tool starts {len(tool.starts)}; "
        f"lease checks {lease.keeper.checks} (answered by the commit {lease.keeper.checks_in_commit}); commits {commits}"
    )


# --- push mode -----------------------------------------------------------------------


@pytest.mark.parametrize("store_kind", STORES)
@pytest.mark.parametrize("kind", SHELLS)
def test_a_push_driver_hands_out_no_run_call_while_its_lease_has_less_left_than_the_margin(
    kind: str, store_kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    lease = _Lease(store_kind, tmp_path, request)
    world = World(SCRIPT)
    driver = make_shell(kind, lease.store, ids=CountingIds("id"), leases=lease.keeper)
    first = driver.start(["go"], thread_id="t1", run_id="r1")
    held = lease.keeper.held("r1")
    assert held is not None
    stopped: Exception | None = None
    try:
        play(driver, first, world)  # answers Infer with the call; a RunCall would start the tool
    except Exception as error:  # what was started is asserted first, then how driving stopped
        stopped = error
    starts = sum(len(attempts) for attempts in world.starts.values())
    assert starts == 0, f"the host's tool started with less lease left than the margin: {world.starts}"
    assert isinstance(stopped, DriverStopped), repr(stopped)
    commits = _assert_nothing_started(lease, held, stopped.__cause__, starts)
    assert driver.snapshot is None, "a stopped driver holds no belief"
    print(
        f"W1 margin, push [{kind}/{store_kind}]: lease {LEASE} s, margin {MARGIN} s, left at the Executing "
        f"commit {lease.left_in_commit[0]}; RunCalls handed out {starts}; lease checks {lease.keeper.checks} "
        f"(answered by the commit {lease.keeper.checks_in_commit}); commits {commits}"
    )


# --- a worker with slots: several Runs in flight, each under the margin ----------------

#: Runs a worker of as many slots holds in flight at once, each brought under the margin
IN_FLIGHT = 4


class _EveryRunUnder:
    """The worker's store, and each slot's (``reopen``): an Executing commit first waits
    until every Run is leased (all in flight at once), then brings every lease under the
    margin: on the memory store and SQLite the store's clock stood still while the leases
    were granted, so one setting serves them all; on PostgreSQL the server's clock passes
    under the latest grant (each lease then has less than LEFT left, valid for seconds)."""

    def __init__(self, store: Store, lease: _Lease, run_ids: list[str]) -> None:
        self.store, self.lease, self.run_ids = store, lease, run_ids

    def reopen(self) -> Store:
        return cast(Store, _EveryRunUnder(self.store.reopen(), self.lease, self.run_ids))

    def append(self, commit: ThreadCommit, settle: Settlement | None = None, **options: Any) -> RunSnapshot:
        if starts_a_call(commit):
            self._every_lease_under()
        stored = self.store.append(commit, settle, **options)
        if starts_a_call(commit):
            self.lease.executing.append(commit)
        return stored

    def _every_lease_under(self) -> None:
        began = time.monotonic()
        while True:
            statuses = self.lease.rival.lease_statuses(self.run_ids)
            leases = [s.lease for s in statuses.values() if s.lease is not None and not s.released]
            if len(leases) == len(self.run_ids):
                break
            assert time.monotonic() - began < HANG_GUARD, f"hang guard: not every Run leased: {statuses}"
            time.sleep(0.01)  # the next look, not a wait for anything in particular
        latest = max(lease.expires_at for lease in leases)
        if self.lease.kind != "postgres":
            self.lease.clock.now = max(self.lease.clock.now, latest - LEFT)
            return
        while (left := latest - self.lease.rival.store_time()) > LEFT:
            time.sleep(left - LEFT + 0.01)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.store, name)


@pytest.mark.parametrize("store_kind", STORES)
def test_a_worker_with_slots_starts_no_tool_of_any_run_in_flight_under_the_margin(
    store_kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    lease = _Lease(store_kind, tmp_path, request)
    lease.store.before_executing = lease.store.after_executing = None  # the worker's own leases, brought under here
    run_ids = [f"r{n}" for n in range(IN_FLIGHT)]
    for n, run_id in enumerate(run_ids):
        decision = step(None, Activate(f"t{n}", run_id, 0, (Message(Role.USER, "go"),), "margin"))
        assert decision.commit is not None
        lease.rival.append(decision.commit)
    tool = _Tool()
    app = RuntimeApp("margin", _Model(), ToolRegistry({"replay": tool}))
    worker = Worker(
        cast(Store, _EveryRunUnder(lease.store, lease, run_ids)), app, worker_id="w1", lease_duration=LEASE,
        lease_margin=MARGIN, monotonic=lambda: 0.0, concurrency=IN_FLIGHT, ids=CountingIds("id"),
    )
    report = worker.run_once()
    statuses = lease.rival.lease_statuses(run_ids)
    calls = []
    for n, run_id in enumerate(run_ids):
        state = lease.rival.run(run_id)
        assert state is not None and state.open_batch is not None
        calls += [call.status for call in state.open_batch.calls]
        assert check_commits(list(lease.rival.commits(f"t{n}"))).verdict is Verdict.LEGAL
    print(
        f"W1 margin, worker with {IN_FLIGHT} slots [{store_kind}]: lease {LEASE} s, margin {MARGIN} s; Runs "
        f"{len(run_ids)}, in-flight peak {report.in_flight_peak}, Executing commits {len(lease.executing)}, tool "
        f"starts {len(tool.starts)}, leases lost {report.leases_lost}, failures {report.failures}"
    )
    assert tool.starts == [], "an executor started with less lease left than the margin"
    assert report.in_flight_peak == IN_FLIGHT, "the Runs were not in flight at once"
    assert len(lease.executing) == IN_FLIGHT and report.leases_lost == IN_FLIGHT and report.failures == 0
    assert calls == [CallExecuting(1)] * IN_FLIGHT, "nothing claims a call ran"
    # each lease is still the worker's and valid: only the starts were withheld
    assert all(s.lease is not None and s.lease.worker_id == "w1" and not s.released and s.lease.expires_at > s.now
               for s in statuses.values()), statuses
