"""The embedded worker recovers at launch (Workers and leases, "Recovery without a
separate process"): an application process whose embedded worker has Runs in flight is
SIGKILLed; the process started again, with nothing but its embedded worker, finishes
every Run, each in-flight one taken over once its lease expired (epoch 2), on SQLite and
PostgreSQL. Counts are asserted; how long the take-overs took is printed beside the
lease and the poll, never asserted."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from embedded_process import LEASE, POLL, SLOTS
from postgres_support import postgres_url
from runkernel.adapters.stores.registry import open_store
from runkernel.kernel.protocol import Activate
from runkernel.kernel.state import Message
from runkernel.kernel.values import Role
from runkernel.specs.checker import Verdict, check_commits
from runkernel.testing import step

__all__ = ["postgres_url"]

ROOT = Path(__file__).resolve().parents[2]
RUNS = 6
HANG_GUARD = 240.0  # seconds: only so that a broken test fails instead of hanging CI


def _process(url: str, directory: Path, mode: str) -> subprocess.Popen[bytes]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "tests"), str(ROOT)])}
    return subprocess.Popen(
        [sys.executable, str(ROOT / "tests" / "embedded_process.py"), url, str(directory), mode],
        env=env,
        stderr=open(directory / f"stderr-{mode}.txt", "wb"),
    )


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
def test_a_killed_application_restarted_with_its_embedded_worker_finishes_every_run(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    url = f"sqlite:///{tmp_path / 'app.db'}" if kind == "sqlite" else request.getfixturevalue("postgres_url")
    store = open_store(url)
    for index in range(RUNS):
        decision = step(None, Activate(f"t{index}", f"r{index}", 0, (Message(Role.USER, "go"),), "embedded"))
        assert decision.commit is not None
        store.append(decision.commit)
    began = time.monotonic()
    first = _process(url, tmp_path, "hang")
    while len(list(tmp_path.glob("started-*"))) < SLOTS:
        assert first.poll() is None, (tmp_path / "stderr-hang.txt").read_text()
        assert time.monotonic() - began < HANG_GUARD, "hang guard: the slots never all reached their tools"
        time.sleep(0.01)
    in_flight = sorted(p.name.split("-")[1] for p in tmp_path.glob("started-*"))
    first.kill()
    first.wait()
    killed_at = time.monotonic()
    second = _process(url, tmp_path, "finish")
    assert second.wait(timeout=HANG_GUARD) == 0, (tmp_path / "stderr-finish.txt").read_text()
    report = json.loads((tmp_path / "report.json").read_text())
    statuses = store.lease_statuses([f"r{index}" for index in range(RUNS)])
    summaries = store.list_runs()
    legal = sum(check_commits(list(store.commits(s.thread_id))).verdict is Verdict.LEGAL for s in summaries)
    restarts = sorted(p.name for p in tmp_path.glob("started-*-2"))
    store.close()
    print(
        f"\nembedded worker ({kind}): {RUNS} Runs, {len(in_flight)} in flight at the kill {in_flight}, "
        f"restarted process: {report['drives']} drives, {report['takeovers']} take-overs, "
        f"in-flight peak {report['in_flight_peak']}, every Run ended after {time.monotonic() - killed_at:.1f} s "
        f"from the kill (lease {LEASE} s, poll {POLL} s), {legal} legal traces"
    )
    assert len(in_flight) == SLOTS and all(s.state == "ended" for s in summaries) and legal == RUNS
    # each Run in flight at the kill was taken over once (epoch 2) and its tool run again
    # (a replay tool), the others driven from the start by the restarted process
    assert all(statuses[run_id].lease is not None and statuses[run_id].lease.epoch == 2 for run_id in in_flight)  # type: ignore[union-attr]
    assert restarts == sorted(f"started-{run_id}-2" for run_id in in_flight)
    assert report["takeovers"] == SLOTS and report["failures"] == 0
