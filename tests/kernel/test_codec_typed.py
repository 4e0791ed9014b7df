"""The typed reading of a trace line (``codec_typed.py``) reads every line it takes to
the commit the strict reader reads, and leaves every line the strict reader refuses
to it: on the random kernel driver's lines, on every catalogued mutation of them, and
on hand-made lines whose fields the strict reader reads leniently. The typed writing
(``codec_encode.py``) writes the bytes of the line's dict."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from typing import Any

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from driver_history import History
from runkernel.errors import TraceFormatError
from runkernel.kernel.codec import _strict_commit, commit_from_json, commit_from_line, commit_line, commit_to_json
from runkernel.kernel.codec_typed import typed_commit, typed_commit_of_text
from runkernel.kernel.policies import RecoveryMode, RetryPolicy, ToolPolicy, ToolRecoveryPolicy
from runkernel.kernel.state import (
    ActiveToolBatch,
    Awaiting,
    CallAwaiting,
    CallCompleted,
    CallIndeterminate,
    Delegation,
    EndCause,
    Ended,
    Event,
    Message,
    ForkedFrom,
    ParentCall,
    ResumeTicket,
    Staged,
    ThreadCommit,
    ToolCall,
    ToolResult,
    ToolUse,
    TypedError,
    Wait,
)
from runkernel.kernel.values import EndCauseKind, IndeterminateReason, ResultKind, Role, WaitKind
from scripted_trace import scripted_trace
from strategies import histories
from trace_mutations import MUTATIONS, Context


def strict(line: Any) -> ThreadCommit | TraceFormatError:
    try:
        return _strict_commit(line)
    except TraceFormatError as error:  # IllegalShape is a TraceFormatError too
        return error


def assert_same_reading(line: Any) -> bool:
    """Both typed readings agree with the strict reader; True when they took the line."""
    expected = strict(copy.deepcopy(line))
    text = json.dumps(line)
    took = False
    for typed in (typed_commit(line), typed_commit_of_text(text), typed_commit_of_text(text.encode())):
        if typed is None:
            continue
        took = True
        assert isinstance(expected, ThreadCommit), f"typed read a line the strict reader refuses: {expected}"
        assert typed == expected
        assert commit_to_json(typed) == commit_to_json(expected)
    if isinstance(expected, ThreadCommit):
        assert commit_from_json(line) == expected and commit_from_line(text) == expected
    else:
        readers: list[Callable[[], ThreadCommit]] = [lambda: commit_from_json(line), lambda: commit_from_line(text)]
        for read in readers:
            with pytest.raises(TraceFormatError) as raised:
                read()
            assert str(raised.value) == str(expected) and type(raised.value) is type(expected)
    return took


@given(histories())
def test_the_typed_reading_reads_every_kernel_line_as_the_strict_reader(history: History) -> None:
    for commit in history.commits:
        line = commit_to_json(commit)
        took = assert_same_reading(line)
        resumed = any(event.type == "resumed" for event in commit.events)
        assert took or resumed  # only a resume's event is left to the strict reader


@given(history=histories(max_threads=2, max_runs=3), data=st.data())
def test_every_catalogued_mutation_is_read_as_the_strict_reader_reads_it(history: History, data: st.DataObject) -> None:
    context = Context.of(history.commits)
    for name, mutation in MUTATIONS.items():
        sites = list(mutation(context))
        if sites:
            for line in data.draw(st.sampled_from(sites), label=name).mutate(context.lines):
                assert_same_reading(line)


def _line() -> dict[str, Any]:
    """A scripted trace's line with a batch (a call of every common field)."""
    lines = [commit_to_json(c) for c in scripted_trace()]
    return next(line for line in lines if line["batch"] is not None and line["batch"]["calls"][0].get("policy"))


LENIENT_EDITS = {
    "an empty tool-use block": lambda l: l["messages"].append({"role": "assistant", "content": "x", "tool_calls": []}),
    "a tool-use block of 0": lambda l: l["messages"].append({"role": "assistant", "content": "x", "tool_calls": 0}),
    "a user message naming a call id of a number": lambda l: l["messages"].append({"role": "user", "content": "x", "call_id": 5}),
    "a tool message without its call": lambda l: l["messages"].append({"role": "tool", "content": "x"}),
    "a tool message with tool uses": lambda l: l["messages"].append(
        {"role": "tool", "content": "x", "call_id": "c", "tool_calls": [{"call_id": "c", "tool": "t", "arguments": 1}]}
    ),
    "staged null": lambda l: l.update(staged=None),
    "an extra field": lambda l: l.update(extra={"any": [1, 2]}),
    "a version of true": lambda l: l.update(version=True),
    "a version of 1.0": lambda l: l.update(version=1.0),
    "a step beyond 2^53-1": lambda l: l.update(step=2**53),
    "a negative step": lambda l: l.update(step=-1),
    "app null": lambda l: l.update(app=None),
    "app a number": lambda l: l.update(app=3),
    "a fork's source": lambda l: l.update(forked_from={"thread_id": "t", "run_id": "r", "version": 3}),
    "forked_from null": lambda l: l.update(forked_from=None),
    "a fork's source at version 0": lambda l: l.update(forked_from={"thread_id": "t", "run_id": "r", "version": 0}),
    "a fork's source without its run": lambda l: l.update(forked_from={"thread_id": "t", "version": 3}),
    "a running disposition with a malformed cause": lambda l: l["disposition"].update(cause=7),
    "a running disposition with a ticket": lambda l: l["disposition"].update(
        ticket={"ticket_id": "t", "wait": "approval", "call_id": "c"}
    ),
    "an ended disposition without a cause": lambda l: l.update(disposition={"state": "ended"}),
    "a failed end without its error": lambda l: l.update(disposition={"state": "ended", "cause": {"kind": "failed"}}),
    "a completed end with a malformed error": lambda l: l.update(
        disposition={"state": "ended", "cause": {"kind": "completed", "error": 3}}
    ),
    "a call with a null wait": lambda l: l["batch"]["calls"][0].update(wait=None),
    "a call with a result it does not carry": lambda l: l["batch"]["calls"][0].update(result=5),
    "a call with an empty id": lambda l: l["batch"]["calls"][0].update(call_id=""),
    "a policy of zero attempts": lambda l: l["batch"]["calls"][0]["policy"].update(max_attempts=0),
    "a policy delegation of a list": lambda l: l["batch"]["calls"][0]["policy"].update(delegation=[1]),
    "a policy delegation unknown": lambda l: l["batch"]["calls"][0]["policy"].update(delegation="both"),
    "a batch of step 0": lambda l: l["batch"].update(step=0),
    "a batch without calls": lambda l: l["batch"].update(calls=[]),
    "an event without a type": lambda l: l["events"].append({"data": 1}),
    "an event that is not an object": lambda l: l["events"].append(3),
    "the old format": lambda l: l.update(trace="runkernel/1"),
    "no batch field": lambda l: l.pop("batch"),
}


@pytest.mark.parametrize("name", list(LENIENT_EDITS))
def test_a_hand_made_line_is_read_as_the_strict_reader_reads_it(name: str) -> None:
    line = _line()
    LENIENT_EDITS[name](line)
    assert_same_reading(line)


def test_a_wait_keeps_its_extra_strings_and_its_request() -> None:
    line = next(
        commit_to_json(c)
        for c in scripted_trace()
        if c.batch is not None and any(call.status.__class__.__name__ == "CallAwaiting" for call in c.batch.calls)
    )
    call = next(c for c in line["batch"]["calls"] if c["status"] == "awaiting")
    call["wait"].update(child=7, due_at="2026-01-01T00:00:00Z", request={"prompt": "ok?"})
    assert assert_same_reading(line)
    typed = typed_commit(line)
    assert typed is not None and typed.batch is not None
    wait = next(c.status.wait for c in typed.batch.calls if hasattr(c.status, "wait"))
    assert (wait.child, wait.due_at, wait.request) == (None, "2026-01-01T00:00:00Z", {"prompt": "ok?"})


def test_text_that_is_not_json_is_refused_by_the_strict_path() -> None:
    assert typed_commit_of_text(b"{not json") is None
    with pytest.raises(msgspec.DecodeError):
        commit_from_line(b"{not json")


@given(histories())
def test_the_typed_writer_writes_the_bytes_of_the_dict(history: History) -> None:
    """``commit_line`` (no dict built) is byte for byte msgspec's encoding of ``commit_to_json``."""
    for commit in history.commits:
        assert commit_line(commit) == msgspec.json.encode(commit_to_json(commit))


def test_the_typed_writer_writes_every_optional_part_as_the_dict() -> None:
    for commit in scripted_trace():
        assert commit_line(commit) == msgspec.json.encode(commit_to_json(commit))
    policy = ToolPolicy(ToolRecoveryPolicy(RecoveryMode.REPLAY, 2), RetryPolicy(3), concurrent=True)
    sequential = ToolPolicy(
        ToolRecoveryPolicy(RecoveryMode.INDETERMINATE, 1), RetryPolicy(1), sequential_delegation=True
    )
    wait = Wait(WaitKind.APPROVAL, "t1", child="c", due_at="d", expires_at="e", request={"prompt": "ok?"})
    calls = (
        ToolCall("a", "t", [1], "op-a", CallAwaiting(0, wait), policy),
        ToolCall("b", "t", None, "op-b", CallCompleted(1, ToolResult(ResultKind.OUTPUT, {"v": 2})), None, {"r": 1}),
        ToolCall("c", "t", {}, "op-c", CallIndeterminate(1, IndeterminateReason.RUN_ENDED), sequential,
                 None, Delegation("ct", "cr", False)),
    )
    commits = [
        ThreadCommit(
            "t", "r", 0, 1, Ended(EndCause(EndCauseKind.FAILED, TypedError("E", "m"))), None,
            messages=(Message(Role.TOOL, None, call_id="a", metadata={"m": 1}),),
            events=(Event("x", {"type": "shadowed", "n": 1.5}),), app="app", staged=Staged(None),
            parent=ParentCall("pt", "pr", "pc"), forked_from=ForkedFrom("st", "sr", 7), app_version="v2",
        ),
        ThreadCommit(
            "t", "r", 1, 1, Awaiting(ResumeTicket("t1", WaitKind.APPROVAL, "a")), ActiveToolBatch("b", 1, True, calls),
            messages=(Message(Role.ASSISTANT, "x", (ToolUse("a", "t", 2**60),)),), staged=Staged({"s": [1]}),
        ),
    ]
    for commit in commits:
        assert commit_line(commit) == msgspec.json.encode(commit_to_json(commit))
