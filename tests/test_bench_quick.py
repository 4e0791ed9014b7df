"""``python -m bench --quick`` still runs and writes every row (never a speed or a verdict).

The benchmark is not a test: this only keeps it from rotting while runkernel changes
under it. Without the ``bench`` extra the peer rows say "peer not installed".
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from bench.framework import QUICK
from bench.rows import rows

ROOT = Path(__file__).resolve().parent.parent


def test_quick_bench_writes_every_row(tmp_path: Path) -> None:
    out = tmp_path / "RESULTS.md"
    done = subprocess.run(
        [sys.executable, "-m", "bench", "--quick", "--out", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    print(done.stderr[-2000:])
    assert done.returncode == 0, done.stderr[-2000:]
    text = out.read_text(encoding="utf-8")
    table = [line for line in text.splitlines() if line.startswith("| ") and not line.startswith("| measure")]
    names = [row.name for row in rows(QUICK)]
    assert [line.split(" | ")[0].removeprefix("| ") for line in table] == names
    # a runkernel side that errors means an entry point in bench/subject.py moved
    broken = [line for line in table if "error:" in line or ("not measured" in line and "peer not installed" not in line)]
    assert broken == []


def test_the_sqlite_lock_share_is_a_part_of_each_run() -> None:
    from bench.lock_share import lock_share

    held, total = lock_share(5)
    print(f"5 Runs: {held:.2f} of {total:.2f} ms per Run inside write transactions")
    assert 0 < held < total
