"""The fast codec (msgspec): every value the kernel admits round-trips without loss, and
the trace format's strict input rules hold on the fast path exactly as on the stdlib
reference parser (duplicate keys, NaN and Infinity, nesting, Unicode scalar values)."""

from __future__ import annotations

import json
import math
from typing import Any

import attrs
import pytest
from hypothesis import given
from hypothesis import strategies as st

from runkernel.adapters.stores.serial import commit_from_text, commit_text, judged_dumps
from runkernel.kernel.state import Message
from runkernel.kernel.values import Role
from runkernel.specs.checker import NotATrace
from runkernel.specs.trace_lines import MAX_DEPTH, parse_line
from runkernel.testing import activate

scalars = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.integers(min_value=-(10**40), max_value=10**40)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text()  # hypothesis text is Unicode scalar values only: no lone surrogates
)
json_values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=20,
)


def _same(a: Any, b: Any) -> bool:
    """Equal as JSON, with 1 and 1.0 told apart and -0.0 kept."""
    if isinstance(a, float) or isinstance(b, float):
        return type(a) is type(b) and (a == b and math.copysign(1, a) == math.copysign(1, b))
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    return type(a) is type(b) and a == b


@given(json_values)
def test_every_json_value_round_trips_through_a_commit_line(value: Any) -> None:
    first = activate("t", "r").commit
    assert first is not None
    commit = attrs.evolve(first, messages=(Message(Role.USER, value, metadata={"host": value}),))
    back = commit_from_text(commit_text(commit))
    assert _same(back.messages[0].content, value) and _same(back.messages[0].metadata, {"host": value})


@given(json_values)
def test_the_fast_parser_reads_what_the_stdlib_reads(value: Any) -> None:
    for raw in (judged_dumps([value]).encode(), json.dumps([value], ensure_ascii=True).encode()):
        assert _same(parse_line(raw), json.loads(raw))


@given(st.dictionaries(st.text(max_size=6), json_values, min_size=1, max_size=4), st.data())
def test_a_duplicate_key_anywhere_is_not_a_trace(obj: dict[str, Any], data: st.DataObject) -> None:
    key = data.draw(st.sampled_from(sorted(obj)))
    body = judged_dumps(obj)
    raw = ("[" + body[:-1] + "," + json.dumps(key) + ":" + judged_dumps(obj[key]) + "}]").encode()
    with pytest.raises(NotATrace, match="duplicate key"):
        parse_line(raw)


@pytest.mark.parametrize(
    "raw",
    [
        b'{"a":"x:y","b":"\\u003a","c":{"d:":":"}}',  # colons in strings, one escaped
        b'{"\\u003a:":1,":":2}',  # an escaped colon in a key, beside a literal one
        b'{"a":1,"A":2}',
    ],
)
def test_colons_inside_strings_are_not_mistaken_for_duplicates(raw: bytes) -> None:
    assert parse_line(raw) == json.loads(raw)


@pytest.mark.parametrize(
    "raw", [b'{"a":1,"a":1}', b'{"a":{"b":1,"b":2}}', b'{"x":"\\u003a","x":2}', b'{"\\u0061":1,"a":2}', b'{"\\u003a":1,":":2}']
)
def test_duplicate_keys_are_refused_whatever_their_spelling(raw: bytes) -> None:
    with pytest.raises(NotATrace, match="duplicate key"):
        parse_line(raw)


@pytest.mark.parametrize("raw", [b"[NaN]", b"[Infinity]", b"[-Infinity]", b"[1e400]", b'{"a":-1e999}'])
def test_non_finite_numbers_are_refused(raw: bytes) -> None:
    with pytest.raises(NotATrace):
        parse_line(raw)


def test_nesting_up_to_the_limit_is_read_and_beyond_is_refused() -> None:
    deepest = b"[" * MAX_DEPTH + b"]" * MAX_DEPTH
    assert parse_line(deepest) is not None
    with pytest.raises(NotATrace, match="nesting deeper"):
        parse_line(b"[" * (MAX_DEPTH + 1) + b"]" * (MAX_DEPTH + 1))
    with pytest.raises(NotATrace, match="nesting deeper"):
        parse_line(b'{"a":' * (MAX_DEPTH + 1) + b"1" + b"}" * (MAX_DEPTH + 1))


@pytest.mark.parametrize("raw", [b'["\\ud800"]', b'{"\\udc00":1}', b'["\xed\xa0\x80"]', b'["\xff"]'])
def test_lone_surrogates_and_invalid_utf8_are_refused(raw: bytes) -> None:
    with pytest.raises(NotATrace):
        parse_line(raw)


def test_big_integers_stay_exact() -> None:
    raw = b"[123456789012345678901234567890,-98765432109876543210]"
    assert parse_line(raw) == [123456789012345678901234567890, -98765432109876543210]


def _depth(value: Any) -> int:
    if isinstance(value, dict):
        return 1 + max((_depth(v) for v in value.values()), default=0)
    if isinstance(value, list):
        return 1 + max((_depth(v) for v in value), default=0)
    return 0


nested = st.recursive(
    st.none() | st.text(alphabet="[]{}\"\\:x", max_size=6),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(alphabet="[]{}\"x", max_size=3), inner, max_size=3),
    max_leaves=200,
)


@given(nested)
def test_the_depth_limit_counts_containers_and_never_brackets_inside_strings(value: Any) -> None:
    raw = judged_dumps([[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[value]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]).encode()
    depth = 61 + _depth(value)
    if depth <= MAX_DEPTH:
        assert _same(parse_line(raw), json.loads(raw))
    else:
        with pytest.raises(NotATrace, match="nesting deeper"):
            parse_line(raw)


def test_brackets_inside_strings_do_not_count_as_nesting() -> None:
    raw = json.dumps({"a": "[" * 200 + "{" * 200, "b": ["\\\"[[[", {"c": "]]]}}}"}]}).encode()
    assert parse_line(raw) == json.loads(raw)
