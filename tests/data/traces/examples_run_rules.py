"""Example traces for the commit-log rules on Threads, Runs and tickets: each builder
returns a legal trace and an illegal one (a legal prefix plus one line that breaks the
rule), with why (see ``Example`` in ``example_log.py``).
"""

from __future__ import annotations

from example_log import (
    Example,
    Line,
    Log,
    allow,
    call,
    done,
    end,
    mutated,
    renumber,
    text,
    ticket,
    tools,
    wait,
)
from runkernel.kernel.protocol import Approve, Deny, ExternalResult, ProvideInput, ResumeCommand
from runkernel.kernel.values import EndCauseKind, WaitKind


# --- examples for each commit-log rule -------------------------------------------------


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
        "trace": "runkernel/2", "thread_id": "thread-1", "run_id": "run-2", "version": 3,
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
        "trace": "runkernel/2", "thread_id": "thread-1", "run_id": "run-2", "version": 3,
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


def ex_app_version() -> Example:
    # Legal: the activation names the Run's app and its version; no later line does.
    log = Log()
    activation = log.activate("thread-1", "run-1", "Ping.")
    versioned = mutated(activation, lambda ln: ln.update(app="pinger", app_version="2026-12-07"))
    log.lines[-1] = versioned
    log.feed("run-1", text("Pong.", EndCauseKind.COMPLETED))
    prefix = [versioned]
    bad = mutated(log.lines[-1], lambda ln: ln.update(app_version="2026-12-08"))
    return (log.lines, prefix + [bad],
            "run-1 records another app version after its activation: a Run's code is named once.")


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


def ex_ticket_reused_by_a_later_run_of_the_thread() -> list[Line]:
    log = Log()
    log.activate("thread-1", "run-1", "Pay supplier A.")
    log.feed("run-1", tools("batch-1", call("call-1", "pay", {"to": "A"})))
    log.feed("run-1", wait("call-1", WaitKind.APPROVAL, "thread/shared"))
    log.feed("run-1", end(EndCauseKind.CANCELLED))
    log.activate("thread-1", "run-2", "Pay supplier A after all.")
    log.feed("run-2", tools("batch-1", call("call-1", "pay", {"to": "A"})))
    log.add(log.peek("run-2", wait("call-1", WaitKind.APPROVAL, "thread/shared")))
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
