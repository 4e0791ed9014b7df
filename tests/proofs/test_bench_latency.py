"""The latency groups (``bench/latency.py``, ``bench/loop_lag.py``, their rows in
``bench/latency_rows.py``): ``--quick`` writes every latency row (never a speed or a
verdict), and the rows' arithmetic reads the samples as the method says."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from bench import latency_rows, loop_lag, slow_disk, subject
from bench.framework import QUICK, Sample

ROOT = Path(__file__).resolve().parent.parent.parent
GROUPS = ("latency/sqlite", "latency/postgres", latency_rows.LAG_GROUP, slow_disk.GROUP)


def test_quick_latency_groups_write_every_latency_row(tmp_path: Path) -> None:
    out = tmp_path / "RESULTS.md"
    bench = subprocess.Popen(
        [sys.executable, "-m", "bench", "--quick", "--out", str(out), "--only", *GROUPS],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # an overrun is killed with the worker processes it started
    )
    try:
        _, stderr = bench.communicate(timeout=240)
    except subprocess.TimeoutExpired:
        os.killpg(bench.pid, signal.SIGKILL)
        _, stderr = bench.communicate()
        raise AssertionError(f"the quick latency groups ran over 240 s and were killed:\n{stderr[-2000:]}") from None
    print(stderr[-2000:])
    assert bench.returncode == 0, stderr[-2000:]
    table = {
        line.split(" | ")[0].removeprefix("| "): line
        for line in out.read_text(encoding="utf-8").splitlines()
        if line.startswith("| ") and not line.startswith("| measure")
    }
    names = [row.name for row in latency_rows.rows(QUICK)]
    assert len(names) == 2 * (1 + 2 * len(QUICK.latency_runs)) + 1 + 2 * len(QUICK.latency_runs)
    assert [name for name in names if name not in table] == []
    broken = [
        table[name] for name in names
        if "error:" in table[name] or ("not measured" in table[name] and "peer not installed" not in table[name])
    ]
    assert broken == []


def _drain(runs: int, seconds: float, slots: int) -> Sample:
    return Sample(seconds, runs, {"slots": float(slots)})


def test_overlap_is_one_when_every_slot_overlaps_fully() -> None:
    one = _drain(1, 1.5, 32)
    assert latency_rows.overlap(_drain(20, 1.5, 32), one) == pytest.approx(1.0)
    # 200 Runs on 32 slots end in 7 waves: 200 / 10.5 Runs/s against 32 / 1.5
    assert latency_rows.overlap(_drain(200, 10.5, 32), one) == pytest.approx(200 / 10.5 / (32 / 1.5))
    # one slot: 20 Runs one after the other overlap perfectly with themselves
    assert latency_rows.overlap(_drain(20, 30.0, 1), one) == pytest.approx(1.0)
    assert latency_rows.drain_ratio(_drain(20, 30.0, 1), one) == pytest.approx(20.0)


def test_the_lag_sample_takes_median_p99_and_max() -> None:
    late = [0.001] * 99 + [0.5]
    sample = loop_lag.lag_sample(2.0, 20, late)
    assert (sample.counts["lag_p50"], sample.counts["lag_max"], sample.counts["wakes"]) == (0.001, 0.5, 100.0)
    assert sample.counts["lag_p99"] == 0.001
    assert loop_lag.lag_sample(2.0, 20, late + [0.5]).counts["lag_p99"] == 0.5


def test_a_sleeping_run_ends_completed_through_the_async_driver(tmp_path: Path) -> None:
    store = subject.sqlite_store(tmp_path / "lag.db", "NORMAL")
    run_id = asyncio.run(subject.drive_sleeping_run(store, 0.0))
    assert subject.runs_completed(store, [run_id]) == 1
    assert store.count_runs(state="running", cap=10) == 0
    store.close()
