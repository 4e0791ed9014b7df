"""Hooks that stage: BeforeInference's staged state and request-only context, AfterTool's
reaction (Step and ToolBatch: hooks), in the kernel, the judge, the pull-mode
runtime and the push-mode driver."""

from __future__ import annotations

import json
from pathlib import Path

import attrs
import pytest

from runkernel.adapters.drive.driver import Driver
from runkernel.adapters.drive.actions import CallRequest, Done, Infer, RunCall
from runkernel.adapters.stores.memory import MemoryStore
from runkernel.adapters.drive.ports import (
    InferenceRequest,
    ModelReply,
    Returned,
    StatusReply,
    Staging,
    ToolRegistry,
    ToolReply,
)
from runkernel.adapters.drive.runtime import Runtime
from runkernel.adapters.stores.sqlite import SqliteStore
from runkernel.adapters.stores.contract import Store
from runkernel.kernel.codec import commit_from_json, commit_to_json
from runkernel.kernel.decide import decide
from runkernel.kernel.policies import Policies, RetryPolicy, ToolPolicy
from runkernel.kernel.protocol import (
    Activate,
    Allow,
    Decision,
    GateVerdict,
    InferenceResult,
    Input,
    ProposedCall,
    ToolFailure,
    ToolFinished,
    ToolOutput,
)
from runkernel.kernel.rules import Rejection, Rule
from runkernel.kernel.state import CallCompleted, Message, RunSnapshot, Staged, ThreadCommit, ThreadHead
from runkernel.kernel.validate import NO_TICKETS_SEEN, validate_commit
from runkernel.kernel.values import EndCauseKind, JsonValue, Role
from runkernel.specs.checker import Verdict, check_lines
from runkernel.testing import Boundary, CrashAt, CrashingStore, Position, SimulatedCrash

RETRY2 = Policies(tools={"fetch": ToolPolicy(retry=RetryPolicy(max_attempts=2))})


def _drive(inputs: list[Input], policies: Policies = Policies()) -> tuple[RunSnapshot, list[ThreadCommit]]:
    """Feed ``inputs`` after an activation; every commit is self-checked by decide."""
    first = decide(None, Activate("t", "r", 0, (Message(Role.USER, "hi"),)))
    assert isinstance(first, Decision) and first.commit is not None
    state, commits = first.state, [first.commit]
    for event in inputs:
        decision = decide(state, event, policies, self_check=True)
        assert isinstance(decision, Decision), decision
        commits += [e.commit for e in decision.effects if hasattr(e, "commit") and isinstance(e.commit, ThreadCommit)]
        state = decision.state
    return state, commits


def _batch(*call_ids: str, staged: Staged | None = None) -> InferenceResult:
    calls = tuple(ProposedCall(c, "fetch", {"n": c}, f"op-{c}") for c in call_ids)
    return InferenceResult("", calls, batch_id=f"b-{'-'.join(call_ids)}", staged=staged)


def test_staged_state_is_committed_with_the_steps_next_commit_and_kept_until_changed() -> None:
    state, commits = _drive(
        [
            _batch("c1", staged=Staged({"plan": ["a"]})),
            GateVerdict("c1", Allow()),
            ToolFinished("c1", 1, ToolOutput(1)),
            InferenceResult("more"),  # no staging: unchanged
        ]
    )
    assert commits[1].staged == Staged({"plan": ["a"]})
    assert state.staged == {"plan": ["a"]}
    lines = [commit_to_json(c) for c in commits]
    assert lines[1]["staged"] == {"plan": ["a"]}
    assert all("staged" not in line for i, line in enumerate(lines) if i != 1)
    cleared, more = _drive([_batch("c1", staged=Staged({"x": 1})), GateVerdict("c1", Allow()),
                            ToolFinished("c1", 1, ToolOutput(1)), InferenceResult("bye", staged=Staged(None))])
    assert cleared.staged is None
    assert commit_to_json(more[-1])["staged"] is None  # null: cleared, not absent
    assert commit_from_json(commit_to_json(more[-1])).staged == Staged(None)


def test_a_reaction_is_committed_with_the_terminal_result_and_never_with_a_retry() -> None:
    state, commits = _drive(
        [
            _batch("c1", "c2"),
            GateVerdict("c1", Allow()),
            ToolFinished("c1", 1, ToolFailure("flaky", retryable=True), reaction={"seen": 1}),
            ToolFinished("c1", 2, ToolOutput("ok"), reaction={"seen": 2}),
            GateVerdict("c2", Allow()),
            ToolFinished("c2", 1, ToolOutput("fine")),
        ],
        RETRY2,
    )
    retry = commits[3]
    assert retry.batch is not None and retry.batch.calls[0].reaction is None
    assert state.batch is not None
    first, second = state.batch.calls
    assert isinstance(first.status, CallCompleted) and first.reaction == {"seen": 2}
    assert second.reaction is None
    line = commit_to_json(commits[-1])
    batch = line["batch"]
    assert isinstance(batch, dict) and isinstance(batch["calls"], list)
    assert batch["calls"][0]["reaction"] == {"seen": 2}
    assert "reaction" not in batch["calls"][1]


def _judge_next(commits: list[ThreadCommit], bad: ThreadCommit) -> Rejection:
    head, run = None, None
    for commit in commits:
        verdict = validate_commit(head, run, commit, ticket_seen=NO_TICKETS_SEEN)
        assert not isinstance(verdict, Rejection), verdict
        head, run = verdict.head, verdict.run
    rejected = validate_commit(head, run, bad, ticket_seen=NO_TICKETS_SEEN)
    assert isinstance(rejected, Rejection)
    return rejected


def test_the_judge_refuses_a_rewritten_reaction_and_a_reaction_before_the_result() -> None:
    _, commits = _drive([_batch("c1", "c2"), GateVerdict("c1", Allow()),
                         ToolFinished("c1", 1, ToolOutput("ok"), reaction="r1"), GateVerdict("c2", Allow())])
    last = commits[-1]
    assert last.batch is not None
    rewritten = attrs.evolve(
        last, expected_version=last.version,
        batch=last.batch.replace_call(attrs.evolve(last.batch.calls[0], reaction="r2")),
    )
    assert _judge_next(commits, rewritten).rule is Rule.TERMINAL_IMMUTABLE
    dropped = attrs.evolve(
        rewritten, batch=last.batch.replace_call(attrs.evolve(last.batch.calls[0], reaction=None))
    )
    assert _judge_next(commits, dropped).rule is Rule.TERMINAL_IMMUTABLE
    early = attrs.evolve(
        rewritten, batch=last.batch.replace_call(attrs.evolve(last.batch.calls[1], reaction="soon"))
    )
    assert _judge_next(commits, early).rule is Rule.EDGE_CONDITION


# --- the pull-mode runtime -----------------------------------------------------------


class _Model:
    def __init__(self) -> None:
        self.requests: list[tuple[int, JsonValue]] = []

    def infer(self, request: InferenceRequest) -> ModelReply:
        self.requests.append((request.step, request.context))
        if request.step == 1:
            return ModelReply("", (CallRequest("fetch", {"q": 1}, "c1"),))
        return ModelReply("done", end=EndCauseKind.COMPLETED)


class _Fetch:
    policy = ToolPolicy()

    def run(self, invocation: RunCall) -> ToolReply:
        return Returned({"got": invocation.arguments})

    def status(self, operation_id: str, lease_epoch: int | None) -> StatusReply:
        raise AssertionError("replay tool")


class _Hooks:
    def __init__(self) -> None:
        self.seen: list[tuple[int, JsonValue]] = []

    def before_inference(self, run_id: str, step: int, staged: JsonValue) -> Staging:
        self.seen.append((step, staged))
        return Staging(Staged({"step": step}), context={"secret": f"ctx-{step}"})

    def after_tool(self, run_id: str, call_id: str, attempt: int, reply: ToolReply) -> JsonValue:
        return {"reacted": call_id, "attempt": attempt}


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
def test_runtime_commits_staging_and_reactions_and_never_the_request_only_context(
    kind: str, tmp_path: Path
) -> None:
    store: Store = MemoryStore() if kind == "memory" else SqliteStore(str(tmp_path / "k.db"))
    model, hooks = _Model(), _Hooks()
    tools = ToolRegistry({"fetch": _Fetch()})
    dying = CrashingStore(store, CrashAt(Boundary.AFTER_WRITE, Position.BATCH_OPEN))
    crashing = Runtime(dying, model, tools, hooks=hooks, self_check=True)
    with pytest.raises(SimulatedCrash):
        crashing.start("t", "r", (Message(Role.USER, "go"),))
    # a fresh runtime continues from the store: the staged state is committed, the
    # request-only context is gone until the hook runs again for the next step
    assert store.run("r") is not None and store.run("r").staged == {"step": 1}  # type: ignore[union-attr]
    outcome = Runtime(store, model, tools, hooks=hooks, self_check=True).drive("r")
    assert outcome.snapshot.staged == {"step": 2}
    assert model.requests == [(1, {"secret": "ctx-1"}), (2, {"secret": "ctx-2"})]
    assert hooks.seen == [(1, None), (2, {"step": 1})]
    lines = [commit_to_json(c) for c in store.commits("t")]
    text = "\n".join(json.dumps(line) for line in lines)
    assert "ctx-" not in text  # never committed, never exported
    reacted = [c for line in lines if line["batch"] for c in line["batch"]["calls"] if "reaction" in c]
    assert reacted and reacted[-1]["reaction"] == {"reacted": "c1", "attempt": 1}
    finding = check_lines([json.dumps(line).encode() for line in lines])
    assert finding.verdict is Verdict.LEGAL


# --- the push-mode driver -----------------------------------------------------------


def test_push_driver_carries_staged_state_and_reactions() -> None:
    store = MemoryStore()
    driver = Driver(store, tools={"fetch": ToolPolicy()})
    action = driver.start([Message(Role.USER, "go")], thread_id="t", run_id="r")
    assert isinstance(action, Infer) and action.staged is None
    action = driver.inferred("", [driver_call("c1")], staged=Staged({"mood": "curious"}))
    assert isinstance(action, RunCall)
    action = driver.call_returned("c1", 42, reaction={"note": "kept"})
    assert isinstance(action, Infer) and action.staged == {"mood": "curious"}
    action = driver.inferred("bye", end=EndCauseKind.COMPLETED, staged=Staged(None))
    assert isinstance(action, Done)
    snapshot = store.run("r")
    assert snapshot is not None and snapshot.staged is None
    finalized = [c.batch for c in store.commits("t") if c.batch is not None and c.batch.finalized]
    assert finalized and finalized[0].calls[0].reaction == {"note": "kept"}
    lines = [json.dumps(commit_to_json(c)).encode() for c in store.commits("t")]
    assert check_lines(lines).verdict is Verdict.LEGAL


def driver_call(call_id: str) -> CallRequest:
    return CallRequest("fetch", {"x": 1}, call_id=call_id)


def test_thread_head_is_unchanged_by_staging() -> None:
    # staging is Run state, not Thread state: the head names the version and the Run only
    _, commits = _drive([InferenceResult("hello", staged=Staged([1, 2]))])
    verdict = validate_commit(ThreadHead("t", 1, "r"), _drive([])[0], commits[1], ticket_seen=NO_TICKETS_SEEN)
    assert not isinstance(verdict, Rejection)
    assert verdict.head == ThreadHead("t", 2, "r")
