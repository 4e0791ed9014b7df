"""The long verification runs that CI does not make (the ``deep`` profiles).

    python bench/deep.py [--skip NAME ...]

- the model checker at the deep bound (3 calls per batch, 2 steps, 2 crashes);
- the Hypothesis property and stateful tests with ``HYPOTHESIS_PROFILE=deep``;
- ``runkernel simulate`` with 20,000 runs on the memory store.

Each run's own summary is printed as it comes; the exit code is the worst of them.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

RUNS: dict[str, tuple[list[str], dict[str, str]]] = {
    "model-checker": ([sys.executable, "proofs/model_check.py", "--profile", "deep"], {}),
    "hypothesis": (
        [
            sys.executable, "-m", "pytest",
            "tests/test_decide_properties.py", "tests/test_recover_properties.py",
            "tests/test_trace_properties.py", "tests/test_kernel_regressions.py",
            "tests/test_stateful_runtime.py",
        ],
        {"HYPOTHESIS_PROFILE": "deep"},
    ),
    "simulate": (
        [sys.executable, "-m", "runkernel.cli", "simulate", "--runs", "20000", "--store", "memory:", "--seed", "1"],
        {},
    ),
}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--skip", nargs="*", default=[], choices=sorted(RUNS), help="runs to leave out")
    skipped = set(parser.parse_args().skip)
    worst = 0
    for name, (argv, extra) in RUNS.items():
        if name in skipped:
            continue
        print(f"==> {name}: {' '.join(argv[1:])}", flush=True)
        started = time.monotonic()
        code = subprocess.run(argv, cwd=ROOT, env={**os.environ, **extra}, check=False).returncode
        print(f"==> {name}: exit {code} after {time.monotonic() - started:.0f}s", flush=True)
        worst = max(worst, code)
    return worst


if __name__ == "__main__":
    sys.exit(main())
