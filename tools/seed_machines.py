"""Extract the source design's two state diagrams and its recovery table as test data.

The design document runkernel implements is not part of a clone; what the tests need
of it — the edges of its two state diagrams and the rows of its recovery decision
table — lives in ``tests/data/seed_machines.json``. When the design changes, refresh
that file from the new text and let the spec tests say what the code must follow:

    python tools/seed_machines.py DESIGN_FILE > tests/data/seed_machines.json

The diagram parser is also how the tests read ``runkernel spec --format mermaid``.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

DrawnEdge = tuple[str, str, str | None]

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
            if match is None:
                raise ValueError(f"cannot parse state diagram line {line!r}")
            edges.append((match.group(1), match.group(2), match.group(3) or None))
        diagrams.append(edges)
    return diagrams


def recovery_table(text: str) -> list[tuple[str, str, str]]:
    """The rows (frontier, runtime action, external action) of the recovery table."""
    section = text.split("## Recovery decision table", 1)[1].split("\n## ", 1)[0]
    rows = [
        [cell.strip() for cell in line.strip().strip("|").split("|")]
        for line in section.splitlines()
        if line.strip().startswith("|")
    ]
    header, separator, body = rows[0], rows[1], rows[2:]
    if header != ["Committed frontier", "Runtime action", "External action"]:
        raise ValueError(f"unexpected recovery table header {header!r}")
    if not all(set(cell) <= {"-", ":"} for cell in separator) or not all(len(row) == 3 for row in body):
        raise ValueError("the recovery table is not a three-column table")
    return [(row[0], row[1], row[2]) for row in body]


def extract(text: str) -> dict[str, object]:
    diagrams = state_diagrams(text)
    if len(diagrams) != 2:
        raise ValueError(f"expected the Run and the Tool-call diagrams, found {len(diagrams)}")
    return {
        "run_machine": [list(edge) for edge in diagrams[0]],
        "tool_call_machine": [list(edge) for edge in diagrams[1]],
        "recovery_table": [list(row) for row in recovery_table(text)],
    }


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python tools/seed_machines.py DESIGN_FILE > tests/data/seed_machines.json", file=sys.stderr)
        return 2
    data = extract(Path(argv[0]).read_text(encoding="utf-8"))
    sys.stdout.write(dumps(data))
    return 0


def dumps(data: dict[str, object]) -> str:
    """JSON with one edge or row per line, so a change to the design reads as a diff."""
    parts = []
    for key, rows in data.items():
        assert isinstance(rows, list)
        body = ",\n".join("  " + json.dumps(row, ensure_ascii=False) for row in rows)
        parts.append(f" {json.dumps(key)}: [\n{body}\n ]")
    return "{\n" + ",\n".join(parts) + "\n}\n"


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
