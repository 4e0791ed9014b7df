"""Steps per second of the stateful runtime test's machine (memory store).

    python -m bench.stateful_rate EXAMPLES

Runs ``tests/runtime_harness.py``'s MemoryMachine for EXAMPLES examples of 40 steps,
derandomized, and counts steps with one extra invariant (Hypothesis runs invariants
after every step). Prints one JSON line: ``{"steps": N, "examples": E, "seconds": S}``.
Run in a process of its own so the harness's imports stay out of the benchmark.
"""

from __future__ import annotations

import importlib
import json
import sys
import time
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, settings
from hypothesis.stateful import invariant, run_state_machine_as_test

STEPS_PER_EXAMPLE = 40


def main(argv: list[str]) -> int:
    examples = int(argv[0]) if argv else 20
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
    harness: Any = importlib.import_module("runtime_harness")
    counted = {"checks": 0}

    class CountedMachine(harness.MemoryMachine):  # type: ignore[misc]
        @invariant()
        def count_step(self) -> None:
            counted["checks"] += 1

    chosen = settings(
        derandomize=True,
        max_examples=examples,
        stateful_step_count=STEPS_PER_EXAMPLE,
        deadline=None,
        database=None,
        suppress_health_check=list(HealthCheck),
    )
    started = time.perf_counter()
    run_state_machine_as_test(CountedMachine, settings=chosen)
    seconds = time.perf_counter() - started
    print(json.dumps({"steps": counted["checks"], "examples": examples, "seconds": seconds}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
