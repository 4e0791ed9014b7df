"""``runkernel schema``: the shipped JSON Schema of one ``runkernel/2`` line is current,
every line of every example trace under ``tests/`` validates against it (legal and
illegal alike: legality is the checker's; an illegal example's bad line may fail it
too, when both require what the line lacks), and a malformed line that a schema can
detect does not, agreeing with the checker's "not a trace"."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from runkernel.cli.entry import main
from runkernel.specs.checker import Verdict, check_lines
from runkernel.specs.schema import render_schema, shipped_schema

TESTS = Path(__file__).resolve().parent.parent
EXAMPLES = sorted((TESTS / "data").rglob("*.jsonl"))
SCHEMA = json.loads(shipped_schema())
VALIDATOR = jsonschema.Draft202012Validator(SCHEMA)


def test_the_shipped_schema_is_generated_from_the_code() -> None:
    regenerate = (
        "regenerate it with: python -c \"from runkernel.specs.schema import render_schema; "
        "open('runkernel/specs/trace-line.schema.json', 'w').write(render_schema())\""
    )
    assert shipped_schema() == render_schema(), f"the shipped schema is stale; {regenerate}"


def test_runkernel_schema_prints_a_valid_2020_12_schema(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["schema"]) == 0
    printed = capsys.readouterr().out
    assert printed == shipped_schema()
    schema = json.loads(printed)
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    jsonschema.Draft202012Validator.check_schema(schema)


def test_there_are_examples() -> None:
    assert len(EXAMPLES) >= 70


MANIFEST = json.loads((TESTS / "data" / "traces" / "manifest.json").read_text(encoding="utf-8"))


@pytest.mark.parametrize("path", EXAMPLES, ids=[str(p.relative_to(TESTS)) for p in EXAMPLES])
def test_every_example_line_validates(path: Path) -> None:
    """Every line validates but an illegal example's bad line, which the schema may
    refuse too (a resume without its command or digest: both require them)."""
    bad = MANIFEST[path.name]["line"] if path.parent.name == "illegal" else 0
    for number, raw in enumerate(path.read_bytes().splitlines(), start=1):
        errors = sorted(VALIDATOR.iter_errors(json.loads(raw)), key=str)
        assert not errors or number == bad, (
            f"{path.name}:{number}: {errors[0].message} at {list(errors[0].absolute_path)}"
        )


def test_the_schema_refuses_a_resume_the_judge_refuses_for_its_shape() -> None:
    path = TESTS / "data" / "traces" / "illegal" / "resume-matches-ticket--command-and-digest-removed.jsonl"
    bad = MANIFEST[path.name]["line"]
    assert MANIFEST[path.name]["rule"] == "resume-matches-ticket"
    assert list(VALIDATOR.iter_errors(json.loads(path.read_bytes().splitlines()[bad - 1])))


def _legal_lines() -> list[dict[str, Any]]:
    path = TESTS / "data" / "traces" / "legal" / "resume-row-approval-approve.jsonl"
    return [json.loads(raw) for raw in path.read_bytes().splitlines()]


def _set(path: tuple[Any, ...], value: Any) -> Callable[[dict[str, Any]], None]:
    def edit(line: dict[str, Any]) -> None:
        target = line
        for key in path[:-1]:
            target = target[key]
        target[path[-1]] = value
    return edit


def _drop(path: tuple[Any, ...]) -> Callable[[dict[str, Any]], None]:
    def edit(line: dict[str, Any]) -> None:
        target = line
        for key in path[:-1]:
            target = target[key]
        del target[path[-1]]
    return edit


#: (line index in the approve example, edit): each a shape the format forbids
MALFORMED: dict[str, tuple[int, Callable[[dict[str, Any]], None]]] = {
    "missing-thread-id": (0, _drop(("thread_id",))),
    "version-as-text": (0, _set(("version",), "1")),
    "version-zero": (0, _set(("version",), 0)),
    "old-format": (0, _set(("trace",), "runkernel/1")),
    "negative-step": (1, _set(("step",), -1)),
    "unknown-state": (0, _set(("disposition", "state"), "sleeping")),
    "awaiting-without-ticket": (2, _drop(("disposition", "ticket"))),
    "ended-without-cause": (0, _set(("disposition",), {"state": "ended"})),
    "batch-as-array": (1, _set(("batch",), [])),
    "unknown-status": (1, _set(("batch", "calls", 0, "status"), "paused")),
    "awaiting-call-without-wait": (2, _drop(("batch", "calls", 0, "wait"))),
    "missing-arguments": (1, _drop(("batch", "calls", 0, "arguments"))),
    "attempt-as-text": (1, _set(("batch", "calls", 0, "attempt"), "0")),
    "unknown-recovery-policy": (1, _set(("batch", "calls", 0, "policy", "recovery"), "retry")),
    "unknown-role": (0, _set(("messages", 0, "role"), "system")),
    "message-without-content": (0, _drop(("messages", 0, "content"))),
    "event-without-type": (0, _set(("events", 0), {"kind": "activated"})),
    "messages-as-object": (0, _set(("messages",), {})),
    "resumed-ticket-as-number": (3, _set(("events", 0, "ticket_id"), 7)),
    "unknown-wait-kind": (2, _set(("disposition", "ticket", "wait"), "phone")),
}


@pytest.mark.parametrize("name", list(MALFORMED))
def test_a_malformed_line_does_not_validate_and_is_not_a_trace(name: str) -> None:
    index, edit = MALFORMED[name]
    lines = copy.deepcopy(_legal_lines())[: index + 1]
    edit(lines[index])
    assert not VALIDATOR.is_valid(lines[index]), f"{name}: the schema accepts it"
    finding = check_lines([json.dumps(line).encode() for line in lines])
    assert (finding.verdict, finding.line) == (Verdict.NOT_A_TRACE, index + 1), finding.report(name)
