"""JSON forms the stores keep: Run snapshots and inbox commands.

Commits are stored as their ``runkernel/2`` line (``runkernel.kernel.codec``), so a
store's export is the stored text itself.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import msgspec

from runkernel.kernel.codec import (
    TraceFormatError,
    batch_from_json,
    batch_to_json,
    commit_from_line,
    commit_line,
    disposition_from_json,
    disposition_to_json,
)
from runkernel.kernel.history import RunHistory
from runkernel.kernel.protocol import (
    Approve,
    DelegationResult,
    Deny,
    EndRequest,
    ExternalResult,
    ProvideInput,
    ResumeCommand,
    ResumePayload,
    TimerFired,
)
from runkernel.kernel.state import (
    AppliedResume,
    EndCause,
    ProvidedInput,
    RunSnapshot,
    ThreadCommit,
    TypedError,
)
from runkernel.kernel.values import EndCauseKind, JsonValue, WaitKind


def dumps(value: JsonValue) -> str:
    """Compact JSON, UTF-8 kept as is, no NaN."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


_ENCODER = msgspec.json.Encoder()


def judged_dumps(value: JsonValue) -> str:
    """Compact JSON by msgspec for values a store already judged (``judge_append``
    refused NaN, lone surrogates and non-string keys, which msgspec would not)."""
    return _ENCODER.encode(value).decode("utf-8")


def commit_text(commit: ThreadCommit) -> str:
    """A judged commit's ``runkernel/2`` line (msgspec: exact big integers, shortest floats),
    written from the commit's values without building its dict (``codec.commit_line``)."""
    return commit_line(commit).decode("utf-8")


def line_text(line: Mapping[str, JsonValue]) -> str:
    """A judged commit's ``commit_to_json`` dict as its ``runkernel/2`` line."""
    return _ENCODER.encode(line).decode("utf-8")


def commit_from_text(text: str | bytes) -> ThreadCommit:
    """A stored line read straight into the kernel's structures (the codec's typed
    reading; anything it is not certain of goes through the strict reader)."""
    return commit_from_line(text)


def snapshot_text(snapshot: RunSnapshot) -> str:
    """A snapshot's stored JSON; every value in it came from judged commits."""
    return judged_dumps(snapshot_to_json(snapshot))


def snapshot_to_json(snapshot: RunSnapshot) -> dict[str, JsonValue]:
    return {
        "thread_id": snapshot.thread_id,
        "run_id": snapshot.run_id,
        "version": snapshot.version,
        "step": snapshot.step,
        "state": disposition_to_json(snapshot.state),
        "batch": batch_to_json(snapshot.batch),
        "provided_inputs": [[p.call_id, p.value] for p in snapshot.provided_inputs],
        "staged": snapshot.staged,
    }


def snapshot_from_text(text: str | bytes) -> RunSnapshot:
    """The snapshot ``snapshot_text`` stored (``snapshot_from_text(snapshot_text(s)) == s``)."""
    return snapshot_from_json(json.loads(text))


def snapshot_from_json(obj: Any) -> RunSnapshot:
    return RunSnapshot(
        thread_id=obj["thread_id"],
        run_id=obj["run_id"],
        version=obj["version"],
        step=obj["step"],
        state=disposition_from_json(obj["state"], "state"),
        batch=batch_from_json(obj["batch"], "batch"),
        provided_inputs=tuple(ProvidedInput(c, v) for c, v in obj.get("provided_inputs", [])),
        staged=obj.get("staged"),
    )


def legacy_history_from_json(obj: Any) -> RunHistory:
    """The history facts a schema-1 snapshot held inline (read only by the migration)."""
    return RunHistory(
        tickets=frozenset(str(t) for t in obj.get("tickets_used", [])),
        closed_batches=frozenset(str(b) for b in obj.get("closed_batch_ids", [])),
        resumes=tuple(AppliedResume(str(t), str(d)) for t, d in obj.get("resumes_applied", [])),
    )


# --- inbox commands -------------------------------------------------------------


def resume_to_inbox(command: ResumeCommand) -> dict[str, JsonValue]:
    return {"type": "resume", "command": command.to_json()}


def answered_ticket(body: JsonValue) -> str | None:
    """The ticket an inbox body answers (a resume's), None for any other body: the key
    that allows one pending answer per wait."""
    if isinstance(body, dict) and body.get("type") == "resume":
        command = body.get("command")
        if isinstance(command, dict) and isinstance(command.get("ticket_id"), str):
            return str(command["ticket_id"])
    return None


def answer_name(body: JsonValue) -> str:
    """What a resume body answers, as the CLI names it (``approve``, ``deny``, ``input``...)."""
    command = body.get("command") if isinstance(body, dict) else None
    payload = command.get("payload") if isinstance(command, dict) else None
    kind = payload.get("type") if isinstance(payload, dict) else None
    return kind if isinstance(kind, str) else "resume"


def end_to_inbox(request: EndRequest) -> dict[str, JsonValue]:
    cause = request.cause
    body: dict[str, JsonValue] = {"type": "end", "kind": cause.kind.value}
    if cause.error is not None:
        body["error"] = {"type": cause.error.type, "message": cause.error.message}
    return body


def _payload_from_json(obj: Any) -> ResumePayload:
    kind = obj.get("type")
    if kind == "approve":
        return Approve()
    if kind == "deny":
        return Deny(obj.get("reason"))
    if kind == "input":
        return ProvideInput(obj.get("value"))
    if kind == "external":
        return ExternalResult(obj.get("value"))
    if kind == "delegation":
        return DelegationResult(obj.get("value"))
    if kind == "timer":
        return TimerFired()
    raise TraceFormatError("payload.type", f"unknown resume payload {kind!r}")


def resume_from_json(obj: Any) -> ResumeCommand:
    """Decode ``ResumeCommand.to_json()``; raises TraceFormatError on a bad shape."""
    if not isinstance(obj, dict):
        raise TraceFormatError("command", "expected an object")
    try:
        return ResumeCommand(
            run_id=str(obj["run_id"]),
            ticket_id=str(obj["ticket_id"]),
            kind=WaitKind(obj["kind"]),
            payload=_payload_from_json(obj["payload"]),
        )
    except (KeyError, ValueError, AttributeError) as error:
        raise TraceFormatError("command", f"malformed resume command: {error}") from None


def inbox_to_input(body: Any) -> ResumeCommand | EndRequest:
    """The kernel input an inbox entry stands for."""
    if not isinstance(body, dict):
        raise TraceFormatError("inbox", "expected an object")
    if body.get("type") == "resume":
        return resume_from_json(body.get("command"))
    if body.get("type") == "end":
        try:
            kind = EndCauseKind(body.get("kind"))
            raw = body.get("error")
            error = TypedError(str(raw["type"]), str(raw["message"])) if raw else None
            return EndRequest(EndCause(kind, error))
        except (KeyError, TypeError, ValueError) as problem:
            raise TraceFormatError("inbox", f"malformed end request: {problem}") from None
    raise TraceFormatError("inbox.type", f"unknown inbox command {body.get('type')!r}")
