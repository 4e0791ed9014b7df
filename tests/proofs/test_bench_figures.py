"""The README quotes the benchmark run in ``bench/RESULTS.md`` and no other: its figures
block is generated from that file (``python -m bench.figures``)."""

from __future__ import annotations

import pytest

from bench import figures


def test_the_readme_block_is_the_one_generated_from_results_md() -> None:
    readme = figures.README.read_text(encoding="utf-8")
    generated = figures.replaced(readme, figures.block(figures.RESULTS.read_text(encoding="utf-8")))
    assert readme == generated, "README.md's figures block is stale: run python -m bench.figures"


def test_a_changed_figure_in_results_md_shows_in_the_block() -> None:
    results = figures.RESULTS.read_text(encoding="utf-8")
    first_row = next(line for line in results.split("\n## Results\n", 1)[1].splitlines() if line.startswith("| agent"))
    cells = first_row.split("|")
    cells[5] = " 99.9 speedup "  # the median column
    changed = results.replace(first_row, "|".join(cells))
    assert "| 99.9 speedup |" in figures.block(changed)
    assert figures.block(changed) != figures.block(results)


def test_a_results_file_without_its_table_is_refused() -> None:
    with pytest.raises(figures.FiguresError):
        figures.block("# runkernel benchmark results\n\nWritten by `python -m bench` on 2026-12-01 13:27 UTC.\n")
    with pytest.raises(figures.FiguresError):
        figures.replaced("no markers here", "block")
