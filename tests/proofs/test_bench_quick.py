"""``python -m bench --quick`` still runs and writes every row (never a speed or a verdict).

The benchmark is not a test: this only keeps it from rotting while runkernel changes
under it. Without the ``bench`` extra the peer rows say "peer not installed".
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from bench.framework import QUICK
from bench.rows import rows

ROOT = Path(__file__).resolve().parent.parent.parent


def test_quick_bench_writes_every_row(tmp_path: Path) -> None:
    out = tmp_path / "RESULTS.md"
    # The bench starts worker processes of its own; in a session of its own, a bench
    # that overruns is killed with every process it started, not just its own.
    bench = subprocess.Popen(
        [sys.executable, "-m", "bench", "--quick", "--out", str(out)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        _, stderr = bench.communicate(timeout=300)
    except subprocess.TimeoutExpired:
        os.killpg(bench.pid, signal.SIGKILL)
        _, stderr = bench.communicate()
        raise AssertionError(f"the quick bench ran over 300 s and was killed:\n{stderr[-2000:]}") from None
    print(stderr[-2000:])
    assert bench.returncode == 0, stderr[-2000:]
    text = out.read_text(encoding="utf-8")
    table = [line for line in text.splitlines() if line.startswith("| ") and not line.startswith("| measure")]
    names = [row.name for row in rows(QUICK)]
    assert [line.split(" | ")[0].removeprefix("| ") for line in table] == names
    # a runkernel side that errors means an entry point in bench/subject.py moved
    broken = [line for line in table if "error:" in line or ("not measured" in line and "peer not installed" not in line)]
    assert broken == []
    # a profile under a row that misses is made by the side's own work: it must run too
    assert [line for line in text.splitlines() if "not profiled:" in line] == []


def test_the_sqlite_lock_share_is_a_part_of_each_run() -> None:
    from bench.lock_share import lock_share

    held, total = lock_share(5)
    print(f"5 Runs: {held:.2f} of {total:.2f} ms per Run inside write transactions")
    assert 0 < held < total
