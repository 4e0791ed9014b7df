"""Gate answers for members of a group of concurrent delegations (Step and
ToolBatch; ``CONCURRENCY_RULE``), with the pull-mode runtime: its model, gate and
answers (every answer kind, played on the first, middle and last member over every host
in test_group_gate_hosts.py), the judge's refusals of a group gated out of order, and a
member's input answer reaching its child."""

from __future__ import annotations

import json
from collections import Counter

import pytest

from runkernel.adapters.drive.inbox import submit_resume
from runkernel.adapters.stores.memory import MemoryStore
from runkernel.adapters.drive.ports import (
    GateAnswer,
    Hold,
    InferenceRequest,
    ModelReply,
    Permit,
    Provide,
    Refuse,
    ToolRegistry,
)
from runkernel import CallRequest
from runkernel.adapters.drive.runtime import Runtime
from runkernel.kernel.codec import commit_to_json
from runkernel.kernel.policies import ToolPolicy
from runkernel.kernel.protocol import (
    Approve,
    Deny,
    ExternalResult,
    ProvideInput,
    ResumeCommand,
    ResumePayload,
)
from runkernel.kernel.state import (
    Awaiting,
    CallExecuting,
    Ended,
    Message,
    RunSnapshot,
    ToolCall,
)
from runkernel.kernel.values import EndCauseKind, JsonValue, Role, WaitKind
from runkernel.specs.checker import Verdict, check_lines
from runkernel.testing import Boundary, CrashAt, CrashingStore, Position, SimulatedCrash
from test_concurrent_delegations import _Tool

PARENT = "parent"
MEMBERS = ("d1", "d2", "d3")
PAST = "2020-01-01T00:00:00Z"


class _Model:
    """The parent asks for three delegations, then one ordinary call; children answer."""

    def infer(self, request: InferenceRequest) -> ModelReply:
        if request.run_id == PARENT:
            if request.step == 1:
                calls = tuple(CallRequest("research", {"topic": m}, m) for m in MEMBERS)
                return ModelReply("", calls + (CallRequest("fetch", {"q": 1}, "o4"),))
            return ModelReply("summary", end=EndCauseKind.COMPLETED)
        return ModelReply(f"answer {request.messages[0].content}", end=EndCauseKind.COMPLETED)


class _Gate:
    """Answers ``answer`` for one call every time it is asked, Permit for the others."""

    def __init__(self, call_id: str, answer: GateAnswer) -> None:
        self.call_id, self.answer = call_id, answer
        self.asked: Counter[str] = Counter()

    def check(self, run_id: str, call: ToolCall) -> GateAnswer:
        if run_id != PARENT:
            return Permit()
        self.asked[call.call_id] += 1
        return self.answer if call.call_id == self.call_id else Permit()


HOLDS: dict[str, tuple[GateAnswer, ResumePayload | None]] = {
    "approve": (Hold(WaitKind.APPROVAL), Approve()),
    "deny": (Hold(WaitKind.APPROVAL), Deny("no")),
    "input": (Hold(WaitKind.INPUT), ProvideInput("more")),
    "external": (Hold(WaitKind.EXTERNAL), ExternalResult({"found": 1})),
    "scheduled": (Hold(WaitKind.SCHEDULED, due_at=PAST), None),  # the runtime fires the timer
}
OUTRIGHT: dict[str, GateAnswer] = {"allow": Permit(), "block": Refuse("policy"), "supply": Provide({"cached": 2})}
KINDS = sorted(OUTRIGHT) + sorted(HOLDS)


class _World:
    def __init__(self, held: str, kind: str) -> None:
        answer = OUTRIGHT[kind] if kind in OUTRIGHT else HOLDS[kind][0]
        self.store = MemoryStore()
        self.research, self.fetch = _Tool(ToolPolicy(terminal_only_delegation=True)), _Tool(ToolPolicy())
        self.tools = ToolRegistry({"research": self.research, "fetch": self.fetch})
        self.gate = _Gate(held, answer)

    def runtime(self) -> Runtime:
        return Runtime(self.store, _Model(), self.tools, gate=self.gate, self_check=True)

    def parent(self) -> RunSnapshot:
        snapshot = self.store.run(PARENT)
        assert snapshot is not None
        return snapshot

    def lines(self) -> list[bytes]:
        return [json.dumps(commit_to_json(c)).encode() for t in self.store.thread_ids() for c in self.store.commits(t)]

    def judged_legal(self) -> None:
        finding = check_lines(self.lines())
        assert finding.verdict is Verdict.LEGAL, finding.report("store")

    def children_running(self) -> list[str]:
        batch = self.parent().batch
        if batch is None:
            return []
        return [
            c.delegation.run_id for c in batch.calls
            if c.delegation is not None and isinstance(c.status, CallExecuting)
        ]

    def finish(self) -> None:
        """Drive children and parent until the parent ends (a bounded number of rounds)."""
        for _ in range(8):
            if isinstance(self.parent().state, Ended):
                return
            self.runtime().drive(PARENT)  # first: it activates children a crash left unactivated
            for child in self.children_running():
                self.runtime().drive(child)
        raise AssertionError("the parent did not end in 8 rounds")


def test_the_judge_refuses_a_run_awaiting_while_a_member_of_its_group_runs() -> None:
    world = _World("d1", "allow")
    world.runtime().start("t", PARENT, (Message(Role.USER, "go"),))
    lines = [commit_to_json(c) for c in world.store.commits("t")]
    batch_open = next(i for i, line in enumerate(lines) if line["batch"] is not None)
    bad = json.loads(json.dumps(lines[batch_open + 1]))  # the group's start commit
    assert [c["status"] for c in bad["batch"]["calls"]] == ["executing"] * 3 + ["requested"]
    wait: JsonValue = {"kind": "approval", "correlation": "tk-planted-0001"}
    bad["batch"]["calls"][2] = {
        k: v for k, v in bad["batch"]["calls"][2].items() if k != "delegation"
    } | {"status": "awaiting", "attempt": 0, "wait": wait}
    bad["disposition"] = {"state": "awaiting", "ticket": {"ticket_id": "tk-planted-0001", "wait": "approval", "call_id": "d3"}}
    kept = lines[: batch_open + 1] + [bad]
    finding = check_lines([json.dumps(line).encode() for line in kept])
    assert (finding.verdict, finding.line, finding.rule) == (Verdict.ILLEGAL, batch_open + 2, "group-gated-before-it-starts")


def test_the_judge_refuses_members_started_one_commit_at_a_time() -> None:
    world = _World("d1", "allow")
    world.runtime().start("t", PARENT, (Message(Role.USER, "go"),))
    lines = [commit_to_json(c) for c in world.store.commits("t")]
    batch_open = next(i for i, line in enumerate(lines) if line["batch"] is not None)
    first = json.loads(json.dumps(lines[batch_open + 1]))
    for call in first["batch"]["calls"][1:3]:
        call.pop("delegation")
        call.update(status="requested", attempt=0)
    finding = check_lines([json.dumps(line).encode() for line in lines[: batch_open + 1] + [first]])
    assert (finding.verdict, finding.line, finding.rule) == (Verdict.ILLEGAL, batch_open + 2, "group-gated-before-it-starts")


def test_the_judge_refuses_a_member_waiting_while_another_starts_in_the_same_commit() -> None:
    world = _World("d1", "allow")
    world.runtime().start("t", PARENT, (Message(Role.USER, "go"),))
    lines = [commit_to_json(c) for c in world.store.commits("t")]
    batch_open = next(i for i, line in enumerate(lines) if line["batch"] is not None)
    bad = json.loads(json.dumps(lines[batch_open + 1]))  # the group's start commit
    calls = bad["batch"]["calls"]
    calls[1] = {k: v for k, v in calls[1].items() if k != "delegation"} | {
        "status": "awaiting", "attempt": 0, "wait": {"kind": "approval", "correlation": "tk-planted-0002"},
    }
    # d1 and d3 start while d2 waits: no member is left Requested, so only the state says it
    bad["disposition"] = {"state": "awaiting", "ticket": {"ticket_id": "tk-planted-0002", "wait": "approval", "call_id": "d2"}}
    finding = check_lines([json.dumps(line).encode() for line in lines[: batch_open + 1] + [bad]])
    assert (finding.verdict, finding.line, finding.rule) == (Verdict.ILLEGAL, batch_open + 2, "group-gated-before-it-starts")


@pytest.mark.parametrize("crash", [False, True], ids=["no crash", "crash after the resume commit"])
def test_a_members_input_answer_reaches_its_child(crash: bool) -> None:
    world = _World("d2", "input")
    world.runtime().start("t", PARENT, (Message(Role.USER, "go"),))
    state = world.parent()
    assert isinstance(state.state, Awaiting)
    ticket = state.state.ticket
    answer = ResumeCommand(PARENT, ticket.ticket_id, ticket.wait, ProvideInput("more"))
    assert isinstance(submit_resume(world.store, answer), int)
    if crash:  # the member is Executing, its child not activated yet: recovery activates it
        dying = CrashingStore(world.store, CrashAt(Boundary.AFTER_WRITE, Position.RESUME))
        runtime = Runtime(dying, _Model(), world.tools, gate=world.gate, self_check=True)
        with pytest.raises(SimulatedCrash):
            runtime.drive(PARENT)
        assert world.children_running() and all(world.store.run(c) is None for c in world.children_running())
    world.finish()
    batches = [c.batch for c in world.store.commits("t") if c.batch is not None]
    member = batches[-1].call("d2")  # the parent has ended: its last batch, as committed
    assert member is not None and member.delegation is not None
    activation = next(iter(world.store.commits(member.delegation.thread_id)))
    assert [m.content for m in activation.messages] == [member.arguments, "more"]
    world.judged_legal()
