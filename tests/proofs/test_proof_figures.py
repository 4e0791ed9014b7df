"""The README's proofs table quotes ``proofs/RESULTS.md`` and nothing else: the block is
generated from that file (``python proofs/figures.py``), and the counts the file takes
from definitions (planted bugs, CrossHair contracts, scenarios, the CI bound) are still
what the definitions say. The model checker's figures are compared where a test already
runs its bound (``tests/proofs/test_model_checker.py``)."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

PROOFS = Path(__file__).resolve().parent.parent.parent / "proofs"
if str(PROOFS) not in sys.path:
    sys.path.append(str(PROOFS))  # the proofs' modules are top-level scripts' siblings

import figures as proof_figures  # noqa: E402


def test_the_readme_block_is_the_one_generated_from_results_md() -> None:
    readme = proof_figures.README.read_text(encoding="utf-8")
    generated = proof_figures.replaced(readme, proof_figures.block(proof_figures.RESULTS.read_text(encoding="utf-8")))
    assert readme == generated, "README.md's proofs block is stale: run python proofs/figures.py"


def test_the_counts_read_from_definitions_are_current() -> None:
    _, written = proof_figures.parse(proof_figures.RESULTS.read_text(encoding="utf-8"))
    for key, value in proof_figures.counted().items():
        assert written[key] == value, f"proofs/RESULTS.md says {key} = {written[key]}, the definitions {value}: run python proofs/figures.py --run"


def test_a_changed_figure_in_results_md_shows_in_the_block() -> None:
    results = proof_figures.RESULTS.read_text(encoding="utf-8")
    _, written = proof_figures.parse(results)
    row = f"| mutants | {proof_figures.FIGURES['mutants']} | {written['mutants']} |"
    assert row in results
    changed = results.replace(row, f"| mutants | {proof_figures.FIGURES['mutants']} | 9,999 |")
    assert "9,999 planted bugs" in proof_figures.block(changed)
    assert "9,999" not in proof_figures.block(results)


def test_a_results_file_without_a_figure_or_a_date_is_refused() -> None:
    results = proof_figures.RESULTS.read_text(encoding="utf-8")
    without_states = "\n".join(line for line in results.splitlines() if not line.startswith("| ci.states |"))
    with pytest.raises(proof_figures.FiguresError, match="ci.states"):
        proof_figures.block(without_states)
    with pytest.raises(proof_figures.FiguresError):
        proof_figures.block(results.replace("Written by", "Typed by"))
    with pytest.raises(proof_figures.FiguresError):
        proof_figures.replaced("no markers here", "block")


def test_the_readme_types_no_figure_outside_its_generated_blocks() -> None:
    """Every number in the README's prose is generated: outside the two generated blocks,
    code and comments, the only figure is the Python version it needs."""
    readme = proof_figures.README.read_text(encoding="utf-8")
    prose = re.sub(r"<!-- (proof|bench)-figures:.*?<!-- /\1-figures -->", "", readme, flags=re.S)
    prose = re.sub(r"^```.*?^```$", "", prose, flags=re.S | re.M)
    prose = re.sub(r"<!--.*?-->", "", prose, flags=re.S)
    prose = re.sub(r"`[^`\n]*`", "", prose)  # code spans: commands, names
    prose = re.sub(r"\]\([^)]*\)", "]", prose)  # link targets
    numbers = re.findall(r"\d[\d,.]*", prose)
    assert numbers == ["3.11"], numbers
