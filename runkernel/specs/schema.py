"""The JSON Schema (2020-12) of one ``runkernel/2`` trace line, built from the code's
vocabularies and shipped as ``trace-line.schema.json`` (``runkernel schema``).

The schema describes shape only, so that runtimes in other languages check it with
their own tools: every line of a legal trace validates, and a line it refuses the
checker refuses too, as not a trace or, for a field the checker reads as a rule's (a
``resumed`` event's ``command`` and ``digest``, which both require), as illegal under
that rule. Legality (the edges, the resume payload table, digests, ticket reuse) stays
the checker's. Extra
fields are allowed everywhere, as the format says. A test fails when the shipped file
is stale.
"""

from __future__ import annotations

import json
from importlib import resources
from typing import Any

from runkernel.kernel.codec import TRACE_FORMAT
from runkernel.kernel.edges import RESUME_PAYLOAD_TABLE
from runkernel.kernel.policies import RecoveryMode
from runkernel.kernel.values import EndCauseKind, IndeterminateReason, ResultKind, Role, WaitKind

SCHEMA_FILE = "trace-line.schema.json"
SCHEMA_ID = "https://runkernel.invalid/schema/runkernel-2/trace-line.schema.json"

Schema = dict[str, Any]

_STRING: Schema = {"type": "string"}
#: every integer field of a line is within 0..2^53-1 (I-JSON's exact integers); outside
#: that range the line is not a trace (check-trace exits 2)
MAX_INTEGER = 2**53 - 1
_COUNT: Schema = {"type": "integer", "minimum": 0, "maximum": MAX_INTEGER}


def _values(kind: Any) -> list[str]:
    return [member.value for member in kind]


def _object(required: dict[str, Schema], optional: dict[str, Schema] | None = None, **extra: Any) -> Schema:
    return {
        "type": "object",
        "required": list(required),
        "properties": {**required, **(optional or {})},
        **extra,
    }


def _ref(name: str) -> Schema:
    return {"$ref": f"#/$defs/{name}"}


def _when(field: str, value: str, then: Schema) -> Schema:
    return {"if": {"properties": {field: {"const": value}}, "required": [field]}, "then": then}


def trace_line_schema() -> Schema:
    """The schema of one line, as a JSON-ready dict."""
    statuses = ["requested", "executing", "awaiting", "completed", "indeterminate"]
    defs: dict[str, Schema] = {
        "wait_kind": {"enum": _values(WaitKind)},
        "cause": _object(
            {"kind": {"enum": _values(EndCauseKind)}},
            {"error": _object({"type": _STRING, "message": _STRING})},
        ),
        "disposition": {
            "type": "object",
            "required": ["state"],
            "properties": {"state": {"enum": ["running", "awaiting", "ended"]}},
            "allOf": [
                _when("state", "awaiting", _object({"ticket": _object(
                    {"ticket_id": _STRING, "wait": _ref("wait_kind"), "call_id": _STRING}
                )})),
                _when("state", "ended", _object({"cause": _ref("cause")})),
            ],
        },
        "call": {
            **_object(
                {
                    "call_id": _STRING, "tool": _STRING, "arguments": {}, "operation_id": _STRING,
                    "status": {"enum": statuses}, "attempt": _COUNT,
                },
                {
                    "wait": _object(
                        {"kind": _ref("wait_kind"), "correlation": _STRING},
                        # the hold's request, shown to whoever answers; never judged
                        {"request": {}},
                    ),
                    "result": _object({"kind": {"enum": _values(ResultKind)}, "value": {}}),
                    "reason": {"enum": _values(IndeterminateReason)},
                    "reaction": {},
                    "policy": _object({
                        "recovery": {"enum": _values(RecoveryMode)},
                        "max_attempts": {"type": "integer", "minimum": 1, "maximum": MAX_INTEGER},
                        "retries": _COUNT,
                    }, {
                        "delegation": {"enum": ["terminal_only", "sequential"]},
                        # a concurrent group's member (absent: false); never a delegation
                        "concurrent": {"type": "boolean"},
                    }),
                    "delegation": _object({"thread_id": _STRING, "run_id": _STRING, "concurrent": {"type": "boolean"}}),
                },
            ),
            "allOf": [
                _when("status", "awaiting", {"required": ["wait"]}),
                _when("status", "completed", {"required": ["result"]}),
                _when("status", "indeterminate", {"required": ["reason"]}),
            ],
        },
        "batch": _object({
            "batch_id": _STRING, "step": _COUNT, "finalized": {"type": "boolean"},
            "calls": {"type": "array", "items": _ref("call")},
        }),
        "message": {
            **_object(
                {"role": {"enum": _values(Role)}, "content": {}},
                {
                    "tool_calls": {"type": ["array", "null"], "items": _object(
                        {"call_id": _STRING, "tool": _STRING, "arguments": {}}
                    )},
                    "call_id": {"type": ["string", "null"]},
                    "metadata": {},
                },
            ),
            "allOf": [_when("role", "tool", {"required": ["call_id"], "properties": {"call_id": _STRING}})],
        },
        "payload": _object({"type": {"enum": [rule.payload for rule in RESUME_PAYLOAD_TABLE]}}),
        "event": {
            **_object({"type": _STRING}),
            # the judge requires all four (resume-matches-ticket without them)
            "allOf": [_when("type", "resumed", _object({
                "ticket_id": _STRING, "call_id": _STRING,
                "command": _object({
                    "run_id": _STRING, "ticket_id": _STRING, "kind": _ref("wait_kind"), "payload": _ref("payload"),
                }),
                "digest": _STRING,
            }))],
        },
    }
    line = _object(
        {
            "trace": {"const": TRACE_FORMAT},
            "thread_id": _STRING,
            "run_id": _STRING,
            "version": {"type": "integer", "minimum": 1, "maximum": MAX_INTEGER},
            "step": _COUNT,
            "disposition": _ref("disposition"),
            "batch": {"oneOf": [{"type": "null"}, _ref("batch")]},
            "messages": {"type": "array", "items": _ref("message")},
            "events": {"type": "array", "items": _ref("event")},
        },
        {
            "staged": {},
            "parent": _object({"thread_id": _STRING, "run_id": _STRING, "call_id": _STRING}),
            "forked_from": _object(
                {"thread_id": _STRING, "run_id": _STRING, "version": {"type": "integer", "minimum": 1, "maximum": MAX_INTEGER}}
            ),
            "app": _STRING,
            "app_version": _STRING,
        },
    )
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": SCHEMA_ID,
        "title": f"One line of a {TRACE_FORMAT} trace (one committed ThreadCommit)",
        "description": (
            "Shape only: legality is what `runkernel check-trace` judges. Extra fields are "
            "allowed and ignored. Strings are Unicode scalar values; numbers are finite."
        ),
        **line,
        "$defs": defs,
    }


def render_schema() -> str:
    """The schema as the shipped file's text."""
    return json.dumps(trace_line_schema(), indent=2, ensure_ascii=False) + "\n"


def shipped_schema() -> str:
    """The schema file shipped in the package (what ``runkernel schema`` prints)."""
    return resources.files("runkernel.specs").joinpath(SCHEMA_FILE).read_text(encoding="utf-8")
