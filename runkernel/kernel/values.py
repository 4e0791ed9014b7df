"""Closed vocabularies of the design: wait kinds, result kinds, reasons and causes.

Every value is the exact string used by the trace format ``runkernel/2``.
"""

from __future__ import annotations

import datetime
import enum
import json
import math
from typing import Any, TypeAlias

#: Any JSON value (tool arguments, message content, tool output). The kernel never
#: interprets it; it only compares it for equality.
JsonValue: TypeAlias = Any


class WaitKind(enum.Enum):
    """What an Awaiting call waits for."""

    APPROVAL = "approval"
    INPUT = "input"
    DELEGATION = "delegation"
    SCHEDULED = "scheduled"
    EXTERNAL = "external"


class ResultKind(enum.Enum):
    """How a Completed call got its result."""

    OUTPUT = "output"
    ERROR = "error"
    DENIED = "denied"
    BLOCKED = "blocked"
    SUPPLIED = "supplied"
    EXTERNAL = "external"


class IndeterminateReason(enum.Enum):
    """Why a call's outcome cannot be known."""

    RUN_ENDED = "run_ended"
    OUTCOME_UNKNOWN = "outcome_unknown"
    ATTEMPTS_EXHAUSTED = "attempts_exhausted"


class EndCauseKind(enum.Enum):
    """The one cause an Ended Run carries."""

    COMPLETED = "completed"
    STEP_LIMIT = "step_limit"
    CANCELLED = "cancelled"
    STOPPED = "stopped"
    FAILED = "failed"
    OUTCOME_UNKNOWN = "outcome_unknown"


class Role(enum.Enum):
    """Author of a committed message."""

    USER = "user"
    ASSISTANT = "assistant"
    TOOL = "tool"


#: End causes by which an Awaiting Run may end (cancel, stop or failure).
AWAITING_END_CAUSES = frozenset(
    {EndCauseKind.CANCELLED, EndCauseKind.STOPPED, EndCauseKind.FAILED}
)


def json_problem(value: JsonValue) -> str | None:
    """Why ``value`` cannot be committed as JSON (None when it can): only null, booleans,
    finite numbers, valid Unicode strings, arrays and objects with string keys."""
    stack = [value]
    while stack:
        item = stack.pop()
        kind = type(item)  # exact types first: the common case skips isinstance chains
        if kind is str:
            if not item.isascii():
                try:
                    item.encode("utf-8")
                except UnicodeEncodeError:
                    return f"{item!r} is not valid Unicode"
            continue
        if kind is dict:
            for key, inner in item.items():
                if type(key) is not str:
                    return f"object key {key!r} is not a string"
                if not key.isascii():
                    stack.append(key)
                stack.append(inner)
            continue
        if kind is list:
            stack.extend(item)
            continue
        if item is None or isinstance(item, (bool, int)):
            continue
        if isinstance(item, float):
            if not math.isfinite(item):
                return f"{item!r} is not a finite number"
        elif isinstance(item, str):
            try:
                item.encode("utf-8")
            except UnicodeEncodeError:
                return f"{item!r} is not valid Unicode"
        elif isinstance(item, (list, tuple)):
            stack.extend(item)
        elif isinstance(item, dict):
            for key, inner in item.items():
                if not isinstance(key, str):
                    return f"object key {key!r} is not a string"
                stack.append(key)
                stack.append(inner)
        else:
            return f"a {type(item).__name__} is not a JSON value"
    return None


#: I-JSON (RFC 7493) integers: exactly representable as IEEE 754 doubles, so every
#: implementation reads the same number and computes the same digest.
IJSON_MAX_INTEGER = 2**53 - 1


def ijson_problem(value: JsonValue) -> str | None:
    """Why ``value`` is not I-JSON (None when it is): ``json_problem``'s rules plus
    integers within +-(2^53 - 1), the values a resume command may carry."""
    problem = json_problem(value)
    if problem is not None:
        return problem
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, int) and not isinstance(item, bool):
            if abs(item) > IJSON_MAX_INTEGER:
                return f"integer {item} is outside I-JSON's +-(2^53 - 1)"
        elif isinstance(item, (list, tuple)):
            stack.extend(item)
        elif isinstance(item, dict):
            stack.extend(item.values())
    return None


#: A hold's request is committed inside its call's line (line, batch, calls, call,
#: wait, request: five levels down), so it nests at most this deep and encodes to at
#: most this many bytes: every line that carries it stays within the trace format's
#: limits (nesting 64, a line 16 MiB) with room for the rest of the batch.
REQUEST_MAX_DEPTH = 32
REQUEST_MAX_BYTES = 1024 * 1024


def request_problem(value: JsonValue) -> str | None:
    """Why ``value`` cannot be committed as a wait's request (None when it can): it must
    be I-JSON (``ijson_problem``), nest at most ``REQUEST_MAX_DEPTH`` deep and encode to
    at most ``REQUEST_MAX_BYTES`` bytes of UTF-8."""
    problem = ijson_problem(value)
    if problem is not None:
        return problem
    stack: list[tuple[JsonValue, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, (list, dict)):
            if depth + 1 > REQUEST_MAX_DEPTH:
                return f"it nests deeper than {REQUEST_MAX_DEPTH} levels"
            inner = item.values() if isinstance(item, dict) else item
            stack.extend((v, depth + 1) for v in inner)
    size = len(json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode("utf-8"))
    if size > REQUEST_MAX_BYTES:
        return f"it encodes to {size} bytes, more than {REQUEST_MAX_BYTES}"
    return None


#: A resume's value (an input, an external or delegation result, a denial's reason) is
#: committed as deep in its line as a wait's request (``events[i].command.payload.value``,
#: ``batch.calls[i].result.value``), so it is held to the same limits.
RESUME_MAX_DEPTH = REQUEST_MAX_DEPTH
RESUME_MAX_BYTES = REQUEST_MAX_BYTES


def resume_value_problem(value: JsonValue) -> str | None:
    """Why ``value`` cannot be committed as a resume's value (None when it can): the
    rules of ``request_problem``, checked without recursion, so a value nested
    thousands deep is refused, never a ``RecursionError``."""
    return request_problem(value)


def instant(text: str) -> datetime.datetime:
    """Parse an ISO-8601 timestamp that names its zone (``Z`` or an offset).

    Deadlines are compared as instants, never as strings: ``13:00+05:00`` is before
    ``11:57Z``. Parsing is pure; the kernel never reads a clock.
    """
    try:
        parsed = datetime.datetime.fromisoformat(text)
    except (TypeError, ValueError):
        raise ValueError(f"{text!r} is not an ISO-8601 timestamp") from None
    if parsed.tzinfo is None:
        raise ValueError(f"{text!r} names no time zone; use Z or an offset")
    return parsed
