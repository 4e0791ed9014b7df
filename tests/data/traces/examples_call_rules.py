"""Example traces for the commit-log rules on tool calls and batches: each builder
returns a legal trace and an illegal one (a legal prefix plus one line that breaks the
rule), with why (see ``Example`` in ``example_log.py``).
"""

from __future__ import annotations

from example_log import (
    RETRY3,
    Example,
    Line,
    Log,
    allow,
    call,
    done,
    end,
    finished,
    mutated,
    renumber,
    text,
    ticket,
    tool_message,
    tools,
    wait,
)
from runkernel.kernel.protocol import (
    Block,
    Deny,
    GateVerdict,
    OperationStatus,
    StatusReport,
    Supply,
    TimerFired,
    ToolFailure,
    ToolScheduled,
)
from runkernel.kernel.values import EndCauseKind, WaitKind


# --- examples for each commit-log rule -------------------------------------------------


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
    log.feed("run-1", tools("batch-1", call("call-1", "fetch", {"url": "https://rates.example"})), RETRY3)
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


def ex_executing_first() -> Example:
    log = Log()
    log.activate("thread-1", "run-1", "Fetch the exchange rates.")
    log.feed("run-1", tools("batch-1", call("call-1", "fetch", {"url": "https://rates.example"})), RETRY3)
    prefix = list(log.lines)
    log.feed("run-1", allow("call-1"))
    output = done("call-1", 1, {"EUR/USD": 1.08})
    # the tool's output committed straight from Requested: the Executing commit is missing
    bad = mutated(log.peek("run-1", output, RETRY3), lambda ln: ln.__setitem__("version", ln["version"] - 1))
    log.feed("run-1", output, RETRY3)
    log.feed("run-1", text("EUR/USD is 1.08.", EndCauseKind.COMPLETED))
    return (log.lines, prefix + [bad], "call-1 completes with attempt 1 without its Executing commit.")


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
    log.feed("run-1", tools("batch-1", call("call-1", "fetch", {"url": "https://x.example/CHANGES"})), RETRY3)
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
