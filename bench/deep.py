"""The long verification runs that CI does not make (the ``deep`` profiles).

    python bench/deep.py [--skip NAME ...] [--time-limit SECONDS] [--memory-limit MIB]
    python bench/deep.py --report-only RESULT.json   # rewrite bench/DEEP.md from a saved result

- the model checker at the deep bound (3 calls per batch, 2 steps, 2 crashes), stopped
  as CAPPED (no proof) past ``--time-limit`` (an hour by default) or ``--memory-limit``;
- the Hypothesis property and stateful tests with ``HYPOTHESIS_PROFILE=deep``;
- ``runkernel simulate`` with 20,000 runs on the memory store.

Each run's own summary is printed as it comes; the exit code is the worst of them. The
model checker's figures (verdict, states, transitions, depth, time, states/s, peak
memory, the frontier per depth) are written to ``bench/DEEP.md``, the file the README's
'What is proved' quotes.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
REPORT = ROOT / "bench" / "DEEP.md"
MODEL_CHECKER = [sys.executable, "proofs/model_check.py", "--profile", "deep"]

RUNS: dict[str, tuple[list[str], dict[str, str]]] = {
    "model-checker": (MODEL_CHECKER, {}),
    "hypothesis": (
        [
            sys.executable, "-m", "pytest",
            "tests/kernel/test_decide_properties.py", "tests/kernel/test_recover_properties.py",
            "tests/specs/test_trace_properties.py", "tests/kernel/test_kernel_regressions.py",
            "tests/drive/test_stateful_runtime.py",
        ],
        {"HYPOTHESIS_PROFILE": "deep"},
    ),
    "simulate": (
        [sys.executable, "-m", "runkernel.cli", "simulate", "--runs", "20000", "--store", "memory:", "--seed", "1"],
        {},
    ),
}


METHOD = """## How the search is made faster, and why each keeps the verdict

- **A memo of the pure kernel** (`KernelMemo` in `proofs/mc_kernel.py`, on in the deep
  profile): `decide` and `validate_commit` are pure, so a repeated call is answered from
  the memo; the model's own checks of every answer still run on every transition.
  The graph explored is the same (`tests/proofs/test_model_checker_memo.py` compares it state
  for state on a small bound, and a planted bug gives the same counterexample).
- **A live frontier** (not pickled) and **no cyclic garbage collection** during the
  search: bookkeeping only, the same states in the same order.
- **Hash compaction** (deep profile): visited states are remembered by a 64-bit hash of
  their canonical key, so two distinct states may merge and one go unexplored; the
  probability is at most the birthday bound given in the table above.
- **Call-id symmetry**: none to exploit. The model derives every id from committed facts
  (call `c{step}.{position}`, ticket `t-{call}-{n}`), so the key is already canonical;
  calls of a batch are not interchangeable (the kernel carries them out in order and
  each tool has its own recovery policy), so renaming them would merge states that
  behave differently.
- **Crashes**: a crash discards the runtime's queue, so its target depends only on
  what is durable; a crash after a commit's write and one before the next commit's
  write (with only observer effects between them) reach the same key and merge. Once the crash budget is spent, commits
  are applied without an intermediate state (the existing chain reduction).
- Not done: merging states that differ only in the crash budget left (a state with
  more budget simulates one with less). It keeps the safety invariants but not the
  liveness check (a final state reachable only through a crash), so it would change
  what the verdict means."""


def omission_probability(states: int) -> float:
    """Upper bound of the chance that 64-bit hash compaction merged two distinct states
    among ``states`` (the birthday bound n(n-1)/2 / 2^64), so that one was never explored."""
    return states * (states - 1) / 2 / 2**64


def report(result: dict[str, Any], command: str, writer: str = "python bench/deep.py") -> str:
    """bench/DEEP.md for a model-checker result (``model_check.py --json``)."""
    states, seconds = result["states"], result["seconds"]
    verdict = {
        "ok": "OK: every invariant holds in every reachable state; the bound is exhausted",
        "violation": "VIOLATION (see the counterexample in the run's output)",
    }.get(result["verdict"], f"CAPPED by {result.get('stopped') or 'a cap'}: not exhausted, so NOT a proof")
    lines = [
        "# The deep model-checking bound",
        "",
        f"Written by `{writer}` on {datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC from `{command}`"
        " (the figures below are that run's; do not edit).",
        "",
        "| figure | value |",
        "|---|---|",
        f"| verdict | {verdict} |",
        f"| states | {states:,} |",
        f"| transitions | {result['transitions']:,} |",
        f"| depth reached | {result['max_depth']} |",
        f"| final states | {result['final_states']:,} |",
        f"| seconds (wall clock) | {seconds:,.0f} |",
        f"| states per second (wall clock) | {states / seconds if seconds else 0:,.0f} |",
        f"| peak memory | {result.get('peak_mib', 0):,.0f} MiB |",
    ]
    if result.get("hash_compaction", result["profile"] == "deep"):
        lines.append(f"| hash compaction: probability a state was omitted | at most {omission_probability(states):.1e} |")
    else:
        lines.append("| state store | exact (no hash compaction) |")
    lines += [f"| {name} | {n:,} |" for name, n in result.get("counters", {}).items()]
    lines += ["", *METHOD.splitlines()]
    lines += [
        "",
        "## Frontier per depth",
        "",
        "States first reached at each depth (the frontier expanded next); on a capped run the",
        "last row is the frontier it was expanding when it stopped (states past it are in the totals).",
        "",
        "| depth | frontier | states (cumulative) | transitions (cumulative) | seconds |",
        "|---:|---:|---:|---:|---:|",
    ]
    lines += [
        f"| {lv['depth']} | {lv['frontier']:,} | {lv['states']:,} | {lv['transitions']:,} | {lv['seconds']:,.0f} |"
        for lv in result.get("levels", [])
    ]
    return "\n".join(lines) + "\n"


def _model_checker(argv: list[str], env: dict[str, str]) -> int:
    with tempfile.TemporaryDirectory() as tmp:
        saved = Path(tmp) / "result.json"
        code = subprocess.run(argv + ["--json", str(saved)], cwd=ROOT, env=env, check=False).returncode
        if saved.exists():
            REPORT.write_text(report(json.loads(saved.read_text(encoding="utf-8")), " ".join(argv[1:])), "utf-8")
            print(f"==> model-checker: figures written to {REPORT.relative_to(ROOT)}", flush=True)
    return code


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--skip", nargs="*", default=[], choices=sorted(RUNS), help="runs to leave out")
    parser.add_argument("--time-limit", type=float, default=3600.0, help="the model checker's (seconds)")
    parser.add_argument("--memory-limit", type=float, default=8000.0, help="the model checker's peak (MiB)")
    parser.add_argument("--report-only", metavar="JSON", help="write bench/DEEP.md from a saved result and stop")
    parser.add_argument("--command", default=" ".join(MODEL_CHECKER[1:]), help="the command --report-only names")
    args = parser.parse_args()
    if args.report_only:
        saved = json.loads(Path(args.report_only).read_text("utf-8"))
        REPORT.write_text(report(saved, args.command, "python bench/deep.py --report-only"), "utf-8")
        return 0
    worst = 0
    for name, (argv, extra) in RUNS.items():
        if name in args.skip:
            continue
        env = {**os.environ, **extra}
        if name == "model-checker":
            argv = argv + ["--time-limit", f"{args.time_limit:g}", "--memory-limit", f"{args.memory_limit:g}"]
        print(f"==> {name}: {' '.join(argv[1:])}", flush=True)
        started = time.monotonic()
        if name == "model-checker":
            code = _model_checker(argv, env)
        else:
            code = subprocess.run(argv, cwd=ROOT, env=env, check=False).returncode
        print(f"==> {name}: exit {code} after {time.monotonic() - started:.0f}s", flush=True)
        worst = max(worst, code)
    return worst


if __name__ == "__main__":
    sys.exit(main())
