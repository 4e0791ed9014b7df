"""Issue 36, item 5: the SQLite lock lines as documented (docs/how-to/worker.md, "A worker
rides out its store"). ``runkernel worker`` with Runs to drive meets a write lock another
process holds past the busy timeout (30 s): one line when it meets it, one when the lock
is released, then the Runs end; exit 0 at SIGTERM."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

from runkernel.adapters.stores.sqlite import SqliteStore
from runkernel.cli.entry import main

ROOT = Path(__file__).resolve().parent.parent.parent
HANG_GUARD = 240.0  # seconds: only so that a broken test fails instead of hanging CI
BEGAN = "runkernel worker: store unavailable: "
ENDED = "runkernel worker: store answers again after "


def _ended(path: Path) -> int:
    store = SqliteStore(path, create=False, read_only=True)
    try:
        return sum(1 for s in store.list_runs() if s.state != "running")
    finally:
        store.close()


def test_a_lock_held_past_the_busy_timeout_prints_its_two_lines(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    url = f"sqlite:///{path}"
    env = dict(os.environ, RUNKERNEL_DEMO_LEDGER=str(tmp_path / "ledger.db"), PYTHONPATH=str(ROOT))
    for run in ("a", "b"):
        assert main(["start", "--store", url, "--thread", f"t-{run}", "--run", run, "--app", "demo", "book"]) == 0
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")  # the write lock, held until the worker said it met it
    worker = subprocess.Popen(
        [sys.executable, "-m", "runkernel.cli", "worker", "--store", url, "--app", "examples.demo_app:app", "--poll", "0.2"],
        cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(line.rstrip("\n") for line in worker.stderr or ()), daemon=True)
    reader.start()
    began = time.monotonic()
    try:
        while not any(line.startswith(BEGAN) for line in lines):
            assert worker.poll() is None, f"the worker exited: {lines}"
            assert time.monotonic() - began < HANG_GUARD, f"hang guard: the worker never said it met the lock: {lines}"
            time.sleep(0.2)  # the next look at the worker's lines
        met = time.monotonic() - began
        holder.execute("ROLLBACK")
        while _ended(path) < 2 or not any(line.startswith(ENDED) for line in lines):
            assert worker.poll() is None, f"the worker exited: {lines}"
            assert time.monotonic() - began < HANG_GUARD, f"hang guard: the Runs never moved on: {lines}"
            time.sleep(0.2)
    finally:
        holder.close()
        worker.send_signal(signal.SIGTERM)
        out, _ = worker.communicate(timeout=120)
        reader.join(timeout=10)
    print(f"\nSQLite lock held past the busy timeout: met after {met:.1f} s, exit {worker.returncode}")
    for line in lines:
        print(f"  {line}")
    assert worker.returncode == 0
    outage = [line for line in lines if line.startswith((BEGAN, ENDED))]
    assert len(outage) == 2 and outage[0].startswith(BEGAN) and "locked" in outage[0] and outage[1].startswith(ENDED)
