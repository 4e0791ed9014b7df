"""The resume command's digest: SHA-256 of its RFC 8785 (JCS) canonical form.

JCS fixes key order (UTF-16 code units), number formatting (ECMAScript's shortest
round-trip form) and string escaping, so a runtime in any language that has a JCS
implementation recomputes the same digest. The canonical form is produced by the
maintained ``rfc8785`` package; ``tests/kernel/test_resume_judge.py`` checks it against the
RFC's published examples. Pure: no I/O.

Fast path: for a value without floats whose keys are all in the Basic Multilingual
Plane, JCS is exactly the stdlib's sorted compact JSON with UTF-8 kept (key order by
code point equals order by UTF-16 unit there, integers within I-JSON print alike,
and both escape only ``"``, ``\\`` and control characters, in the same way); a
property test holds the two equal on that domain.
"""

from __future__ import annotations

import hashlib
import json
import math

import rfc8785

from runkernel.errors import NotIJson as NotIJson
from runkernel.kernel.values import IJSON_MAX_INTEGER, JsonValue


def _scan(value: JsonValue) -> tuple[str | None, bool]:
    """(why the value is not I-JSON or None, whether the stdlib form is its JCS form)."""
    simple = True
    stack = [value]
    while stack:
        item = stack.pop()
        if item is None or isinstance(item, bool):
            continue
        if isinstance(item, int):
            if abs(item) > IJSON_MAX_INTEGER:
                return f"integer {item} is outside I-JSON's +-(2^53 - 1)", False
        elif isinstance(item, float):
            if not math.isfinite(item):
                return f"{item!r} is not a finite number", False
            simple = False
        elif isinstance(item, str):
            try:
                item.encode("utf-8")
            except UnicodeEncodeError:
                return f"{item[:40]!r} is not valid Unicode", False
        elif isinstance(item, (list, tuple)):
            stack.extend(item)
        elif isinstance(item, dict):
            for key, inner in item.items():
                if not isinstance(key, str):
                    return f"object key {key!r} is not a string", False
                if simple and not key.isascii() and max(key) > "\uffff":
                    simple = False
                stack.append(key)
                stack.append(inner)
        else:
            return f"a {type(item).__name__} is not a JSON value", False
    return None, simple


def canonical_bytes(value: JsonValue) -> bytes:
    """The RFC 8785 canonical UTF-8 bytes of an I-JSON value; raises ``NotIJson``."""
    problem, simple = _scan(value)
    if problem is not None:
        raise NotIJson(problem)
    if simple:
        return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    return rfc8785.dumps(value)


def jcs_digest(value: JsonValue) -> str:
    """Lowercase hex SHA-256 of the value's RFC 8785 canonical form."""
    return hashlib.sha256(canonical_bytes(value)).hexdigest()
