"""Reading a trace's lines before the kernel judges them: bounded lines (a hostile file
costs at most one line of memory) and strict JSON (UTF-8, Unicode scalar values only, no
NaN/Infinity, no duplicate keys, bounded nesting), fast in C with the stdlib parser as
the reference that names what is wrong. Anything else raises ``NotATrace``.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterator
from typing import Any, BinaryIO

import msgspec

from runkernel.errors import NotATrace
from runkernel.kernel.values import json_problem

MAX_LINE_BYTES = 16 * 1024 * 1024
MAX_DEPTH = 64


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    obj: dict[str, Any] = {}
    for key, value in pairs:
        if key in obj:
            raise NotATrace(f"duplicate key {key!r}")
        obj[key] = value
    return obj


def _no_constant(name: str) -> Any:
    raise NotATrace(f"{name} is not valid JSON")


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise NotATrace(f"number {text[:40]} is not finite")
    return value


def _depth(value: Any) -> int:
    deepest = 0
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            deepest = max(deepest, depth)
            stack.extend((v, depth + 1) for v in item.values())
        elif isinstance(item, list):
            deepest = max(deepest, depth)
            stack.extend((v, depth + 1) for v in item)
    return deepest


def _strict_stdlib(raw: bytes) -> Any:
    """The reference parser (stdlib ``json`` with hooks): slow, but its errors say
    exactly what is wrong. Used only for lines the fast path refuses or cannot vouch for."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as error:
        raise NotATrace(f"invalid UTF-8 at byte {error.start}") from None
    try:
        value = json.loads(
            text,
            object_pairs_hook=_no_duplicates,
            parse_constant=_no_constant,
            parse_float=_finite_float,
        )
    except RecursionError:
        raise NotATrace(f"nesting deeper than {MAX_DEPTH}") from None
    except json.JSONDecodeError as error:
        raise NotATrace(f"invalid JSON: {error.msg} at column {error.colno}") from None
    except ValueError as error:  # e.g. an integer longer than int() converts (4300 digits)
        raise NotATrace(f"invalid JSON: {error}") from None
    problem = json_problem(value)
    if problem is not None:  # the stdlib accepts a lone surrogate escape; a trace does not
        raise NotATrace(f"not a Unicode scalar value: {problem[:120]}")
    return value


_DECODER = msgspec.json.Decoder()
_ENCODER = msgspec.json.Encoder()
_ESCAPED_COLON = re.compile(rb"\\u003[aA]")


_ONE_BRACKET_KIND = bytes.maketrans(b"{}", b"[]")
_NOT_A_BRACKET_OR_QUOTE = bytes(b for b in range(256) if b not in b'[]{}"')


def _too_deep(raw: bytes) -> bool:
    """Whether well-formed JSON ``raw`` nests deeper than MAX_DEPTH, decided in C with
    a few copies of the line (never one object per container): drop escaped
    backslashes and quotes, keep only brackets (one kind) and the quotes that delimit
    strings, drop what is inside strings, then peel one level per round (a round
    removes every innermost pair at once), at most MAX_DEPTH rounds."""
    kept = raw.replace(b"\\\\", b"").replace(b'\\"', b"").translate(_ONE_BRACKET_KIND, _NOT_A_BRACKET_OR_QUOTE)
    if b'"' in kept:
        kept = b"".join(kept.split(b'"')[0::2])
    for _ in range(MAX_DEPTH):
        if not kept:
            return False
        kept = kept.replace(b"[]", b"")
    return bool(kept)


def parse_line(raw: bytes) -> Any:
    """Strict JSON: UTF-8, Unicode scalar values only, no NaN/Infinity, no duplicate
    keys, nesting <= MAX_DEPTH.

    The fast path is msgspec (C): it refuses invalid UTF-8, lone surrogate escapes,
    NaN and Infinity and keeps big integers exact. It keeps the last of duplicate keys,
    so duplicates are found by counting: every key of the input has exactly one ``:``
    outside strings, and every ``:`` inside a string survives decoding as one ``:``
    unless it was escaped (``\\u003a``, sent to the reference parser). Re-encoding the
    decoded value therefore has as many ``:`` as the line iff no key was dropped.
    """
    if not raw.strip():
        raise NotATrace("empty line")
    try:
        value = _DECODER.decode(raw)
    except (msgspec.DecodeError, RecursionError):
        _strict_stdlib(raw)  # raises with the precise reason
        raise NotATrace("invalid JSON") from None  # pragma: no cover - both parsers refuse
    if not isinstance(value, (dict, list)):
        return value
    if _ESCAPED_COLON.search(raw) is not None or raw.count(b":") != _ENCODER.encode(value).count(b":"):
        value = _strict_stdlib(raw)  # a duplicate key raises here with its name
    if raw.count(b"[") + raw.count(b"{") > MAX_DEPTH and _too_deep(raw):
        raise NotATrace(f"nesting deeper than {MAX_DEPTH}")
    return value


def bounded_lines(stream: BinaryIO) -> Iterator[bytes]:
    """Lines without their terminator; a line over MAX_LINE_BYTES raises NotATrace."""
    while True:
        chunk = stream.readline(MAX_LINE_BYTES + 2)  # room for a CRLF after a full line
        if not chunk:
            return
        if chunk.endswith(b"\n"):
            chunk = chunk[:-1]
            if chunk.endswith(b"\r"):
                chunk = chunk[:-1]
        if len(chunk) > MAX_LINE_BYTES:
            raise NotATrace(f"line longer than {MAX_LINE_BYTES} bytes")
        yield chunk


__all__ = ["MAX_DEPTH", "MAX_LINE_BYTES", "bounded_lines", "parse_line"]
