"""Regenerate the example traces under ``tests/data/traces``.

    python tests/data/traces/make_examples.py

Legal traces are driven through the kernel's own ``decide`` (plus a few hand-made
commits that other runtimes may legally emit, e.g. finalizing a batch in a commit of
its own). Each illegal trace is a legal prefix followed by one mutated line that
breaks exactly one commit-log rule. Every file is checked with the real checker
before it is written, so a generated example can never claim a rule it does not hit.
The ``.jsonl`` files and ``manifest.json`` are committed data: the tests read them,
not this script. Output is deterministic (no clock, no randomness).
"""

from __future__ import annotations

import copy
import hashlib
import json
import sys
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

from runkernel.kernel.codec import commit_to_json
from runkernel.kernel.decide import decide
from runkernel.kernel.policies import IndeterminateChoice, Policies, RetryPolicy, ToolPolicy
from runkernel.kernel.protocol import (
    Activate,
    Allow,
    Approve,
    Block,
    DeadlinePassed,
    Decision,
    DelegationResult,
    Deny,
    EndRequest,
    ExternalResult,
    GateVerdict,
    InferenceResult,
    Input,
    OperationStatus,
    ProposedCall,
    ProvideInput,
    RequireWait,
    ResumeCommand,
    ResumePayload,
    StatusReport,
    Supply,
    TimerFired,
    ToolDelegated,
    ToolFailure,
    ToolFinished,
    ToolOutcome,
    ToolOutcomeLost,
    ToolOutput,
    ToolScheduled,
)
from runkernel.kernel.rules import Rejection
from runkernel.kernel.state import EndCause, Message, RunSnapshot, TypedError
from runkernel.kernel.values import EndCauseKind, Role, WaitKind
from runkernel.specs.checker import Verdict, check_lines

Line = dict[str, Any]

HERE = Path(__file__).resolve().parent
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
        decision = decide(state, event, policies)
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


# --- examples for each commit-log rule -------------------------------------------------
#
# Each builder returns (legal lines, illegal lines, why). The illegal file is the legal
# prefix plus its last line, which breaks the rule; the manifest points at that line.

Example = tuple[list[Line], list[Line], str]


def ex_identity() -> Example:
    log = Log()
    log.activate("thread-a", "run-a", "Summarize the release notes.")
    log.activate("thread-b", "run-b", "Translate the summary to French.")
    prefix = list(log.lines)
    bad = mutated(log.peek("run-a", text("Here is the summary.")),
                  lambda ln: ln.__setitem__("thread_id", "thread-b"))
    log.feed("run-a", text("Here is the summary.", EndCauseKind.COMPLETED))
    log.feed("run-b", text("Voici le résumé.", EndCauseKind.COMPLETED))
    return (log.lines, prefix + [bad],
            "run-a belongs to thread-a but this commit files it under thread-b.")


def ex_version() -> Example:
    log = Log()
    log.activate("thread-1", "run-1", "What is the weather in Lyon?")
    log.feed("run-1", tools("batch-1", call("call-1", "weather", {"city": "Lyon"})))
    log.feed("run-1", allow("call-1"))
    prefix = list(log.lines)
    bad = mutated(log.peek("run-1", done("call-1", 1, {"celsius": 21})),
                  lambda ln: ln.__setitem__("version", ln["version"] + 1))
    log.feed("run-1", done("call-1", 1, {"celsius": 21}))
    log.feed("run-1", text("It is 21 °C in Lyon.", EndCauseKind.COMPLETED))
    return (log.lines, prefix + [bad], "version 4 is skipped: the commit says version 5.")


def ex_first_commit() -> Example:
    # Legal: the first commit carries the activation and the first inference (step 1),
    # and a Run whose first inference ends it still commits Running first.
    log = Log()
    activation = log.activate("thread-1", "run-1", "Say hello.")
    reply = log.peek("run-1", text("Hello!"))
    first = mutated(activation, lambda ln: ln.update(
        step=1, messages=activation["messages"] + reply["messages"]))
    ended = mutated(first, lambda ln: ln.update(
        disposition={"state": "ended", "cause": {"kind": "completed"}}, messages=[],
        events=[]))
    legal = renumber([first, ended])
    # Illegal: the second Run of the thread commits Ended as its very first commit.
    log2 = Log()
    log2.activate("thread-1", "run-1", "Say hello.")
    log2.feed("run-1", text("Hello!", EndCauseKind.COMPLETED))
    bad: Line = {
        "trace": "runkernel/1", "thread_id": "thread-1", "run_id": "run-2", "version": 3,
        "step": 1, "disposition": {"state": "ended", "cause": {"kind": "completed"}},
        "batch": None,
        "messages": [{"role": "user", "content": "Say goodbye."},
                     {"role": "assistant", "content": "Goodbye!"}],
        "events": [{"type": "activated"}],
    }
    return (legal, log2.lines + [bad],
            "run-2's first commit is Ended: there is no [*]->Ended edge, it must commit Running first.")


def ex_one_active_run() -> Example:
    log = Log()
    log.activate("thread-1", "run-1", "List the open tickets.")
    log.feed("run-1", text("There are 3 open tickets.", EndCauseKind.COMPLETED))
    log.activate("thread-1", "run-2", "Close the oldest one.")
    log.feed("run-2", text("Closed ticket #12.", EndCauseKind.COMPLETED))
    bad_log = Log()
    bad_log.activate("thread-1", "run-1", "List the open tickets.")
    bad_log.feed("run-1", tools("batch-1", call("call-1", "tickets.list", {"state": "open"})))
    bad = {
        "trace": "runkernel/1", "thread_id": "thread-1", "run_id": "run-2", "version": 3,
        "step": 0, "disposition": {"state": "running"}, "batch": None,
        "messages": [{"role": "user", "content": "Close the oldest one."}],
        "events": [{"type": "activated"}],
    }
    return (log.lines, bad_log.lines + [bad],
            "run-2 starts in thread-1 while run-1 of that thread is still Running.")


def ex_after_ended() -> Example:
    log = Log()
    log.activate("thread-1", "run-1", "Ping.")
    log.feed("run-1", text("Pong.", EndCauseKind.COMPLETED))
    prefix = list(log.lines)
    bad = mutated(prefix[-1], lambda ln: ln.update(
        version=3, messages=[], events=[{"type": "terminus_redelivered"}]))
    log.activate("thread-1", "run-2", "Ping again.")
    log.feed("run-2", text("Pong again.", EndCauseKind.COMPLETED))
    return (log.lines, prefix + [bad],
            "run-1 is Ended; committing its terminus again is a commit after Ended.")


def ex_step() -> Example:
    log = Log()
    log.activate("thread-1", "run-1", "Plan a trip to Porto.")
    log.feed("run-1", text("Let me check the trains first."))
    log.feed("run-1", tools("batch-2", call("call-1", "trains.search", {"to": "Porto"})))
    prefix = list(log.lines)
    bad = mutated(log.peek("run-1", allow("call-1")),
                  lambda ln: ln.__setitem__("step", ln["step"] + 1))
    log.feed("run-1", allow("call-1"))
    log.feed("run-1", done("call-1", 1, [{"train": "AP 130", "leaves": "08:39"}]))
    log.feed("run-1", text("Take the AP 130 at 08:39.", EndCauseKind.COMPLETED))
    return (log.lines, prefix + [bad],
            "the gate commit carries no inference result but raises step from 2 to 3.")


def ex_run_edge() -> Example:
    log = Log()
    log.activate("thread-1", "run-1", "Delete the staging database.")
    log.feed("run-1", tools("batch-1", call("call-1", "db.drop", {"name": "staging"})))
    log.feed("run-1", wait("call-1", WaitKind.APPROVAL, "run-edge/approval"))
    prefix = list(log.lines)
    bad = mutated(prefix[-1], lambda ln: ln.update(
        version=ln["version"] + 1, events=[{"type": "approval_reminder_sent"}]))
    log.resume("run-1", "run-edge/approval", WaitKind.APPROVAL, Approve())
    log.feed("run-1", done("call-1", 1, "dropped"))
    log.feed("run-1", text("The staging database is gone.", EndCauseKind.COMPLETED))
    return (log.lines, prefix + [bad],
            "Awaiting -> Awaiting is not an edge of the Run machine (a reminder is not a commit).")


def ex_ticket_shape() -> Example:
    log = Log()
    log.activate("thread-1", "run-1", "Book a table for tonight.")
    log.feed("run-1", tools("batch-1", call("call-1", "restaurant.book", {"people": None})))
    prefix = list(log.lines)
    bad = mutated(log.peek("run-1", wait("call-1", WaitKind.INPUT, "shape/input")),
                  lambda ln: ln["disposition"]["ticket"].__setitem__(
                      "ticket_id", ticket("shape/other")))
    log.feed("run-1", wait("call-1", WaitKind.INPUT, "shape/input"))
    log.resume("run-1", "shape/input", WaitKind.INPUT, ProvideInput({"people": 4}))
    log.feed("run-1", done("call-1", 1, {"table": 7}))
    log.feed("run-1", text("Table 7 is booked for four.", EndCauseKind.COMPLETED))
    return (log.lines, prefix + [bad],
            "the ticket id differs from the awaiting call's wait correlation.")


def ex_ticket_reused() -> Example:
    log = Log()
    log.activate("thread-1", "run-1", "Send the invoice and the reminder.")
    log.feed("run-1", tools("batch-1", call("call-1", "mail.send", {"doc": "invoice"}),
                            call("call-2", "mail.send", {"doc": "reminder"})))
    log.feed("run-1", wait("call-1", WaitKind.APPROVAL, "reuse/first"))
    log.resume("run-1", "reuse/first", WaitKind.APPROVAL, Approve())
    log.feed("run-1", done("call-1", 1, "sent"))
    prefix = list(log.lines)
    reused = ticket("reuse/first")

    def reuse(ln: Line) -> None:
        ln["disposition"]["ticket"]["ticket_id"] = reused
        ln["batch"]["calls"][1]["wait"]["correlation"] = reused

    bad = mutated(log.peek("run-1", wait("call-2", WaitKind.APPROVAL, "reuse/second")), reuse)
    log.feed("run-1", wait("call-2", WaitKind.APPROVAL, "reuse/second"))
    log.resume("run-1", "reuse/second", WaitKind.APPROVAL, Approve())
    log.feed("run-1", done("call-2", 1, "sent"))
    log.feed("run-1", text("Both mails are sent.", EndCauseKind.COMPLETED))
    return (log.lines, prefix + [bad],
            "the second wait reuses the first wait's ticket id; ticket ids are never reused.")


def ex_ticket_reused_across_runs() -> list[Line]:
    log = Log()
    log.activate("thread-a", "run-a", "Pay supplier A.")
    log.feed("run-a", tools("batch-a", call("call-a", "pay", {"to": "A"})))
    log.feed("run-a", wait("call-a", WaitKind.APPROVAL, "across/shared"))
    log.resume("run-a", "across/shared", WaitKind.APPROVAL, Deny("not this month"))
    log.activate("thread-b", "run-b", "Pay supplier B.")
    log.feed("run-b", tools("batch-b", call("call-b", "pay", {"to": "B"})))
    log.add(log.peek("run-b", wait("call-b", WaitKind.APPROVAL, "across/shared")))
    return log.lines


def ex_resume() -> Example:
    log = Log()
    log.activate("thread-1", "run-1", "Get the signed contract from legal.")
    log.feed("run-1", tools("batch-1", call("call-1", "legal.request", {"doc": "contract"})))
    log.feed("run-1", wait("call-1", WaitKind.EXTERNAL, "resume/external"))
    prefix = list(log.lines)
    command = ResumeCommand("run-1", ticket("resume/external"), WaitKind.EXTERNAL,
                            ExternalResult({"signed": True}))

    def wrong_ticket(ln: Line) -> None:
        ln["events"][0]["ticket_id"] = ticket("resume/someone-else")

    bad = mutated(log.peek("run-1", command), wrong_ticket)
    log.feed("run-1", command)
    log.feed("run-1", text("Legal sent the signed contract.", EndCauseKind.COMPLETED))
    return (log.lines, prefix + [bad],
            "the 'resumed' event names a ticket other than the committed one.")


def ex_awaiting_end() -> Example:
    log = Log()
    log.activate("thread-1", "run-1", "Publish the blog post.")
    log.feed("run-1", tools("batch-1", call("call-1", "blog.publish", {"slug": "v1"})))
    log.feed("run-1", wait("call-1", WaitKind.APPROVAL, "await-end/approval"))
    prefix = list(log.lines)
    bad = mutated(log.peek("run-1", end(EndCauseKind.STOPPED)),
                  lambda ln: ln["disposition"]["cause"].__setitem__("kind", "completed"))
    log.feed("run-1", end(EndCauseKind.STOPPED))
    return (log.lines, prefix + [bad],
            "an Awaiting run ends as 'completed'; only cancel, stop or failure may end it.")


def ex_call_edge() -> Example:
    log = Log()
    log.activate("thread-1", "run-1", "Resize the cluster to 5 nodes.")
    log.feed("run-1", tools("batch-1", call("call-1", "cluster.resize", {"nodes": 5})))
    log.feed("run-1", allow("call-1"))
    prefix = list(log.lines)

    def back_to_requested(ln: Line) -> None:
        ln["version"] += 1
        ln["batch"]["calls"][0].update(status="requested", attempt=0)

    bad = mutated(prefix[-1], back_to_requested)
    # Recovery asks the tool (reconnect): it never started, so attempt 2 runs it.
    log.feed("run-1", StatusReport("call-1", 1, OperationStatus.NOT_FOUND))
    log.feed("run-1", done("call-1", 2, {"nodes": 5}))
    log.feed("run-1", text("The cluster has 5 nodes.", EndCauseKind.COMPLETED))
    return (log.lines, prefix + [bad],
            "Executing -> Requested is not an edge: a started call is never reset to Requested.")


def ex_edge_condition() -> Example:
    log = Log()
    log.activate("thread-1", "run-1", "Clean up the temp files, then back up.")
    log.feed("run-1", tools("batch-1", call("call-1", "shell", {"cmd": "rm -rf /"}),
                            call("call-2", "cache.lookup", {"key": "tmp-size"}),
                            call("call-3", "backup", {"target": "s3"})))
    log.feed("run-1", GateVerdict("call-1", Block("refusing to delete /")))
    log.feed("run-1", GateVerdict("call-2", Supply({"bytes": 1024})))
    prefix = list(log.lines)

    def gate_delegates(ln: Line) -> None:
        ln["batch"]["calls"][2]["wait"]["kind"] = "delegation"
        ln["disposition"]["ticket"]["wait"] = "delegation"

    bad = mutated(log.peek("run-1", wait("call-3", WaitKind.SCHEDULED, "cond/scheduled",
                                         due_at="2026-12-01T02:00:00Z")), gate_delegates)
    log.feed("run-1", allow("call-3"))
    log.feed("run-1", finished("call-3", 1, ToolScheduled(ticket("cond/backoff"),
                                                          "2026-12-01T02:00:00Z")))
    log.resume("run-1", "cond/backoff", WaitKind.SCHEDULED, TimerFired())
    log.feed("run-1", done("call-3", 2, {"archive": "s3://backups/1.tar"}))
    log.feed("run-1", text("Backed up; I did not delete anything.", EndCauseKind.COMPLETED))
    return (log.lines, prefix + [bad],
            "Requested -> Awaiting is a gate wait and may not be a delegation: only a running tool delegates.")


def ex_attempt() -> Example:
    log = Log()
    log.activate("thread-1", "run-1", "Fetch the exchange rates.")
    log.feed("run-1", tools("batch-1", call("call-1", "fetch", {"url": "https://rates.example"})))
    log.feed("run-1", allow("call-1"))
    prefix = list(log.lines)
    failure = finished("call-1", 1, ToolFailure("HTTP 503", retryable=True))
    bad = mutated(log.peek("run-1", failure, RETRY3),
                  lambda ln: ln["batch"]["calls"][0].__setitem__("attempt", 3))
    log.feed("run-1", failure, RETRY3)
    log.feed("run-1", finished("call-1", 2, ToolFailure("HTTP 503", retryable=True)), RETRY3)
    log.feed("run-1", done("call-1", 3, {"EUR/USD": 1.08}), RETRY3)
    log.feed("run-1", text("EUR/USD is 1.08.", EndCauseKind.COMPLETED))
    return (log.lines, prefix + [bad], "the retry jumps from attempt 1 to attempt 3.")


def ex_batch_new() -> Example:
    log = Log()
    log.activate("thread-1", "run-1", "Check disk and memory on web-1.")
    prefix = list(log.lines)
    proposal = tools("batch-1", call("call-1", "host.disk", {"host": "web-1"}),
                     call("call-2", "host.memory", {"host": "web-1"}))

    def already_running(ln: Line) -> None:
        ln["batch"]["calls"][0].update(status="executing", attempt=1)

    bad = mutated(log.peek("run-1", proposal), already_running)
    log.feed("run-1", proposal)
    log.feed("run-1", allow("call-1"))
    log.feed("run-1", done("call-1", 1, {"free": "40%"}))
    log.feed("run-1", allow("call-2"))
    log.feed("run-1", done("call-2", 1, {"free": "2 GiB"}))
    log.feed("run-1", text("web-1 is healthy.", EndCauseKind.COMPLETED))
    return (log.lines, prefix + [bad],
            "the commit that creates the batch already marks call-1 Executing; new calls are Requested.")


def ex_batch_identity() -> Example:
    log = Log()
    log.activate("thread-1", "run-1", "Fetch the changelog.")
    log.feed("run-1", tools("batch-1", call("call-1", "fetch", {"url": "https://x.example/CHANGES"})))
    log.feed("run-1", allow("call-1"))
    prefix = list(log.lines)
    failure = finished("call-1", 1, ToolFailure("timeout", retryable=True))
    bad = mutated(log.peek("run-1", failure, RETRY3),
                  lambda ln: ln["batch"]["calls"][0].__setitem__("operation_id", "op-call-1-retry"))
    log.feed("run-1", failure, RETRY3)
    log.feed("run-1", done("call-1", 2, "v1.2: bug fixes"), RETRY3)
    # The finalized batch is carried unchanged by the next commit, then dropped (null).
    reply = log.feed("run-1", text("Version 1.2 fixes bugs."))
    final = mutated(reply, lambda ln: ln.update(
        version=ln["version"] + 1, step=ln["step"] + 1, batch=None,
        disposition={"state": "ended", "cause": {"kind": "completed"}},
        messages=[{"role": "assistant", "content": "Anything else?"}]))
    log.add(final)
    return (log.lines, prefix + [bad],
            "the retry gives the call a new operation_id; it is fixed for every attempt.")


def ex_call_order() -> Example:
    log = Log()
    log.activate("thread-1", "run-1", "Deploy api, then worker, then web.")
    log.feed("run-1", tools("batch-1", call("call-1", "deploy", {"svc": "api"}),
                            call("call-2", "deploy", {"svc": "worker"}),
                            call("call-3", "deploy", {"svc": "web"})))
    log.feed("run-1", allow("call-1"))
    prefix = list(log.lines)

    def start_second(ln: Line) -> None:
        ln["version"] += 1
        ln["batch"]["calls"][1].update(status="executing", attempt=1)

    bad = mutated(prefix[-1], start_second)
    for cid in ("call-1", "call-2", "call-3"):
        if cid != "call-1":
            log.feed("run-1", allow(cid))
        log.feed("run-1", done(cid, 1, "deployed"))
    log.feed("run-1", text("All three services are deployed.", EndCauseKind.COMPLETED))
    return (log.lines, prefix + [bad],
            "call-2 starts while call-1 is still Executing; calls run one at a time, in order.")


def ex_inference_open_batch() -> Example:
    log = Log()
    log.activate("thread-1", "run-1", "Compare prices at two shops.")
    log.feed("run-1", tools("batch-1", call("call-1", "shop.price", {"shop": "A"}),
                            call("call-2", "shop.price", {"shop": "B"})))
    log.feed("run-1", allow("call-1"))
    log.feed("run-1", done("call-1", 1, 9.5))
    prefix = list(log.lines)
    bad = mutated(prefix[-1], lambda ln: ln.update(
        version=ln["version"] + 1, step=ln["step"] + 1,
        messages=[{"role": "assistant", "content": "Shop A is cheapest."}], events=[]))
    log.feed("run-1", allow("call-2"))
    log.feed("run-1", done("call-2", 1, 11.0))
    log.feed("run-1", text("Shop A is cheaper (9.50 vs 11.00).", EndCauseKind.COMPLETED))
    return (log.lines, prefix + [bad],
            "an inference result is committed while call-2 of the batch is still Requested.")


def _split_finalize(line: Line) -> list[Line]:
    """A runtime that finalizes in a commit of its own: terminal result, then barrier."""
    first = mutated(line, lambda ln: ln.update(messages=[], events=[]))
    first["batch"]["finalized"] = False
    second = mutated(line, lambda ln: ln.update(events=[]))
    return [first, second]


def ex_finalize() -> Example:
    log = Log()
    log.activate("thread-1", "run-1", "Translate 'cat' and 'dog'.")
    log.feed("run-1", tools("batch-1", call("call-1", "translate", {"word": "cat"}),
                            call("call-2", "translate", {"word": "dog"})))
    log.feed("run-1", allow("call-1"))
    log.feed("run-1", done("call-1", 1, "chat"))
    prefix = list(log.lines)

    def finalize_early(ln: Line) -> None:
        ln["batch"]["finalized"] = True
        ln["messages"] = [tool_message("call-1", {"kind": "output", "value": "chat"}),
                          tool_message("call-2", {"kind": "output", "value": None})]

    bad = mutated(log.peek("run-1", allow("call-2")), finalize_early)
    log.feed("run-1", allow("call-2"))
    log.feed("run-1", done("call-2", 1, "chien"))
    finalizing = log.lines.pop()
    log.lines.extend(_split_finalize(finalizing))
    log.add(log.peek("run-1", text("cat = chat, dog = chien.", EndCauseKind.COMPLETED)))
    return (renumber(log.lines), prefix + [bad],
            "the batch is marked finalized while call-2 is Executing.")


def ex_publish() -> Example:
    log = Log()
    log.activate("thread-1", "run-1", "Look up three ISBNs.")
    log.feed("run-1", tools("batch-1", *(call(f"call-{i}", "isbn.lookup", {"isbn": f"97800{i}"})
                                         for i in (1, 2, 3))))
    for i in (1, 2):
        log.feed("run-1", allow(f"call-{i}"))
        log.feed("run-1", done(f"call-{i}", 1, {"title": f"Book {i}"}))
    log.feed("run-1", allow("call-3"))
    prefix = list(log.lines)
    bad = mutated(log.peek("run-1", done("call-3", 1, {"title": "Book 3"})),
                  lambda ln: ln["messages"].reverse())
    log.feed("run-1", done("call-3", 1, {"title": "Book 3"}))
    log.feed("run-1", text("Found all three books.", EndCauseKind.COMPLETED))
    return (log.lines, prefix + [bad],
            "the finalizing commit publishes the tool results in reverse call order.")


def ex_run_end_closes() -> Example:
    log = Log()
    log.activate("thread-1", "run-1", "Migrate the three tables.")
    log.feed("run-1", tools("batch-1", *(call(f"call-{i}", "migrate", {"table": t})
                                         for i, t in ((1, "users"), (2, "orders"), (3, "items")))))
    log.feed("run-1", allow("call-1"))
    log.feed("run-1", done("call-1", 1, "migrated"))
    log.feed("run-1", allow("call-2"))
    prefix = list(log.lines)
    bad = mutated(prefix[-1], lambda ln: ln.update(
        version=ln["version"] + 1, events=[],
        disposition={"state": "ended", "cause": {"kind": "cancelled"}}))
    log.feed("run-1", end(EndCauseKind.CANCELLED))
    return (log.lines, prefix + [bad],
            "the run is cancelled but its batch stays open with call-2 Executing and call-3 Requested.")


def ex_terminal_immutable() -> Example:
    log = Log()
    log.activate("thread-1", "run-1", "Charge the card, then email the receipt.")
    log.feed("run-1", tools("batch-1", call("call-1", "card.charge", {"cents": 1999}),
                            call("call-2", "mail.receipt", {"to": "a@example.com"})))
    log.feed("run-1", allow("call-1"))
    log.feed("run-1", done("call-1", 1, {"charge": "ch_1", "status": "ok"}))
    prefix = list(log.lines)
    bad = mutated(log.peek("run-1", allow("call-2")),
                  lambda ln: ln["batch"]["calls"][0]["result"]["value"].__setitem__("status", "refunded"))
    log.feed("run-1", allow("call-2"))
    log.feed("run-1", done("call-2", 1, "sent"))
    log.feed("run-1", text("Charged and receipt sent.", EndCauseKind.COMPLETED))
    return (log.lines, prefix + [bad],
            "call-1's committed result is rewritten while call-2 runs.")


def ex_call_waits_with_run() -> Example:
    log = Log()
    log.activate("thread-1", "run-1", "Transfer 500 EUR to savings.")
    log.feed("run-1", tools("batch-1", call("call-1", "bank.transfer", {"eur": 500})))
    prefix = list(log.lines)
    bad = mutated(log.peek("run-1", wait("call-1", WaitKind.APPROVAL, "waits/approval")),
                  lambda ln: ln.__setitem__("disposition", {"state": "running"}))
    log.feed("run-1", wait("call-1", WaitKind.APPROVAL, "waits/approval"))
    log.resume("run-1", "waits/approval", WaitKind.APPROVAL, Deny("over the daily limit"))
    log.feed("run-1", text("The transfer was denied.", EndCauseKind.COMPLETED))
    return (log.lines, prefix + [bad],
            "call-1 enters Awaiting while the run stays Running.")


RULE_EXAMPLES: dict[str, Callable[[], Example]] = {
    "identity": ex_identity,
    "version-contiguous": ex_version,
    "first-commit-running": ex_first_commit,
    "one-active-run": ex_one_active_run,
    "nothing-after-ended": ex_after_ended,
    "step-counts-inference": ex_step,
    "run-edge": ex_run_edge,
    "ticket-matches-wait": ex_ticket_shape,
    "ticket-never-reused": ex_ticket_reused,
    "resume-matches-ticket": ex_resume,
    "awaiting-ends-by-cancel-stop-failure": ex_awaiting_end,
    "call-edge": ex_call_edge,
    "edge-condition": ex_edge_condition,
    "attempt-increments-by-one": ex_attempt,
    "batch-complete-and-requested": ex_batch_new,
    "batch-identity-stable": ex_batch_identity,
    "calls-one-at-a-time-in-order": ex_call_order,
    "no-inference-with-open-batch": ex_inference_open_batch,
    "finalize-when-all-terminal": ex_finalize,
    "publish-one-result-per-call": ex_publish,
    "run-end-closes-calls": ex_run_end_closes,
    "terminal-result-immutable": ex_terminal_immutable,
    "call-waits-with-run": ex_call_waits_with_run,
}


# --- extra illegal variants (named <rule>--<variant>.jsonl) ----------------------------


def var_tool_use_without_batch() -> tuple[list[Line], str, str]:
    log = Log()
    log.activate("thread-1", "run-1", "Check the weather, then the traffic.")
    log.feed("run-1", tools("batch-1", call("call-1", "weather", {"city": "Oslo"})))
    log.feed("run-1", allow("call-1"))
    log.feed("run-1", done("call-1", 1, "snow"))

    def orphan_tool_use(ln: Line) -> None:
        ln["messages"] = [{"role": "assistant", "content": "",
                           "tool_calls": [{"call_id": "call-2", "tool": "traffic",
                                           "arguments": {"city": "Oslo"}}]}]

    log.add(mutated(log.peek("run-1", text("Snow in Oslo.")), orphan_tool_use))
    return (log.lines, "batch-complete-and-requested",
            "a tool-use message is committed while the finalized batch-1 is carried: it has no batch of its own.")


def var_result_type_changed() -> tuple[list[Line], str, str]:
    log = Log()
    log.activate("thread-1", "run-1", "Count the users, then email the count.")
    log.feed("run-1", tools("batch-1", call("call-1", "users.count", {}),
                            call("call-2", "mail.send", {"to": "ops@example.com"})))
    log.feed("run-1", allow("call-1"))
    log.feed("run-1", done("call-1", 1, 1))
    log.add(mutated(log.peek("run-1", allow("call-2")),
                    lambda ln: ln["batch"]["calls"][0]["result"].__setitem__("value", True)))
    return (log.lines, "terminal-result-immutable",
            "call-1's committed result 1 (a number) is rewritten as true (a boolean).")


def var_arguments_type_changed() -> tuple[list[Line], str, str]:
    log = Log()
    log.activate("thread-1", "run-1", "Enable the feature flag.")
    log.feed("run-1", tools("batch-1", call("call-1", "flags.set", {"enabled": 1})))
    log.add(mutated(log.peek("run-1", allow("call-1")),
                    lambda ln: ln["batch"]["calls"][0]["arguments"].__setitem__("enabled", True)))
    return (log.lines, "batch-identity-stable",
            "call-1's arguments change from {\"enabled\": 1} to {\"enabled\": true} mid-batch.")


VARIANTS: dict[str, Callable[[], tuple[list[Line], str, str]]] = {
    "ticket-never-reused--across-runs": lambda: (
        ex_ticket_reused_across_runs(), "ticket-never-reused",
        "run-b's wait reuses the ticket id run-a already used in another thread."),
    "batch-complete-and-requested--tool-use-without-batch": var_tool_use_without_batch,
    "terminal-result-immutable--number-becomes-boolean": var_result_type_changed,
    "batch-identity-stable--arguments-number-becomes-boolean": var_arguments_type_changed,
}


# --- larger realistic legal traces ------------------------------------------------------


def big_batch_approvals() -> list[Line]:
    log = Log()
    log.activate("thread-ops", "run-ops-1", "Rotate the keys of all four services.")
    names = ("billing", "search", "auth", "mailer")
    log.feed("run-ops-1", tools(
        "batch-rotate", *(call(f"rotate-{n}", "keys.rotate", {"service": n}) for n in names),
        content="I will rotate the four keys one at a time."))
    log.feed("run-ops-1", wait("rotate-billing", WaitKind.APPROVAL, "ops/billing",
                               request={"prompt": "Rotate billing keys?"}))
    log.resume("run-ops-1", "ops/billing", WaitKind.APPROVAL, Approve())
    log.feed("run-ops-1", done("rotate-billing", 1, {"rotated": True}))
    log.feed("run-ops-1", wait("rotate-search", WaitKind.APPROVAL, "ops/search"))
    log.resume("run-ops-1", "ops/search", WaitKind.APPROVAL, Deny("search is mid-reindex"))
    log.feed("run-ops-1", allow("rotate-auth"))
    log.feed("run-ops-1", done("rotate-auth", 1, {"rotated": True}))
    log.feed("run-ops-1", wait("rotate-mailer", WaitKind.APPROVAL, "ops/mailer",
                               expires_at="2026-12-01T12:00:00Z"))
    log.feed("run-ops-1", DeadlinePassed(ticket("ops/mailer"), "2026-12-01T12:00:01Z"))
    log.feed("run-ops-1", tools("batch-verify", call("verify-1", "keys.verify", {"all": True})))
    log.feed("run-ops-1", GateVerdict("verify-1", Supply({"ok": ["billing", "auth"]})))
    log.feed("run-ops-1", text("Rotated billing and auth; search was denied and the mailer "
                               "approval expired.", EndCauseKind.COMPLETED))
    return log.lines


def big_retries() -> list[Line]:
    log = Log()
    log.activate("thread-etl", "run-etl", "Load yesterday's and today's exports.")
    log.feed("run-etl", tools("batch-load", call("load-1", "fetch", {"day": "2026-11-29"}),
                              call("load-2", "fetch", {"day": "2026-11-30"})), RETRY3)
    log.feed("run-etl", allow("load-1"), RETRY3)
    log.feed("run-etl", finished("load-1", 1, ToolFailure({"http": 502}, retryable=True)), RETRY3)
    log.feed("run-etl", done("load-1", 2, {"rows": 1200}), RETRY3)
    log.feed("run-etl", allow("load-2"), RETRY3)
    for attempt in (1, 2, 3):
        log.feed("run-etl", finished("load-2", attempt, ToolFailure({"http": 503}, retryable=True)),
                 RETRY3)
    log.feed("run-etl", text("Yesterday loaded; today's export keeps failing. Retrying later."),
             RETRY3)
    log.feed("run-etl", tools("batch-later", call("load-3", "fetch", {"day": "2026-11-30"})), RETRY3)
    log.feed("run-etl", allow("load-3"), RETRY3)
    log.feed("run-etl", finished("load-3", 1, ToolOutcomeLost()), RETRY3)
    log.feed("run-etl", text("The second try timed out; check operation op-load-3.",
                             EndCauseKind.COMPLETED), RETRY3)
    return log.lines


def big_delegation() -> list[Line]:
    log = Log()
    log.activate("thread-parent", "run-parent", "Research three vendors and pick one.")
    log.feed("run-parent", tools("batch-research", call("research", "delegate",
                                                          {"task": "compare vendors"})))
    log.feed("run-parent", allow("research"))
    log.feed("run-parent", finished("research", 1, ToolDelegated(ticket("parent/child"),
                                                                 "run-child")))
    log.activate("thread-child", "run-child", "Compare vendors A, B and C.")
    log.feed("run-child", tools("batch-child", call("c-1", "web.search", {"q": "vendor A"}),
                                call("c-2", "web.search", {"q": "vendor B"}),
                                call("c-3", "web.search", {"q": "vendor C"})))
    for cid in ("c-1", "c-2", "c-3"):
        log.feed("run-child", allow(cid))
        log.feed("run-child", done(cid, 1, {"hits": 10}))
    log.feed("run-child", text("B is cheapest with good support.", EndCauseKind.COMPLETED))
    log.resume("run-parent", "parent/child", WaitKind.DELEGATION,
               DelegationResult({"choice": "B"}))
    log.feed("run-parent", text("Vendor B it is.", EndCauseKind.COMPLETED))
    return log.lines


def big_cancel_while_awaiting() -> list[Line]:
    log = Log()
    log.activate("thread-1", "run-1", "Sync the CRM, wait for the import, then notify sales.")
    log.feed("run-1", tools("batch-1", call("sync", "crm.sync", {}),
                            call("import", "crm.import", {"file": "leads.csv"}),
                            call("notify", "chat.post", {"channel": "#sales"})))
    log.feed("run-1", allow("sync"))
    log.feed("run-1", done("sync", 1, {"synced": 310}))
    log.feed("run-1", allow("import"))
    log.feed("run-1", finished("import", 1, ToolScheduled(ticket("cancel/poll"),
                                                          "2026-12-01T09:00:00Z")))
    log.feed("run-1", end(EndCauseKind.CANCELLED))
    # The thread continues with a new Run after the cancel.
    log.activate("thread-1", "run-2", "Never mind, just tell me the CRM count.")
    log.feed("run-2", text("The CRM holds 310 synced contacts.", EndCauseKind.COMPLETED))
    return log.lines


def big_two_runs_one_thread() -> list[Line]:
    log = Log()
    log.activate("thread-chat", "run-1", "What's 2+2? Use the calculator.")
    log.feed("run-1", tools("batch-1", call("calc-1", "calc", {"expr": "2+2"})))
    log.feed("run-1", allow("calc-1"))
    log.feed("run-1", done("calc-1", 1, 4))
    log.feed("run-1", text("2+2 = 4.", EndCauseKind.COMPLETED))
    limited = Policies(max_steps=2)
    log.activate("thread-chat", "run-2", "Now keep multiplying by 2.")
    log.feed("run-2", tools("batch-2", call("calc-2", "calc", {"expr": "4*2"})), limited)
    log.feed("run-2", allow("calc-2"), limited)
    log.feed("run-2", done("calc-2", 1, 8), limited)
    log.feed("run-2", text("8. Next would be 16...", ), limited)
    return log.lines


def big_two_threads_interleaved() -> list[Line]:
    log = Log()
    end_run = Policies(on_indeterminate=IndeterminateChoice.END_RUN)
    log.activate("thread-alice", "run-alice", "Order a pizza.")
    log.activate("thread-bob", "run-bob", "Order sushi.")
    log.feed("run-alice", tools("batch-a", call("order-a", "food.order", {"item": "pizza"})))
    log.feed("run-bob", tools("batch-b", call("order-b", "food.order", {"item": "sushi"})),
             end_run)
    log.feed("run-alice", wait("order-a", WaitKind.INPUT, "alice/address"))
    log.feed("run-bob", allow("order-b"), end_run)
    log.resume("run-alice", "alice/address", WaitKind.INPUT, ProvideInput({"street": "Main 1"}))
    log.feed("run-bob", finished("order-b", 1, ToolOutcomeLost()), end_run)
    log.feed("run-alice", done("order-a", 1, {"eta_min": 30}))
    log.feed("run-alice", text("Pizza arrives in 30 minutes.", EndCauseKind.COMPLETED))
    log.activate("thread-bob", "run-bob-2", "Did my sushi order go through?")
    log.feed("run-bob-2", text("I cannot tell; check order op-order-b with the shop.",
                               EndCauseKind.COMPLETED))
    failed = end(EndCauseKind.FAILED, TypedError("ModelError", "context window exceeded"))
    log.activate("thread-alice", "run-alice-2", "And a drink?")
    log.feed("run-alice-2", failed)
    return log.lines


BIG: dict[str, Callable[[], list[Line]]] = {
    "batch-approvals-and-denies": big_batch_approvals,
    "retries-attempt-failed": big_retries,
    "delegation-resumed": big_delegation,
    "cancel-while-awaiting": big_cancel_while_awaiting,
    "two-runs-one-thread": big_two_runs_one_thread,
    "two-threads-interleaved": big_two_threads_interleaved,
}


# --- writing ------------------------------------------------------------------------


def encode(lines: Sequence[Line]) -> bytes:
    return b"".join(
        json.dumps(line, ensure_ascii=False, allow_nan=False).encode("utf-8") + b"\n"
        for line in lines
    )


def judge(data: bytes) -> tuple[Verdict, int, str]:
    finding = check_lines(data.splitlines())
    return finding.verdict, finding.line, finding.rule


def build() -> tuple[dict[str, bytes], dict[str, bytes], dict[str, dict[str, Any]]]:
    """All files and the manifest; raises if an example does not say what it claims."""
    legal: dict[str, bytes] = {}
    illegal: dict[str, bytes] = {}
    manifest: dict[str, dict[str, Any]] = {}

    def add_illegal(name: str, lines: list[Line], rule: str, why: str) -> None:
        data = encode(lines)
        verdict, line, found = judge(data)
        if (verdict, line, found) != (Verdict.ILLEGAL, len(lines), rule):
            raise AssertionError(
                f"illegal/{name}: expected {rule} at line {len(lines)}, got {verdict.name} "
                f"{found} at line {line}"
            )
        illegal[name] = data
        manifest[name] = {"line": len(lines), "rule": rule, "why": why}

    for rule, builder in RULE_EXAMPLES.items():
        good, bad, why = builder()
        legal[f"{rule}.jsonl"] = encode(good)
        add_illegal(f"{rule}.jsonl", bad, rule, why)
    for name, variant in VARIANTS.items():
        lines, rule, why = variant()
        add_illegal(f"{name}.jsonl", lines, rule, why)
    for name, make in BIG.items():
        legal[f"{name}.jsonl"] = encode(make())
    for name, data in legal.items():
        verdict, line, found = judge(data)
        if verdict is not Verdict.LEGAL:
            raise AssertionError(f"legal/{name}: {verdict.name} {found} at line {line}")
    return legal, illegal, manifest


def main(argv: Sequence[str] = ()) -> int:
    strict = "--strict" in argv
    try:
        legal, illegal, manifest = build()
    except AssertionError as error:
        print(f"make_examples: {error}", file=sys.stderr)
        if strict:
            return 1
        raise
    for folder, files in (("legal", legal), ("illegal", illegal)):
        target = HERE / folder
        target.mkdir(parents=True, exist_ok=True)
        for stale in target.glob("*.jsonl"):
            if stale.name not in files:
                stale.unlink()
        for name, data in sorted(files.items()):
            (target / name).write_bytes(data)
    (HERE / "manifest.json").write_text(
        json.dumps(manifest, indent=2, sort_keys=True, ensure_ascii=False) + "\n", encoding="utf-8"
    )
    print(f"wrote {len(legal)} legal and {len(illegal)} illegal traces to {HERE}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
