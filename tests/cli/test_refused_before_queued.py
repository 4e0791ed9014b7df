"""Issue 36, item 4: every value a resume would commit is checked against the trace's
limits when it is queued (nesting, integers, size, Unicode): one line, exit 2, nothing
queued; and the committed line of a value at the limit is a trace line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from runkernel.adapters.drive.inbox import queue_resume
from runkernel.adapters.stores.sqlite import SqliteStore
from runkernel.cli.entry import main
from runkernel.kernel.codec import commit_to_json
from runkernel.kernel.policies import Policies
from runkernel.kernel.protocol import Decision, ExternalResult, ProvideInput, ResumeCommand
from runkernel.kernel.resume import check_resume, resume
from runkernel.kernel.rules import Rejection, Rule
from runkernel.kernel.values import RESUME_MAX_BYTES, RESUME_MAX_DEPTH, JsonValue, WaitKind
from runkernel.specs.trace_lines import parse_line
from runkernel.testing import awaiting_run


def _nested(depth: int) -> JsonValue:
    value: JsonValue = []
    for _ in range(depth - 1):
        value = [value]
    return value


def _store(path: Path, kind: WaitKind = WaitKind.INPUT) -> str:
    store = SqliteStore(path)
    for commit in awaiting_run("t1", "r1", "tk1", kind=kind)[0]:
        store.append(commit)
    store.close()
    return f"sqlite:///{path}"


def _pending(path: Path) -> int:
    store = SqliteStore(path, read_only=True)
    try:
        return len(store.pending_commands("r1"))
    finally:
        store.close()


@pytest.mark.parametrize("depth", [70, 500, 5000])
def test_a_deep_resume_value_is_refused_at_resume_with_one_line_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], depth: int
) -> None:
    db = _store(tmp_path / "s.db")
    raw = "[" * depth + "]" * depth
    code = main(["resume", "--store", db, "r1", "--ticket", "tk1", "--input-json", raw])
    captured = capsys.readouterr()
    print(f"{depth} deep: exit {code}, stderr {captured.err!r}")
    assert code == 2 and captured.out == "" and captured.err.count("\n") == 1, captured.err
    assert "Traceback" not in captured.err and "nests deeper than" in captured.err
    assert _pending(tmp_path / "s.db") == 0


@pytest.mark.parametrize(
    "raw, says",
    [
        ("9007199254740992", "I-JSON"),
        ("[-9007199254740992]", "I-JSON"),
        ('"\\ud800"', "not valid Unicode"),
        ('{"a": "\\udfff"}', "not valid Unicode"),
    ],
)
def test_integers_out_of_range_and_lone_surrogates_are_refused_at_resume(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], raw: str, says: str
) -> None:
    db = _store(tmp_path / "s.db", WaitKind.EXTERNAL)
    code = main(["resume", "--store", db, "r1", "--ticket", "tk1", "--external", raw])
    captured = capsys.readouterr()
    assert code == 2 and captured.err.count("\n") == 1 and says in captured.err, captured.err
    assert _pending(tmp_path / "s.db") == 0


def test_a_value_at_the_limits_commits_lines_that_are_a_trace_and_one_past_them_is_refused() -> None:
    commits, snapshot = awaiting_run("t1", "r1", "tk1", kind=WaitKind.EXTERNAL)
    deepest = ResumeCommand("r1", "tk1", WaitKind.EXTERNAL, ExternalResult(_nested(RESUME_MAX_DEPTH)))
    decision = resume(snapshot, deepest, Policies())
    assert isinstance(decision, Decision) and decision.commit is not None, decision
    parse_line(json.dumps(commit_to_json(decision.commit)).encode())  # no NotATrace
    deeper = ResumeCommand("r1", "tk1", WaitKind.EXTERNAL, ExternalResult(_nested(RESUME_MAX_DEPTH + 1)))
    refused = check_resume(snapshot, deeper)
    assert isinstance(refused, Rejection) and refused.rule is Rule.PAYLOAD_TYPE, refused
    big = ResumeCommand("r1", "tk1", WaitKind.EXTERNAL, ExternalResult("x" * (RESUME_MAX_BYTES + 1)))
    refused = check_resume(snapshot, big)
    assert isinstance(refused, Rejection) and "bytes" in refused.message, refused


def test_the_library_queue_refuses_a_deep_value_without_a_recursion_error(tmp_path: Path) -> None:
    _store(tmp_path / "s.db")
    store = SqliteStore(tmp_path / "s.db")
    try:
        result = queue_resume(store, ResumeCommand("r1", "tk1", WaitKind.INPUT, ProvideInput(_nested(5000))))
        assert isinstance(result, Rejection) and result.rule is Rule.PAYLOAD_TYPE, result
        assert store.pending_commands("r1") == []
    finally:
        store.close()
