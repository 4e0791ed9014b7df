"""Sequential delegations get a derived identity too (Step and ToolBatch:
"every delegation's child (sequential ones too) has a Thread id and Run id derived from
the parent Run id and the call's operation id ... fixed in the call's `delegation` field
by its Executing{n} commit"): the kernel, the pull-mode runtime, the codec and the judge.
An undeclared tool that delegates fails with ``UndeclaredDelegation`` under every host
(the pull-mode runtime and the push-mode driver through both shells). Traces written
before the tool had to be declared stay legal."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from push_host import SHELLS, make_shell
from runkernel.adapters.stores.memory import MemoryStore
from runkernel.adapters.drive.ports import (
    Delegated,
    InferenceRequest,
    ModelReply,
    StatusReply,
    ToolRegistry,
    ToolReply,
)
from runkernel import CallRequest, RunCall
from runkernel.adapters.drive.actions import Infer
from runkernel.adapters.drive.inbox import submit_resume
from runkernel.adapters.drive.runtime import Runtime
from runkernel.kernel.codec import commit_to_json, policy_from_json, policy_to_json
from runkernel.kernel.delegation import child_identity
from runkernel.kernel.policies import ToolPolicy
from runkernel.kernel.protocol import DelegationResult, ResumeCommand
from runkernel.kernel.state import Awaiting, CallAwaiting, CallCompleted, CallExecuting, Delegation, Ended, Message
from runkernel.kernel.values import EndCauseKind, ResultKind, Role, WaitKind
from runkernel.specs.checker import Verdict, check_lines
from runkernel.testing import CountingIds

LEGAL = Path(__file__).parent.parent / "data" / "traces" / "legal" / "delegation-resumed.jsonl"


class _Model:
    def infer(self, request: InferenceRequest) -> ModelReply:
        if request.step == 1:
            return ModelReply("", (CallRequest("ask", {"q": "which?"}, "c1"),))
        return ModelReply("done", end=EndCauseKind.COMPLETED)


class _Asker:
    def __init__(self, policy: ToolPolicy) -> None:
        self.policy = policy
        self.invocations: list[RunCall] = []

    def run(self, invocation: RunCall) -> ToolReply:
        self.invocations.append(invocation)
        return Delegated()

    def status(self, operation_id: str, lease_epoch: int | None) -> StatusReply:
        raise AssertionError("not a reconnect tool")


def _lines(store: MemoryStore) -> list[bytes]:
    return [json.dumps(commit_to_json(c)).encode() for t in store.thread_ids() for c in store.commits(t)]


def test_the_childs_identity_is_derived_and_fixed_by_the_executing_commit() -> None:
    store = MemoryStore()
    asker = _Asker(ToolPolicy(sequential_delegation=True))
    outcome = Runtime(store, _Model(), ToolRegistry({"ask": asker}), self_check=True).start(
        "t", "parent", (Message(Role.USER, "go"),)
    )
    state = outcome.snapshot
    assert isinstance(state.state, Awaiting) and state.batch is not None
    call = state.batch.calls[0]
    expected = child_identity("parent", call.operation_id, concurrent=False)
    assert call.delegation == expected
    assert isinstance(call.status, CallAwaiting) and call.status.wait.kind is WaitKind.DELEGATION
    assert call.status.wait.child == expected.run_id  # one id: the derived one
    assert [i.delegation for i in asker.invocations] == [expected]  # the tool is told its child
    executing = [
        c for c in store.commits("t")
        if c.batch is not None and isinstance(c.batch.calls[0].status, CallExecuting)
    ]
    assert len(executing) == 1 and executing[0].batch is not None
    assert executing[0].batch.calls[0].delegation == expected  # fixed by the Executing commit
    line = commit_to_json(executing[0])
    assert line["batch"]["calls"][0]["delegation"] == {
        "thread_id": expected.thread_id, "run_id": expected.run_id, "concurrent": False,
    }
    ticket = state.state.ticket
    command = ResumeCommand("parent", ticket.ticket_id, WaitKind.DELEGATION, DelegationResult({"pick": "B"}))
    assert isinstance(submit_resume(store, command), int)
    ended = Runtime(store, _Model(), ToolRegistry({"ask": asker}), self_check=True).drive("parent")
    assert isinstance(ended.snapshot.state, Ended)
    finding = check_lines(_lines(store))
    assert finding.verdict is Verdict.LEGAL, finding.report("store")


#: the pull-mode Runtime, and the push-mode driver through both shells
HOSTS = ("pull", *SHELLS)


def _undeclared_delegates(host: str, store: MemoryStore) -> list[Delegation | None]:
    """Run r1 (Thread t1) asks for ``c1`` of a tool not declared a delegation, which
    answers that it delegated; the host drives on until the call's result is committed
    (the pull runtime to the Run's end, a push host to the next Infer). Returns the
    child identity each invocation of the tool was told."""
    if host == "pull":
        asker = _Asker(ToolPolicy())
        outcome = Runtime(store, _Model(), ToolRegistry({"ask": asker}), self_check=True).start(
            "t1", "r1", (Message(Role.USER, "go"),)
        )
        assert isinstance(outcome.snapshot.state, Ended)
        return [i.delegation for i in asker.invocations]
    driver = make_shell(host, store, ids=CountingIds("id"), tools={"ask": ToolPolicy()})
    assert isinstance(driver.start(["go"], thread_id="t1", run_id="r1"), Infer)
    action = driver.inferred("", [CallRequest("ask", {"q": "which?"}, "c1")])
    assert isinstance(action, RunCall)
    step = driver.call_delegated("c1")
    assert isinstance(step, Infer) and step.step == 2  # the call ended; the model is asked again
    assert [m.role for m in store.messages("t1")][-1] is Role.TOOL
    return [action.delegation]


@pytest.mark.parametrize("host", HOSTS)
def test_a_tool_not_declared_a_delegation_that_delegates_fails_with_a_typed_error(host: str) -> None:
    store = MemoryStore()
    assert _undeclared_delegates(host, store) == [None]
    finalized = [c.batch for c in store.commits("t1") if c.batch is not None and c.batch.finalized][0]
    status = finalized.calls[0].status
    assert isinstance(status, CallCompleted) and status.result.kind is ResultKind.ERROR
    assert isinstance(status.result.value, dict) and status.result.value["type"] == "UndeclaredDelegation"
    finding = check_lines(_lines(store))
    assert finding.verdict is Verdict.LEGAL, finding.report("store")


def test_the_policy_declares_the_kind_of_delegation_in_the_trace() -> None:
    sequential = ToolPolicy(sequential_delegation=True)
    encoded = policy_to_json(sequential)
    assert encoded["delegation"] == "sequential"
    assert policy_from_json(encoded, "policy") == sequential
    assert policy_from_json(policy_to_json(ToolPolicy(terminal_only_delegation=True)), "p") == ToolPolicy(
        terminal_only_delegation=True
    )


def _legal_lines() -> list[dict[str, Any]]:
    return [json.loads(line) for line in LEGAL.read_text("utf-8").splitlines()]


def _verdict(lines: list[dict[str, Any]]) -> tuple[Verdict, int | None, str | None]:
    finding = check_lines([json.dumps(line).encode() for line in lines])
    return finding.verdict, finding.line, finding.rule


def _parent_awaiting_index(lines: list[dict[str, Any]]) -> int:
    return next(i for i, ln in enumerate(lines) if ln["disposition"]["state"] == "awaiting")


def test_the_judge_refuses_a_delegation_wait_naming_another_child() -> None:
    lines = _legal_lines()
    at = _parent_awaiting_index(lines)
    lines[at]["batch"]["calls"][0]["wait"]["child"] = "someone-else"
    assert _verdict(lines[: at + 1]) == (Verdict.ILLEGAL, at + 1, "delegation-child-fixed")


def test_the_judge_refuses_a_declared_delegation_started_without_its_child() -> None:
    lines = _legal_lines()
    at = next(i for i, ln in enumerate(lines) if ln["batch"] and ln["batch"]["calls"][0]["status"] == "executing")
    del lines[at]["batch"]["calls"][0]["delegation"]
    assert _verdict(lines[: at + 1]) == (Verdict.ILLEGAL, at + 1, "delegation-child-fixed")


def test_a_trace_from_before_delegations_were_declared_stays_legal() -> None:
    # no `delegation` in the policy or the call, any child id in the wait, a child that
    # does not name its parent: what runkernel wrote before this change
    lines = _legal_lines()
    for line in lines:
        line.pop("parent", None)
        for call in (line["batch"] or {}).get("calls", []):
            call.get("policy", {}).pop("delegation", None)
            call.pop("delegation", None)
            if "wait" in call and call["wait"]["kind"] == "delegation":
                call["wait"]["child"] = "run-child"
    assert _verdict(lines)[0] is Verdict.LEGAL
