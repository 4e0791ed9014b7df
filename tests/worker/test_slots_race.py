"""Many Runs in flight, under kills and stalls (Workers and leases, W1-W6): worker
processes with several slots each drive the race app's Runs over one store (SQLite and
PostgreSQL); the test SIGKILLs a worker with Runs in flight and starts another in its
place, and stalls one (every store call of it waits: ``race_worker.Pausable``) until
another worker took its Runs over, then lets it go and stops it (its late commits must be
refused). A stall is not a SIGSTOP: a process stopped at an arbitrary moment may hold a
SQLite write lock or PostgreSQL row locks and block every worker, or catch a slot between
its lease re-check and an unfenced tool's start (the planned stalls of
``test_fencing_workers``, whose tools fence, SIGSTOP a worker only outside its
transactions: ``held_points.stop``; ``test_worker_race`` with slots holds store calls
as here).

When each kill and stall comes is a count, never a time: the n-th commit acknowledged
across the workers. A kill lands wherever the killed worker's slots are then (a tool
running, a commit in flight), with several drives cut at once. It ends with every Run
Ended, every trace legal, no acknowledged commit lost, none written twice, and no second
executor start of a reconnect or indeterminate call.

The soak (``RUNKERNEL_SOAK=1``, not in CI: ``python -m pytest -m soak -s
tests/worker/test_slots_race.py``) runs 8 workers of 32 slots over 1,000 Runs on SQLite,
with more kills and stalls; both print their figures.
"""

from __future__ import annotations

import itertools
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import attrs
import pytest

from postgres_support import postgres_url
from race_audit import acknowledged, downstream
from race_audit import duplicated as duplicated_in
from race_audit import lost as lost_of
from runkernel.adapters.stores.contract import Store
from runkernel.adapters.stores.registry import open_store
from runkernel.kernel.protocol import Activate
from runkernel.kernel.state import Message
from runkernel.kernel.values import Role
from runkernel.specs.checker import Verdict, check_commits
from runkernel.testing import step

__all__ = ["postgres_url"]

ROOT = Path(__file__).resolve().parents[2]
LEASE = 1.0
HANG_GUARD = 300.0  # seconds: only so that a broken race fails instead of hanging CI
LOOK = 0.02  # the next look at the workers, not a wait for anything in particular


@attrs.frozen
class Size:
    workers: int
    slots: int
    runs: int
    kills: int
    stalls: int


CI = Size(workers=3, slots=4, runs=40, kills=4, stalls=2)
SOAK = Size(workers=8, slots=32, runs=1000, kills=16, stalls=8)


@attrs.define
class Worker:
    process: subprocess.Popen[bytes]
    worker_id: str
    acks: Path
    report: Path


class Race:
    """The worker processes over one store, and what they acknowledged."""

    def __init__(self, tmp: Path, url: str, size: Size) -> None:
        self.tmp, self.url, self.size = tmp, url, size
        self.ledger = tmp / "ledger.db"
        self.env = {
            **os.environ,
            "PYTHONPATH": os.pathsep.join([str(ROOT / "tests"), str(ROOT)]),
            "RUNKERNEL_DEMO_LEDGER": str(self.ledger),
            "RUNKERNEL_DEMO_TOOL_SECONDS": "0.2",
            "PYTHONFAULTHANDLER": "1",
        }
        self.generation = itertools.count(1)
        self.workers = [self.spawn() for _ in range(size.workers)]

    def spawn(self) -> Worker:
        worker_id = f"w-g{next(self.generation)}"
        acks, report = self.tmp / f"acks-{worker_id}.jsonl", self.tmp / f"report-{worker_id}.json"
        process = subprocess.Popen(
            [sys.executable, str(ROOT / "tests" / "race_worker.py"), self.url, str(acks), str(report), worker_id,
             str(LEASE), str(self.size.slots)],
            env=self.env,
            stdout=subprocess.DEVNULL,
            stderr=open(self.tmp / f"stderr-{worker_id}.txt", "wb"),
        )
        return Worker(process, worker_id, acks, report)

    def acknowledged(self) -> int:
        return sum(len(p.read_bytes().splitlines()) for p in self.tmp.glob("acks-*.jsonl"))

    def replace(self, index: int) -> None:
        self.workers[index] = self.spawn()

    def ready(self, worker: Worker) -> None:
        """Wait until its signal handlers are in place (SIGTERM, and SIGUSR1/2 to stall)."""
        ready = Path(f"{worker.report}.ready")
        began = time.monotonic()
        while worker.process.poll() is None and not ready.exists():
            assert time.monotonic() - began < HANG_GUARD, "hang guard: a worker never got ready"
            time.sleep(LOOK)

    def stop(self, worker: Worker) -> dict[str, int]:
        """SIGTERM once its handler is in place; its report."""
        self.ready(worker)
        worker.process.terminate()
        try:
            code = worker.process.wait(timeout=120)
        except subprocess.TimeoutExpired:
            worker.process.send_signal(signal.SIGABRT)  # PYTHONFAULTHANDLER: every thread's stack
            worker.process.wait(timeout=60)
            code = -1
        assert code == 0, (self.tmp / f"stderr-{worker.worker_id}.txt").read_text()
        report: dict[str, int] = json.loads(worker.report.read_text())
        return report


def _start_runs(store: Store, runs: int) -> list[str]:
    run_ids = [f"run-{index:04d}" for index in range(runs)]
    for index, run_id in enumerate(run_ids):
        decision = step(None, Activate(f"thread-{index:04d}", run_id, 0, (Message(Role.USER, "book"),), "race"))
        assert decision.commit is not None
        store.append(decision.commit)
    return run_ids


def _held_by(store: Store, run_ids: list[str], worker_id: str) -> list[str]:
    """The Runs whose valid lease ``worker_id`` holds, by the store's clock."""
    statuses = store.lease_statuses(run_ids)
    return [
        r for r, s in statuses.items()
        if s.lease is not None and not s.released and s.lease.worker_id == worker_id and s.lease.expires_at > s.now
    ]


def _taken_from(store: Store, run_ids: list[str], worker_id: str) -> bool:
    """Whether none of ``run_ids`` is ``worker_id``'s any more: another worker's now, or
    released or ended by it before it stalled (the stall comes at its next store call, a
    moment after the signal: an ending commit may land, its lease's release not)."""
    statuses = store.lease_statuses(run_ids)
    ended = {s.run_id for s in store.list_runs() if s.state == "ended"}
    return all(
        s.lease is not None and (s.lease.worker_id != worker_id or s.released or run_id in ended)
        for run_id, s in statuses.items()
    )


def race(tmp: Path, url: str, size: Size) -> None:
    store = open_store(url)
    run_ids = _start_runs(store, size.runs)
    race = Race(tmp, url, size)
    expected = size.runs * 8  # about 8 commits a Run: the points below fall inside the race
    # every point in the first half of the race, while most Runs are in flight
    kill_at = [expected * (n + 1) // (2 * (size.kills + size.stalls) + 2) for n in range(size.kills + size.stalls)]
    # the stalls last: each lasts a lease at least, while the Runs it held are taken over
    stall_at = set(kill_at[size.kills:])
    kills = stalls = 0
    held_at_stalls: list[int] = []
    refused: list[int] = []
    in_flight_at_kills: list[int] = []
    reports: list[dict[str, int]] = []
    began = time.monotonic()
    try:
        for point in kill_at:
            while race.acknowledged() < point:
                assert time.monotonic() - began < HANG_GUARD, f"hang guard: {race.acknowledged()} of {point} acknowledged"
                time.sleep(LOOK)
            # the worker with the most Runs in flight: a kill cuts all of them at once
            held_now = [len(_held_by(store, run_ids, w.worker_id)) for w in race.workers]
            index = held_now.index(max(held_now))
            victim = race.workers[index]
            if point in stall_at:
                race.ready(victim)
                victim.process.send_signal(signal.SIGUSR1)  # stalls at its next store call
                held = _held_by(store, run_ids, victim.worker_id)
                held_at_stalls.append(len(held))
                while held and not _taken_from(store, held, victim.worker_id):
                    assert time.monotonic() - began < HANG_GUARD, (
                        f"hang guard: the Runs {held} of stalled {victim.worker_id} were never taken over: "
                        f"{store.lease_statuses(held)}; not ended: {[s for s in store.list_runs() if s.state != 'ended']}"
                    )
                    time.sleep(LOOK)
                victim.process.send_signal(signal.SIGUSR2)
                report = race.stop(victim)
                reports.append(report)
                refused.append(report["conflicts"] + report["leases_lost"])
                stalls += 1
            else:
                in_flight_at_kills.append(len(_held_by(store, run_ids, victim.worker_id)))
                victim.process.kill()
                victim.process.wait()
                kills += 1
            race.replace(index)
        while not all(s.state == "ended" for s in store.list_runs()):
            assert time.monotonic() - began < HANG_GUARD, "hang guard: the Runs never all ended"
            time.sleep(LOOK)
    finally:
        for worker in race.workers:
            if worker.process.poll() is None and Path(f"{worker.report}.ready").exists():
                worker.process.send_signal(signal.SIGUSR2)  # a worker a failed test left stalled
        reports += [race.stop(w) for w in race.workers if w.process.poll() is None]
    took = time.monotonic() - began

    summaries = {s.run_id: s for s in store.list_runs()}
    assert sorted(summaries) == run_ids
    legal = sum(check_commits(list(store.commits(t))).verdict is Verdict.LEGAL for t in store.thread_ids())
    acks = acknowledged(tmp)
    lost = lost_of(store, acks)
    duplicated = sum(duplicated_in(store, t) for t in store.thread_ids())
    store.close()
    seen = downstream(race.ledger)
    repeated, fenced, replays = seen.repeated, seen.fenced, seen.replays
    peak = max((r["in_flight_peak"] for r in reports), default=0)
    print(
        f"\nslots race ({url.split(':')[0]}): workers {size.workers} x {size.slots} slots "
        f"(+{next(race.generation) - 1 - size.workers} restarts), runs {size.runs}, kills {kills} "
        f"(Runs in flight at each: {in_flight_at_kills}), stalls {stalls} (Runs held at each {held_at_stalls}, "
        f"refused commits after each {refused}), in-flight peak {peak}, acknowledged {len(acks)}, lost {lost}, "
        f"duplicated {duplicated}, reconnect/indeterminate starts after the first {repeated}, fenced {fenced}, "
        f"replays {replays}, legal traces {legal}, {took:.0f} s"
    )
    assert kills == size.kills and stalls == size.stalls
    assert legal == size.runs and all(s.state == "ended" for s in summaries.values())
    assert lost == 0 and duplicated == 0 and repeated == 0
    assert max(in_flight_at_kills) > 1, "no kill cut several drives at once"
    # a worker that stalled holding leases comes back to refusals (W3), one at least
    assert all(r >= 1 for r, held in zip(refused, held_at_stalls) if held), "a stalled worker's late commit was accepted"
    assert peak > 1, "no worker had several Runs in flight"


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
def test_workers_with_slots_race_with_kills_and_stalls_and_lose_or_repeat_nothing(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    url = f"sqlite:///{tmp_path / 'race.db'}" if kind == "sqlite" else request.getfixturevalue("postgres_url")
    race(tmp_path, url, CI)


@pytest.mark.soak
@pytest.mark.skipif(os.environ.get("RUNKERNEL_SOAK") != "1", reason="the soak runs by hand: RUNKERNEL_SOAK=1")
def test_soak_eight_workers_of_32_slots_over_1000_runs(tmp_path: Path) -> None:
    race(tmp_path, f"sqlite:///{tmp_path / 'soak.db'}", SOAK)
