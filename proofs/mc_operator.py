"""What an operator may send: matching resumes and ends, and commands that must be refused.

I14: a ResumeCommand commits if and only if the Run is Awaiting and ticket, wait kind
and payload type all match. The matching commands are transitions of the model; the
others (a forged ticket, another run, a wrong wait kind, a wrong payload type, a
command for a ticket that is no longer awaited, an end cause an Awaiting run may not
take) are offered at every quiet point and must be refused without changing anything.
"""

from __future__ import annotations

from runkernel.kernel.protocol import (
    PAYLOADS_BY_WAIT,
    Approve,
    DeadlinePassed,
    DelegationResult,
    Deny,
    EndRequest,
    ExternalResult,
    Input,
    ProvideInput,
    ResumeCommand,
    ResumePayload,
    TimerFired,
)
from runkernel.kernel.history import RunHistory
from runkernel.kernel.rules import Rejection
from runkernel.kernel.state import Awaiting, CallAwaiting, EndCause, Ended, RunSnapshot, TypedError
from runkernel.kernel.values import EndCauseKind, WaitKind

import mc_config as cfg
from mc_encode import Key, enc_history, enc_snapshot
from mc_kernel import Context, Violation

#: One payload of every type, by the wait kind that accepts it.
PAYLOADS: dict[WaitKind, tuple[ResumePayload, ...]] = {
    WaitKind.APPROVAL: (Approve(), Deny("denied-by-operator")),
    WaitKind.INPUT: (ProvideInput("operator-input"),),
    WaitKind.EXTERNAL: (ExternalResult("external-answer"),),
    WaitKind.DELEGATION: (DelegationResult("child-answer"),),
    WaitKind.SCHEDULED: (TimerFired(),),
}
ALL_PAYLOADS: tuple[ResumePayload, ...] = tuple(p for ps in PAYLOADS.values() for p in ps)


def end_request(kind: EndCauseKind) -> EndRequest:
    error = TypedError("OperatorFailed", "failed by the operator") if kind is EndCauseKind.FAILED else None
    return EndRequest(EndCause(kind, error))


def _name(payload: ResumePayload) -> str:
    return type(payload).__name__


def operator_commands(snap: RunSnapshot) -> list[tuple[str, Input]]:
    """What an operator may do while the run is Awaiting: every matching resume, or end it."""
    assert isinstance(snap.state, Awaiting)
    ticket = snap.state.ticket
    out: list[tuple[str, Input]] = [
        (f"resume {ticket.wait.value} {_name(p)}", ResumeCommand(snap.run_id, ticket.ticket_id, ticket.wait, p))
        for p in PAYLOADS[ticket.wait]
    ]
    if _expires_at(snap) is not None:
        out.append(("deadline passes", DeadlinePassed(ticket.ticket_id, cfg.AFTER_EXPIRY)))
    for kind in (EndCauseKind.CANCELLED, EndCauseKind.STOPPED, EndCauseKind.FAILED):
        out.append((f"operator {kind.value}", end_request(kind)))
    return out


def _expires_at(snap: RunSnapshot) -> str | None:
    """The deadline of the awaited call's wait, if it has one."""
    if not isinstance(snap.state, Awaiting) or snap.batch is None:
        return None
    call = snap.batch.call(snap.state.ticket.call_id)
    return call.status.wait.expires_at if call is not None and isinstance(call.status, CallAwaiting) else None


def refused_commands(snap: RunSnapshot, history: RunHistory) -> list[tuple[str, Input]]:
    """Commands the kernel must refuse in ``snap``."""
    out: list[tuple[str, Input]] = []
    current = snap.state.ticket if isinstance(snap.state, Awaiting) else None
    if current is not None:
        good = PAYLOADS[current.wait][0]
        out.append(("forged ticket", ResumeCommand(snap.run_id, cfg.FORGED_TICKET, current.wait, good)))
        out.append(("other run", ResumeCommand(cfg.OTHER_RUN, current.ticket_id, current.wait, good)))
        for kind, payloads in PAYLOADS.items():
            if kind is not current.wait:
                out.append((f"wrong kind {kind.value}", ResumeCommand(snap.run_id, current.ticket_id, kind, payloads[0])))
        for payload in ALL_PAYLOADS:
            if not isinstance(payload, PAYLOADS_BY_WAIT[current.wait]):
                out.append(
                    (f"wrong payload {_name(payload)}", ResumeCommand(snap.run_id, current.ticket_id, current.wait, payload))
                )
        out.append(("end completed while awaiting", end_request(EndCauseKind.COMPLETED)))
        early = cfg.BEFORE_EXPIRY if _expires_at(snap) is not None else cfg.AFTER_EXPIRY
        out.append(("deadline not passed", DeadlinePassed(current.ticket_id, early)))
    else:
        out.append(("resume while not awaiting", ResumeCommand(snap.run_id, cfg.FORGED_TICKET, WaitKind.APPROVAL, Approve())))
    out.append(("deadline of a forged ticket", DeadlinePassed(cfg.FORGED_TICKET, cfg.AFTER_EXPIRY)))
    for used in sorted(history.tickets):
        if current is not None and used == current.ticket_id:
            continue
        for kind, payloads in PAYLOADS.items():
            for payload in payloads:
                out.append((f"stale {used} {_name(payload)}", ResumeCommand(snap.run_id, used, kind, payload)))
    if isinstance(snap.state, Ended):
        out.append(("cancel after end", end_request(EndCauseKind.CANCELLED)))
    return out


def check_refusals(ctx: Context, snap: RunSnapshot, history: RunHistory) -> None:
    """Every command of ``refused_commands`` is a typed rejection that changes nothing."""
    key: Key = (enc_snapshot(snap), enc_history(history))
    if ctx.profile.hash_compaction:
        key = hash(key)
    if key in ctx.refusals_checked:
        return
    before = repr((snap, history))
    commands = refused_commands(snap, history)
    ctx.counters["refused commands checked"] = ctx.counters.get("refused commands checked", 0) + len(commands)
    for label, command in commands:
        verdict = ctx.decide(snap, command, history)
        if not isinstance(verdict, Rejection):
            raise Violation("I14", f"the kernel accepted a command it must refuse ({label}): {command!r}")
    if repr((snap, history)) != before:
        raise Violation("I14", "a refused command changed the committed state")
    ctx.refusals_checked.add(key)
