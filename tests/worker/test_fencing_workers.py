"""W5 with real worker processes (Workers and leases): a worker SIGSTOPped
between its lease re-check and its tool's effect, past its lease, starts nothing the
downstream accepts once another worker moved the Run past the call.

Worker processes drive Runs of one SQLite file (``fencing_app``: a reconnect tool, then
an indeterminate one, over one downstream that keeps the highest epoch per operation).
Each stall is planned (``held_points``): the worker that reaches the N-th start of a
tool holds there, after its lease re-check and before the tool's work, and the test
SIGSTOPs it (a new worker takes its place). Only once the store shows the Run moved
past the call, under another worker's lease (the call terminal: a reconnect call
restarted after ``not_found`` and completed, an indeterminate one ``outcome_unknown``;
or the Run ended), is the stalled worker continued: its start then reaches the
downstream, which must refuse it. Every precondition is reached by construction; the
lease is short (1 s) and nothing is asserted about time (the cap is a hang guard).

With one slot a worker and with 4: a stopped worker then has other Runs in flight
(counted), some held at points too, and is stopped outside its transactions
(``held_points.stop``); it is continued once every Run it is held on moved past.
"""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from held_points import Arrival, HeldPoints, Process
from stopping import stop
from runkernel.adapters.stores.sqlite import SqliteStore
from runkernel.kernel.protocol import Activate
from runkernel.kernel.state import CallCompleted, CallIndeterminate, Ended, Message
from runkernel.kernel.values import Role
from runkernel.specs.checker import Verdict, check_commits
from runkernel.testing import step

ROOT = Path(__file__).resolve().parents[2]
WORKERS = 3
RUNS = 12
#: planned stalls per tool: the first STALLS starts of each (every Run starts each once)
STALLS = 10
TOOLS = ("reserve", "pay")
LEASE = 1.0
HANG_GUARD = 240.0  # seconds: only so that a broken test fails instead of hanging CI
LOOK = 0.02  # the next look at the workers, not a wait for anything in particular


class Pool:
    """The worker processes: spawned, and each stopped cleanly by SIGTERM at the end."""

    def __init__(self, tmp: Path, points: HeldPoints, slots: int) -> None:
        self.tmp, self.slots = tmp, slots
        self.store = tmp / "runs.db"
        self.ledger = tmp / "ledger.db"
        self.env = {
            **os.environ,
            "PYTHONPATH": os.pathsep.join([str(ROOT / "tests"), str(ROOT)]),
            "RUNKERNEL_FENCING_LEDGER": str(self.ledger),
            "PYTHONFAULTHANDLER": "1",
            **points.env(),
        }
        self.spawned = 0
        self.ready: dict[int, Path] = {}
        self.worker_ids: dict[int, str] = {}

    def spawn(self) -> Process:
        self.spawned += 1
        worker_id = f"w{self.spawned}"
        proc = subprocess.Popen(
            [sys.executable, str(ROOT / "tests" / "fencing_worker.py"), str(self.store), worker_id, str(LEASE),
             str(self.slots)],
            env=self.env,
            stdout=subprocess.DEVNULL,
            stderr=open(self.tmp / f"stderr-{worker_id}.txt", "wb"),
        )
        self.ready[proc.pid] = self.tmp / f"{worker_id}.ready"
        self.worker_ids[proc.pid] = worker_id
        return proc

    def terminate(self, proc: Process, began: float) -> int:
        while proc.poll() is None and not self.ready[proc.pid].exists():  # its SIGTERM handler
            assert time.monotonic() - began < HANG_GUARD, "hang guard: a worker never got ready"
            time.sleep(LOOK)
        if proc.poll() is None:
            proc.send_signal(signal.SIGCONT)
            proc.terminate()
        return proc.wait(timeout=60)


def _start_runs(path: Path) -> None:
    store = SqliteStore(path)
    for index in range(RUNS):
        decision = step(None, Activate(f"thread-{index:02d}", f"run-{index:02d}", 0, (Message(Role.USER, "book"),), "fencing"))
        assert decision.commit is not None
        store.append(decision.commit)
    store.close()


def _leased_by(store: SqliteStore, worker_id: str) -> int:
    """How many Runs ``worker_id`` holds a valid lease on, by the store's clock."""
    statuses = store.lease_statuses([s.run_id for s in store.list_runs()])
    return sum(
        1 for s in statuses.values()
        if s.lease is not None and s.lease.worker_id == worker_id and not s.released and s.lease.expires_at > s.now
    )


def _tool(arrival: Arrival) -> str:
    return arrival.point.split(":")[0]


def moved_past(store: SqliteStore, arrival: Arrival) -> bool:
    """Whether the store shows the held worker's Run moved past its call: Ended, the
    call terminal, or the batch of a later step (its writer another lease: the held
    worker is stopped and its lease expired)."""
    snapshot = store.run(arrival.run_id)
    assert snapshot is not None
    if isinstance(snapshot.state, Ended):
        return True
    batch = snapshot.batch
    call = next((c for c in batch.calls if c.tool == _tool(arrival)), None) if batch is not None else None
    return call is None or isinstance(call.status, (CallCompleted, CallIndeterminate))


def late_start(ledger: Path, arrival: Arrival) -> bool | None:
    """Whether the downstream accepted the held worker's start, once it made it."""
    if not ledger.exists():
        return None
    db = sqlite3.connect(ledger, timeout=30)
    try:
        row = db.execute(
            "SELECT accepted FROM starts WHERE run_id = ? AND tool = ? AND epoch = ?",
            (arrival.run_id, _tool(arrival), arrival.lease_epoch),
        ).fetchone()
    finally:
        db.close()
    return None if row is None else bool(row[0])


@pytest.mark.parametrize("slots", [1, 4], ids=["1-slot", "4-slots"])
def test_stalled_workers_late_starts_are_refused_downstream(tmp_path: Path, slots: int) -> None:
    planned = [f"{tool}:before:{n}" for tool in TOOLS for n in range(1, STALLS + 1)]
    points = HeldPoints(tmp_path / "points", planned)
    pool = Pool(tmp_path, points, slots)
    _start_runs(pool.store)
    live = [pool.spawn() for _ in range(WORKERS)]
    watcher = SqliteStore(pool.store, create=False)
    stalled: list[tuple[Arrival, Process]] = []
    continued: list[tuple[Arrival, Process]] = []
    stopped: set[int] = set()  # the pids of the workers stopped now
    inside = 0  # how often a worker was found stopped inside a transaction and tried again
    late: dict[str, list[bool]] = {tool: [] for tool in TOOLS}
    stopped_exits: list[int] = []
    held_at_once: list[int] = []  # per stall, how many of the worker's slots were held at a point
    leased_at_stops: list[int] = []  # per stall, the Runs the stopped worker held leases on
    began = time.monotonic()

    def quiet() -> bool:
        runs = watcher.list_runs()
        return len(runs) == RUNS and all(r.state == "ended" for r in runs)

    try:
        while points.missing() or stalled or continued or not quiet():
            assert time.monotonic() - began < HANG_GUARD, f"hang guard: never reached {points.missing()}"
            for arrival in points.arrivals():
                # a worker with several slots may be held at several points (a stopped one
                # reached them before it stopped; a continued one, before it shut down)
                proc = next(p for p in live + [p for _, p in stalled + continued] if p.pid == arrival.pid)
                if proc.pid not in stopped:
                    inside += stop(proc)  # held after its lease re-check, before the effect
                    stopped.add(proc.pid)
                    held_at_once.append(0)
                    leased_at_stops.append(_leased_by(watcher, pool.worker_ids[proc.pid]))
                held_at_once[-1] += 1
                points.release(arrival)  # seen once it is continued
                if proc in live:
                    live[live.index(proc)] = pool.spawn()
                stalled.append((arrival, proc))
            for arrival, proc in list(stalled):
                if moved_past(watcher, arrival):
                    stalled.remove((arrival, proc))
                    continued.append((arrival, proc))
                    if all(p is not proc for _, p in stalled):  # every Run it holds at a point moved past
                        proc.send_signal(signal.SIGCONT)
                        stopped.discard(proc.pid)
            for arrival, proc in list(continued):
                accepted = late_start(pool.ledger, arrival)
                if accepted is not None and proc.poll() is not None and proc.pid not in stopped:  # it exits after that drive
                    continued.remove((arrival, proc))
                    late[_tool(arrival)].append(accepted)
                    stopped_exits.append(proc.returncode)
            time.sleep(LOOK)
    finally:
        for _arrival, proc in stalled + continued:
            proc.send_signal(signal.SIGCONT)
        for point in planned:  # a worker held at a point never heard would never finish its SIGTERM
            (points.directory / f"{point}.go").touch()
        exits = [pool.terminate(proc, began) for proc in live]
        exits += [pool.terminate(proc, began) for _arrival, proc in stalled + continued]

    summaries = watcher.list_runs()
    legal = sum(check_commits(list(watcher.commits(t))).verdict is Verdict.LEGAL for t in watcher.thread_ids())
    watcher.close()
    db = sqlite3.connect(pool.ledger)
    twice = db.execute(
        "SELECT count(*) FROM (SELECT operation_id FROM starts WHERE accepted = 1 GROUP BY operation_id HAVING count(*) > 1)"
    ).fetchone()[0]
    refused = db.execute("SELECT count(*) FROM starts WHERE accepted = 0").fetchone()[0]
    db.close()
    for tool in TOOLS:
        print(
            f"{tool} ({'reconnect' if tool == 'reserve' else 'indeterminate'}): {len(late[tool])} workers stopped "
            f"between the lease re-check and the effect past their lease, each continued after another worker "
            f"moved its Run past the call; late starts accepted downstream: {sum(late[tool])}"
        )
    print(
        f"workers: {WORKERS} (+{pool.spawned - WORKERS} spawned in place of stopped ones), runs {RUNS} "
        f"({sum(s.state == 'ended' for s in summaries)} ended, {legal} legal traces), starts refused downstream "
        f"{refused}, operations started twice {twice}, worker exits {sorted(set(exits + stopped_exits))}; "
        f"{slots} slots a worker: Runs leased by the worker at each stall {leased_at_stops}, points held at once "
        f"per stall {held_at_once}, stops tried again (inside a transaction) {inside}"
    )
    assert [len(late[tool]) for tool in TOOLS] == [STALLS, STALLS]
    assert [sum(late[tool]) for tool in TOOLS] == [0, 0]
    assert twice == 0
    assert legal == RUNS and all(s.state == "ended" for s in summaries)
    assert set(exits + stopped_exits) == {0}, "a worker did not stop cleanly on SIGTERM"
    assert slots == 1 or max(leased_at_stops) > 1, "no stall stopped a worker with several Runs in flight"
