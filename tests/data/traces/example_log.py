"""How the example traces are built (``make_examples.py``): ``Log`` drives Runs through
the kernel's ``decide`` and records every commit as a trace line; short builders for the
inputs, deterministic ticket ids, and helpers for hand-made and mutated lines.
"""

from __future__ import annotations

import copy
import hashlib
from collections.abc import Callable, Iterable
from typing import Any

from runkernel.kernel.codec import commit_to_json
from runkernel.kernel.decide import decide
from runkernel.kernel.policies import Policies, RetryPolicy, ToolPolicy
from runkernel.kernel.protocol import (
    Activate,
    Allow,
    Decision,
    EndRequest,
    GateVerdict,
    InferenceResult,
    Input,
    ProposedCall,
    RequireWait,
    ResumeCommand,
    ResumePayload,
    ToolFinished,
    ToolOutcome,
    ToolOutput,
)
from runkernel.kernel.rules import Rejection
from runkernel.kernel.state import EndCause, Message, ParentCall, RunSnapshot, TypedError
from runkernel.kernel.values import EndCauseKind, Role, WaitKind

Line = dict[str, Any]

DEFAULT = Policies()
RETRY3 = Policies(tools={"fetch": ToolPolicy(retry=RetryPolicy(max_attempts=3))})


def ticket(label: str) -> str:
    """A deterministic 128-bit ticket id (hex) for a label."""
    return hashlib.sha256(f"runkernel-example:{label}".encode()).hexdigest()[:32]


def call(call_id: str, tool: str, arguments: Any) -> ProposedCall:
    return ProposedCall(call_id, tool, arguments, f"op-{call_id}")


def tools(batch_id: str, *calls: ProposedCall, content: str = "") -> InferenceResult:
    return InferenceResult(content, calls=calls, batch_id=batch_id)


def text(content: str, end: EndCauseKind | None = None) -> InferenceResult:
    return InferenceResult(content, end=end)


def allow(call_id: str) -> GateVerdict:
    return GateVerdict(call_id, Allow())


def finished(call_id: str, attempt: int, outcome: ToolOutcome) -> ToolFinished:
    return ToolFinished(call_id, attempt, outcome)


def done(call_id: str, attempt: int, value: Any) -> ToolFinished:
    return ToolFinished(call_id, attempt, ToolOutput(value))


def wait(call_id: str, kind: WaitKind, label: str, **extra: Any) -> GateVerdict:
    return GateVerdict(call_id, RequireWait(kind, ticket(label), **extra))


def end(kind: EndCauseKind, error: TypedError | None = None) -> EndRequest:
    return EndRequest(EndCause(kind, error))


class Log:
    """Drives runs through ``decide`` and records every commit as a trace line."""

    def __init__(self) -> None:
        self.lines: list[Line] = []
        self.runs: dict[str, RunSnapshot] = {}
        self.thread_of: dict[str, str] = {}
        self.heads: dict[str, int] = {}

    def activate(self, thread_id: str, run_id: str, prompt: str) -> Line:
        self.thread_of[run_id] = thread_id
        event = Activate(
            thread_id, run_id, self.heads.get(thread_id, 0), (Message(Role.USER, prompt),)
        )
        return self._record(run_id, self._decide(None, event, DEFAULT))

    def activate_child(self, thread_id: str, run_id: str, prompt: Any, parent: ParentCall) -> Line:
        """A child Run's activation, naming the parent call that delegated to it."""
        self.thread_of[run_id] = thread_id
        event = Activate(
            thread_id, run_id, self.heads.get(thread_id, 0), (Message(Role.USER, prompt),), parent=parent
        )
        return self._record(run_id, self._decide(None, event, DEFAULT))

    def feed(self, run_id: str, event: Input, policies: Policies = DEFAULT) -> Line:
        return self._record(run_id, self._decide(self.runs[run_id], event, policies))

    def peek(self, run_id: str, event: Input, policies: Policies = DEFAULT) -> Line:
        """The line ``event`` would commit, without recording it (to mutate a copy)."""
        decision = self._decide(self.runs[run_id], event, policies)
        assert decision.commit is not None
        return commit_to_json(decision.commit)

    def resume(self, run_id: str, label: str, kind: WaitKind, payload: ResumePayload,
               policies: Policies = DEFAULT) -> Line:
        return self.feed(run_id, ResumeCommand(run_id, ticket(label), kind, payload), policies)

    def add(self, line: Line) -> Line:
        """Append a hand-made line (state tracking stops being exact for its run)."""
        self.lines.append(line)
        return line

    @staticmethod
    def _decide(state: RunSnapshot | None, event: Input, policies: Policies) -> Decision:
        decision = decide(state, event, policies, self_check=True)
        if isinstance(decision, Rejection):
            raise AssertionError(f"decide rejected {event!r}: {decision}")
        if decision.commit is None:
            raise AssertionError(f"decide committed nothing for {event!r}")
        return decision

    def _record(self, run_id: str, decision: Decision) -> Line:
        commit = decision.commit
        assert commit is not None
        self.runs[run_id] = decision.state
        self.heads[commit.thread_id] = commit.version
        return self.add(commit_to_json(commit))


def mutated(line: Line, change: Callable[[Line], None]) -> Line:
    out = copy.deepcopy(line)
    change(out)
    return out


def renumber(lines: Iterable[Line]) -> list[Line]:
    """Contiguous versions per Thread, in file order (after hand-made insertions)."""
    heads: dict[str, int] = {}
    out: list[Line] = []
    for line in lines:
        version = heads.get(line["thread_id"], 0) + 1
        heads[line["thread_id"]] = version
        copied = copy.deepcopy(line)
        copied["version"] = version
        out.append(copied)
    return out


def tool_message(call_id: str, content: Any) -> Line:
    return {"role": "tool", "content": content, "call_id": call_id}


#: What each example builder of a commit-log rule returns: (legal lines, illegal lines,
#: why). The illegal file is the legal prefix plus its last line, which breaks the rule;
#: the manifest points at that line.
Example = tuple[list[Line], list[Line], str]
