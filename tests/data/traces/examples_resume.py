"""Example traces of the resume payload table (Resume): for each row a legal
trace and an illegal one, and each edit of a ``resumed`` event that issue 7 lists (a
deny whose call goes on executing, an input command on an approval ticket, a command
naming another Run or ticket, a digest of zeros, command and digest removed), each an
illegal example at its line; and a well-formed ``resumed`` event on each kind of commit
that is not a resume (Trace format: "a RESUMED event on any other commit is
illegal").
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

from example_log import (
    Example,
    Line,
    Log,

    call,
    done,
    end,
    mutated,
    text,
    ticket,
    tools,
    wait,
)
from runkernel.kernel.canonical import jcs_digest
from runkernel.kernel.protocol import (
    Approve,
    Deny,
    ExternalResult,
    ProvideInput,
    ResumeCommand,
    ResumePayload,
    TimerFired,
)
from runkernel.kernel.values import EndCauseKind, WaitKind

Variant = tuple[list[Line], str, str]


def _resumed(line: Line) -> dict[str, Any]:
    event: dict[str, Any] = next(e for e in line["events"] if e["type"] == "resumed")
    return event


def redigest(line: Line) -> None:
    """Recompute the resumed event's digest, so that a mutation breaks only what it means to."""
    event = _resumed(line)
    event["digest"] = jcs_digest(event["command"])


def _awaiting(kind: WaitKind, label: str, tool: str = "deploy") -> Log:
    """A Run whose one call waits with ``kind`` (a gate wait) on ticket ``label``."""
    log = Log()
    log.activate("thread-1", "run-1", f"Please {tool}.")
    log.feed("run-1", tools("batch-1", call("call-1", tool, {"target": "prod"})))
    extra = {"due_at": "2026-12-01T12:00:00Z"} if kind is WaitKind.SCHEDULED else {}
    log.feed("run-1", wait("call-1", kind, label, **extra))
    return log


def _command(kind: WaitKind, label: str, payload: ResumePayload) -> ResumeCommand:
    return ResumeCommand("run-1", ticket(label), kind, payload)


def _finish_executing(log: Log, attempt: int) -> list[Line]:
    log.feed("run-1", done("call-1", attempt, {"ok": True}))
    log.feed("run-1", text("Done.", EndCauseKind.COMPLETED))
    return log.lines


# --- legal: one trace per row of the payload table -------------------------------------


def legal_approve() -> list[Line]:
    log = _awaiting(WaitKind.APPROVAL, "row/approve")
    log.resume("run-1", "row/approve", WaitKind.APPROVAL, Approve())
    return _finish_executing(log, 1)


def legal_deny() -> list[Line]:
    log = _awaiting(WaitKind.APPROVAL, "row/deny")
    log.resume("run-1", "row/deny", WaitKind.APPROVAL, Deny({"why": "freeze week"}))
    log.feed("run-1", text("The deploy was denied.", EndCauseKind.COMPLETED))
    return log.lines


def legal_input_executes() -> list[Line]:
    log = _awaiting(WaitKind.INPUT, "row/input-exec", "ask_region")
    log.resume("run-1", "row/input-exec", WaitKind.INPUT, ProvideInput("eu-west"))
    return _finish_executing(log, 1)


def input_completes_lines(answer: Any = "eu-west") -> tuple[list[Line], Line]:
    """The ask-the-user tool: the input answer completes the call as ``external`` with
    the answer as its value (Awaiting->Completed{external}), then the batch is finalized
    in a commit of its own and the Run ends. Returns the lines and the resume line."""
    log = _awaiting(WaitKind.INPUT, "row/input-complete", "ask_user")
    resume = log.peek("run-1", _command(WaitKind.INPUT, "row/input-complete", ProvideInput(answer)))
    resume["batch"]["calls"][0].update(
        {"status": "completed", "attempt": 0, "result": {"kind": "external", "value": answer}}
    )
    finalize = copy.deepcopy(resume)
    finalize.update({"version": resume["version"] + 1, "events": [],
                     "messages": [{"role": "tool", "content": answer, "call_id": "call-1"}]})
    finalize["batch"]["finalized"] = True
    ending = copy.deepcopy(finalize)
    ending.update({"version": finalize["version"] + 1, "step": finalize["step"] + 1,
                   "disposition": {"state": "ended", "cause": {"kind": "completed"}},
                   "messages": [{"role": "assistant", "content": "Deploying to eu-west."}]})
    return log.lines + [resume, finalize, ending], resume


def legal_input_completes() -> list[Line]:
    return input_completes_lines()[0]


def legal_external() -> list[Line]:
    log = _awaiting(WaitKind.EXTERNAL, "row/external", "legal.sign")
    log.resume("run-1", "row/external", WaitKind.EXTERNAL, ExternalResult({"signed": True}))
    log.feed("run-1", text("Signed.", EndCauseKind.COMPLETED))
    return log.lines


def legal_timer() -> list[Line]:
    log = _awaiting(WaitKind.SCHEDULED, "row/timer", "report.poll")
    log.resume("run-1", "row/timer", WaitKind.SCHEDULED, TimerFired())
    return _finish_executing(log, 1)


RESUME_LEGAL: dict[str, Callable[[], list[Line]]] = {
    "resume-row-approval-approve": legal_approve,
    "resume-row-approval-deny": legal_deny,
    "resume-row-input-executes": legal_input_executes,
    "resume-row-input-completes-as-external": legal_input_completes,
    "resume-row-external": legal_external,
    "resume-row-scheduled-timer": legal_timer,
}


# --- illegal: the edits of issue 7 and one per row ----------------------------------


def _bad_resume(kind: WaitKind, label: str, payload: ResumePayload, change: Callable[[Line], None],
                tool: str = "deploy") -> list[Line]:
    log = _awaiting(kind, label, tool)
    bad = mutated(log.peek("run-1", _command(kind, label, payload)), change)
    return log.lines + [bad]


def _deny_but_executing(line: Line) -> None:
    _resumed(line)["command"]["payload"] = {"type": "deny", "reason": None}
    redigest(line)


def ex_resume_edge() -> Example:
    good = legal_approve()
    bad = _bad_resume(WaitKind.APPROVAL, "row/approve", Approve(), _deny_but_executing)
    return (good, bad, "the payload says deny, yet the call goes Awaiting -> Executing: the tool would run after a deny.")


def _input_on_approval(line: Line) -> None:
    _resumed(line)["command"].update({"kind": "input", "payload": {"type": "input", "value": "yes"}})
    redigest(line)


def ex_resume_payload() -> Example:
    good = legal_approve()
    bad = _bad_resume(WaitKind.APPROVAL, "row/approve", Approve(), _input_on_approval)
    return (good, bad, "an input command answers an approval ticket.")


def _zero_digest(line: Line) -> None:
    _resumed(line)["digest"] = "0" * 64


def ex_resume_digest() -> Example:
    good = legal_approve()
    bad = _bad_resume(WaitKind.APPROVAL, "row/approve", Approve(), _zero_digest)
    return (good, bad, "the resumed event's digest is 64 zeros, not the SHA-256 of the command's RFC 8785 form.")


def _other_run(line: Line) -> None:
    _resumed(line)["command"]["run_id"] = "run-2"
    redigest(line)


def _other_ticket(line: Line) -> None:
    _resumed(line)["command"]["ticket_id"] = ticket("someone-else")
    redigest(line)


def _no_command(line: Line) -> None:
    event = _resumed(line)
    del event["command"], event["digest"]


def _approve_completes(line: Line) -> None:
    line["batch"]["calls"][0].update({"status": "completed", "attempt": 0, "result": {"kind": "denied", "value": None}})
    line["batch"]["finalized"] = True
    line["messages"] = [{"role": "tool", "content": "denied", "call_id": "call-1"}]


def _other_value(line: Line) -> None:
    line["batch"]["calls"][0]["result"]["value"] = {"signed": False}


def var_input_completes_with_another_value() -> Variant:
    lines, resume = input_completes_lines()
    resume["batch"]["calls"][0]["result"]["value"] = "us-east"
    return (lines[: lines.index(resume) + 1], "resume-edge-per-payload",
            "the input answer is 'eu-west' but the call completes with 'us-east'.")


def _timer_completes(line: Line) -> None:
    line["batch"]["calls"][0].update({"status": "completed", "attempt": 0, "result": {"kind": "external", "value": None}})


def _deny_without_reason(line: Line) -> None:
    del _resumed(line)["command"]["payload"]["reason"]
    redigest(line)


def _big_integer(line: Line) -> None:
    _resumed(line)["command"]["payload"]["value"] = 2**53
    line["batch"]["calls"][0]["result"]["value"] = 2**53
    _resumed(line)["digest"] = "0" * 64


# --- a resumed event on a commit that is not a resume ------------------------------------


def _with_resumed(line: Line, resumed: dict[str, Any]) -> Line:
    """``line`` carrying a copy of the well-formed ``resumed`` event ``resumed`` as well."""
    return mutated(line, lambda ln: ln["events"].append(copy.deepcopy(resumed)))


def var_resumed_on_running_commit() -> Variant:
    # the resume is applied once; the next commit (Running -> Running, the tool's
    # result) carries the same event again, as a replayed resume would
    log = _awaiting(WaitKind.APPROVAL, "misplaced/running")
    applied = _resumed(log.resume("run-1", "misplaced/running", WaitKind.APPROVAL, Approve()))
    bad = _with_resumed(log.peek("run-1", done("call-1", 1, {"ok": True})), applied)
    return (log.lines + [bad], "resume-matches-ticket",
            "the tool's result (Running -> Running) carries the resume's 'resumed' event a second time.")


def var_resumed_on_commit_entering_awaiting() -> Variant:
    # the commit that parks the Run already carries an approval of its own ticket
    log = Log()
    log.activate("thread-1", "run-1", "Please deploy.")
    log.feed("run-1", tools("batch-1", call("call-1", "deploy", {"target": "prod"})))
    command = _command(WaitKind.APPROVAL, "misplaced/entering", Approve())
    preapproved = {"type": "resumed", "ticket_id": command.ticket_id, "call_id": "call-1",
                   "command": command.to_json(), "digest": command.digest()}
    bad = _with_resumed(log.peek("run-1", wait("call-1", WaitKind.APPROVAL, "misplaced/entering")), preapproved)
    return (log.lines + [bad], "resume-matches-ticket",
            "the commit entering Awaiting carries a 'resumed' event for the ticket it commits.")


def var_resumed_on_activation() -> Variant:
    # run-2 of the thread starts with run-1's resume copied into its activation
    log = _awaiting(WaitKind.APPROVAL, "misplaced/activation")
    applied = _resumed(log.resume("run-1", "misplaced/activation", WaitKind.APPROVAL, Approve()))
    _finish_executing(log, 1)
    prefix = list(log.lines)
    activation = _with_resumed(log.activate("thread-1", "run-2", "Deploy again."), applied)
    return (prefix + [activation], "resume-matches-ticket",
            "run-2's activation (its first commit) carries run-1's 'resumed' event.")


def var_resumed_on_cancel_of_awaiting_run() -> Variant:
    # Awaiting -> Ended leaves Awaiting like a resume does, but is not one
    log = _awaiting(WaitKind.APPROVAL, "misplaced/cancel")
    resume = log.peek("run-1", _command(WaitKind.APPROVAL, "misplaced/cancel", Approve()))
    bad = _with_resumed(log.peek("run-1", end(EndCauseKind.CANCELLED)), _resumed(resume))
    return (log.lines + [bad], "resume-matches-ticket",
            "the cancel of the Awaiting run (Awaiting -> Ended) carries a 'resumed' event.")


RESUME_VARIANTS: dict[str, Callable[[], Variant]] = {
    "resume-matches-ticket--command-names-another-run": lambda: (
        _bad_resume(WaitKind.APPROVAL, "edit/run", Approve(), _other_run), "resume-matches-ticket",
        "the resume command names run-2; the commit is for run-1."),
    "resume-matches-ticket--command-names-another-ticket": lambda: (
        _bad_resume(WaitKind.APPROVAL, "edit/ticket", Approve(), _other_ticket), "resume-matches-ticket",
        "the resume command names a ticket other than the committed one."),
    "resume-matches-ticket--command-and-digest-removed": lambda: (
        _bad_resume(WaitKind.APPROVAL, "edit/removed", Approve(), _no_command), "resume-matches-ticket",
        "the resumed event carries neither command nor digest."),
    "resume-edge-per-payload--approve-completes-the-call": lambda: (
        _bad_resume(WaitKind.APPROVAL, "row/approve", Approve(), _approve_completes), "resume-edge-per-payload",
        "an approve resumes the call to Executing; here it completes it as denied."),
    "resume-edge-per-payload--external-value-is-not-the-payloads": lambda: (
        _bad_resume(WaitKind.EXTERNAL, "row/external", ExternalResult({"signed": True}), _other_value,
                    "legal.sign"),
        "resume-edge-per-payload", "the external answer is {\"signed\": true}, the call completes with false."),
    "resume-edge-per-payload--input-completes-with-another-value": var_input_completes_with_another_value,
    "edge-condition--timer-completes-the-call": lambda: (
        _bad_resume(WaitKind.SCHEDULED, "row/timer", TimerFired(), _timer_completes, "report.poll"),
        "edge-condition", "a timer only resumes its call to Executing; here the call completes."),
    "resume-payload-fits-wait--deny-without-reason": lambda: (
        _bad_resume(WaitKind.APPROVAL, "row/deny", Deny(), _deny_without_reason), "resume-payload-fits-wait",
        "the deny payload omits 'reason'; its normal form carries it (null when none)."),
    "resume-payload-fits-wait--integer-outside-i-json": lambda: (
        _bad_resume(WaitKind.EXTERNAL, "row/external", ExternalResult(1), _big_integer, "legal.sign"),
        "resume-payload-fits-wait", "the external answer 2^53 is outside I-JSON, so no digest is portable."),
    "resume-matches-ticket--resumed-on-a-running-commit": var_resumed_on_running_commit,
    "resume-matches-ticket--resumed-on-the-commit-entering-awaiting": var_resumed_on_commit_entering_awaiting,
    "resume-matches-ticket--resumed-on-the-activation": var_resumed_on_activation,
    "resume-matches-ticket--resumed-on-the-cancel-of-an-awaiting-run": var_resumed_on_cancel_of_awaiting_run,
}
