"""The parallel-tool-calls group (``bench/group_calls.py``): ``--quick`` writes its rows
(never a speed or a verdict), a side's sample is the tool phase the model saw, and the
ratio reads it against one tool's."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from bench import group_calls
from bench.framework import QUICK, Sample

ROOT = Path(__file__).resolve().parent.parent.parent


def test_quick_group_calls_writes_its_rows(tmp_path: Path) -> None:
    out = tmp_path / "RESULTS.md"
    done = subprocess.run(
        [sys.executable, "-m", "bench", "--quick", "--out", str(out), "--only", group_calls.GROUP],
        cwd=ROOT, capture_output=True, text=True, timeout=600,
    )
    print(done.stderr[-1000:])
    assert done.returncode == 0, done.stderr[-2000:]
    table = {
        line.split(" | ")[0].removeprefix("| "): line
        for line in out.read_text(encoding="utf-8").splitlines()
        if line.startswith("| ") and not line.startswith("| measure")
    }
    names = [row.name for row in group_calls.rows(QUICK)]
    assert len(names) == 4 and [name for name in names if name not in table] == []
    assert [table[name] for name in names if "error:" in table[name]] == []


def test_the_runtime_side_measures_the_phase_between_the_models_two_answers(tmp_path: Path) -> None:
    """Three concurrent calls of 0.05 s: the phase holds at least one tool's sleep."""
    sample = group_calls._runtime(tmp_path, 3, 0.05, concurrent=True)()
    assert sample.seconds >= 0.05


def test_a_run_that_never_asks_its_model_again_is_no_sample() -> None:
    with pytest.raises(AssertionError, match="never came back"):
        group_calls._Phase().sample()


def test_the_ratio_is_the_phase_over_one_tools() -> None:
    assert group_calls.phase_ratio(Sample(1.5), Sample(0.5)) == pytest.approx(3.0)
