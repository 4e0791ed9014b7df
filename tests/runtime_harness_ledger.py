"""What the stateful test's invariants learn from each new commit, once (``runtime_harness.py``).

Fed every commit the first time the invariants see it (parents' Threads before their
children's), the ledger checks what one commit can say about staged hooks and
concurrent delegations, with no pass over the history:

- staged state is set only by the commit that carries its Step's inference, and to
  the hook's latest answer for that Step; the Run's committed staged state is the last
  one a commit set;
- a reaction comes only with a terminal result, is the hook's latest answer for that
  attempt, and neither it nor the result ever changes after (I7);
- each child Run is activated once, and a concurrent delegation's result is its
  child's committed terminus (I15), read from the store.
"""

from __future__ import annotations

import collections
from collections.abc import Callable

from runkernel.adapters.stores.contract import Store
from runkernel.kernel.delegation import terminus
from runkernel.kernel.state import (
    CallCompleted,
    CallExecuting,
    CallIndeterminate,
    CallStatus,
    Ended,
    ThreadCommit,
    ToolCall,
    is_concurrent_delegation,
    is_terminal,
)
from runkernel.kernel.values import IndeterminateReason, JsonValue, Role
from runtime_harness_hooks import RecordingHooks

# Scenario names (``RuntimeMachineState.note``).
STAGED = "staged state committed"
REACTED = "reaction committed"
TOGETHER = "delegations executing together"
AFTER_GROUP = "ordinary call started after its group"
PUBLISHED = "children's termini published"
PARENT_ENDED = "parent ended while children run"

CallKey = tuple[str, str, str]  # (run, batch, call)


class CommitLedger:
    """Fed each commit once, in the order the store took them; ``feed`` says what is
    wrong with it, ``note`` hears which scenarios it shows."""

    def __init__(self, store: Store, note: Callable[[str], None]) -> None:
        self.store = store
        self.note = note
        #: run -> the staged state its commits set last
        self.staged: dict[str, JsonValue] = {}
        #: each call's last committed status, and its first terminal status with its reaction
        self.status: dict[CallKey, CallStatus] = {}
        self.terminal: dict[CallKey, tuple[CallStatus, JsonValue]] = {}
        self.activations: collections.Counter[str] = collections.Counter()
        #: (parent run, child run) of each child whose parent ended while it ran
        self.cancel_due: list[tuple[str, str]] = []

    def feed(self, commit: ThreadCommit, hooks: RecordingHooks | None) -> list[str]:
        problems = self.staging(commit, hooks)
        if commit.parent is not None:
            self.activations[commit.run_id] += 1
            if self.activations[commit.run_id] > 1:
                problems.append(f"I15 child run {commit.run_id} activated {self.activations[commit.run_id]} times")
        if commit.batch is not None:
            problems += self.calls(commit, hooks)
        return problems

    def staging(self, commit: ThreadCommit, hooks: RecordingHooks | None) -> list[str]:
        where = f"{commit.thread_id} v{commit.version} (run {commit.run_id}, step {commit.step})"
        inferred = any(m.role is Role.ASSISTANT for m in commit.messages)
        answer = hooks.staging.get((commit.run_id, commit.step)) if hooks is not None and inferred else None
        expected = answer.staged if answer is not None else None
        if commit.staged != expected:
            return [f"staged: {where} sets {commit.staged}, its Step's hook answered {expected}"]
        if commit.staged is not None:
            self.staged[commit.run_id] = commit.staged.value
            if commit.staged.value is not None:
                self.note(STAGED)
        return []

    def staged_problems(self, run_id: str, committed: JsonValue) -> list[str]:
        """The Run's committed staged state is the value its commits set last."""
        expected = self.staged.get(run_id)
        if committed != expected:
            return [f"staged: run {run_id} holds staged state {committed!r}, its commits set {expected!r}"]
        return []

    def calls(self, commit: ThreadCommit, hooks: RecordingHooks | None) -> list[str]:
        batch = commit.batch
        assert batch is not None
        problems: list[str] = []
        where = f"{commit.thread_id} v{commit.version}"
        executing = [c for c in batch.calls if is_concurrent_delegation(c) and isinstance(c.status, CallExecuting)]
        if len(executing) > 1:
            self.note(TOGETHER)
        grouped = any(is_concurrent_delegation(c) for c in batch.calls)
        for call in batch.calls:
            key = (commit.run_id, batch.batch_id, call.call_id)
            before = self.status.get(key)
            self.status[key] = call.status
            if grouped and not is_concurrent_delegation(call) and isinstance(call.status, CallExecuting):
                if not isinstance(before, CallExecuting):
                    self.note(AFTER_GROUP)
            if not is_terminal(call.status):
                if call.reaction is not None:
                    problems.append(f"reaction: {where} call {call.call_id} has one before its result")
                continue
            first = self.terminal.get(key)
            if first is not None:
                if first != (call.status, call.reaction):
                    problems.append(
                        f"I7 {where} call {call.call_id}: {first} became {(call.status, call.reaction)}"
                    )
                continue
            self.terminal[key] = (call.status, call.reaction)
            problems += self.first_terminal(commit, call, before, hooks)
        if batch.finalized and sum(1 for c in batch.calls if self.completed_delegation(c)) > 1:
            self.note(PUBLISHED)
        return problems

    @staticmethod
    def completed_delegation(call: ToolCall) -> bool:
        return is_concurrent_delegation(call) and isinstance(call.status, CallCompleted)

    def first_terminal(
        self, commit: ThreadCommit, call: ToolCall, before: CallStatus | None, hooks: RecordingHooks | None
    ) -> list[str]:
        where = f"{commit.thread_id} v{commit.version} call {call.call_id}"
        problems = []
        if call.reaction is not None:
            attempt = call.status.attempt
            expected = hooks.reactions.get((commit.run_id, call.call_id, attempt)) if hooks is not None else None
            if call.reaction != expected:
                problems.append(f"reaction: {where} commits {call.reaction!r}, its AfterTool answered {expected!r}")
            self.note(REACTED)
        if not is_concurrent_delegation(call):
            return problems
        assert call.delegation is not None
        if isinstance(call.status, CallIndeterminate) and isinstance(before, CallExecuting):
            if call.status.reason is IndeterminateReason.OUTCOME_UNKNOWN and isinstance(commit.disposition, Ended):
                self.note(PARENT_ENDED)
                self.cancel_due.append((commit.run_id, call.delegation.run_id))
        if not isinstance(call.status, CallCompleted):
            return problems
        child = self.store.run(call.delegation.run_id)
        if child is None or not isinstance(child.state, Ended):
            return problems + [f"I15 {where} completed while its child {call.delegation.run_id} has not ended"]
        final: JsonValue = None
        for message in self.store.messages(call.delegation.thread_id):
            if message.role is Role.ASSISTANT:
                final = message.content
        ended = terminus(call.delegation.thread_id, call.delegation.run_id, child.state.cause, final)
        if call.status.result.value != ended:
            problems.append(f"I15 {where}: result {call.status.result.value!r} is not its child's terminus {ended!r}")
        return problems
