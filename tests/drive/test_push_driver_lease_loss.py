"""W1 in push mode: the push driver (both shells) re-checks its lease after a call's
Executing commit and before it hands the ``RunCall`` to the host. A host whose lease is
lost exactly in between (its Executing commit won, then it was stopped or suspended past
its lease and another worker took the Run over) hands out nothing, so its tool never
starts, and stops with ``DriverStopped`` caused by ``LeaseLost``; the worker that took
the Run over hands out the replay under the next epoch."""

from __future__ import annotations

from pathlib import Path

import pytest

from push_host import POLICIES, SHELLS, Reply, World, make_shell, play
from runkernel.adapters.drive.driver import Driver
from runkernel.adapters.drive.actions import Done, DriverStopped, RunCall
from runkernel.adapters.stores.contract import LeaseLost
from runkernel.adapters.drive.lease_keeper import LeaseKeeper
from runkernel.kernel.state import CallExecuting, ThreadCommit
from runkernel.kernel.values import EndCauseKind
from runkernel.specs.checker import Verdict, check_commits
from runkernel.testing import CountingIds, ManualClock
from store_interleavings import open_stores

LEASE = 10.0  # seconds of store time
SCRIPT = {1: Reply("working", (("replay", {"n": 1}),)), 2: Reply("done", end=EndCauseKind.COMPLETED)}


@pytest.mark.parametrize("loss", ["stalled", "suspended"])
@pytest.mark.parametrize("store_kind", ["memory", "sqlite"])
@pytest.mark.parametrize("kind", SHELLS)
def test_a_push_driver_whose_lease_is_lost_after_its_executing_commit_hands_out_no_run_call(
    kind: str, store_kind: str, loss: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    store_clock, host_clock = ManualClock(1000.0), ManualClock(1000.0)
    store, rescuer_store = open_stores(store_kind, tmp_path, request, clock=store_clock)
    keeper = LeaseKeeper(store, "stalled", duration=LEASE, monotonic=host_clock)
    rescuer = LeaseKeeper(rescuer_store, "rescuer", duration=LEASE, monotonic=store_clock)

    def lose_the_lease(executing: ThreadCommit) -> None:
        # stalled (SIGSTOP): both clocks move past the lease, so the re-check first
        # tries to renew; suspended (the host's machine slept): its monotonic clock
        # stood still, the store's did not, so only the store's answer tells
        store_clock.now += LEASE + 1
        if loss == "stalled":
            host_clock.now += LEASE + 1
        rescuer.take("r1")

    store.after_executing = lose_the_lease
    world = World(SCRIPT)
    driver = make_shell(kind, store, ids=CountingIds("id"), leases=keeper)
    first = driver.start(["go"], thread_id="t1", run_id="r1")
    with pytest.raises(DriverStopped) as stopped:
        play(driver, first, world)  # answers Infer with the call; a RunCall would start the tool
    assert isinstance(stopped.value.__cause__, LeaseLost), stopped.value.__cause__
    assert store.after_executing is None, "the lease was not lost after the Executing commit"
    started_by_stalled_host = sum(len(attempts) for attempts in world.starts.values())
    assert started_by_stalled_host == 0, f"the host's tool started after its lease was lost: {world.starts}"
    assert driver.snapshot is None, "a stopped driver holds no belief"
    assert keeper.held("r1") is None
    state = rescuer_store.run("r1")
    assert state is not None and state.open_batch is not None
    (call,) = state.open_batch.calls
    assert call.status == CallExecuting(1), "the Executing commit won: only the start was withheld"

    # the worker that took the Run over replays the call under the next epoch
    taken_over = Driver(rescuer_store, POLICIES, leases=rescuer, ids=CountingIds("rescuer"))
    replay = taken_over.pick_up("r1")
    assert isinstance(replay, RunCall) and (replay.attempt, replay.lease_epoch) == (2, 2)
    assert isinstance(play(taken_over, replay, world), Done)
    assert world.starts == {call.operation_id: [2]}
    commits = list(rescuer_store.commits("t1"))
    assert check_commits(commits).verdict is Verdict.LEGAL
    print(
        f"W1 push [{kind}/{store_kind}/{loss}]: executing commits by the stalled host 1, its lease checks "
        f"{keeper.checks}, its tool starts {started_by_stalled_host}; the rescuer's starts {world.starts}, "
        f"commits {len(commits)}"
    )
