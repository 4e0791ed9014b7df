"""The spec cannot drift: seed, python-statemachine declarations, kernel tables, docs.

* the machines declared with python-statemachine have exactly the kernel's edges;
* ``runkernel spec --format mermaid`` redraws the source design's two state diagrams (tests/data/seed_machines.json) edge for edge;
* the recovery table is the source design's (tests/data/seed_machines.json), row for row;
* ``docs/spec.md`` is what ``runkernel spec --format markdown`` prints.

Commit validation and ``decide`` against the spec's edges are checked in
``test_spec_validate_accepts_iff_edge.py`` and ``test_spec_decide_input_table.py``.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from pathlib import Path

from runkernel.kernel.edges import CALL_TABLE, RUN_FINAL_PHASES, RUN_TABLE, CallPhase, RunPhase
from runkernel.kernel.recover import RECOVERY_TABLE, RecoveryRow
from runkernel.specs.export import mermaid, render
from runkernel.specs.machines import RunMachine, SpecEdge, ToolCallMachine, spec_edges, state_names

ROOT = Path(__file__).resolve().parent.parent.parent
sys.path.insert(0, str(ROOT / "tools"))
import seed_machines as seed_machines_tool  # noqa: E402
from seed_machines import DrawnEdge, state_diagrams  # noqa: E402

SEED_MACHINES = ROOT / "tests" / "data" / "seed_machines.json"
SPEC_DOC = ROOT / "docs" / "spec.md"

Edge = tuple[str | None, str | None, str | None]


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


# --- the source design's diagrams and table ---------------------------------------------------
# The source design is not in a clone: its two diagrams and its recovery table live in
# tests/data/seed_machines.json (refreshed by tools/seed_machines.py from a new design).


def seed_machines() -> dict[str, list[list[str | None]]]:
    data: dict[str, list[list[str | None]]] = json.loads(SEED_MACHINES.read_text(encoding="utf-8"))
    return data


def seed_diagrams() -> list[list[DrawnEdge]]:
    data = seed_machines()
    return [
        [(str(a), str(b), label) for a, b, label in data[name]]
        for name in ("run_machine", "tool_call_machine")
    ]


def test_seed_has_two_state_diagrams() -> None:
    diagrams = seed_diagrams()
    assert len(diagrams) == 2
    assert diagrams[0][0] == ("[*]", "Running", "RunActivation")
    assert diagrams[1][0] == ("[*]", "Requested", "complete batch committed")


def test_mermaid_export_redraws_the_seed_diagrams_edge_for_edge() -> None:
    seed = seed_diagrams()
    ours = state_diagrams(mermaid())
    assert len(ours) == len(seed) == 2
    for drawn, expected in zip(ours, seed):
        assert set(drawn) == set(expected)
        assert drawn == expected


def test_mermaid_export_only_holds_the_state_diagrams() -> None:
    text = mermaid()
    assert text.count("```mermaid") == 2
    assert render("mermaid") == text


def test_recovery_table_matches_the_seed_row_for_row() -> None:
    seed = [tuple(row) for row in seed_machines()["recovery_table"]]
    ours = [(r.frontier, r.runtime_action, r.external_action) for r in RECOVERY_TABLE]
    assert ours == seed
    assert [r.row for r in RECOVERY_TABLE] == list(RecoveryRow)


def test_the_extraction_tool_reads_back_what_it_wrote() -> None:
    """tools/seed_machines.py parses a design text into the test data's shape: a text
    drawn from the test data itself extracts to the same JSON, byte for byte."""
    data = seed_machines()

    def diagram(edges: list[list[str | None]]) -> str:
        lines = [f"    {a} --> {b}" + (f" : {label}" if label else "") for a, b, label in edges]
        return "```mermaid\nstateDiagram-v2\n" + "\n".join(lines) + "\n```\n"

    table = "| Committed frontier | Runtime action | External action |\n|---|---|---|\n" + "".join(
        f"| {a} | {b} | {c} |\n" for a, b, c in data["recovery_table"]
    )
    text = (
        diagram(data["run_machine"]) + diagram(data["tool_call_machine"])
        + "## Recovery decision table\n\n" + table + "\n## Next\n"
    )
    assert seed_machines_tool.dumps(seed_machines_tool.extract(text)) == SEED_MACHINES.read_text(encoding="utf-8")


# --- the generated document -----------------------------------------------------------


def test_docs_spec_md_is_generated_from_the_code() -> None:
    regenerate = "regenerate it with: runkernel spec --format markdown > docs/spec.md"
    assert SPEC_DOC.exists(), f"docs/spec.md is missing; {regenerate}"
    assert SPEC_DOC.read_text(encoding="utf-8") == render("markdown"), (
        f"docs/spec.md is out of date with the code; {regenerate}"
    )
