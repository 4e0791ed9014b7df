"""Hostile input to ``runkernel check-trace``: never a traceback, always one line.

Anything that is not a ``runkernel/2`` trace exits 2 with exactly one line on stderr,
``FILE:LINE: not-a-trace: message`` (or ``FILE: not-a-trace: message`` when no line
applies), and memory stays bounded by one line.
"""

from __future__ import annotations

import copy
import io
import json
import random
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from runkernel.cli.entry import main
from runkernel.specs.checker import Verdict, check_lines
from runkernel.specs.trace_lines import MAX_DEPTH, MAX_LINE_BYTES, bounded_lines

DATA = Path(__file__).resolve().parent.parent / "data" / "traces"
#: activation, a one-call batch, the gate, the finalizing result, the end.
BASE = DATA / "legal" / "version-contiguous.jsonl"

Line = dict[str, Any]


def _base_lines() -> list[Line]:
    return [json.loads(raw) for raw in BASE.read_bytes().splitlines()]


def _encode(line: Line) -> bytes:
    return json.dumps(line).encode("utf-8")


def _write(tmp_path: Path, *raw_lines: bytes, name: str = "trace.jsonl") -> Path:
    path = tmp_path / name
    path.write_bytes(b"".join(raw + b"\n" for raw in raw_lines))
    return path


def _check(capsys: pytest.CaptureFixture[str], path: Path | str) -> tuple[int, str, str]:
    code = main(["check-trace", str(path)])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def assert_not_a_trace(
    capsys: pytest.CaptureFixture[str], path: Path | str, line: int | None, *fragments: str
) -> str:
    """Exit 2, nothing on stdout, one line on stderr naming file (and line)."""
    code, out, err = _check(capsys, path)
    assert code == 2, err
    assert out == ""
    assert "Traceback" not in err
    assert err.count("\n") == 1 and err.endswith("\n"), err
    where = f"{path}:{line}" if line is not None else f"{path}"
    assert err.startswith(f"{where}: not-a-trace: "), err
    for fragment in fragments:
        assert fragment.lower() in err.lower(), (fragment, err)
    return err


def assert_legal(capsys: pytest.CaptureFixture[str], path: Path) -> None:
    code, out, err = _check(capsys, path)
    assert (code, err) == (0, ""), err
    assert out.startswith(f"{path}: legal: ")


def _second_line_is(tmp_path: Path, raw: bytes) -> Path:
    """A legal first line, then ``raw``: the report must name line 2."""
    return _write(tmp_path, _encode(_base_lines()[0]), raw)


# --- not JSON, not UTF-8 ---------------------------------------------------------------


def test_not_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert_not_a_trace(capsys, _second_line_is(tmp_path, b"{this is not json}"), 2, "invalid JSON")


def test_truncated_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    raw = _encode(_base_lines()[1])
    assert_not_a_trace(capsys, _second_line_is(tmp_path, raw[: len(raw) // 2]), 2, "invalid JSON")


def test_invalid_utf8(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    raw = _encode(_base_lines()[1]).replace(b"weather", b"weath\xff\xfeer")
    assert_not_a_trace(capsys, _second_line_is(tmp_path, raw), 2, "UTF-8")


def test_binary_garbage_with_nul_bytes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    garbage = random.Random(20261130).randbytes(8192) + b"\x00\x00\xff\x00"
    assert b"\x00" in garbage
    path = tmp_path / "garbage.bin"
    path.write_bytes(garbage)
    assert_not_a_trace(capsys, path, 1)


@given(st.binary(max_size=512))
def test_arbitrary_bytes_never_escape_as_an_exception(data: bytes) -> None:
    finding = check_lines(bounded_lines(io.BytesIO(data)))
    assert finding.verdict in (Verdict.NOT_A_TRACE, Verdict.ILLEGAL, Verdict.LEGAL)
    assert "\n" not in finding.report("f.jsonl")
    if not data.strip():
        assert finding.verdict is Verdict.NOT_A_TRACE


# --- numbers JSON does not have ----------------------------------------------------------


@pytest.mark.parametrize("constant", ["NaN", "Infinity", "-Infinity"])
def test_non_finite_constants(constant: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    raw = _encode(_base_lines()[1]).replace(b'"Lyon"', constant.encode())
    assert constant.encode() in raw
    assert_not_a_trace(capsys, _second_line_is(tmp_path, raw), 2, constant)


@pytest.mark.parametrize("number", ["1e999", "-1e999"])
def test_overflowing_number(number: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    raw = _encode(_base_lines()[1]).replace(b'"Lyon"', number.encode())
    assert_not_a_trace(capsys, _second_line_is(tmp_path, raw), 2, "not finite")


def test_integer_too_long_to_convert(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # Python refuses int() of more than 4300 digits with a ValueError; the checker must
    # turn that into not-a-trace, not a traceback.
    raw = _encode(_base_lines()[1]).replace(b'"Lyon"', b"1" + b"0" * 5000)
    assert_not_a_trace(capsys, _second_line_is(tmp_path, raw), 2)


# --- duplicate keys ----------------------------------------------------------------------


def test_duplicate_key_at_top_level(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    raw = _encode(_base_lines()[1])
    raw = b'{"run_id": "run-1", ' + raw[1:]
    assert_not_a_trace(capsys, _second_line_is(tmp_path, raw), 2, "duplicate key", "run_id")


def test_duplicate_key_nested(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    raw = _encode(_base_lines()[1]).replace(b'{"city": "Lyon"}', b'{"city": "Lyon", "city": "Paris"}')
    assert b'"Paris"' in raw
    assert_not_a_trace(capsys, _second_line_is(tmp_path, raw), 2, "duplicate key", "city")


def test_same_key_in_sibling_objects_is_fine(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert_legal(capsys, _write(tmp_path, *(_encode(line) for line in _base_lines())))


# --- size and depth ----------------------------------------------------------------------


def _padded_first_line(total: int) -> bytes:
    """The legal first line with an extra field making it exactly ``total`` bytes."""
    line = _base_lines()[0]
    line["padding"] = ""
    overhead = len(_encode(line))
    line["padding"] = "a" * (total - overhead)
    raw = _encode(line)
    assert len(raw) == total
    return raw


def test_line_of_exactly_the_limit_is_read(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert_legal(capsys, _write(tmp_path, _padded_first_line(MAX_LINE_BYTES)))


def test_crlf_line_of_exactly_the_limit_is_read(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # The limit is on the line, not on its terminator: CRLF and LF must agree.
    path = tmp_path / "crlf-limit.jsonl"
    path.write_bytes(_padded_first_line(MAX_LINE_BYTES) + b"\r\n")
    assert_legal(capsys, path)


def test_line_one_byte_over_the_limit(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _write(tmp_path, _padded_first_line(MAX_LINE_BYTES + 1))
    assert_not_a_trace(capsys, path, 1, str(MAX_LINE_BYTES))


def test_a_100_mb_line_is_refused_with_bounded_reads(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "huge.jsonl"
    chunk = b"a" * (1 << 20)
    with path.open("wb") as stream:
        stream.write(_encode(_base_lines()[0]) + b"\n")
        stream.write(b'{"trace": "runkernel/2", "padding": "')
        for _ in range(100):
            stream.write(chunk)
        stream.write(b'"}\n')
    assert path.stat().st_size > 100 * (1 << 20)
    assert_not_a_trace(capsys, path, 2, "line longer than", str(MAX_LINE_BYTES))


def _nested(levels: int) -> bytes:
    """The legal first line with an extra field so that the line nests ``levels`` deep."""
    inner = levels - 1  # the line's own object is the first level
    raw = _encode(_base_lines()[0])
    return raw[:-1] + b', "deep": ' + b"[" * inner + b"]" * inner + b"}"


def test_nesting_at_the_limit_is_read(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert_legal(capsys, _write(tmp_path, _nested(MAX_DEPTH)))


@pytest.mark.parametrize("levels", [MAX_DEPTH + 1, 100_000])
def test_nesting_too_deep(levels: int, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _write(tmp_path, _encode(_base_lines()[0]), _nested(levels))
    assert_not_a_trace(capsys, path, 2, "nesting deeper than 64")


def test_nesting_too_deep_in_objects(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    raw = b'{"a": ' * 100_000 + b"1" + b"}" * 100_000
    assert_not_a_trace(capsys, _write(tmp_path, raw), 1, "nesting")


# --- wrong types and missing fields ------------------------------------------------------


def _batch_line() -> tuple[int, Line]:
    """Index and copy of the first base line that carries a batch."""
    for index, line in enumerate(_base_lines()):
        if line["batch"] is not None:
            return index, line
    raise AssertionError("the base trace has a batch")


def _set_version_str(line: Line) -> None:
    line["version"] = str(line["version"])


def _set_version_bool(line: Line) -> None:
    line["version"] = True


def _set_step_negative(line: Line) -> None:
    line["step"] = -1


def _set_calls_object(line: Line) -> None:
    line["batch"]["calls"] = {"0": line["batch"]["calls"][0]}


def _set_status_unknown(line: Line) -> None:
    line["batch"]["calls"][0]["status"] = "paused"


def _set_attempt_float(line: Line) -> None:
    line["batch"]["calls"][0]["attempt"] = 1.0


def _set_messages_string(line: Line) -> None:
    line["messages"] = "hello"


def _set_disposition_unknown(line: Line) -> None:
    line["disposition"] = {"state": "paused"}


WRONG_TYPES: dict[str, tuple[Callable[[Line], None], str]] = {
    "version-as-string": (_set_version_str, "version"),
    "version-as-bool": (_set_version_bool, "version"),
    "step-negative": (_set_step_negative, "step"),
    "calls-not-a-list": (_set_calls_object, "calls"),
    "status-unknown": (_set_status_unknown, "status"),
    "attempt-as-float": (_set_attempt_float, "attempt"),
    "messages-not-a-list": (_set_messages_string, "messages"),
    "disposition-state-unknown": (_set_disposition_unknown, "state"),
}


@pytest.mark.parametrize("case", sorted(WRONG_TYPES))
def test_wrong_types(case: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    change, field = WRONG_TYPES[case]
    index, line = _batch_line()
    lines = _base_lines()[:index]
    bad = copy.deepcopy(line)
    change(bad)
    path = _write(tmp_path, *(_encode(ln) for ln in lines), _encode(bad))
    assert_not_a_trace(capsys, path, index + 1, field)


TOP_LEVEL_FIELDS = ["trace", "thread_id", "run_id", "version", "step", "disposition", "batch",
                    "messages", "events"]


@pytest.mark.parametrize("field", TOP_LEVEL_FIELDS)
def test_missing_top_level_field(field: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    line = _base_lines()[1]
    del line[field]
    assert_not_a_trace(capsys, _second_line_is(tmp_path, _encode(line)), 2, field)


def test_an_unknown_trace_format_is_not_a_trace(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    line = _base_lines()[0]
    line["trace"] = "runkernel/3"
    assert_not_a_trace(capsys, _write(tmp_path, _encode(line)), 1, "runkernel/3")


def test_a_runkernel_1_line_is_refused_saying_so(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    lines = _base_lines()
    lines[1]["trace"] = "runkernel/1"
    path = _write(tmp_path, b"\n".join(_encode(line) for line in lines[:2]))
    err = assert_not_a_trace(capsys, path, 2, "'runkernel/1' is the format of runkernel 0.1", "runkernel/2")
    assert err.count("\n") == 1


def test_json_array_instead_of_object(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    raw = b"[" + _encode(_base_lines()[0]) + b"]"
    assert_not_a_trace(capsys, _write(tmp_path, raw), 1, "object")


# --- empty, blank and missing files -----------------------------------------------------


def test_empty_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "empty.jsonl"
    path.write_bytes(b"")
    assert_not_a_trace(capsys, path, None, "empty")


def test_only_a_newline(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "newline.jsonl"
    path.write_bytes(b"\n")
    assert_not_a_trace(capsys, path, 1, "empty line")


def test_blank_line_in_the_middle(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    first, second, *_ = (_encode(line) for line in _base_lines())
    assert_not_a_trace(capsys, _write(tmp_path, first, b"", second), 2, "empty line")


def test_nonexistent_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert_not_a_trace(capsys, tmp_path / "missing.jsonl", None, "cannot read")


def test_directory_instead_of_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert_not_a_trace(capsys, tmp_path, None, "cannot read")


# --- what is accepted --------------------------------------------------------------------

_EXTRA = {"x-vendor": {"note": "ignored", "n": [1, 2.5, None, True]}}


def _with_extra_fields(line: Line) -> Line:
    """Unknown fields on every object the format names (never inside payload values)."""
    out = copy.deepcopy(line)
    out.update(_EXTRA)
    disposition = out["disposition"]
    disposition.update(_EXTRA)
    for key in ("ticket", "cause"):
        if key in disposition:
            disposition[key].update(_EXTRA)
    if "cause" in disposition and "error" in disposition["cause"]:
        disposition["cause"]["error"].update(_EXTRA)
    if out["batch"] is not None:
        out["batch"].update(_EXTRA)
        for call in out["batch"]["calls"]:
            call.update(_EXTRA)
            for key in ("wait", "result"):
                if key in call:
                    call[key].update(_EXTRA)
    for message in out["messages"]:
        message.update(_EXTRA)
        for use in message.get("tool_calls") or ():
            use.update(_EXTRA)
    for event in out["events"]:
        event.update(_EXTRA)
    return out


@pytest.mark.parametrize(
    "name", ["batch-approvals-and-denies.jsonl", "two-threads-interleaved.jsonl",
             "delegation-resumed.jsonl"]
)
def test_unknown_fields_anywhere_are_ignored(
    name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    lines = [json.loads(raw) for raw in (DATA / "legal" / name).read_bytes().splitlines()]
    decorated = [_with_extra_fields(line) for line in lines]
    raw = [_encode(line) for line in decorated]
    assert all(b"x-vendor" in r for r in raw)
    path = _write(tmp_path, *raw)
    assert_legal(capsys, path)
    _code, out, _err = _check(capsys, path)
    assert f": legal: {len(lines)} commits" in out


def test_crlf_line_endings_are_accepted(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    source = DATA / "legal" / "batch-approvals-and-denies.jsonl"
    data = source.read_bytes().replace(b"\n", b"\r\n")
    assert data.count(b"\r\n") == source.read_bytes().count(b"\n") > 1
    path = tmp_path / "crlf.jsonl"
    path.write_bytes(data)
    assert_legal(capsys, path)


def test_last_line_without_newline_is_accepted(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "no-eol.jsonl"
    path.write_bytes(BASE.read_bytes().rstrip(b"\n"))
    assert_legal(capsys, path)


def test_console_script_on_hostile_input_prints_no_traceback(tmp_path: Path) -> None:
    raw = _encode(_base_lines()[1]).replace(b'"Lyon"', b"9" * 5000)
    path = _second_line_is(tmp_path, raw)
    done = subprocess.run(
        [sys.executable, "-m", "runkernel.cli", "check-trace", str(path)],
        capture_output=True, text=True, check=False, timeout=120,
    )
    assert done.returncode == 2
    assert done.stdout == ""
    assert "Traceback" not in done.stderr
    assert done.stderr.count("\n") == 1
    assert done.stderr.startswith(f"{path}:2: not-a-trace: ")
