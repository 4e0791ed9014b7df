"""The race (issue 9): worker processes over many Runs of one SQLite file, SIGKILLed at
seeded random moments and restarted, SIGSTOPped past their lease and then continued.

It ends with every Run Ended or Awaiting, every exported trace legal, no acknowledged
commit lost, no commit written twice, and no executor start of a reconnect or
indeterminate call after its first (counted in the tools' downstream record, which also
refuses starts whose fencing token is stale). Budgets are counts; the lease is short
(1 s) but nothing is asserted about time: the cap on the whole race is a hang guard.
"""

from __future__ import annotations

import json
import os
import random
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

from runkernel.adapters.sqlite_store import SqliteStore
from runkernel.conformance.runs import step
from runkernel.kernel.codec import commit_to_json
from runkernel.kernel.protocol import Activate
from runkernel.kernel.state import Message
from runkernel.kernel.values import Role
from runkernel.specs.checker import Verdict, check_commits

ROOT = Path(__file__).resolve().parents[1]
WORKERS = 4
RUNS = 60
LEASE = 1.0
KILLS = 10
STALLS = 3
HANG_GUARD = 240.0  # seconds: only so that a broken race fails instead of hanging CI


class Race:
    def __init__(self, tmp: Path, seed: int) -> None:
        self.tmp = tmp
        self.random = random.Random(seed)
        self.store_path = tmp / "race.db"
        self.ledger = tmp / "ledger.db"
        self.env = {
            **os.environ,
            "PYTHONPATH": os.pathsep.join([str(ROOT / "tests"), str(ROOT)]),
            "RUNKERNEL_DEMO_LEDGER": str(self.ledger),
            "RUNKERNEL_DEMO_TOOL_SECONDS": "0.05",
        }
        self.procs: dict[int, subprocess.Popen[bytes]] = {}
        self.ready: dict[int, Path] = {}
        self.stalled: list[tuple[subprocess.Popen[bytes], float]] = []
        self.generation = 0
        self.kills = 0
        self.stalls = 0

    def spawn(self, slot: int) -> None:
        self.generation += 1
        worker_id = f"w{slot}-g{self.generation}"
        self.ready[slot] = self.tmp / f"report-{worker_id}.json.ready"
        self.procs[slot] = subprocess.Popen(
            [
                sys.executable,
                str(ROOT / "tests" / "race_worker.py"),
                str(self.store_path),
                str(self.tmp / f"acks-{worker_id}.jsonl"),
                str(self.tmp / f"report-{worker_id}.json"),
                worker_id,
                str(LEASE),
            ],
            env=self.env,
            stdout=subprocess.DEVNULL,
            stderr=open(self.tmp / f"stderr-{worker_id}.txt", "wb"),
        )

    def holding(self, store: SqliteStore) -> list[int]:
        """The slots whose worker holds a valid lease now (a stall of one of them is
        the interesting one: it wakes up after another worker may have taken over)."""
        now = store.store_time()
        rows = store._db.execute(
            "SELECT worker_id FROM leases WHERE released = 0 AND expires_at > ?", (now,)
        ).fetchall()
        current = {f"w{slot}-g": slot for slot in self.procs}
        return sorted({slot for (worker_id,) in rows for prefix, slot in current.items() if worker_id.startswith(prefix)})

    def plan(self) -> list[tuple[int, str]]:
        """The disturbances, at seeded points of progress (commits written so far, out
        of about 9 per Run), so that they land while the Runs are driven whatever the
        machine's speed."""
        kinds = ["kill"] * KILLS + ["stall"] * STALLS
        self.random.shuffle(kinds)
        points = sorted(self.random.sample(range(RUNS + 20, RUNS * 8), len(kinds)))
        return list(zip(points, kinds))

    def kill(self) -> None:
        slot = self.random.randrange(WORKERS)
        proc = self.procs[slot]
        proc.kill()
        proc.wait()
        self.kills += 1
        self.spawn(slot)

    def stall(self, store: SqliteStore) -> bool:
        """SIGSTOP a worker that holds a lease; ``wake`` sends SIGCONT once the stall
        outlasted that lease. False if no worker holds one at this moment."""
        holders = [s for s in self.holding(store) if all(p is not self.procs[s] for p, _ in self.stalled)]
        if not holders:
            return False
        proc = self.procs[self.random.choice(holders)]
        proc.send_signal(signal.SIGSTOP)
        self.stalled.append((proc, time.monotonic() + LEASE * 1.6))  # another worker may take over
        self.stalls += 1
        return True

    def wake(self, everyone: bool = False) -> None:
        now = time.monotonic()
        for proc, until in list(self.stalled):
            if everyone or now >= until:
                proc.send_signal(signal.SIGCONT)
                self.stalled.remove((proc, until))

    def quiet(self, store: SqliteStore) -> bool:
        runs = store.list_runs()
        return len(runs) == RUNS and all(r.state in ("ended", "awaiting") for r in runs)


def _start_runs(path: Path) -> list[str]:
    store = SqliteStore(path)
    run_ids = []
    for index in range(RUNS):
        run_id = f"run-{index:03d}"
        decision = step(None, Activate(f"thread-{index:03d}", run_id, 0, (Message(Role.USER, "book"),), "race"))
        assert decision.commit is not None
        store.append(decision.commit)
        run_ids.append(run_id)
    store.close()
    return run_ids


def test_workers_race_with_kills_and_stalls_and_lose_or_repeat_nothing(tmp_path: Path) -> None:
    race = Race(tmp_path, seed=int(os.environ.get("RUNKERNEL_RACE_SEED", "9")))
    run_ids = _start_runs(race.store_path)
    for slot in range(WORKERS):
        race.spawn(slot)
    watcher = SqliteStore(race.store_path, create=False)
    plan = race.plan()
    began = time.monotonic()
    try:
        while not race.quiet(watcher) or race.stalled:
            assert time.monotonic() - began < HANG_GUARD, "hang guard: the race did not settle"
            time.sleep(0.02)
            race.wake()
            written = sum(s.version for s in watcher.list_runs())
            while plan and written >= plan[0][0]:
                kind = plan[0][1]
                if kind == "kill":
                    race.kill()
                    plan.pop(0)
                elif race.stall(watcher):
                    plan.pop(0)
                else:  # nobody holds a lease this instant: the stall goes after the rest
                    plan.append((max(written + 5, plan[-1][0]), plan.pop(0)[1]))
                    break
    finally:
        race.wake(everyone=True)
        for slot, proc in race.procs.items():
            while proc.poll() is None and not race.ready[slot].exists():  # its SIGTERM handler
                assert time.monotonic() - began < HANG_GUARD, "hang guard: a worker never got ready"
                time.sleep(0.02)
            if proc.poll() is None:
                proc.send_signal(signal.SIGCONT)
                proc.terminate()
        exits = [proc.wait(timeout=60) for proc in race.procs.values()]
    assert exits == [0] * WORKERS, f"a worker did not stop cleanly on SIGTERM: {exits}"

    # every Run quiet, every trace legal
    summaries = {s.run_id: s for s in watcher.list_runs()}
    assert sorted(summaries) == run_ids
    assert all(s.state in ("ended", "awaiting") for s in summaries.values())
    legal = sum(check_commits(list(watcher.commits(t))).verdict is Verdict.LEGAL for t in watcher.thread_ids())
    assert legal == RUNS

    # 0 lost: every commit a worker saw acknowledged is in the store, written by it
    acks = [
        json.loads(line)
        for path in tmp_path.glob("acks-*.jsonl")
        for line in path.read_text().splitlines()
        if line.strip()
    ]
    lost = 0
    for thread_id, version, worker_id in acks:
        writer = watcher.writer_of(thread_id, version)
        lost += writer is None or writer.worker_id != worker_id
    # 0 duplicated: no commit repeats the one before it (a write made twice)
    duplicated = 0
    takeovers = 0
    for thread_id in watcher.thread_ids():
        lines = [commit_to_json(c) for c in watcher.commits(thread_id)]
        for before, after in zip(lines, lines[1:]):
            same = {k: v for k, v in before.items() if k != "version"} == {k: v for k, v in after.items() if k != "version"}
            duplicated += same
        writers = [watcher.writer_of(thread_id, v) for v in range(2, len(lines) + 1)]
        takeovers += sum(
            1 for a, b in zip(writers, writers[1:]) if a is not None and b is not None and a.worker_id != b.worker_id
        )
    # 0 executor starts of a reconnect or indeterminate call after its first
    ledger = sqlite3.connect(race.ledger)
    repeated = ledger.execute(
        "SELECT count(*) FROM (SELECT operation_id FROM starts WHERE tool IN ('reserve', 'pay') AND refused = 0 "
        "GROUP BY operation_id HAVING count(*) > 1)"
    ).fetchone()[0]
    fenced = ledger.execute("SELECT count(*) FROM starts WHERE refused = 1").fetchone()[0]
    replays = ledger.execute(
        "SELECT count(*) - count(DISTINCT operation_id) FROM starts WHERE tool = 'lookup' AND refused = 0"
    ).fetchone()[0]
    ledger.close()
    reports = [json.loads(p.read_text()) for p in tmp_path.glob("report-*.json")]
    conflicts = sum(r["conflicts"] for r in reports)
    leases_lost = sum(r["leases_lost"] for r in reports)
    ended = sum(s.state == "ended" for s in summaries.values())
    watcher.close()
    print(
        f"race: workers {WORKERS} (+{race.kills} restarts), runs {RUNS} ({ended} ended), kills {race.kills}, "
        f"stalls {race.stalls}, take-overs {takeovers}, conflicts {conflicts}, leases lost {leases_lost} "
        f"(from {len(reports)} clean exits), acknowledged {len(acks)}, lost {lost}, duplicated {duplicated}, "
        f"reconnect/indeterminate starts after the first {repeated}, fenced starts {fenced}, replays {replays}"
    )
    assert race.kills == KILLS and race.stalls >= 1
    assert lost == 0 and duplicated == 0 and repeated == 0
