"""Run CrossHair on the kernel contracts with an explicit budget, and never trust exit 0.

    python proofs/crosshair_check.py                      # every check_* in DEFAULT_MODULES
    python proofs/crosshair_check.py --only check_decide  # one contract
    python proofs/crosshair_check.py --module proofs/planted_contracts.py  # the planted bugs
    python proofs/crosshair_check.py --cli                # cross-check with `crosshair check`

Why not just ``crosshair check``: CrossHair 0.0.113 exits 0 when a precondition can
never be met (it checked nothing), when a target holds no contract at all, and when the
default budget of 5 uninteresting iterations stopped the search early; its report lines
carry no iteration count, and messages of several postconditions on one line are
merged. So each contract runs in a worker process of its own (``sys.executable`` with
this file, ``--worker``; the worker is ``crosshair_worker.py``), which drives CrossHair's
analysis API (``analyze_function`` -> ``ConditionCheckable`` -> ``analyze_calltree``) per
postcondition with ``max_uninteresting_iterations``, ``per_condition_timeout`` and
``per_path_timeout`` set, behind CrossHair's audit wall, and reports, per
postcondition: the status, the iterations run, whether the path tree was exhausted and
how many paths passed the preconditions and confirmed the postcondition.

The run FAILS (exit 1) when any postcondition is violated (a counterexample, an error
in the function or in the condition), when a precondition cannot be met, when a
contract's docstring has ``post:`` lines that CrossHair did not analyze, when a
postcondition was "checked" on zero paths, or when a worker crashed or timed out.
Otherwise each contract is reported honestly as either "confirmed over all paths"
(CrossHair exhausted the path tree) or "searched (N iterations, no counterexample)".

``--cli`` additionally runs ``python -m crosshair check --analysis_kind=PEP316
--report_all`` with the default budget as a cross-check: it fails on any ``error:``
line, on "Unable to meet precondition" and on a contract with no line at all. Its
"Not confirmed." lines cannot tell a search from nothing checked; the analysis above
decides that.

Budgets: by iterations, per contract (BUDGETS), with
CPU caps per postcondition far above what a loaded run needs (hang guards, never the
bound); two workers at a time; DEFAULT_TOTAL_TIMEOUT seconds of wall clock guard the
whole run against a hang.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import subprocess
import sys
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from contract_source import contracts_in
from crosshair_cli_crosscheck import run_cli
from crosshair_results import CONFIRMED, FAILING, SEARCHED, ConditionResult, FunctionResult
from crosshair_worker import RESULT_MARK, worker_main

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
#: The contract modules checked by default (every one: a contracts module missing here is
#: never checked), in the order of the report.
DEFAULT_MODULES = (
    HERE / "contracts_helpers.py",
    HERE / "contracts_validate.py",
    HERE / "contracts_decide_recover.py",
)

#: Consecutive iterations without new coverage before CrossHair stops a postcondition
#: (CrossHair's own default is 5, which misses planted bugs). The iteration budgets are
#: the real bound: the same commit gets the same verdict at any load.
DEFAULT_ITERATIONS = 50
#: CPU seconds per postcondition: a hang guard only, far above what any contract needs
#: (measured 2026-12-01 on the 2-core CI machine, under load: at most 18.9 s of CPU for
#: check_decide, under 5 s for most; no postcondition stopped on time). CPU time, not
#: wall clock, so a busy machine does not reach it sooner.
DEFAULT_CONDITION_TIMEOUT = 60.0
#: CPU seconds per execution path (a hang guard too: paths take milliseconds).
DEFAULT_PATH_TIMEOUT = 10.0
#: Wall-clock hang guard for the whole run (an idle run takes about 3 minutes, a loaded
#: one about 3 times longer); contracts not finished by then fail as not checked.
DEFAULT_TOTAL_TIMEOUT = 3600.0

#: Per-contract budgets: (max_uninteresting_iterations, per_condition_timeout in CPU s).
#: Contracts not listed get the defaults above. The CPU caps are at least 6 times the
#: CPU a loaded run measured for the contract.
BUDGETS: dict[str, tuple[int, float]] = {
    # small enumerations: a budget large enough to exhaust the path tree (confirmed)
    "check_order_predicate": (200, 60.0),
    "check_first_open_call": (60, 60.0),
    "check_digest_equal": (120, 60.0),
    "check_digest_distinct": (100, 60.0),
    "check_validate_rejects_foreign_resume": (200, 60.0),
    "check_validate_accepts_matching_resume": (100, 60.0),
    "check_recover_settled": (200, 60.0),
    "check_validate_first_commit": (100, 60.0),
    # big spaces: searched, not confirmed
    "check_validate_accepts_identity": (50, 60.0),
    "check_validate_rejects_terminal_change": (50, 60.0),
    "check_validate_single_call_edges": (50, 60.0),
    "check_resume_acceptance": (40, 90.0),
    "check_decide": (120, 150.0),
    "check_decide_settled": (60, 60.0),
    "check_recover_open_batch": (60, 120.0),
}

# --- the driver ------------------------------------------------------------------------


@dataclasses.dataclass
class Budget:
    iterations: int
    condition_timeout: float
    path_timeout: float


def budget_for(name: str, args: argparse.Namespace) -> Budget:
    """The contract's budget from BUDGETS (or the defaults); --iterations and
    --condition-timeout, when given, override it for every contract."""
    iterations, timeout = BUDGETS.get(name, (DEFAULT_ITERATIONS, DEFAULT_CONDITION_TIMEOUT))
    if args.iterations is not None:
        iterations = args.iterations
    if args.condition_timeout is not None:
        timeout = args.condition_timeout
    return Budget(iterations, timeout, min(args.path_timeout, timeout))


def check_function(
    module_path: Path, name: str, expected_posts: int, budget: Budget, deadline: float
) -> FunctionResult:
    """Run one contract in a worker process and collect its report."""
    result = FunctionResult(name, expected_posts)
    # CPU caps are per postcondition; wall clock on busy shared cores runs several
    # times longer (measured: 3.5x at a load of 5 on 2 cores), so this only catches a
    # hung worker; the total cap bounds the run.
    wall_cap = expected_posts * budget.condition_timeout * 5.0 + 60.0
    left = deadline - time.monotonic()
    if left < 1.0:
        result.error = "not started: the total time cap was reached (not checked)"
        return result
    capped_by_total = left < wall_cap
    wall_cap = min(wall_cap, left)
    command = [
        sys.executable,
        str(Path(__file__).resolve()),
        "--worker",
        str(module_path),
        name,
        str(budget.iterations),
        str(budget.condition_timeout),
        str(budget.path_timeout),
    ]
    start = time.monotonic()
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=wall_cap, cwd=ROOT)
    except subprocess.TimeoutExpired:
        why = "the total time cap" if capped_by_total else "its wall-clock cap"
        result.error = f"worker stopped by {why} after {wall_cap:.0f} s (not checked)"
        result.wall_seconds = time.monotonic() - start
        return result
    result.wall_seconds = time.monotonic() - start
    lines = [line for line in done.stdout.splitlines() if line.startswith(RESULT_MARK)]
    if done.returncode != 0 or len(lines) != 1:
        tail = (done.stderr.strip().splitlines() or ["no output"])[-1]
        result.error = f"worker exited {done.returncode}: {tail}"
        return result
    for item in json.loads(lines[0][len(RESULT_MARK):]):
        result.conditions.append(ConditionResult(**item))
    return result


def run_checks(
    module_paths: Sequence[Path],
    names: Sequence[str] | None = None,
    *,
    args: argparse.Namespace | None = None,
) -> list[FunctionResult]:
    """Check the contracts of ``module_paths`` (all, or ``names``); one result each."""
    args = args if args is not None else parse_args([])
    contracts = contracts_in(module_paths)
    posts = {name: count for name, (_, count) in contracts.items()}
    selected = list(names) if names else list(posts)
    # the biggest contracts first, so the two workers finish together
    selected.sort(key=lambda n: -budget_for(n, args).iterations * posts.get(n, 1))
    deadline = time.monotonic() + args.total_timeout
    results: dict[str, FunctionResult] = {}
    missing = [n for n in selected if n not in posts]
    for name in missing:
        results[name] = FunctionResult(name, 1, error="no contract (no post: lines) with this name")
    todo = [n for n in selected if n in posts]
    with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        futures = {
            name: pool.submit(check_function, contracts[name][0], name, posts[name], budget_for(name, args), deadline)
            for name in todo
        }
        for name, future in futures.items():
            results[name] = future.result()
    order = {name: index for index, name in enumerate(posts)}
    return sorted(results.values(), key=lambda r: order.get(r.name, len(order)))


def print_table(results: Sequence[FunctionResult], seconds: float, verbose: bool) -> None:
    width = max([len(r.name) for r in results] + [8])
    print(f"{'contract':<{width}}  result")
    print(f"{'-' * width}  {'-' * 60}")
    for result in results:
        print(f"{result.name:<{width}}  {result.describe()}")
        if verbose or result.status in FAILING:
            for c in result.conditions:
                how = c.status
                if c.status == SEARCHED and c.hit_time_cap:
                    how += " (time cap)"
                print(
                    f"{'':<{width}}    post {how}: {c.iterations} it, {c.confirmed_paths} paths, "
                    f"{c.cpu_seconds:.1f} s cpu: {c.condition[:70]}"
                    + (f" -- {c.detail}" if c.detail else "")
                )
    confirmed = sum(r.status == CONFIRMED for r in results)
    searched = sum(r.status == SEARCHED for r in results)
    failed = sum(r.status in FAILING for r in results)
    print(
        f"\n{len(results)} contracts: {confirmed} confirmed over all paths, {searched} searched "
        f"without counterexample, {failed} failed. Total {seconds:.1f} s."
    )


# --- command line ----------------------------------------------------------------------


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--module", type=Path, nargs="+", default=list(DEFAULT_MODULES),
                        help="contract files (default: DEFAULT_MODULES, every contracts module)")
    parser.add_argument("--only", nargs="+", metavar="NAME", help="check only these contracts")
    parser.add_argument("--iterations", type=int, default=None,
                        help="max_uninteresting_iterations for every contract (default: "
                        f"BUDGETS, else {DEFAULT_ITERATIONS})")
    parser.add_argument("--condition-timeout", type=float, default=None,
                        help="per_condition_timeout in CPU seconds for every contract "
                        f"(default: BUDGETS, else {DEFAULT_CONDITION_TIMEOUT})")
    parser.add_argument("--path-timeout", type=float, default=DEFAULT_PATH_TIMEOUT)
    parser.add_argument("--total-timeout", type=float, default=DEFAULT_TOTAL_TIMEOUT)
    parser.add_argument("--jobs", type=int, default=min(2, os.cpu_count() or 1))
    parser.add_argument("--cli", action="store_true", help="also cross-check with `crosshair check`")
    parser.add_argument("--json", type=Path, help="write the results as JSON here")
    parser.add_argument("--verbose", "-v", action="store_true", help="one line per postcondition")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["--worker"]:
        return worker_main(argv[1:])
    args = parse_args(argv)
    module_paths = [path.resolve() for path in args.module]
    start = time.monotonic()
    results = run_checks(module_paths, args.only, args=args)
    cli_ok, cli_report = True, list[str]()
    if args.cli:
        names = [r.name for r in results if r.name in contracts_in(module_paths)]
        cli_ok, cli_report = run_cli(
            module_paths,
            names,
            args.iterations if args.iterations is not None else DEFAULT_ITERATIONS,
            args.condition_timeout if args.condition_timeout is not None else DEFAULT_CONDITION_TIMEOUT,
        )
    seconds = time.monotonic() - start
    print_table(results, seconds, args.verbose)
    if args.cli:
        print("\ncrosshair check cross-check:")
        for line in cli_report:
            print(f"  {line}")
    if args.json is not None:
        payload: dict[str, Any] = {
            "seconds": round(seconds, 1),
            "results": [
                {**dataclasses.asdict(r), "status": r.status, "describe": r.describe()} for r in results
            ],
        }
        args.json.write_text(json.dumps(payload, indent=2), encoding="utf-8")
    failed = any(r.status in FAILING for r in results) or not results or not cli_ok
    if failed:
        print("FAIL: CrossHair found a problem or did not check everything (see above).")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
