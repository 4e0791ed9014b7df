"""The spec cannot drift: seed, python-statemachine declarations, kernel tables, docs.

* the machines declared with python-statemachine have exactly the kernel's edges;
* ``runkernel spec --format mermaid`` redraws the seed's two state diagrams edge for edge;
* the recovery table is the seed's, row for row;
* ``docs/spec.md`` is what ``runkernel spec --format markdown`` prints.

Commit validation and ``decide`` against the spec's edges are checked in
``test_spec_validate_accepts_iff_edge.py`` and ``test_spec_decide_input_table.py``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

import pytest

from runkernel.kernel.edges import CALL_TABLE, RUN_FINAL_PHASES, RUN_TABLE, CallPhase, RunPhase
from runkernel.kernel.recover import RECOVERY_TABLE, RecoveryRow
from runkernel.specs.export import mermaid, render
from runkernel.specs.machines import RunMachine, SpecEdge, ToolCallMachine, spec_edges, state_names

ROOT = Path(__file__).resolve().parent.parent
SEED_NAME = "run-step-toolbatch-recovery.en.md"
SEED_COPY = ROOT / "tests" / "data" / "seed" / SEED_NAME
SHARED_SEED = ROOT.parent / "shared" / "seed" / SEED_NAME
SPEC_DOC = ROOT / "docs" / "spec.md"

Edge = tuple[str | None, str | None, str | None]
DrawnEdge = tuple[str, str, str | None]


# --- python-statemachine declarations == kernel tables ------------------------------


def _edge_set(edges: Sequence[SpecEdge]) -> set[Edge]:
    return {(e.source, e.target, e.event) for e in edges}


def test_run_machine_edges_equal_kernel_run_table() -> None:
    table: set[Edge] = {
        (r.source.value if r.source else None, r.target.value, r.edge.value) for r in RUN_TABLE
    }
    table |= {(phase.value, None, None) for phase in RUN_FINAL_PHASES}
    assert _edge_set(spec_edges(RunMachine)) == table
    assert (None, "Running", "run_activation") in table, "the [*] --> Running edge is missing"
    assert len(spec_edges(RunMachine)) == len(table), "an edge is declared twice"


def test_call_machine_edges_equal_kernel_call_table() -> None:
    table: set[Edge] = {
        (r.source.value if r.source else None, r.target.value, r.edge.value) for r in CALL_TABLE
    }
    assert _edge_set(spec_edges(ToolCallMachine)) == table
    assert (None, "Requested", "complete_batch_committed") in table
    assert {e for e in table if e[1] == "Finalized"} == {
        ("Completed", "Finalized", "every_call_terminal"),
        ("Indeterminate", "Finalized", "every_call_terminal"),
    }
    assert len(spec_edges(ToolCallMachine)) == len(table), "an edge is declared twice"


def test_machine_states_are_the_kernel_phases() -> None:
    assert state_names(RunMachine) == [phase.value for phase in RunPhase]
    assert state_names(ToolCallMachine) == [phase.value for phase in CallPhase]


# --- the seed's diagrams and table ---------------------------------------------------

_EDGE_LINE = re.compile(r"^\s*(\[\*\]|\w+)\s*-->\s*(\[\*\]|\w+)\s*(?::\s*(.*?))?\s*$")


def state_diagrams(text: str) -> list[list[DrawnEdge]]:
    """The edges (source, target, label) of every ``stateDiagram-v2`` block, in order."""
    diagrams = []
    for block in re.findall(r"```mermaid\n(.*?)```", text, flags=re.DOTALL):
        lines = [line for line in block.splitlines() if line.strip()]
        if not lines or lines[0].strip() != "stateDiagram-v2":
            continue
        edges: list[DrawnEdge] = []
        for line in lines[1:]:
            match = _EDGE_LINE.match(line)
            assert match is not None, f"cannot parse state diagram line {line!r}"
            edges.append((match.group(1), match.group(2), match.group(3) or None))
        diagrams.append(edges)
    return diagrams


def seed_text() -> str:
    return SEED_COPY.read_text(encoding="utf-8")


def test_seed_copy_is_identical_to_shared_seed() -> None:
    if not SHARED_SEED.exists():
        pytest.skip(f"{SHARED_SEED} is not there (tests run without ../shared)")
    assert SEED_COPY.read_bytes() == SHARED_SEED.read_bytes(), (
        f"tests/data/seed/{SEED_NAME} differs from {SHARED_SEED}; copy the seed again"
    )


def test_seed_has_two_state_diagrams() -> None:
    diagrams = state_diagrams(seed_text())
    assert len(diagrams) == 2
    assert diagrams[0][0] == ("[*]", "Running", "RunActivation")
    assert diagrams[1][0] == ("[*]", "Requested", "complete batch committed")


def test_mermaid_export_redraws_the_seed_diagrams_edge_for_edge() -> None:
    seed = state_diagrams(seed_text())
    ours = state_diagrams(mermaid())
    assert len(ours) == len(seed) == 2
    for drawn, expected in zip(ours, seed):
        assert set(drawn) == set(expected)
        assert drawn == expected


def test_mermaid_export_only_holds_the_state_diagrams() -> None:
    text = mermaid()
    assert text.count("```mermaid") == 2
    assert render("mermaid") == text


def seed_recovery_table(text: str) -> list[tuple[str, str, str]]:
    section = text.split("## Recovery decision table", 1)[1].split("\n## ", 1)[0]
    rows = [
        [cell.strip() for cell in line.strip().strip("|").split("|")]
        for line in section.splitlines()
        if line.strip().startswith("|")
    ]
    header, separator, body = rows[0], rows[1], rows[2:]
    assert header == ["Committed frontier", "Runtime action", "External action"]
    assert all(set(cell) <= {"-", ":"} for cell in separator)
    assert all(len(row) == 3 for row in body)
    return [(row[0], row[1], row[2]) for row in body]


def test_recovery_table_matches_the_seed_row_for_row() -> None:
    seed = seed_recovery_table(seed_text())
    ours = [(r.frontier, r.runtime_action, r.external_action) for r in RECOVERY_TABLE]
    assert ours == seed
    assert [r.row for r in RECOVERY_TABLE] == list(RecoveryRow)


# --- the generated document -----------------------------------------------------------


def test_docs_spec_md_is_generated_from_the_code() -> None:
    regenerate = "regenerate it with: runkernel spec --format markdown > docs/spec.md"
    assert SPEC_DOC.exists(), f"docs/spec.md is missing; {regenerate}"
    assert SPEC_DOC.read_text(encoding="utf-8") == render("markdown"), (
        f"docs/spec.md is out of date with the code; {regenerate}"
    )
