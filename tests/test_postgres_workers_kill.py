"""Many workers on PostgreSQL, killed and stalled (issue 10 item 5; W1-W4 across
processes): 4 ``runkernel worker`` processes drive 200 Runs of the example app while
they are SIGKILLed again and again (and restarted), and SIGSTOPped past their lease
then resumed; approvals are answered through ``runkernel resume``. Afterwards every Run
is Ended or Awaiting, every exported trace passes ``check-trace``, and the tools'
downstream record shows no reconnect or indeterminate operation started twice."""

from __future__ import annotations

import os
import random
import signal
import sqlite3
import subprocess
import time
from collections import Counter
from pathlib import Path

import pytest

from postgres_support import postgres_url
from runkernel.cli import main
from runkernel.kernel.state import Awaiting, Ended
from worker_processes import report_figure, spawn_worker

__all__ = ["postgres_url"]

ROOT = Path(__file__).resolve().parent.parent
WORKERS = 4
RUNS = 200
LEASE = 1.0  # seconds: a stall of LEASE + 0.5 s outlives it
CHAOS_SECONDS = 25.0
SETTLE_SECONDS = 120.0
SEED = 10


def _worker(url: str, env: dict[str, str], n: int, generation: int) -> subprocess.Popen[str]:
    return spawn_worker(url, "examples.demo_app:app", env, f"w{n}-g{generation}", lease=LEASE, poll=0.1)


def _approve_waiting(store: object, url: str, answered: set[str]) -> int:
    from runkernel.adapters.postgres_store import PostgresStore

    assert isinstance(store, PostgresStore)
    done = 0
    for summary in store.list_runs(state="awaiting"):
        if summary.run_id in answered or summary.waiting_for != "approval":
            continue
        snapshot = store.run(summary.run_id)
        if snapshot is None or not isinstance(snapshot.state, Awaiting):
            continue
        ticket = snapshot.state.ticket.ticket_id
        code = main(["resume", "--store", url, summary.run_id, "--ticket", ticket, "--approve"])
        if code == 0:
            answered.add(summary.run_id)
            done += 1
    return done


def test_killed_and_stalled_workers_finish_every_run_once(
    postgres_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from runkernel.adapters.postgres_store import PostgresStore

    url = postgres_url
    env = dict(os.environ, RUNKERNEL_DEMO_LEDGER=str(tmp_path / "ledger.db"), RUNKERNEL_DEMO_TOOL_SECONDS="0.02",
               PYTHONPATH=str(ROOT))
    os.environ["RUNKERNEL_DEMO_LEDGER"] = env["RUNKERNEL_DEMO_LEDGER"]
    for index in range(RUNS):
        assert main(["start", "--store", url, "--thread", f"t{index}", "--run", f"r{index}", "--app", "demo", "book"]) == 0
    capsys.readouterr()
    chance = random.Random(SEED)
    generation = 0
    workers = [_worker(url, env, n, generation) for n in range(WORKERS)]
    kills = stalls = 0
    answered: set[str] = set()
    store = PostgresStore(url)
    reports: list[str] = []
    try:
        started = time.monotonic()
        while time.monotonic() - started < CHAOS_SECONDS:
            time.sleep(chance.uniform(0.2, 0.6))
            n = chance.randrange(WORKERS)
            if chance.random() < 0.6:
                workers[n].kill()
                workers[n].wait()
                kills += 1
                generation += 1
                workers[n] = _worker(url, env, n, generation)
            else:
                workers[n].send_signal(signal.SIGSTOP)
                time.sleep(LEASE + 0.5)  # past its lease: another worker may take its Runs
                workers[n].send_signal(signal.SIGCONT)
                stalls += 1
            _approve_waiting(store, url, answered)
            capsys.readouterr()
        deadline = time.monotonic() + SETTLE_SECONDS
        while time.monotonic() < deadline:
            _approve_waiting(store, url, answered)
            capsys.readouterr()
            states = Counter(s.state for s in store.list_runs())
            if states["ended"] == RUNS:
                break
            time.sleep(0.3)
    finally:
        for worker in workers:
            worker.send_signal(signal.SIGTERM)
        for worker in workers:
            out, _ = worker.communicate(timeout=60)
            reports += [line for line in out.splitlines() if line.startswith("worker ")]
    snapshots = [store.run(f"r{index}") for index in range(RUNS)]
    unfinished = [
        f"r{index}" for index, s in enumerate(snapshots) if s is None or not isinstance(s.state, (Ended, Awaiting))
    ]
    traces = tmp_path / "traces"
    traces.mkdir()
    versions_missing = duplicated_versions = 0
    for index in range(RUNS):
        commits = list(store.commits(f"t{index}"))  # a gap or repeat would be a DamagedStore
        numbers = [c.version for c in commits]
        versions_missing += len(set(range(1, len(commits) + 1)) - set(numbers))
        duplicated_versions += len(numbers) - len(set(numbers))
        (traces / f"t{index}.jsonl").write_text("".join(line + "\n" for line in store.commit_lines(f"t{index}")))
    # every lease taken after the Run's first (after a release, or a take-over past expiry)
    retaken = int(store._fetch_all("SELECT coalesce(sum(epoch - 1), 0) FROM leases WHERE epoch > 0", ())[0][0])
    store.close()
    legal = main(["check-trace", *sorted(str(p) for p in traces.iterdir())])
    capsys.readouterr()
    ledger = sqlite3.connect(env["RUNKERNEL_DEMO_LEDGER"])
    twice = ledger.execute(
        "SELECT tool, operation_id, count(*) FROM starts WHERE refused = 0 AND tool IN ('reserve', 'pay') "
        "GROUP BY tool, operation_id HAVING count(*) > 1"
    ).fetchall()
    starts = dict(ledger.execute("SELECT tool, count(*) FROM starts GROUP BY tool").fetchall())
    fenced = ledger.execute("SELECT count(*) FROM starts WHERE refused = 1").fetchone()[0]
    ledger.close()
    ended = sum(1 for s in snapshots if s is not None and isinstance(s.state, Ended))
    conflicts = sum(report_figure(r, "conflicts") for r in reports)
    takeovers = sum(report_figure(r, "take-overs") for r in reports)
    with capsys.disabled():
        print(
            f"\nworkers on PostgreSQL: workers {WORKERS}, runs {RUNS}, kills {kills}, stalls {stalls}, "
            f"leases re-taken {retaken}, take-overs (workers that exited) {takeovers}, "
            f"conflicts (workers that exited) {conflicts}, approvals {len(answered)}, "
            f"ended {ended}, unfinished {len(unfinished)}, starts {starts}, fenced starts {fenced}, "
            f"lost {versions_missing}, duplicated {duplicated_versions + len(twice)}"
        )
    assert kills >= 5 and stalls >= 3
    assert unfinished == []
    assert legal == 0
    assert twice == []  # no reconnect or indeterminate operation started twice
    assert versions_missing == 0 and duplicated_versions == 0
