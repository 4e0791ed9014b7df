"""Commit validation of a resume commit's ``resumed`` event (I14).

The event is ``{"type": "resumed", "ticket_id", "call_id", "command", "digest"}`` with
``command = {"run_id", "ticket_id", "kind", "payload"}``. It must name the committed
Run, ticket and call (exact byte strings, compared in constant time), its kind must be
the ticket's wait, its payload a row of the resume payload table for that wait, in
normal form and within I-JSON, its digest the SHA-256 of the command's RFC 8785 form,
and the edge the commit applies to the ticket's call one that payload allows.
"""

from __future__ import annotations

import hmac
from collections.abc import Mapping

from runkernel.kernel.canonical import NotIJson, jcs_digest
from runkernel.kernel.edges import RESUME_PAYLOAD_TABLE, RESUME_PAYLOADS
from runkernel.kernel.rules import Rule
from runkernel.kernel.state import (
    RESUMED_EVENT,
    CallCompleted,
    CallExecuting,
    CallStatus,
    Event,
    ResumeTicket,
    ToolCall,
)
from runkernel.kernel.validate_calls import Illegal, same_json
from runkernel.kernel.values import JsonValue, ResultKind, WaitKind


def _short(value: object, limit: int) -> str:
    """``repr(value)`` cut to ``limit`` characters, for messages about untrusted input."""
    return repr(value)[:limit]


def same_id(a: str, b: str) -> bool:
    """Exact byte-string equality in constant time: no case folding, trimming or prefix."""
    return hmac.compare_digest(a.encode("utf-8", "surrogatepass"), b.encode("utf-8", "surrogatepass"))


def _text(obj: Mapping[str, JsonValue], key: str, where: str) -> str:
    value = obj.get(key)
    if not isinstance(value, str):
        raise Illegal(Rule.RESUME, f"the resumed event's {where}{key} must be a string, got {_short(value, 60)}")
    return value


def check_resumed_event(
    run_id: str, ticket: ResumeTicket, data: Mapping[str, JsonValue], moved: ToolCall | None
) -> None:
    """Judge the event of the commit that applies ``ticket``; ``moved`` is the ticket's
    call as that commit leaves it. Raises ``Illegal`` naming the broken rule."""
    command = data.get("command")
    if not isinstance(command, dict):
        raise Illegal(
            Rule.RESUME,
            "the resumed event carries no command object (run_id, ticket_id, kind, payload)",
        )
    digest = _text(data, "digest", "")
    if not same_id(_text(command, "run_id", "command."), run_id):
        raise Illegal(
            Rule.RESUME,
            f"the resume command names run {_short(command.get('run_id'), 80)}, the commit is for run {run_id!r}",
        )
    if not same_id(_text(command, "ticket_id", "command."), ticket.ticket_id):
        raise Illegal(
            Rule.RESUME,
            f"the resume command names ticket {_short(command.get('ticket_id'), 80)}, the committed ticket is "
            f"{ticket.ticket_id!r}",
        )
    kind = _text(command, "kind", "command.")
    if kind != ticket.wait.value:
        raise Illegal(
            Rule.RESUME_PAYLOAD,
            f"the resume command is of kind {_short(kind, 40)}, the ticket waits for {ticket.wait.value!r}",
        )
    payload = command.get("payload")
    if not isinstance(payload, dict):
        raise Illegal(Rule.RESUME_PAYLOAD, "the resume command carries no payload object")
    payload_type = payload.get("type")
    row = RESUME_PAYLOADS.get(payload_type) if isinstance(payload_type, str) else None
    if row is None or ticket.wait not in row.waits:
        raise Illegal(
            Rule.RESUME_PAYLOAD,
            f"the ticket waits for {ticket.wait.value!r}, which does not take a {_short(payload_type, 40)} payload",
        )
    for name in row.fields:
        if name not in payload:
            raise Illegal(
                Rule.RESUME_PAYLOAD,
                f"the {row.payload!r} payload carries {name!r} in normal form (null when none)",
            )
    try:
        expected = jcs_digest(command)
    except NotIJson as error:
        raise Illegal(Rule.RESUME_PAYLOAD, f"the resume command is not I-JSON (RFC 7493): {error}") from None
    _check_edge(row.payload, row.executes, row.completes_as, payload.get(row.value_field or ""), moved)
    if not hmac.compare_digest(digest.encode("utf-8", "surrogatepass"), expected.encode("ascii")):
        raise Illegal(
            Rule.RESUME_DIGEST,
            f"the resumed event's digest {_short(digest, 80)} is not the SHA-256 of the command's RFC 8785 form "
            f"({expected})",
        )


def _check_edge(
    payload: str, executes: bool, completes_as: ResultKind | None, value: JsonValue, moved: ToolCall | None
) -> None:
    status = moved.status if moved is not None else None
    call_id = moved.call_id if moved is not None else ""
    if isinstance(status, CallExecuting):
        if not executes:
            raise Illegal(
                Rule.RESUME_EDGE,
                f"a {payload!r} resume completes call {call_id!r}; it may not go on executing",
            )
        return
    if isinstance(status, CallCompleted):
        allowed = f"completes the call as {completes_as.value!r}" if completes_as else "only resumes it to Executing"
        if status.result.kind is not completes_as:
            raise Illegal(
                Rule.RESUME_EDGE,
                f"call {call_id!r} completes as {status.result.kind.value!r}; a {payload!r} resume {allowed}",
            )
        if not same_json(status.result.value, value):
            raise Illegal(
                Rule.RESUME_EDGE,
                f"the completed value of call {call_id!r} is not the {payload!r} payload's",
            )
        return
    raise Illegal(Rule.RESUME_EDGE, f"a {payload!r} resume moves its call to Executing or Completed")


def resumed_event(run_id: str, ticket: ResumeTicket, payload: Mapping[str, JsonValue]) -> Event:
    """The ``resumed`` event of a commit that applies ``payload`` (in normal form) to
    ``ticket`` of ``run_id``, with its JCS digest: what a hand-built resume commit carries."""
    command: dict[str, JsonValue] = {
        "run_id": run_id,
        "ticket_id": ticket.ticket_id,
        "kind": ticket.wait.value,
        "payload": dict(payload),
    }
    return Event(
        RESUMED_EVENT,
        {"ticket_id": ticket.ticket_id, "call_id": ticket.call_id, "command": command, "digest": jcs_digest(command)},
    )


def payload_for(wait: WaitKind, moved: CallStatus) -> dict[str, JsonValue]:
    """A payload the table allows for ``wait`` that moves the call to ``moved``: the
    completing payload with the result's value, else the wait's resuming payload (or,
    when the table has none, the wait's first payload, which that edge then breaks)."""
    rows = [rule for rule in RESUME_PAYLOAD_TABLE if wait in rule.waits]
    if isinstance(moved, CallCompleted):
        for rule in rows:
            if rule.completes_as is moved.result.kind and rule.value_field is not None:
                return {"type": rule.payload, rule.value_field: moved.result.value}
    chosen = next((rule for rule in rows if rule.executes), rows[0])
    out: dict[str, JsonValue] = {"type": chosen.payload}
    if chosen.value_field is not None:
        out[chosen.value_field] = None
    return out
