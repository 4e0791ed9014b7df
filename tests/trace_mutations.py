"""The catalogue of mutations that make a legal trace illegal: each finds the places
(Sites) where it can break a trace and says at which line, and by which rule, the
checker must report the break.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from runkernel.kernel.canonical import jcs_digest
from runkernel.kernel.codec import commit_to_json
from runkernel.kernel.rules import Rule
from runkernel.kernel.state import (
    ActiveToolBatch,
    Awaiting,
    CallExecuting,
    CallRequested,
    Ended,
    ThreadCommit,
    is_terminal,
)


def encode(commits: Iterator[ThreadCommit] | tuple[ThreadCommit, ...]) -> list[dict[str, Any]]:
    return [commit_to_json(c) for c in commits]


def to_lines(objects: list[dict[str, Any]]) -> list[bytes]:
    return [json.dumps(o).encode("utf-8") for o in objects]


Lines = list[dict[str, Any]]
Edit = Callable[[Lines], None]


@dataclass(frozen=True)
class Site:
    """One place to break a legal trace: the edit, and the 1-based line and rule it must
    be reported with. Edits are applied lazily, to a copy, only for the site tested."""

    edit: Edit
    line: int
    rule: Rule

    def mutate(self, lines: Lines) -> Lines:
        mutated = copy.deepcopy(lines)
        self.edit(mutated)
        return mutated


@dataclass(frozen=True)
class Context:
    """The legal trace, with each line's previous line of the same Run."""

    lines: Lines
    commits: tuple[ThreadCommit, ...]
    prev: list[int | None]

    @classmethod
    def of(cls, commits: tuple[ThreadCommit, ...]) -> Context:
        last: dict[str, int] = {}
        prev: list[int | None] = []
        for index, commit in enumerate(commits):
            prev.append(last.get(commit.run_id))
            last[commit.run_id] = index
        return cls(encode(commits), commits, prev)

    def open_before(self, index: int) -> bool:
        """The Run's previous commit left its batch open."""
        p = self.prev[index]
        if p is None:
            return False
        batch = self.commits[p].batch
        return batch is not None and not batch.finalized

    def prev_batch(self, index: int) -> ActiveToolBatch:
        p = self.prev[index]
        assert p is not None
        batch = self.commits[p].batch
        assert batch is not None
        return batch


Mutation = Callable[[Context], Iterator[Site]]


def skip_version(ctx: Context) -> Iterator[Site]:
    for k in range(len(ctx.lines)):
        def edit(lines: Lines, k: int = k) -> None:
            lines[k]["version"] += 1
        yield Site(edit, k + 1, Rule.VERSION)


def duplicate_line(ctx: Context) -> Iterator[Site]:
    for k in range(len(ctx.lines)):
        def edit(lines: Lines, k: int = k) -> None:
            lines.insert(k + 1, copy.deepcopy(lines[k]))
        yield Site(edit, k + 2, Rule.VERSION)


def change_terminal_result_later(ctx: Context) -> Iterator[Site]:
    for k in range(len(ctx.lines)):
        if not ctx.open_before(k):
            continue
        for j, call in enumerate(ctx.prev_batch(k).calls):
            if is_terminal(call.status):
                def edit(lines: Lines, k: int = k, j: int = j) -> None:
                    target = lines[k]["batch"]["calls"][j]
                    if "result" in target:
                        target["result"]["value"] = {"rewritten": True}
                    else:
                        target["reason"] = "run_ended" if target["reason"] != "run_ended" else "outcome_unknown"
                yield Site(edit, k + 1, Rule.TERMINAL_IMMUTABLE)


def change_finalized_result_later(ctx: Context) -> Iterator[Site]:
    for k, commit in enumerate(ctx.commits):
        p = ctx.prev[k]
        if p is None or commit.batch is None:
            continue
        old = ctx.commits[p].batch
        if old is None or not old.finalized or old.batch_id != commit.batch.batch_id:
            continue
        def edit(lines: Lines, k: int = k) -> None:
            target = lines[k]["batch"]["calls"][0]
            target.pop("reason", None)
            target["status"] = "completed"
            target["result"] = {"kind": "output", "value": "rewritten"}
        yield Site(edit, k + 1, Rule.BATCH_IDENTITY)


def bump_attempt_by_two(ctx: Context) -> Iterator[Site]:
    for k, commit in enumerate(ctx.commits):
        if not ctx.open_before(k) or commit.batch is None:
            continue
        for j, (old, new) in enumerate(zip(ctx.prev_batch(k).calls, commit.batch.calls)):
            if isinstance(new.status, CallExecuting) and old.status != new.status:
                def edit(lines: Lines, k: int = k, j: int = j, attempt: int = old.status.attempt + 2) -> None:
                    lines[k]["batch"]["calls"][j]["attempt"] = attempt
                yield Site(edit, k + 1, Rule.ATTEMPT)


def requested_straight_to_output(ctx: Context) -> Iterator[Site]:
    for k, commit in enumerate(ctx.commits):
        if not ctx.open_before(k) or commit.batch is None:
            continue
        for j, (old, new) in enumerate(zip(ctx.prev_batch(k).calls, commit.batch.calls)):
            if isinstance(old.status, CallRequested) and old.status != new.status:
                def edit(lines: Lines, k: int = k, j: int = j) -> None:
                    target = lines[k]["batch"]["calls"][j]
                    for key in ("wait", "reason", "delegation"):
                        target.pop(key, None)
                    target.update(status="completed", attempt=0, result={"kind": "output", "value": 1})
                # a tool's output with no attempt committed: its Executing commit is missing
                yield Site(edit, k + 1, Rule.EXECUTING_FIRST)


def drop_resumed_event(ctx: Context) -> Iterator[Site]:
    for k, line in enumerate(ctx.lines):
        if any(e["type"] == "resumed" for e in line["events"]):
            def edit(lines: Lines, k: int = k) -> None:
                lines[k]["events"] = [e for e in lines[k]["events"] if e["type"] != "resumed"]
            yield Site(edit, k + 1, Rule.RESUME)


def resume_another_ticket(ctx: Context) -> Iterator[Site]:
    for k, line in enumerate(ctx.lines):
        if any(e["type"] == "resumed" for e in line["events"]):
            def edit(lines: Lines, k: int = k) -> None:
                for event in lines[k]["events"]:
                    if event["type"] == "resumed":
                        event["ticket_id"] = "ticket-of-someone-else"
            yield Site(edit, k + 1, Rule.RESUME)


def reuse_ticket(ctx: Context) -> Iterator[Site]:
    seen: list[str] = []
    for k, commit in enumerate(ctx.commits):
        if not isinstance(commit.disposition, Awaiting):
            continue
        ticket = commit.disposition.ticket
        for earlier in seen:
            def edit(lines: Lines, k: int = k, earlier: str = earlier, call_id: str = ticket.call_id) -> None:
                lines[k]["disposition"]["ticket"]["ticket_id"] = earlier
                for call in lines[k]["batch"]["calls"]:
                    if call["call_id"] == call_id:
                        call["wait"]["correlation"] = earlier
            yield Site(edit, k + 1, Rule.TICKET_REUSED)
        seen.append(ticket.ticket_id)


def _finalizing(ctx: Context) -> Iterator[tuple[int, list[int]]]:
    """Commits that finalize an open batch, with the positions of their tool messages."""
    for k, commit in enumerate(ctx.commits):
        if ctx.open_before(k) and commit.batch is not None and commit.batch.finalized:
            yield k, [i for i, m in enumerate(ctx.lines[k]["messages"]) if m["role"] == "tool"]


def remove_tool_result(ctx: Context) -> Iterator[Site]:
    for k, tools in _finalizing(ctx):
        for drop in tools:
            def edit(lines: Lines, k: int = k, drop: int = drop) -> None:
                del lines[k]["messages"][drop]
            yield Site(edit, k + 1, Rule.PUBLISH)


def reorder_tool_results(ctx: Context) -> Iterator[Site]:
    for k, tools in _finalizing(ctx):
        if len(tools) >= 2:
            def edit(lines: Lines, k: int = k, a: int = tools[0], b: int = tools[1]) -> None:
                messages = lines[k]["messages"]
                messages[a], messages[b] = messages[b], messages[a]
            yield Site(edit, k + 1, Rule.PUBLISH)


def assistant_while_batch_open(ctx: Context) -> Iterator[Site]:
    for k in range(len(ctx.lines)):
        if ctx.open_before(k):
            def edit(lines: Lines, k: int = k) -> None:
                lines[k]["messages"].insert(0, {"role": "assistant", "content": "sneaky"})
                lines[k]["step"] += 1
            yield Site(edit, k + 1, Rule.INFERENCE_OPEN_BATCH)


def commit_after_ended(ctx: Context) -> Iterator[Site]:
    for k, commit in enumerate(ctx.commits):
        if isinstance(commit.disposition, Ended):
            def edit(lines: Lines, k: int = k) -> None:
                extra = copy.deepcopy(lines[k])
                extra.update(version=extra["version"] + 1, disposition={"state": "running"}, messages=[], events=[])
                lines.insert(k + 1, extra)
            yield Site(edit, k + 2, Rule.AFTER_ENDED)


def change_operation_id(ctx: Context) -> Iterator[Site]:
    for k in range(len(ctx.lines)):
        if ctx.open_before(k) and ctx.lines[k]["batch"] is not None:
            def edit(lines: Lines, k: int = k) -> None:
                lines[k]["batch"]["calls"][-1]["operation_id"] += "-changed"
            yield Site(edit, k + 1, Rule.BATCH_IDENTITY)


def finalize_with_open_call(ctx: Context) -> Iterator[Site]:
    for k, commit in enumerate(ctx.commits):
        batch = commit.batch
        if ctx.open_before(k) and batch is not None and not batch.all_terminal():
            def edit(lines: Lines, k: int = k) -> None:
                lines[k]["batch"]["finalized"] = True
            yield Site(edit, k + 1, Rule.FINALIZE)


def first_commit_not_running(ctx: Context) -> Iterator[Site]:
    for k in range(len(ctx.lines)):
        if ctx.prev[k] is None:
            def edit(lines: Lines, k: int = k) -> None:
                lines[k]["disposition"] = {"state": "ended", "cause": {"kind": "completed"}}
            yield Site(edit, k + 1, Rule.FIRST_COMMIT)


def awaiting_ends_completed(ctx: Context) -> Iterator[Site]:
    for k, commit in enumerate(ctx.commits):
        p = ctx.prev[k]
        if p is not None and isinstance(commit.disposition, Ended) and isinstance(ctx.commits[p].disposition, Awaiting):
            def edit(lines: Lines, k: int = k) -> None:
                lines[k]["disposition"]["cause"] = {"kind": "completed"}
            yield Site(edit, k + 1, Rule.AWAITING_END)


def wrong_step(ctx: Context) -> Iterator[Site]:
    for k, line in enumerate(ctx.lines):
        if ctx.prev[k] is not None and any(m["role"] == "assistant" for m in line["messages"]):
            def edit(lines: Lines, k: int = k) -> None:
                lines[k]["step"] += 1
            yield Site(edit, k + 1, Rule.STEP)


def ticket_wrong_wait_kind(ctx: Context) -> Iterator[Site]:
    for k, commit in enumerate(ctx.commits):
        if isinstance(commit.disposition, Awaiting):
            def edit(lines: Lines, k: int = k) -> None:
                ticket = lines[k]["disposition"]["ticket"]
                ticket["wait"] = "input" if ticket["wait"] != "input" else "approval"
            yield Site(edit, k + 1, Rule.TICKET_SHAPE)


def end_leaving_batch_open(ctx: Context) -> Iterator[Site]:
    for k, commit in enumerate(ctx.commits):
        if ctx.open_before(k) and isinstance(commit.disposition, Ended):
            def edit(lines: Lines, k: int = k) -> None:
                lines[k]["batch"]["finalized"] = False
            yield Site(edit, k + 1, Rule.RUN_END_CLOSES)


def start_a_later_call_early(ctx: Context) -> Iterator[Site]:
    for k, commit in enumerate(ctx.commits):
        if not ctx.open_before(k) or commit.batch is None:
            continue
        calls = commit.batch.calls
        for j, (old, new) in enumerate(zip(ctx.prev_batch(k).calls[:-1], calls[:-1])):
            started = isinstance(old.status, CallRequested) and isinstance(new.status, CallExecuting)
            if started and isinstance(calls[j + 1].status, CallRequested):
                def edit(lines: Lines, k: int = k, j: int = j) -> None:
                    lines[k]["batch"]["calls"][j + 1].update(status="executing", attempt=1)
                yield Site(edit, k + 1, Rule.CALL_ORDER)


def drop_open_batch(ctx: Context) -> Iterator[Site]:
    for k in range(len(ctx.lines)):
        if ctx.open_before(k):
            def edit(lines: Lines, k: int = k) -> None:
                lines[k]["batch"] = None
            yield Site(edit, k + 1, Rule.BATCH_IDENTITY)


# --- the resumed event (I14): each edit issue 7 lists, and ticket comparisons --------------


def _resumed(line: dict[str, Any]) -> dict[str, Any]:
    event: dict[str, Any] = next(e for e in line["events"] if e["type"] == "resumed")
    return event


def _redigest(line: dict[str, Any]) -> None:
    event = _resumed(line)
    event["digest"] = jcs_digest(event["command"])


def _resume_sites(ctx: Context) -> Iterator[int]:
    for k, line in enumerate(ctx.lines):
        if any(e["type"] == "resumed" for e in line["events"]):
            yield k


def _command_edit(change: Callable[[dict[str, Any]], None], rule: Rule) -> Mutation:
    """Edit the resume command, recompute the digest, expect ``rule`` at that line."""

    def mutation(ctx: Context) -> Iterator[Site]:
        for k in _resume_sites(ctx):
            def edit(lines: Lines, k: int = k) -> None:
                change(_resumed(lines[k])["command"])
                _redigest(lines[k])
            yield Site(edit, k + 1, rule)

    return mutation


def deny_while_executing(ctx: Context) -> Iterator[Site]:
    """The payload becomes a deny while the call still goes Awaiting -> Executing."""
    for k in _resume_sites(ctx):
        commit = ctx.commits[k]
        ticket = _resumed(ctx.lines[k])
        moved = commit.batch.call(ticket["call_id"]) if commit.batch else None
        approval = ticket["command"]["kind"] == "approval"
        if approval and moved is not None and isinstance(moved.status, CallExecuting):
            def edit(lines: Lines, k: int = k) -> None:
                _resumed(lines[k])["command"]["payload"] = {"type": "deny", "reason": None}
                _redigest(lines[k])
            yield Site(edit, k + 1, Rule.RESUME_EDGE)


def _other_kind(command: dict[str, Any]) -> None:
    command["kind"] = "approval" if command["kind"] == "input" else "input"
    command["payload"] = {"type": "input", "value": "yes"} if command["kind"] == "input" else {"type": "approve"}


def zero_digest(ctx: Context) -> Iterator[Site]:
    for k in _resume_sites(ctx):
        def edit(lines: Lines, k: int = k) -> None:
            _resumed(lines[k])["digest"] = "0" * 64
        yield Site(edit, k + 1, Rule.RESUME_DIGEST)


def remove_command_and_digest(ctx: Context) -> Iterator[Site]:
    for k in _resume_sites(ctx):
        def edit(lines: Lines, k: int = k) -> None:
            event = _resumed(lines[k])
            del event["command"], event["digest"]
        yield Site(edit, k + 1, Rule.RESUME)


def _ticket_edit(change: Callable[[str], str]) -> Mutation:
    """The command's ticket id, changed in a way a sloppy comparison would forgive."""

    def edit_command(command: dict[str, Any]) -> None:
        command["ticket_id"] = change(command["ticket_id"])

    return _command_edit(edit_command, Rule.RESUME)


def change_a_policy(ctx: Context) -> Iterator[Site]:
    for k in range(len(ctx.lines)):
        if ctx.open_before(k) and ctx.lines[k]["batch"] is not None:
            def edit(lines: Lines, k: int = k) -> None:
                policy = lines[k]["batch"]["calls"][0]["policy"]
                policy["max_attempts"] += 1
            yield Site(edit, k + 1, Rule.BATCH_IDENTITY)


def _swap_case(text: str) -> str:
    swapped = text.swapcase()
    return swapped if swapped != text else text + "X"


MUTATIONS: dict[str, Mutation] = {
    "skip-a-version": skip_version,
    "duplicate-a-line": duplicate_line,
    "change-a-terminal-result-later": change_terminal_result_later,
    "change-a-finalized-result-later": change_finalized_result_later,
    "bump-an-attempt-by-two": bump_attempt_by_two,
    "requested-straight-to-completed-output": requested_straight_to_output,
    "drop-the-resumed-event": drop_resumed_event,
    "resume-names-another-ticket": resume_another_ticket,
    "reuse-a-ticket-id": reuse_ticket,
    "remove-a-tool-result-from-finalizing-commit": remove_tool_result,
    "reorder-tool-results": reorder_tool_results,
    "assistant-message-while-batch-open": assistant_while_batch_open,
    "commit-after-ended": commit_after_ended,
    "change-an-operation-id": change_operation_id,
    "finalize-while-a-call-is-open": finalize_with_open_call,
    "first-commit-not-running": first_commit_not_running,
    "awaiting-run-ends-completed": awaiting_ends_completed,
    "step-does-not-count-inference": wrong_step,
    "ticket-names-the-wrong-wait-kind": ticket_wrong_wait_kind,
    "run-ends-with-batch-open": end_leaving_batch_open,
    "drop-an-open-batch": drop_open_batch,
    "start-a-later-call-early": start_a_later_call_early,
    "resume-deny-while-the-call-executes": deny_while_executing,
    "resume-command-of-another-wait-kind": _command_edit(_other_kind, Rule.RESUME_PAYLOAD),
    "resume-command-names-another-run": _command_edit(lambda c: c.update(run_id=c["run_id"] + "-other"), Rule.RESUME),
    "resume-command-names-another-ticket": _ticket_edit(lambda t: "ticket-of-someone-else"),
    "resume-digest-of-zeros": zero_digest,
    "resume-command-and-digest-removed": remove_command_and_digest,
    "resume-ticket-case-folded": _ticket_edit(_swap_case),
    "resume-ticket-with-whitespace": _ticket_edit(lambda t: f" {t} "),
    "resume-ticket-prefix": _ticket_edit(lambda t: t[:-1]),
    "resume-ticket-extended": _ticket_edit(lambda t: t + "0"),
    "change-a-committed-policy": change_a_policy,
}
