"""The judge explains itself (issue 39, item 3): several files judged in one
``check-trace`` call are one trace (one ticket set, parents with their children across
files), a tool started without its Executing commit is named as such, every
``batch-identity-stable`` message names the field that changed, the schema requires
what the judge requires of a resume, and a Run judged alone refuses a ticket its own
history used."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from runkernel.adapters.stores.serial import commit_text
from runkernel.cli.entry import main
from runkernel.kernel.codec import commit_from_json
from runkernel.kernel.history import RunHistory
from runkernel.kernel.rules import Rejection, Rule
from runkernel.kernel.state import RunSnapshot, ThreadCommit, ThreadHead
from runkernel.kernel.validate import NO_TICKETS_SEEN, Accepted, validate_commit
from runkernel.specs.checker import Finding, Verdict, check_files, check_lines
from runkernel.specs.schema import trace_line_schema
from runkernel.testing import awaiting_run

DATA = Path(__file__).resolve().parent.parent / "data" / "traces"
Line = dict[str, Any]


def _lines(path: Path) -> list[Line]:
    return [json.loads(raw) for raw in path.read_bytes().splitlines()]


def _write(path: Path, lines: list[Line]) -> Path:
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    return path


def _judge(*paths: Path) -> list[Finding]:
    return [finding for _, finding in check_files(paths)]


def _check(capsys: pytest.CaptureFixture[str], *paths: Path) -> tuple[int, str, str]:
    code = main(["check-trace", *(str(p) for p in paths)])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


# --- one ticket set across files -------------------------------------------------------


def _ticket_files(tmp_path: Path) -> tuple[Path, Path]:
    """Two files, each legal alone, whose Runs (of two Threads) wait on one ticket id."""
    first, _ = awaiting_run("t1", "r1", "ticket-shared-0001")
    second, _ = awaiting_run("t2", "r2", "ticket-shared-0001")
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    a.write_text("".join(commit_text(c) + "\n" for c in first), encoding="utf-8")
    b.write_text("".join(commit_text(c) + "\n" for c in second), encoding="utf-8")
    return a, b


def test_a_ticket_reused_across_two_files_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a, b = _ticket_files(tmp_path)
    assert [f.verdict for f in _judge(a)] == [Verdict.LEGAL]
    assert [f.verdict for f in _judge(b)] == [Verdict.LEGAL]
    legal, refused = _judge(a, b)
    assert legal.verdict is Verdict.LEGAL
    assert (refused.verdict, refused.line, refused.rule) == (
        Verdict.ILLEGAL, len(b.read_bytes().splitlines()), Rule.TICKET_REUSED.value
    ), refused
    code, out, err = _check(capsys, a, b)
    assert code == Verdict.ILLEGAL
    assert out.startswith(f"{a}: legal: ")
    assert err.startswith(f"{b}:{refused.line}: ticket-never-reused: ")


def test_each_file_reports_its_own_commits_and_threads(tmp_path: Path) -> None:
    a, b = _ticket_files(tmp_path)
    other, _ = awaiting_run("t3", "r3", "ticket-other-0001")
    c = tmp_path / "c.jsonl"
    c.write_text("".join(commit_text(x) + "\n" for x in other), encoding="utf-8")
    first, third = _judge(a, c)
    assert (first.commits, first.threads) == (len(a.read_bytes().splitlines()), 1)
    assert (third.commits, third.threads) == (len(other), 1)


def test_the_same_file_twice_is_one_trace_twice(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    legal = DATA / "legal" / "identity.jsonl"
    code, out, err = _check(capsys, legal, legal)
    assert code == Verdict.ILLEGAL
    assert out.startswith(f"{legal}: legal: ")
    assert err.startswith(f"{legal}:1: version-contiguous: "), err


def test_a_thread_may_go_on_in_a_later_file(tmp_path: Path) -> None:
    lines = _lines(DATA / "legal" / "retries-attempt-failed.jsonl")
    head = _write(tmp_path / "head.jsonl", lines[:3])
    tail = _write(tmp_path / "tail.jsonl", lines[3:])
    assert [f.verdict for f in _judge(head, tail)] == [Verdict.LEGAL, Verdict.LEGAL]
    assert _judge(tail)[0].verdict is Verdict.ILLEGAL  # alone, it starts mid-Thread


# --- parents and children across files -------------------------------------------------

FAMILY = DATA / "legal" / "concurrent-delegations-parent-and-children.jsonl"
CHILD_RUN = "run-1.op-call-1.run"


def _family(tmp_path: Path, mutate: Callable[[Line], None] | None = None) -> tuple[Path, list[Path]]:
    """The parent's Thread in one file, each child's in a file of its own."""
    by_thread: dict[str, list[Line]] = {}
    for line in _lines(FAMILY):
        if mutate is not None and line["run_id"] == CHILD_RUN:
            mutate(line)
        by_thread.setdefault(line["thread_id"], []).append(line)
    files = [_write(tmp_path / f"{n}.jsonl", lines) for n, lines in enumerate(by_thread.values())]
    return files[0], files[1:]


@pytest.mark.parametrize("parent_first", [True, False], ids=["parent-first", "children-first"])
def test_a_family_split_over_files_is_legal_in_either_order(tmp_path: Path, parent_first: bool) -> None:
    parent, children = _family(tmp_path)
    order = [parent, *children] if parent_first else [*children, parent]
    assert [f.verdict for f in _judge(*order)] == [Verdict.LEGAL] * len(order)


def _another_child(line: Line) -> None:
    line["run_id"] = "run-1.op-call-1.impostor"


def test_a_child_in_a_later_file_is_checked_against_its_parent(tmp_path: Path) -> None:
    parent, children = _family(tmp_path, _another_child)
    findings = _judge(parent, *children)
    assert findings[0].verdict is Verdict.LEGAL
    refused = findings[1]
    assert (refused.verdict, refused.line, refused.rule) == (Verdict.ILLEGAL, 1, Rule.DELEGATION_FIXED.value), refused


def test_a_parent_in_a_later_file_is_checked_against_its_child(tmp_path: Path) -> None:
    parent, children = _family(tmp_path, _another_child)
    *first, last = _judge(*children, parent)
    assert all(f.verdict is Verdict.LEGAL for f in first), first
    executing = next(n for n, line in enumerate(_lines(parent), start=1)
                     if line["batch"] and line["batch"]["calls"][0]["status"] == "executing")
    assert (last.verdict, last.line, last.rule) == (Verdict.ILLEGAL, executing, Rule.DELEGATION_FIXED.value), last
    assert "impostor" in last.message and "(I15)" in last.message


def test_a_child_claimed_by_two_calls_across_files_is_refused(tmp_path: Path) -> None:
    def other_call(line: Line) -> None:
        if line.get("parent"):
            line["parent"]["call_id"] = "call-2"

    parent, children = _family(tmp_path, other_call)
    *_, last = _judge(*children, parent)
    assert (last.verdict, last.rule) == (Verdict.ILLEGAL, Rule.DELEGATION_FIXED.value), last


# --- a missing Executing commit is named ------------------------------------------------


def _without_executing(source: Path, tweak: Callable[[Line], None] | None = None) -> tuple[list[bytes], int]:
    """``source`` with its first Requested -> Executing commit left out (later versions
    of its Thread renumbered); the line that now follows Requested is returned too."""
    lines = _lines(source)
    for index, line in enumerate(lines):
        calls = (line.get("batch") or {}).get("calls", [])
        before = (lines[index - 1].get("batch") or {}).get("calls", []) if index else []
        if any(c["status"] == "executing" and b["status"] == "requested" for c, b in zip(calls, before)):
            break
    else:
        raise AssertionError("no Executing commit")
    dropped = lines.pop(index)
    for line in lines[index:]:
        if line["thread_id"] == dropped["thread_id"]:
            line["version"] -= 1
    if tweak is not None:
        tweak(lines[index])
    return [json.dumps(line).encode() for line in lines], index + 1


def _set_attempt(attempt: int) -> Callable[[Line], None]:
    def tweak(line: Line) -> None:
        line["batch"]["calls"][0]["attempt"] = attempt
    return tweak


@pytest.mark.parametrize(
    ("tweak", "attempt"),
    [(None, 1), (_set_attempt(0), 0)],
    ids=["completed-output-attempt-1", "completed-output-attempt-0"],
)
def test_a_tool_result_without_its_executing_commit_is_named(tweak: Callable[[Line], None] | None, attempt: int) -> None:
    raw, line = _without_executing(DATA / "legal" / "publish-one-result-per-call.jsonl", tweak)
    finding = check_lines(raw)
    assert (finding.verdict, finding.line, finding.rule) == (
        Verdict.ILLEGAL, line, Rule.EXECUTING_FIRST.value
    ), finding
    assert "without its Executing commit" in finding.message and "(I5)" in finding.message
    assert f"attempt {attempt}" in finding.message


def test_a_retry_result_without_its_executing_commit_is_named() -> None:
    """Executing{1} -> Completed with attempt 2: attempt 2 never had its Executing commit."""
    lines = _lines(DATA / "legal" / "publish-one-result-per-call.jsonl")
    index = next(i for i, line in enumerate(lines) if line["batch"] and line["batch"]["calls"][0]["status"] == "completed")
    lines[index]["batch"]["calls"][0]["attempt"] = 2
    finding = check_lines([json.dumps(line).encode() for line in lines])
    assert (finding.line, finding.rule) == (index + 1, Rule.EXECUTING_FIRST.value), finding
    assert "Executing{2}" in finding.message


def test_the_attempt_rule_keeps_its_own_example() -> None:
    """The catalogue's attempt jump (1 to 3) is still the attempt rule's, not the new one's."""
    assert check_lines(DATA.joinpath("illegal", "attempt-increments-by-one.jsonl").read_bytes().splitlines()).rule == (
        Rule.ATTEMPT.value
    )


# --- batch-identity-stable names the field ---------------------------------------------


def _open_batch_change(field: str, value: Any) -> Finding:
    """A legal trace whose commit after the batch opens changes ``field`` of its first call."""
    lines = _lines(DATA / "legal" / "retries-attempt-failed.jsonl")
    opened = next(i for i, line in enumerate(lines) if line["batch"])
    lines[opened + 1]["batch"]["calls"][0][field] = value
    return check_lines([json.dumps(line).encode() for line in lines])


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("tool", "another-tool"),
        ("arguments", {"changed": True}),
        ("operation_id", "op-other"),
        ("policy", {"recovery": "indeterminate", "max_attempts": 1, "retries": 0}),
    ],
)
def test_a_changed_call_field_is_named(field: str, value: Any) -> None:
    finding = _open_batch_change(field, value)
    assert finding.rule == Rule.BATCH_IDENTITY.value, finding
    assert f"changed its {field};" in finding.message, finding.message


def test_a_changed_finalized_batch_names_its_field() -> None:
    lines = _lines(DATA / "legal" / "batch-identity-stable.jsonl")
    final = next(i for i, line in enumerate(lines) if line["batch"] and line["batch"]["finalized"])
    carried = next((i for i in range(final + 1, len(lines)) if lines[i]["batch"]), None)
    assert carried is not None, "the example carries its finalized batch"
    lines[carried]["batch"]["calls"][0]["policy"] = {"recovery": "indeterminate", "max_attempts": 1, "retries": 0}
    finding = check_lines([json.dumps(line).encode() for line in lines])
    assert (finding.line, finding.rule) == (carried + 1, Rule.BATCH_IDENTITY.value), finding
    assert "changed its policy;" in finding.message, finding.message


# --- the schema and the judge agree on the resume event --------------------------------


@pytest.mark.parametrize("field", ["command", "digest"])
def test_the_schema_and_the_judge_both_require_the_resumes_command_and_digest(field: str) -> None:
    lines = _lines(DATA / "legal" / "resume-row-approval-approve.jsonl")
    index = next(i for i, line in enumerate(lines) if any(e["type"] == "resumed" for e in line["events"]))
    validator = jsonschema.Draft202012Validator(trace_line_schema())
    assert not list(validator.iter_errors(lines[index]))
    broken = copy.deepcopy(lines[index])
    del next(e for e in broken["events"] if e["type"] == "resumed")[field]
    assert list(validator.iter_errors(broken)), f"the schema lets a resume without {field} pass"
    finding = check_lines([json.dumps(line).encode() for line in [*lines[:index], broken]])
    assert (finding.verdict, finding.line) == (Verdict.ILLEGAL, index + 1), finding
    assert finding.rule == Rule.RESUME.value


# --- one Run judged alone ---------------------------------------------------------------


def test_a_run_judged_alone_refuses_a_ticket_its_own_history_used() -> None:
    """No store's ticket set (``NO_TICKETS_SEEN``): the Run's own history refuses it."""
    path = DATA / "illegal" / "ticket-never-reused.jsonl"
    commits: list[ThreadCommit] = [commit_from_json(line) for line in _lines(path)]
    assert len({c.run_id for c in commits}) == 1, "one Run"
    head: ThreadHead | None = None
    run: RunSnapshot | None = None
    history = RunHistory()
    verdicts: list[Accepted | Rejection] = []
    for commit in commits:
        verdict = validate_commit(head, run, commit, history, ticket_seen=NO_TICKETS_SEEN)
        verdicts.append(verdict)
        if isinstance(verdict, Accepted):
            head, run, history = verdict.head, verdict.run, history.plus(verdict.keys)
    assert all(isinstance(v, Accepted) for v in verdicts[:-1]), verdicts
    refused = verdicts[-1]
    assert isinstance(refused, Rejection) and refused.rule is Rule.TICKET_REUSED, refused
    assert "already used by this run" in refused.message
