"""The judge of issue 7: the RFC 8785 digest, exact ticket comparison, I-JSON resume
commands, committed policies, metadata, Unicode in check-trace, redaction, stdin.

The payload-table rows and the listed edits of a ``resumed`` event are example traces
(``tests/data/traces``, judged in ``test_trace_examples.py``) and mutations
(``trace_mutations.py``, judged in ``test_trace_properties.py``).
"""

from __future__ import annotations

import hashlib
import io
import json
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import attrs
import pytest
import rfc8785
from hypothesis import given
from hypothesis import strategies as st

from driver_history import History
from runkernel.adapters.stores.export import redact_lines, redacted_ticket, ticket_ids
import runkernel.kernel.canonical as canonical_module
from runkernel.cli.entry import main
from runkernel.kernel.canonical import NotIJson, canonical_bytes, jcs_digest
from runkernel.kernel.codec import commit_from_json, commit_to_json
from runkernel.kernel.decide import decide
from runkernel.kernel.policies import Policies, RecoveryMode, RetryPolicy, ToolPolicy, ToolRecoveryPolicy
from runkernel.kernel.protocol import (
    Approve,
    Execute,
    ExternalResult,
    GateVerdict,
    InferenceResult,
    ProposedCall,
    RequireWait,
    ResumeCommand,
    ToolFinished,
    ToolFailure,
)
from runkernel.kernel.recover import recover
from runkernel.kernel.rules import Rejection, Rule
from runkernel.kernel.state import RESUMED_EVENT, CallExecuting, Message
from runkernel.kernel.validate_resume import same_id
from runkernel.kernel.values import Role, WaitKind
from runkernel.specs.checker import Verdict, check_lines
from runkernel.testing import activate, step
from strategies import histories
from trace_mutations import encode, to_lines

DATA = Path(__file__).resolve().parent.parent / "data" / "traces"
TICKET = "4f0c8a9d2b7e41c6a3d5e8f90b1c2d3e"


# --- RFC 8785 -------------------------------------------------------------------------


def test_canonical_form_matches_the_rfcs_published_example() -> None:
    # RFC 8785, section 3.2.2 (the sample input) and 3.2.3 (its canonical output)
    sample = json.loads(
        '{"numbers": [333333333.33333329, 1E30, 4.50, 2e-3, 0.000000000000000000000000001],'
        ' "string": "\\u20ac$\\u000F\\u000aA\'\\u0042\\u0022\\u005c\\\\\\"\\/",'
        ' "literals": [null, true, false]}'
    )
    expected = (
        '{"literals":[null,true,false],"numbers":[333333333.3333333,1e+30,4.5,0.002,1e-27],'
        '"string":"€$\\u000f\\nA\'B\\"\\\\\\\\\\"/"}'
    )
    assert canonical_bytes(sample) == expected.encode("utf-8")


def test_canonical_key_order_is_by_utf16_code_units_as_the_rfc_shows() -> None:
    # RFC 8785, section 3.2.3, "Sorting of Object Properties"
    sample = {
        "\u20ac": "Euro Sign", "\r": "Carriage Return", "\ufb33": "Hebrew Letter Dalet With Dagesh",
        "1": "One", "\U0001f600": "Emoji: Grinning Face", "\u0080": "Control",
        "\u00f6": "Latin Small Letter O With Diaeresis",
    }
    order = [value for _key, value in json.loads(canonical_bytes(sample)).items()]
    assert order == [
        "Carriage Return", "One", "Control", "Latin Small Letter O With Diaeresis", "Euro Sign",
        "Emoji: Grinning Face", "Hebrew Letter Dalet With Dagesh",
    ]


@pytest.mark.parametrize("value", [2**53, -(2**53), float("nan"), "bad \ud800", {1: "key"}])
def test_values_outside_i_json_have_no_canonical_form(value: Any) -> None:
    with pytest.raises(NotIJson):
        canonical_bytes(value)


# --- the runtime's own resume commits -------------------------------------------------


def _awaiting(kind: WaitKind = WaitKind.EXTERNAL) -> Any:
    state = activate("t", "r").state
    call = ProposedCall("c1", "sign", {"doc": 1}, "op-c1")
    state = step(state, InferenceResult("", (call,), "b1")).state
    return step(state, GateVerdict("c1", RequireWait(kind, TICKET))).state


def test_the_runtimes_resume_commit_carries_the_jcs_digest_of_its_command() -> None:
    # keys outside the BMP sort differently in JCS (UTF-16) than in sort_keys (code points)
    command = ResumeCommand("r", TICKET, WaitKind.EXTERNAL, ExternalResult({"\U0001f600": 1, "\uffff": 2, "n": 1e30}))
    decision = step(_awaiting(), command)
    assert decision.commit is not None
    (event,) = [e for e in decision.commit.events if e.type == RESUMED_EVENT]
    canonical = canonical_bytes(event.data["command"])
    assert event.data["digest"] == hashlib.sha256(canonical).hexdigest() == command.digest()
    naive = json.dumps(command.to_json(), sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    assert hashlib.sha256(naive.encode()).hexdigest() != event.data["digest"]


@pytest.mark.parametrize("value", [2**53, -(2**60), "bad \ud800", float("inf")])
def test_a_resume_command_outside_i_json_is_refused_before_anything_is_committed(value: Any) -> None:
    verdict = decide(_awaiting(), ResumeCommand("r", TICKET, WaitKind.EXTERNAL, ExternalResult({"v": value})))
    assert isinstance(verdict, Rejection) and verdict.rule is Rule.PAYLOAD_TYPE, verdict


# --- exact ticket comparison ------------------------------------------------------------


@pytest.mark.parametrize(
    "other",
    [TICKET.upper(), f" {TICKET}", f"{TICKET}\n", TICKET[:-1], TICKET[:16], TICKET + "0", TICKET.replace("a", "A", 1)],
)
def test_ticket_ids_compare_as_exact_byte_strings(other: str) -> None:
    assert same_id(TICKET, TICKET)
    assert not same_id(TICKET, other)
    assert not same_id(other, TICKET)


@pytest.mark.parametrize(
    "edit", [str.upper, lambda t: t + " ", lambda t: " " + t, lambda t: t[:-4], lambda t: t + "ff"],
    ids=["case-folded", "trailing-space", "leading-space", "prefix", "extended"],
)
@pytest.mark.parametrize("where", ["event", "command"])
def test_a_resume_naming_a_sloppily_equal_ticket_is_illegal(edit: Any, where: str) -> None:
    state = _awaiting()
    command = ResumeCommand("r", TICKET, WaitKind.EXTERNAL, ExternalResult("signed"))
    decision = step(state, command)
    assert decision.commit is not None
    line = commit_to_json(decision.commit)
    (event,) = [e for e in line["events"] if e["type"] == RESUMED_EVENT]
    target = event if where == "event" else event["command"]
    target["ticket_id"] = edit(target["ticket_id"])
    event["digest"] = jcs_digest(event["command"])
    lines = [commit_to_json(c) for c in _commits_to_awaiting()] + [line]
    finding = check_lines(to_lines(lines))
    assert (finding.verdict, finding.line, finding.rule) == (Verdict.ILLEGAL, len(lines), Rule.RESUME.value)


def _commits_to_awaiting() -> list[Any]:
    decision = activate("t", "r")
    commits = [decision.commit]
    call = ProposedCall("c1", "sign", {"doc": 1}, "op-c1")
    decision = step(decision.state, InferenceResult("", (call,), "b1"))
    commits.append(decision.commit)
    decision = step(decision.state, GateVerdict("c1", RequireWait(WaitKind.EXTERNAL, TICKET)))
    commits.append(decision.commit)
    return commits


# --- the ask-the-user tool: Awaiting -> Completed{external} -----------------------------


def test_an_input_answer_may_complete_its_call_as_external() -> None:
    path = DATA / "legal" / "resume-row-input-completes-as-external.jsonl"
    finding = check_lines(path.read_bytes().splitlines())
    assert finding.verdict is Verdict.LEGAL, finding.report(path.name)
    resume = json.loads(path.read_bytes().splitlines()[3])
    (call,) = resume["batch"]["calls"]
    assert call["status"] == "completed" and call["result"] == {"kind": "external", "value": "eu-west"}
    assert _resumed_payload(resume) == {"type": "input", "value": "eu-west"}


def _resumed_payload(line: dict[str, Any]) -> Any:
    (event,) = [e for e in line["events"] if e["type"] == RESUMED_EVENT]
    return event["command"]["payload"]


# --- committed policies ---------------------------------------------------------------


REPLAY = ToolPolicy(ToolRecoveryPolicy(RecoveryMode.REPLAY, 3), RetryPolicy(2))
NEVER_AGAIN = Policies(default=ToolPolicy(ToolRecoveryPolicy(RecoveryMode.INDETERMINATE), RetryPolicy(1)))


def _executing_under(policies: Policies) -> Any:
    state = activate("t", "r").state
    state = step(state, InferenceResult("", (ProposedCall("c1", "fetch", {}, "op-c1"),), "b1"), policies).state
    from runkernel.kernel.protocol import Allow

    return step(state, GateVerdict("c1", Allow()), policies).state


def test_the_commit_that_opens_a_batch_fixes_each_calls_policy_in_the_trace() -> None:
    policies = Policies(tools={"fetch": REPLAY})
    state = activate("t", "r").state
    decision = step(state, InferenceResult("", (ProposedCall("c1", "fetch", {}, "op-c1"),), "b1"), policies)
    assert decision.commit is not None and decision.commit.batch is not None
    assert decision.commit.batch.calls[0].policy == REPLAY
    line = commit_to_json(decision.commit)
    assert line["batch"]["calls"][0]["policy"] == {"recovery": "replay", "max_attempts": 3, "retries": 1}
    assert commit_from_json(json.loads(json.dumps(line))) == decision.commit


def test_recover_reads_the_committed_policy_not_the_workers_configuration() -> None:
    state = _executing_under(Policies(tools={"fetch": REPLAY}))
    # a worker configured to never run the tool again still replays it: the policy is committed
    decision = recover(state, NEVER_AGAIN).decision
    assert decision.commit is not None and decision.commit.batch is not None
    assert decision.commit.batch.calls[0].status == CallExecuting(2)
    assert any(isinstance(e, Execute) and e.attempt == 2 for e in decision.effects)


def test_retries_follow_the_committed_retry_policy_not_the_workers() -> None:
    state = _executing_under(Policies(tools={"fetch": REPLAY}))
    decision = step(state, ToolFinished("c1", 1, ToolFailure("503", retryable=True)), NEVER_AGAIN)
    assert decision.commit is not None and decision.commit.batch is not None
    assert decision.commit.batch.calls[0].status == CallExecuting(2)


def test_a_committed_policy_never_changes() -> None:
    state = _executing_under(Policies(tools={"fetch": REPLAY}))
    decision = step(state, ToolFinished("c1", 1, ToolFailure("503", retryable=True)))
    assert decision.commit is not None and decision.commit.batch is not None
    changed_call = attrs.evolve(decision.commit.batch.calls[0], policy=NEVER_AGAIN.default)
    changed = attrs.evolve(decision.commit, batch=decision.commit.batch.replace_call(changed_call))
    lines = [commit_to_json(c) for c in _commits_through_execution()] + [commit_to_json(changed)]
    finding = check_lines(to_lines(lines))
    assert (finding.verdict, finding.line, finding.rule) == (Verdict.ILLEGAL, 4, Rule.BATCH_IDENTITY.value)


def _commits_through_execution() -> list[Any]:
    from runkernel.kernel.protocol import Allow

    policies = Policies(tools={"fetch": REPLAY})
    decision = activate("t", "r")
    commits = [decision.commit]
    decision = step(decision.state, InferenceResult("", (ProposedCall("c1", "fetch", {}, "op-c1"),), "b1"), policies)
    commits.append(decision.commit)
    decision = step(decision.state, GateVerdict("c1", Allow()), policies)
    commits.append(decision.commit)
    return commits


# --- metadata ---------------------------------------------------------------------------


def test_message_metadata_is_kept_verbatim_and_not_judged() -> None:
    metadata = {"framework": {"id": "msg_01", "parts": [{"kind": "text"}]}, "big": 2**70, "x": None}
    first = activate("t", "r").commit
    assert first is not None
    commit = attrs.evolve(first, messages=(Message(Role.USER, "task", metadata=metadata),))
    line = commit_to_json(commit)
    assert line["messages"][0]["metadata"] == metadata
    assert commit_from_json(json.loads(json.dumps(line))).messages[0].metadata == metadata
    assert check_lines(to_lines([line])).verdict is Verdict.LEGAL


# --- Unicode in check-trace -------------------------------------------------------------


def _first_lines() -> list[bytes]:
    return (DATA / "legal" / "resume-row-approval-approve.jsonl").read_bytes().splitlines()


@pytest.mark.parametrize(
    "escape", [b"\\ud800", b"\\udfff", b"\\ud83d", b"x\\ude00y", b"\\ud83d\\ud83d"],
)
@pytest.mark.parametrize("where", ["content", "key"])
def test_a_lone_surrogate_anywhere_is_not_a_trace(
    escape: bytes, where: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    lines = _first_lines()
    if where == "content":
        lines[1] = lines[1].replace(b'"content": "', b'"content": "bad ' + escape, 1)
    else:
        lines[1] = lines[1][:-1] + b',"' + escape + b'":1}'
    assert escape in lines[1]
    path = tmp_path / "surrogate.jsonl"
    path.write_bytes(b"\n".join(lines) + b"\n")
    assert main(["check-trace", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"{path}:2: not-a-trace: ") and err.count("\n") == 1, err


def test_a_surrogate_pair_is_one_scalar_value_and_fine(tmp_path: Path) -> None:
    lines = _first_lines()
    lines[1] = lines[1].replace(b'"content": "', b'"content": "\\ud83d\\ude00 ', 1)
    assert check_lines(lines).verdict is Verdict.LEGAL


# --- redaction ----------------------------------------------------------------------------


def _assert_redaction_keeps_legality(lines: list[dict[str, Any]]) -> None:
    redacted = redact_lines(lines)
    finding = check_lines(to_lines(redacted))
    assert finding.verdict is Verdict.LEGAL, finding.report("redacted")
    text = b"\n".join(to_lines(redacted))
    for ticket_id in ticket_ids(lines):
        assert ticket_id.encode() not in text
        assert redacted_ticket(ticket_id).encode() in text


@given(histories())
def test_redaction_keeps_legal_traces_legal(history: History) -> None:
    _assert_redaction_keeps_legality(encode(history.commits))


@pytest.mark.parametrize("path", sorted((DATA / "legal").glob("*.jsonl")), ids=lambda p: p.name)
def test_redaction_keeps_every_legal_example_legal(path: Path) -> None:
    _assert_redaction_keeps_legality([json.loads(raw) for raw in path.read_bytes().splitlines()])


# --- standard input -----------------------------------------------------------------------


def test_dash_reads_the_trace_from_standard_input(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    data = b"\n".join(_first_lines()) + b"\n"
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(data)))
    assert main(["check-trace", "-"]) == 0
    assert capsys.readouterr().out.startswith("-: legal: ")
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(data + b"\n{}\n")))
    assert main(["check-trace", "-"]) == 2
    assert capsys.readouterr().err.startswith(f"-:{len(_first_lines()) + 1}: not-a-trace: ")


# --- the canonical form's fast path -------------------------------------------------------

i_json = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**53) + 1, 2**53 - 1)
    | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4),
    max_leaves=25,
)


@given(i_json)
def test_the_canonical_form_is_rfc8785s_on_every_i_json_value(value: Any) -> None:
    assert canonical_bytes(value) == rfc8785.dumps(value)


@pytest.mark.parametrize(
    "value", [{"\U0001f600": 1, "\uffff": 2}, {"n": 1e30}, {"n": 0.1, "k": [4.50, 2e-3]}, {"\x7f\x00\n\"\\": "\x1f/"}]
)
def test_the_canonical_form_agrees_with_rfc8785_where_the_stdlib_would_not(value: Any) -> None:
    assert canonical_bytes(value) == rfc8785.dumps(value)


#: Text beyond ASCII in keys and values where the fast path answers alone (no floats, no
#: key outside the Basic Multilingual Plane): accents, other scripts, astral characters
#: in values, control characters and the characters JSON escapes, separators JCS leaves
#: raw, BMP keys whose order is by code point, a decomposed and a precomposed key.
FAST_PATH_TEXT: list[Any] = [
    {"name": "café", "ville": "Zürich"},
    {"ключ": "значение", "中文": "日本語", "한국어": 1},
    {"emoji": "\U0001f600 and \U0001f9ea", "edge": ["\U00010000", "\U0010ffff"]},
    {"controls": "\x00\x01\x08\x0b\x1f\x7f\x80\x9f"},
    {"escaped": "\"\\/\b\f\n\r\t", "quote\"key\\": "ok"},
    {"separators": "\u2028\u2029", "bom": "\ufeff", "nonchar": "\uffff", "private": "\ue000"},
    {"z": 1, "é": 2, "A": 3, "\ue000": 4, "\uffff": 5, "\u00ff": 6, "\u0100": 7},
    {"e\u0301": "decomposed", "é": "precomposed"},
    {"nested": [{"ü": {"\u2603": "\U0001f600\u0000"}}], "n": -(2**53) + 1},
    "naïve \U0001f600 \x1f",
]
#: Keys outside the BMP, where UTF-16 order differs from code point order: the slow path.
ASTRAL_KEYS: list[Any] = [
    {"\U0001f600": 1, "\uffff": 2, "\ue000": 3},
    {"a\U00010000": "x", "a\uffff": "y"},
    {"outer": {"\U0010ffff": [1], "\U0001f9ea": "\u00e9"}},
]


@pytest.mark.parametrize("value", FAST_PATH_TEXT, ids=[str(i) for i in range(len(FAST_PATH_TEXT))])
def test_the_fast_path_on_non_ascii_text_is_rfc8785s_form_and_digest(
    value: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    expected = rfc8785.dumps(value)

    def not_consulted(_value: Any) -> bytes:
        raise AssertionError("the fast path should answer this value alone")

    monkeypatch.setattr(canonical_module, "rfc8785", SimpleNamespace(dumps=not_consulted))
    assert canonical_bytes(value) == expected
    assert jcs_digest(value) == hashlib.sha256(expected).hexdigest()


@pytest.mark.parametrize("value", ASTRAL_KEYS, ids=[str(i) for i in range(len(ASTRAL_KEYS))])
def test_keys_outside_the_bmp_leave_the_fast_path_and_sort_by_utf16(
    value: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    expected = rfc8785.dumps(value)
    consulted: list[Any] = []

    def spy(inner: Any) -> bytes:
        consulted.append(inner)
        return rfc8785.dumps(inner)

    monkeypatch.setattr(canonical_module, "rfc8785", SimpleNamespace(dumps=spy))
    assert canonical_bytes(value) == expected
    assert consulted == [value]
    assert jcs_digest(value) == hashlib.sha256(expected).hexdigest()
