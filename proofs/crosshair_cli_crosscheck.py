"""The optional cross-check of ``proofs/crosshair_check.py --cli``: the same contracts
through the ``crosshair check`` command line, which must not contradict the analysis.
"""

from __future__ import annotations

import collections
import os
import re
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from contract_source import contracts_in, function_lines

ROOT = Path(__file__).resolve().parent.parent


# --- optional cross-check through the `crosshair check` command line ----------------------

_CLI_LINE = re.compile(r"^(?P<file>.+?):(?P<line>\d+): (?P<level>info|error): (?P<text>.*)$")


def run_cli(module_paths: Sequence[Path], names: Sequence[str], iterations: int, condition_timeout: float) -> tuple[bool, list[str]]:
    """``python -m crosshair check --report_all`` on ``names`` (contracts of
    ``module_paths``); returns (ok, report lines).

    Fails on any ``error:`` line, any "Unable to meet precondition" and any contract of
    which no line was reported at all (CrossHair exits 0 in the last two cases).
    """
    module_of = {name: path for name, (path, _) in contracts_in(module_paths).items()}
    spans = {name: function_lines(module_of[name])[name] for name in names}
    targets = [f"{module_of[name]}:{spans[name][0]}" for name in names]
    command = [
        sys.executable, "-m", "crosshair", "check", "--analysis_kind=PEP316", "--report_all",
        f"--max_uninteresting_iterations={iterations}",
        f"--per_condition_timeout={condition_timeout}", *targets,
    ]
    folders = dict.fromkeys(str(path.parent) for path in module_paths)
    python_path = os.pathsep.join([str(ROOT), *folders])
    done = subprocess.run(command, capture_output=True, text=True, cwd=ROOT, env={**os.environ, "PYTHONPATH": python_path})
    ok = True
    report: list[str] = []
    seen: dict[str, list[str]] = {name: [] for name in names}
    for line in done.stdout.splitlines():
        match = _CLI_LINE.match(line)
        if match is None:
            continue
        number, file_name = int(match["line"]), Path(match["file"]).name
        owner = next(
            (
                n for n in names
                if module_of[n].name == file_name and spans[n][0] <= number <= spans[n][1]
            ),
            "?",
        )
        seen.setdefault(owner, []).append(match["text"])
        if match["level"] == "error" or "Unable to meet precondition" in match["text"]:
            ok = False
    for name in names:
        texts = seen.get(name, [])
        if not texts:
            ok = False
            report.append(f"{name}: NOT REPORTED by crosshair check (nothing was checked)")
        else:
            summary = collections.Counter(t if len(t) < 60 else t[:57] + "..." for t in texts)
            report.append(f"{name}: " + "; ".join(f"{count}x {text}" for text, count in summary.items()))
    report.append(
        "(its lines carry no iteration counts: 'Not confirmed.' cannot tell a search from "
        "nothing checked, so the analysis above decides that)"
    )
    report.append(f"crosshair check exit code {done.returncode} (not used as the verdict)")
    if done.returncode not in (0, 1):
        ok = False
        report.append(done.stderr.strip()[-500:])
    return ok, report
