"""Well-typed lines whose shape breaks a rule are illegal (exit 1, the rule named), not
"not a trace"; fields the format leaves optional or does not name are tolerated."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from runkernel.kernel.codec import commit_to_json
from runkernel.specs.checker import Finding, Verdict, check_lines
from runkernel.testing import awaiting_run, text_run, tool_run

Line = dict[str, Any]


def judge(lines: list[Line]) -> Finding:
    return check_lines([json.dumps(line).encode() for line in lines])


def tool_trace() -> list[Line]:
    return [commit_to_json(c) for c in tool_run("t1", "r1")]


def waiting_trace() -> list[Line]:
    commits, _ = awaiting_run("t1", "r1", "ticket-0001")
    return [commit_to_json(c) for c in commits]


def with_ticket_on_running(lines: list[Line]) -> None:
    lines[0]["disposition"]["ticket"] = {"ticket_id": "x", "wait": "approval", "call_id": "c"}


def with_ticket_on_ended(lines: list[Line]) -> None:
    lines[-1]["disposition"]["ticket"] = {"ticket_id": "x", "wait": "approval", "call_id": "c"}


def with_duplicate_call_ids(lines: list[Line]) -> None:
    batch = lines[1]["batch"]
    batch["calls"].append(dict(batch["calls"][0], operation_id="other"))


def with_empty_batch(lines: list[Line]) -> None:
    lines[1]["batch"]["calls"] = []


def with_requested_attempt(lines: list[Line]) -> None:
    lines[1]["batch"]["calls"][0]["attempt"] = 3


def with_batch_step_zero(lines: list[Line]) -> None:
    lines[1]["batch"]["step"] = 0


def with_user_tool_calls(lines: list[Line]) -> None:
    lines[0]["messages"][0]["tool_calls"] = [{"call_id": "c", "tool": "t", "arguments": {}}]


@pytest.mark.parametrize(
    "mutate, rule",
    [
        (with_ticket_on_running, "ticket-matches-wait"),
        (with_ticket_on_ended, "ticket-matches-wait"),
        (with_duplicate_call_ids, "batch-identity-stable"),
        (with_empty_batch, "batch-complete-and-requested"),
        (with_requested_attempt, "attempt-increments-by-one"),
        (with_batch_step_zero, "step-counts-inference"),
        (with_user_tool_calls, "batch-complete-and-requested"),
    ],
)
def test_a_rule_breaking_shape_is_illegal_not_unreadable(mutate: Callable[[list[Line]], None], rule: str) -> None:
    lines = tool_trace()
    mutate(lines)
    finding = judge(lines)
    assert finding.verdict is Verdict.ILLEGAL, finding
    assert finding.rule == rule


def tolerate_null_optional_fields(lines: list[Line]) -> None:
    call = lines[1]["batch"]["calls"][0]
    call.update(wait=None, result=None, reason=None)


def tolerate_error_detail_on_other_causes(lines: list[Line]) -> None:
    lines[-1]["disposition"]["cause"]["error"] = {"type": "Note", "message": "just a detail"}


def tolerate_empty_tool_calls(lines: list[Line]) -> None:
    lines[0]["messages"][0]["tool_calls"] = []


def tolerate_call_id_on_a_user_message(lines: list[Line]) -> None:
    lines[0]["messages"][0]["call_id"] = "irrelevant"


@pytest.mark.parametrize(
    "mutate",
    [
        tolerate_null_optional_fields,
        tolerate_error_detail_on_other_causes,
        tolerate_empty_tool_calls,
        tolerate_call_id_on_a_user_message,
    ],
)
def test_optional_and_unnamed_fields_are_tolerated(mutate: Callable[[list[Line]], None]) -> None:
    lines = tool_trace()
    mutate(lines)
    assert judge(lines).verdict is Verdict.LEGAL


def test_extra_wait_fields_of_any_type_are_ignored() -> None:
    lines = waiting_trace()
    call = lines[-1]["batch"]["calls"][0]
    call["wait"]["due_at"] = 1700000000
    call["wait"]["child"] = {"nested": True}
    assert judge(lines).verdict is Verdict.LEGAL


def test_a_failed_cause_needs_its_error() -> None:
    lines = [commit_to_json(c) for c in text_run("t1", "r1", 1)]
    lines[-1]["disposition"]["cause"] = {"kind": "failed"}
    finding = judge(lines)
    assert finding.verdict is Verdict.NOT_A_TRACE
    assert "error" in finding.message
