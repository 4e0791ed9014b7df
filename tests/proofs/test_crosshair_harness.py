"""The CrossHair harness can fail.

``proofs/crosshair_check.py`` must report every problem planted in
``proofs/planted_contracts.py`` and exit non-zero: a postcondition broken by an off-by-one
and by a bug behind the real ``recover``, a precondition that no input meets, a contract
whose paths never reach the postcondition, and a postcondition that does not parse.
``crosshair check`` itself exits 0 on the middle two; the harness must not. The control
contract (the off-by-one fixed) must pass, so the harness does not simply fail on
everything.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
HARNESS = ROOT / "proofs" / "crosshair_check.py"
PLANTED = ROOT / "proofs" / "planted_contracts.py"
#: A small budget: every planted problem shows up within it. The iteration count is
#: the bound; the CPU caps are hang guards, far above need, so load never decides.
BUDGET = ["--iterations", "20", "--condition-timeout", "30", "--path-timeout", "5"]


def run_harness(report: Path, *args: str) -> tuple[int, dict[str, dict[str, Any]], str]:
    """Run the harness on the planted contracts: (exit code, results by name, stdout)."""
    command = [sys.executable, str(HARNESS), "--module", str(PLANTED), "--json", str(report), *BUDGET, *args]
    done = subprocess.run(command, capture_output=True, text=True, timeout=240, cwd=ROOT)
    assert report.exists(), done.stdout + done.stderr
    payload = json.loads(report.read_text(encoding="utf-8"))
    return done.returncode, {r["name"]: r for r in payload["results"]}, done.stdout


@pytest.fixture(scope="module")
def planted(tmp_path_factory: pytest.TempPathFactory) -> tuple[int, dict[str, dict[str, Any]], str]:
    return run_harness(tmp_path_factory.mktemp("crosshair") / "planted.json")


def test_the_run_fails(planted: tuple[int, dict[str, dict[str, Any]], str]) -> None:
    code, results, stdout = planted
    assert code == 1, stdout
    assert "FAIL" in stdout
    assert set(results) == {
        "planted_exhausted",
        "planted_fixed_exhausted",
        "planted_recover_regresses",
        "planted_unsat",
        "planted_never_finishes",
        "planted_bad_syntax",
    }


def test_off_by_one_is_a_violation(planted: tuple[int, dict[str, dict[str, Any]], str]) -> None:
    result = planted[1]["planted_exhausted"]
    assert result["status"] == "violated", result
    assert "POST_FAIL" in result["describe"]
    # the counterexample is the boundary the off-by-one gets wrong
    assert any("attempt >= max_attempts" in c["condition"] for c in result["conditions"])


def test_bug_behind_recover_is_a_violation(planted: tuple[int, dict[str, dict[str, Any]], str]) -> None:
    result = planted[1]["planted_recover_regresses"]
    assert result["status"] == "violated", result
    assert "executing_never_back_to_requested" in result["describe"]


def test_unmeetable_precondition_fails(planted: tuple[int, dict[str, dict[str, Any]], str]) -> None:
    result = planted[1]["planted_unsat"]
    assert result["status"] == "pre_unsat", result
    assert "Unable to meet precondition" in result["describe"]
    assert "Unable to meet precondition" in planted[2]


def test_contract_never_reaching_its_postcondition_fails(planted: tuple[int, dict[str, dict[str, Any]], str]) -> None:
    result = planted[1]["planted_never_finishes"]
    assert result["status"] == "not_checked", result
    assert all(c["confirmed_paths"] == 0 for c in result["conditions"])


def test_unparsable_postcondition_fails(planted: tuple[int, dict[str, dict[str, Any]], str]) -> None:
    assert planted[1]["planted_bad_syntax"]["status"] == "violated"


def test_control_passes(planted: tuple[int, dict[str, dict[str, Any]], str]) -> None:
    result = planted[1]["planted_fixed_exhausted"]
    assert result["status"] == "confirmed", result
    assert result["describe"].startswith("confirmed over all paths")


def test_control_alone_exits_zero(tmp_path: Path) -> None:
    code, results, stdout = run_harness(tmp_path / "control.json", "--only", "planted_fixed_exhausted")
    assert code == 0, stdout
    assert results["planted_fixed_exhausted"]["status"] == "confirmed"


def test_crosshair_cli_exit_zero_is_not_trusted(tmp_path: Path) -> None:
    """`crosshair check` exits 0 for these two; the --cli cross-check still fails."""
    code, _, stdout = run_harness(
        tmp_path / "cli.json", "--cli", "--only", "planted_unsat", "planted_never_finishes"
    )
    assert code == 1, stdout
    assert "crosshair check exit code 0 (not used as the verdict)" in stdout
    assert "Unable to meet precondition" in stdout
    assert "Not confirmed" in stdout
