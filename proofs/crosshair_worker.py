"""The worker of ``proofs/crosshair_check.py``: one contract, analyzed in a process of
its own through CrossHair's analysis API, one result per postcondition, printed as
one JSON line after RESULT_MARK.
"""

from __future__ import annotations

import collections
import dataclasses
import importlib
import json
import sys
from collections.abc import Sequence
from pathlib import Path

from crosshair_results import CONFIRMED, NOT_CHECKED, PRE_UNSAT, SEARCHED, VIOLATED, ConditionResult

ROOT = Path(__file__).resolve().parent.parent
RESULT_MARK = "CROSSHAIR-CHECK-RESULT "


def run_worker(module_path: Path, name: str, iterations: int, condition_timeout: float, path_timeout: float) -> list[ConditionResult]:
    """Analyze every postcondition of ``name`` (runs inside the worker process)."""
    from time import process_time

    from crosshair.auditwall import engage_auditwall
    from crosshair.condition_parser import condition_parser
    from crosshair.core import ConditionCheckable, SyntaxErrorCheckable, analyze_calltree
    from crosshair.core_and_libs import AnalysisKind, MessageType, analyze_function
    from crosshair.options import AnalysisOptionSet
    from crosshair.pure_importer import prefer_pure_python_imports
    from crosshair.statespace import VerificationStatus

    sys.path.insert(0, str(module_path.parent))
    sys.path.insert(0, str(ROOT))
    with prefer_pure_python_imports():
        module = importlib.import_module(module_path.stem)
    function = getattr(module, name)
    engage_auditwall()
    option_set = AnalysisOptionSet(
        analysis_kind=[AnalysisKind.PEP316],
        max_uninteresting_iterations=iterations,
        per_condition_timeout=condition_timeout,
        per_path_timeout=path_timeout,
    )
    results: list[ConditionResult] = []
    for checkable in analyze_function(function, option_set):
        if isinstance(checkable, SyntaxErrorCheckable):
            for message in checkable.messages:
                results.append(ConditionResult("<syntax>", VIOLATED, detail=message.message))
            continue
        assert isinstance(checkable, ConditionCheckable), type(checkable)
        stats: collections.Counter[str] = collections.Counter()
        options = dataclasses.replace(checkable.options, stats=stats)
        (post,) = checkable.conditions.post
        start = process_time()
        options.deadline = start + options.per_condition_timeout
        with condition_parser(options.analysis_kind):
            analysis = analyze_calltree(options, checkable.conditions)
        cpu = process_time() - start
        result = ConditionResult(
            condition=post.expr_source,
            status=SEARCHED,
            iterations=stats["num_paths"],
            confirmed_paths=analysis.num_confirmed_paths,
            exhausted=stats["exhaustion"] > 0,
            cpu_seconds=round(cpu, 2),
            hit_time_cap=cpu >= condition_timeout,
        )
        problems = [m for m in analysis.messages if m.state > MessageType.PRE_UNSAT]
        unsat = [m for m in analysis.messages if m.state == MessageType.PRE_UNSAT]
        if problems:
            worst = max(problems, key=lambda m: m.state)
            result.status = VIOLATED
            result.detail = f"{worst.state.name}: {worst.message} (line {worst.line})"
        elif unsat:
            result.status = PRE_UNSAT
            result.detail = unsat[0].message
        elif result.iterations == 0 or result.confirmed_paths == 0:
            result.status = NOT_CHECKED
            result.detail = (
                f"{result.iterations} iterations, {result.confirmed_paths} paths reached the "
                "postcondition"
            )
        elif analysis.verification_status is VerificationStatus.CONFIRMED:
            result.status = CONFIRMED
        elif analysis.verification_status is VerificationStatus.UNKNOWN:
            result.status = SEARCHED
        else:
            result.status = VIOLATED
            result.detail = f"refuted without a message ({analysis.verification_status})"
        results.append(result)
    return results


def worker_main(argv: Sequence[str]) -> int:
    module_path, name, iterations, condition_timeout, path_timeout = argv
    results = run_worker(Path(module_path), name, int(iterations), float(condition_timeout), float(path_timeout))
    print(RESULT_MARK + json.dumps([dataclasses.asdict(r) for r in results]), flush=True)
    return 0
