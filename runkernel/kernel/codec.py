"""The trace format ``runkernel/2``: ThreadCommit <-> JSON-ready dicts.

Decoding is strict about the fields the format names (a missing or mistyped field is a
``TraceFormatError`` naming its path) and ignores extra fields, as the format says.
Pure: parsing text and reading files happen in the callers.

Why this module is long: the format is one unit. Each field's encoding and decoding sit
side by side, so a field added to one is seen missing from the other; most of the length
is the strict decoder's error paths, each naming the path of the field it refuses.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from typing import Any, TypeVar

import msgspec

from runkernel.errors import IllegalShape as IllegalShape, TraceFormatError as TraceFormatError
from runkernel.kernel.canonical import jcs_digest
from runkernel.kernel.codec_encode import commit_line as commit_line
from runkernel.kernel.codec_typed import remember_policy, remembered_policy, typed_commit, typed_commit_of_text
from runkernel.kernel.policies import RecoveryMode, RetryPolicy, ToolPolicy, ToolRecoveryPolicy
from runkernel.kernel.rules import Rule
from runkernel.kernel.state import (
    RESUMED_EVENT,
    ActiveToolBatch,
    Awaiting,
    CallAwaiting,
    CallCompleted,
    CallExecuting,
    CallIndeterminate,
    CallRequested,
    CallStatus,
    Delegation,
    EndCause,
    Ended,
    Event,
    ForkedFrom,
    Message,
    ParentCall,
    ResumeTicket,
    RunDisposition,
    Running,
    Staged,
    ThreadCommit,
    ToolCall,
    ToolResult,
    ToolUse,
    TypedError,
    Wait,
)
from runkernel.kernel.values import (
    EndCauseKind,
    IndeterminateReason,
    JsonValue,
    ResultKind,
    Role,
    WaitKind,
    json_problem,
)

TRACE_FORMAT = "runkernel/2"
#: The format of version 0.1, refused by name: it has no checked resume event, no
#: committed policies and no metadata.
OLD_TRACE_FORMAT = "runkernel/1"

#: Every integer field of a line (version, step, attempt, max_attempts, retries) is
#: within 0..2^53-1, the integers every JSON implementation reads exactly; outside it a
#: line is not a trace (the schema states the same maximum).
MAX_TRACE_INTEGER = 2**53 - 1

E = TypeVar("E", bound=enum.Enum)
T = TypeVar("T")


# --- encoding -----------------------------------------------------------------------
# The line as a dict (what export, the JSON-value scan and the schema read); enums by
# their ``_value_`` (a plain attribute; ``.value`` is a property). ``commit_line``
# (codec_encode.py) writes the same line's bytes without building it.


def wait_to_json(wait: Wait) -> dict[str, JsonValue]:
    out: dict[str, JsonValue] = {"kind": wait.kind._value_, "correlation": wait.correlation}
    for name in ("child", "due_at", "expires_at"):
        value = getattr(wait, name)
        if value is not None:
            out[name] = value
    if wait.request is not None:  # absent when none was given: old traces stay byte-identical
        out["request"] = wait.request
    return out


def call_to_json(call: ToolCall) -> dict[str, JsonValue]:
    status = call.status
    out: dict[str, JsonValue] = {
        "call_id": call.call_id,
        "tool": call.tool,
        "arguments": call.arguments,
        "operation_id": call.operation_id,
        "status": _STATUS_NAMES[type(status)],
        "attempt": status.attempt,
    }
    if isinstance(status, CallAwaiting):
        out["wait"] = wait_to_json(status.wait)
    elif isinstance(status, CallCompleted):
        out["result"] = {"kind": status.result.kind._value_, "value": status.result.value}
    elif isinstance(status, CallIndeterminate):
        out["reason"] = status.reason._value_
    if call.reaction is not None:
        out["reaction"] = call.reaction
    if call.policy is not None:
        out["policy"] = policy_to_json(call.policy)
    if call.delegation is not None:
        out["delegation"] = {
            "thread_id": call.delegation.thread_id,
            "run_id": call.delegation.run_id,
            "concurrent": call.delegation.concurrent,
        }
    return out


def policy_to_json(policy: ToolPolicy) -> dict[str, JsonValue]:
    """A call's committed policy: ``retries`` counts the attempts after the first that
    retryable tool errors may use (a retry policy of n attempts has n - 1 retries)."""
    out: dict[str, JsonValue] = {
        "recovery": policy.recovery.mode._value_,
        "max_attempts": policy.recovery.max_attempts,
        "retries": policy.retry.max_attempts - 1,
    }
    if policy.terminal_only_delegation:
        out["delegation"] = "terminal_only"  # an extra field: the format allows it
    elif policy.sequential_delegation:
        out["delegation"] = "sequential"
    if policy.concurrent:
        out["concurrent"] = True  # absent: false (a trace without it is sequential)
    return out


def batch_to_json(batch: ActiveToolBatch | None) -> dict[str, JsonValue] | None:
    if batch is None:
        return None
    return {
        "batch_id": batch.batch_id,
        "step": batch.step,
        "finalized": batch.finalized,
        "calls": [call_to_json(c) for c in batch.calls],
    }


def disposition_to_json(disposition: RunDisposition) -> dict[str, JsonValue]:
    if isinstance(disposition, Running):
        return {"state": "running"}
    if isinstance(disposition, Awaiting):
        ticket = disposition.ticket
        return {
            "state": "awaiting",
            "ticket": {"ticket_id": ticket.ticket_id, "wait": ticket.wait._value_, "call_id": ticket.call_id},
        }
    cause: dict[str, JsonValue] = {"kind": disposition.cause.kind._value_}
    if disposition.cause.error is not None:
        cause["error"] = {"type": disposition.cause.error.type, "message": disposition.cause.error.message}
    return {"state": "ended", "cause": cause}


def message_to_json(message: Message) -> dict[str, JsonValue]:
    out: dict[str, JsonValue] = {"role": message.role._value_, "content": message.content}
    if message.tool_calls is not None:
        out["tool_calls"] = [
            {"call_id": u.call_id, "tool": u.tool, "arguments": u.arguments} for u in message.tool_calls
        ]
    if message.call_id is not None:
        out["call_id"] = message.call_id
    if message.metadata is not None:
        out["metadata"] = message.metadata
    return out


def event_to_json(event: Event) -> dict[str, JsonValue]:
    out: dict[str, JsonValue] = dict(event.data)
    out["type"] = event.type
    return out


def commit_to_json(commit: ThreadCommit) -> dict[str, JsonValue]:
    """One ``runkernel/2`` trace line as a dict (serialize with any JSON encoder)."""
    out: dict[str, JsonValue] = {
        "trace": TRACE_FORMAT,
        "thread_id": commit.thread_id,
        "run_id": commit.run_id,
        "version": commit.version,
        "step": commit.step,
        "disposition": disposition_to_json(commit.disposition),
        "batch": batch_to_json(commit.batch),
        "messages": [message_to_json(m) for m in commit.messages],
        "events": [event_to_json(e) for e in commit.events],
    }
    if commit.staged is not None:
        out["staged"] = commit.staged.value  # absent: unchanged; null: cleared
    if commit.parent is not None:
        out["parent"] = {
            "thread_id": commit.parent.thread_id,
            "run_id": commit.parent.run_id,
            "call_id": commit.parent.call_id,
        }
    if commit.forked_from is not None:
        out["forked_from"] = {
            "thread_id": commit.forked_from.thread_id,
            "run_id": commit.forked_from.run_id,
            "version": commit.forked_from.version,
        }
    if commit.app is not None:
        out["app"] = commit.app
    if commit.app_version is not None:
        out["app_version"] = commit.app_version
    return out


def upgrade_v1_line(obj: dict[str, Any]) -> dict[str, Any]:
    """A ``runkernel/1`` line as the ``runkernel/2`` line it stands for (``db migrate``).

    The shapes are the same; what changes is the resumed event's digest, which version
    0.1 computed over ``sort_keys`` JSON: it becomes the RFC 8785 digest of the same
    command. Calls keep no ``policy`` (it was never committed) and recovery falls back
    to the worker's configuration for them.
    """
    if obj.get("trace") != OLD_TRACE_FORMAT:
        raise TraceFormatError("trace", f"expected {OLD_TRACE_FORMAT!r}, got {obj.get('trace')!r}")
    out = dict(obj, trace=TRACE_FORMAT)
    events = out.get("events")
    if isinstance(events, list):
        out["events"] = [
            dict(event, digest=jcs_digest(event["command"]))
            if isinstance(event, dict) and event.get("type") == RESUMED_EVENT and isinstance(event.get("command"), dict)
            else event
            for event in events
        ]
    return out


def commit_json_problem(commit: ThreadCommit) -> str | None:
    """Why the commit's trace line would not be JSON (None when it is): every string
    Unicode scalar values (no lone surrogate), every number finite, every key a string."""
    return json_problem(commit_to_json(commit))


_STATUS_NAMES: dict[type, str] = {
    CallRequested: "requested",
    CallExecuting: "executing",
    CallAwaiting: "awaiting",
    CallCompleted: "completed",
    CallIndeterminate: "indeterminate",
}

# --- decoding -----------------------------------------------------------------------


_MISSING: Any = object()


def _field(obj: Mapping[str, Any], key: str, kind: type[T], path: str) -> T:
    value = obj.get(key, _MISSING)
    if type(value) is kind:  # the common case, decided without building a path; bool is not int
        if kind is int and not 0 <= value <= MAX_TRACE_INTEGER:  # type: ignore[operator]
            where = f"{path}.{key}" if path else key
            limit = "must be >= 0" if value < 0 else "must be at most 2^53-1 (an integer field is within 0..2^53-1)"  # type: ignore[operator]
            raise TraceFormatError(where, f"{limit}, got {value}")
        return value
    where = f"{path}.{key}" if path else key
    if key not in obj:
        raise TraceFormatError(where, "missing field")
    value = obj[key]
    if kind is int and (isinstance(value, bool) or not isinstance(value, int)):
        raise TraceFormatError(where, f"expected an integer, got {type(value).__name__}")
    if not isinstance(value, kind):
        raise TraceFormatError(where, f"expected {_KIND_NAMES.get(kind, kind.__name__)}, got {_json_type(value)}")
    return value


def _optional_str(obj: Mapping[str, Any], key: str, path: str) -> str | None:
    if key not in obj or obj[key] is None:
        return None
    return _field(obj, key, str, path)


def _enum(obj: Mapping[str, Any], key: str, kind: type[E], path: str) -> E:
    raw = _field(obj, key, str, path)
    member = kind._value2member_map_.get(raw)  # the Enum's own value index, without its call machinery
    if member is not None:
        return member  # type: ignore[return-value]
    try:
        return kind(raw)
    except ValueError:
        allowed = ", ".join(repr(m.value) for m in kind)
        raise TraceFormatError(f"{path}.{key}", f"{raw!r} is not one of {allowed}") from None


def _object(value: Any, path: str) -> Mapping[str, Any]:
    if not isinstance(value, dict):
        raise TraceFormatError(path, f"expected an object, got {_json_type(value)}")
    return value


def _non_negative(value: int, path: str) -> int:
    if value < 0:
        raise TraceFormatError(path, f"must be >= 0, got {value}")
    return value


_KIND_NAMES = {str: "a string", int: "an integer", bool: "a boolean", list: "an array", dict: "an object"}


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    return _KIND_NAMES.get(type(value), type(value).__name__)


def wait_from_json(obj: Mapping[str, Any], path: str) -> Wait:
    return Wait(
        kind=_enum(obj, "kind", WaitKind, path),
        correlation=_field(obj, "correlation", str, path),
        child=_extra_str(obj, "child"),
        due_at=_extra_str(obj, "due_at"),
        expires_at=_extra_str(obj, "expires_at"),
        request=obj.get("request"),  # any JSON value, kept to be shown, never judged
    )


def _extra_str(obj: Mapping[str, Any], key: str) -> str | None:
    """A field the format does not name: kept when it is a string, else ignored."""
    value = obj.get(key)
    return value if isinstance(value, str) else None


def _status_from_json(obj: Mapping[str, Any], path: str) -> CallStatus:
    status = _field(obj, "status", str, path)
    attempt = _field(obj, "attempt", int, path)
    if attempt < 0:
        raise TraceFormatError(f"{path}.attempt", f"must be >= 0, got {attempt}")
    present = {key for key in _STATUS_FIELDS if obj.get(key) is not None}
    wanted = _WANTED.get(status, _NONE_WANTED)
    if status not in _STATUS_BY_NAME:
        allowed = ", ".join(repr(n) for n in _STATUS_BY_NAME)
        raise TraceFormatError(f"{path}.status", f"{status!r} is not one of {allowed}")
    if present != wanted:
        raise TraceFormatError(
            path,
            f"a {status} call carries {sorted(wanted) or 'none of wait/result/reason'}, got {sorted(present)}",
        )
    if status == "requested":
        if attempt != 0:
            raise IllegalShape(Rule.ATTEMPT, f"{path}.attempt", f"a requested call has attempt 0, not {attempt}")
        return _REQUESTED
    if status == "executing":
        if attempt < 1:
            raise IllegalShape(Rule.ATTEMPT, f"{path}.attempt", "an executing call has attempt >= 1")
        return CallExecuting(attempt)
    if status == "awaiting":
        return CallAwaiting(attempt, wait_from_json(_object(obj["wait"], f"{path}.wait"), f"{path}.wait"))
    if status == "completed":
        result = _object(obj["result"], f"{path}.result")
        if "value" not in result:
            raise TraceFormatError(f"{path}.result.value", "missing field")
        return CallCompleted(attempt, ToolResult(_enum(result, "kind", ResultKind, f"{path}.result"), result["value"]))
    return CallIndeterminate(attempt, _enum(obj, "reason", IndeterminateReason, path))


_STATUS_BY_NAME = ("requested", "executing", "awaiting", "completed", "indeterminate")
_STATUS_FIELDS = ("wait", "result", "reason")
_WANTED = {"awaiting": {"wait"}, "completed": {"result"}, "indeterminate": {"reason"}}
_NONE_WANTED: set[str] = set()
_REQUESTED = CallRequested()


def call_from_json(obj: Mapping[str, Any], path: str) -> ToolCall:
    if "arguments" not in obj:
        raise TraceFormatError(f"{path}.arguments", "missing field")
    return ToolCall(
        call_id=_field(obj, "call_id", str, path),
        tool=_field(obj, "tool", str, path),
        arguments=obj["arguments"],
        operation_id=_field(obj, "operation_id", str, path),
        status=_status_from_json(obj, path),
        policy=policy_from_json(obj.get("policy"), f"{path}.policy"),
        reaction=obj.get("reaction"),
        delegation=_delegation_from_json(obj.get("delegation"), f"{path}.delegation"),
    )


def _delegation_from_json(value: Any, path: str) -> Delegation | None:
    if value is None:
        return None
    obj = _object(value, path)
    return Delegation(
        _field(obj, "thread_id", str, path), _field(obj, "run_id", str, path), _field(obj, "concurrent", bool, path)
    )


def _parent_from_json(value: Any, path: str) -> ParentCall | None:
    if value is None:
        return None
    obj = _object(value, path)
    return ParentCall(_field(obj, "thread_id", str, path), _field(obj, "run_id", str, path), _field(obj, "call_id", str, path))


def _forked_from_json(value: Any, path: str) -> ForkedFrom | None:
    if value is None:
        return None
    obj = _object(value, path)
    version = _field(obj, "version", int, path)
    if version < 1:
        raise TraceFormatError(f"{path}.version", f"versions start at 1, got {version}")
    return ForkedFrom(_field(obj, "thread_id", str, path), _field(obj, "run_id", str, path), version)


def policy_from_json(value: Any, path: str) -> ToolPolicy | None:
    """Decode a call's ``policy`` (absent or null: the runtime did not record one)."""
    if value is None:
        return None
    obj = _object(value, path)
    recovery, max_attempts, retries = obj.get("recovery"), obj.get("max_attempts"), obj.get("retries")
    delegation, concurrent = obj.get("delegation"), obj.get("concurrent", False)
    if not (type(recovery) is str and type(max_attempts) is int and type(retries) is int
            and type(delegation) in (str, type(None)) and type(concurrent) is bool):
        return _decode_policy(obj, path)
    key = (recovery, max_attempts, retries, delegation, concurrent)
    known = remembered_policy(key)  # one cache with the typed reader's
    return known if known is not None else remember_policy(key, _decode_policy(obj, path))


def _decode_policy(obj: Mapping[str, Any], path: str) -> ToolPolicy:
    mode = _enum(obj, "recovery", RecoveryMode, path)
    max_attempts = _field(obj, "max_attempts", int, path)
    retries = _non_negative(_field(obj, "retries", int, path), f"{path}.retries")
    if max_attempts < 1:
        raise TraceFormatError(f"{path}.max_attempts", f"must be >= 1, got {max_attempts}")
    kind = obj.get("delegation")
    if kind not in (None, "terminal_only", "sequential"):
        raise TraceFormatError(f"{path}.delegation", f"must be 'terminal_only' or 'sequential', got {kind!r}")
    concurrent = obj.get("concurrent", False)
    if type(concurrent) is not bool:
        raise TraceFormatError(f"{path}.concurrent", f"must be a boolean, got {concurrent!r}")
    if concurrent and kind is not None:
        raise TraceFormatError(f"{path}.concurrent", "a concurrent tool is never a delegation")
    return ToolPolicy(
        ToolRecoveryPolicy(mode, max_attempts),
        RetryPolicy(retries + 1),
        terminal_only_delegation=kind == "terminal_only",
        sequential_delegation=kind == "sequential",
        concurrent=concurrent,
    )


def _call_at(value: Any, where: str) -> ToolCall:
    return call_from_json(_object(value, where), where)


def batch_from_json(value: Any, path: str) -> ActiveToolBatch | None:
    if value is None:
        return None
    obj = _object(value, path)
    raw_calls = _field(obj, "calls", list, path)
    batch_id = _field(obj, "batch_id", str, path)
    step = _field(obj, "step", int, path)
    finalized = _field(obj, "finalized", bool, path)
    calls = tuple(_call_at(c, f"{path}.calls[{i}]") for i, c in enumerate(raw_calls))
    if not calls:
        raise IllegalShape(Rule.BATCH_NEW, f"{path}.calls", "a batch holds one or more calls")
    if step < 1:
        raise IllegalShape(Rule.STEP, f"{path}.step", f"a batch belongs to the step of its inference (>= 1), not {step}")
    for name in ("call_id", "operation_id"):
        values = [getattr(call, name) for call in calls]
        if len(set(values)) != len(values):
            raise IllegalShape(Rule.BATCH_IDENTITY, f"{path}.calls", f"{name}s of a batch must be unique")
    return ActiveToolBatch(batch_id=batch_id, step=step, finalized=finalized, calls=calls)


def disposition_from_json(obj: Mapping[str, Any], path: str) -> RunDisposition:
    state = _field(obj, "state", str, path)
    if state in ("running", "ended") and obj.get("ticket") is not None:
        raise IllegalShape(Rule.TICKET_SHAPE, f"{path}.ticket", f"a {state} disposition carries no ticket (I2)")
    if state == "running":
        return Running()
    if state == "awaiting":
        ticket = _object(obj.get("ticket"), f"{path}.ticket")
        return Awaiting(
            ResumeTicket(
                ticket_id=_field(ticket, "ticket_id", str, f"{path}.ticket"),
                wait=_enum(ticket, "wait", WaitKind, f"{path}.ticket"),
                call_id=_field(ticket, "call_id", str, f"{path}.ticket"),
            )
        )
    if state == "ended":
        cause = _object(obj.get("cause"), f"{path}.cause")
        kind = _enum(cause, "kind", EndCauseKind, f"{path}.cause")
        error = None
        if kind is EndCauseKind.FAILED:
            if cause.get("error") is None:
                raise TraceFormatError(f"{path}.cause.error", "missing field: a failed cause carries its typed error")
            raw = _object(cause["error"], f"{path}.cause.error")
            error = TypedError(
                _field(raw, "type", str, f"{path}.cause.error"),
                _field(raw, "message", str, f"{path}.cause.error"),
            )
        return Ended(EndCause(kind, error))
    raise TraceFormatError(f"{path}.state", f"{state!r} is not one of 'running', 'awaiting', 'ended'")


def message_from_json(obj: Mapping[str, Any], path: str) -> Message:
    if "content" not in obj:
        raise TraceFormatError(f"{path}.content", "missing field")
    role = _enum(obj, "role", Role, path)
    tool_calls = None
    if obj.get("tool_calls"):
        if role is not Role.ASSISTANT:
            raise IllegalShape(Rule.BATCH_NEW, f"{path}.tool_calls", f"only an assistant message uses tools, not a {role.value} message")
        raw = _field(obj, "tool_calls", list, path)
        uses = []
        for i, item in enumerate(raw):
            where = f"{path}.tool_calls[{i}]"
            use = _object(item, where)
            if "arguments" not in use:
                raise TraceFormatError(f"{where}.arguments", "missing field")
            uses.append(ToolUse(_field(use, "call_id", str, where), _field(use, "tool", str, where), use["arguments"]))
        tool_calls = tuple(uses)
    call_id = _optional_str(obj, "call_id", path) if role is Role.TOOL else None
    if role is Role.TOOL and call_id is None:
        raise TraceFormatError(f"{path}.call_id", "missing field: a tool message names its call")
    return Message(
        role=role, content=obj["content"], tool_calls=tool_calls, call_id=call_id, metadata=obj.get("metadata")
    )


def event_from_json(obj: Mapping[str, Any], path: str) -> Event:
    kind = _field(obj, "type", str, path)
    if kind == RESUMED_EVENT:
        # the format types the resumed event's fields; what they say is judged later
        _field(obj, "ticket_id", str, path)
        _field(obj, "call_id", str, path)
        if "command" in obj:
            _object(obj["command"], f"{path}.command")
        if "digest" in obj:
            _field(obj, "digest", str, path)
    return Event(kind, {k: v for k, v in obj.items() if k != "type"})


def commit_from_json(value: Any) -> ThreadCommit:
    """Decode one trace line; raises ``TraceFormatError`` on any shape the format forbids."""
    typed = typed_commit(value)  # the typed reading, when it is certain (codec_typed.py)
    if typed is not None:
        return typed
    return _strict_commit(value)


def commit_from_line(text: str | bytes) -> ThreadCommit:
    """Decode one trace line's text (JSON) straight into the typed structures; a line
    the typed reading is not certain of is parsed and read by the strict reader."""
    typed = typed_commit_of_text(text)
    if typed is not None:
        return typed
    return _strict_commit(_UNTYPED.decode(text))


_UNTYPED = msgspec.json.Decoder()


def _strict_commit(value: Any) -> ThreadCommit:
    """The strict, field-by-field reader: names the path of whatever it refuses."""
    obj = _object(value, "")
    trace = _field(obj, "trace", str, "")
    if trace == OLD_TRACE_FORMAT:
        raise TraceFormatError(
            "trace",
            f"{OLD_TRACE_FORMAT!r} is the format of runkernel 0.1; this checker reads {TRACE_FORMAT!r} "
            "(re-export the trace with this version)",
        )
    if trace != TRACE_FORMAT:
        raise TraceFormatError("trace", f"expected {TRACE_FORMAT!r}, got {trace!r}")
    version = _field(obj, "version", int, "")
    if version < 1:
        raise TraceFormatError("version", f"versions start at 1, got {version}")
    messages = _field(obj, "messages", list, "")
    events = _field(obj, "events", list, "")
    if "batch" not in obj:
        raise TraceFormatError("batch", "missing field")
    try:
        return ThreadCommit(
            thread_id=_field(obj, "thread_id", str, ""),
            run_id=_field(obj, "run_id", str, ""),
            expected_version=version - 1,
            step=_non_negative(_field(obj, "step", int, ""), "step"),
            disposition=disposition_from_json(_object(obj.get("disposition"), "disposition"), "disposition"),
            batch=batch_from_json(obj["batch"], "batch"),
            messages=tuple(message_from_json(_object(m, f"messages[{i}]"), f"messages[{i}]") for i, m in enumerate(messages)),
            events=tuple(event_from_json(_object(e, f"events[{i}]"), f"events[{i}]") for i, e in enumerate(events)),
            app=_optional_str(obj, "app", ""),
            staged=Staged(obj["staged"]) if "staged" in obj else None,
            parent=_parent_from_json(obj.get("parent"), "parent"),
            forked_from=_forked_from_json(obj.get("forked_from"), "forked_from"),
            app_version=_optional_str(obj, "app_version", ""),
        )
    except TraceFormatError:
        raise
    except (ValueError, TypeError) as error:
        raise TraceFormatError("", f"malformed commit: {error}") from None
