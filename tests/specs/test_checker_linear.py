"""check-trace does the same work per line whatever came before it, and keeps only what
later rules need (Cost model). Work is counted, never timed: Python calls
made while judging the last lines of a trace, and what the judge retains.
"""

from __future__ import annotations

import gc
import json
import sys
import tracemalloc
from collections.abc import Iterator
from dataclasses import dataclass
from types import FrameType
from typing import Any

from runkernel.kernel.canonical import jcs_digest
from runkernel.specs.checker import TraceJudge, Verdict, check_lines
from runkernel.specs.trace_lines import parse_line
from runkernel.kernel.codec import commit_from_json

WINDOW = 40  # the last lines, judged under the call counter


def _line(version: int, step: int, disposition: Any, batch: Any, messages: list[Any], events: list[Any],
          run: str = "run-1", thread: str = "thread-1") -> bytes:
    obj = {"trace": "runkernel/2", "thread_id": thread, "run_id": run, "version": version, "step": step,
           "disposition": disposition, "batch": batch, "messages": messages, "events": events}
    return json.dumps(obj, separators=(",", ":")).encode()


def _call(i: int, status: str, attempt: int, **extra: Any) -> dict[str, Any]:
    return {"call_id": f"c{i:06d}", "tool": "deploy", "arguments": {"n": i % 7}, "operation_id": f"op{i:06d}",
            "status": status, "attempt": attempt,
            "policy": {"recovery": "indeterminate", "max_attempts": 3, "retries": 0}, **extra}


def one_run_trace(cycles: int) -> Iterator[bytes]:
    """1 + 4 * cycles lines of one Run: each cycle opens a batch, waits for approval on
    a fresh ticket, is resumed, and completes and finalizes it. History grows by one
    ticket, one batch and one resume per cycle."""
    running = {"state": "running"}
    yield _line(1, 0, running, None, [{"role": "user", "content": "go"}], [{"type": "activated"}])
    version = 1
    for i in range(cycles):
        step = i + 1
        ticket = f"tk{i:030d}"

        def batch(call: dict[str, Any], finalized: bool = False) -> dict[str, Any]:
            return {"batch_id": f"b{i:06d}", "step": step, "finalized": finalized, "calls": [call]}

        use = {"role": "assistant", "content": "", "tool_calls": [{"call_id": f"c{i:06d}", "tool": "deploy",
                                                                   "arguments": {"n": i % 7}}]}
        yield _line(version + 1, step, running, batch(_call(i, "requested", 0)), [use], [])
        awaiting = {"state": "awaiting", "ticket": {"ticket_id": ticket, "wait": "approval", "call_id": f"c{i:06d}"}}
        waiting = _call(i, "awaiting", 0, wait={"kind": "approval", "correlation": ticket})
        yield _line(version + 2, step, awaiting, batch(waiting), [], [])
        command = {"run_id": "run-1", "ticket_id": ticket, "kind": "approval", "payload": {"type": "approve"}}
        resumed = {"type": "resumed", "ticket_id": ticket, "call_id": f"c{i:06d}", "command": command,
                   "digest": jcs_digest(command)}
        yield _line(version + 3, step, running, batch(_call(i, "executing", 1)), [], [resumed])
        done = _call(i, "completed", 1, result={"kind": "output", "value": "ok"})
        yield _line(version + 4, step, running, batch(done, True),
                    [{"role": "tool", "content": "ok", "call_id": f"c{i:06d}"}], [])
        version += 4


def many_runs_trace(runs: int) -> Iterator[bytes]:
    """Text-only Runs, one after another in one Thread: 2 lines each."""
    version = 0
    for r in range(runs):
        run = f"run-{r:06d}"
        yield _line(version + 1, 0, {"state": "running"}, None, [{"role": "user", "content": "hi"}], [], run=run)
        yield _line(version + 2, 1, {"state": "ended", "cause": {"kind": "completed"}}, None,
                    [{"role": "assistant", "content": "bye"}], [], run=run)
        version += 2


@dataclass(frozen=True)
class Work:
    """What judging the last WINDOW lines cost: calls made, and the most memory
    allocated above what was held before them (a copy of anything that grows with
    history would show in both or in the second)."""

    calls: int
    peak_bytes: int


def judged_with_count(lines: list[bytes]) -> tuple[TraceJudge, Work]:
    """Judge every line; count the work done for the last WINDOW lines."""
    judge = TraceJudge()
    for raw in lines[:-WINDOW]:
        assert judge.feed(commit_from_json(parse_line(raw))) is None
    # earlier tests' garbage is collected now, not inside the window: a finalizer it
    # runs there would count as the judge's work
    gc.collect()
    tracemalloc.start()
    try:
        before, _ = tracemalloc.get_traced_memory()
        tracemalloc.reset_peak()
        calls = _count_calls(judge, lines[-WINDOW:])
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return judge, Work(calls, peak - before)


def _count_calls(judge: TraceJudge, lines: list[bytes]) -> int:
    calls = 0

    def count(_frame: FrameType, event: str, _arg: object) -> None:
        nonlocal calls
        if event in ("call", "c_call"):
            calls += 1

    sys.setprofile(count)
    try:
        for raw in lines:
            assert judge.feed(commit_from_json(parse_line(raw))) is None
    finally:
        sys.setprofile(None)
    return calls


def test_per_line_work_does_not_grow_with_the_runs_history() -> None:
    small, large = list(one_run_trace(1_000)), list(one_run_trace(10_000))
    assert (len(small), len(large)) == (4_001, 40_001)
    small_judge, small_work = judged_with_count(small)
    large_judge, large_work = judged_with_count(large)
    print(f"work for the last {WINDOW} lines: {small_work} at 4,001 lines, {large_work} at 40,001 lines")
    print(f"retained at 4,001: {small_judge.retained()}; at 40,001: {large_judge.retained()}")
    assert large_work.calls == small_work.calls
    assert large_work.peak_bytes <= 2 * small_work.peak_bytes + 64 * 1024
    small_kept, large_kept = small_judge.retained(), large_judge.retained()
    # the open state is the same; history is one fixed-size key per ticket, batch and resume
    for name in ("threads", "open_runs", "ended_runs", "open_calls"):
        assert small_kept[name] == large_kept[name], name
    assert small_kept["history_keys"] == 3 * 1_000 and large_kept["history_keys"] == 3 * 10_000
    assert small_kept["ticket_keys"] == 1_000 and large_kept["ticket_keys"] == 10_000


def test_per_line_work_does_not_grow_with_the_runs_before_it() -> None:
    small_judge, small_work = judged_with_count(list(many_runs_trace(200)))
    large_judge, large_work = judged_with_count(list(many_runs_trace(2_000)))
    print(f"work for the last {WINDOW} lines: {small_work} after 200 runs, {large_work} after 2,000 runs")
    assert large_work.calls == small_work.calls
    assert large_work.peak_bytes <= 2 * small_work.peak_bytes + 64 * 1024
    kept = large_judge.retained()
    # an Ended Run keeps a stub: no batch, no history
    assert kept["open_runs"] == 0 and kept["history_keys"] == 0 and kept["open_calls"] == 0
    assert kept["ended_runs"] == 2_000


def test_an_ended_run_keeps_no_batch_and_no_history() -> None:
    lines = list(one_run_trace(3))
    ending = json.loads(lines[-1])
    ending.update(version=ending["version"] + 1, step=ending["step"] + 1,
                  disposition={"state": "ended", "cause": {"kind": "completed"}},
                  messages=[{"role": "assistant", "content": "done"}])
    lines.append(json.dumps(ending).encode())
    assert check_lines(lines).verdict is Verdict.LEGAL
    judge = TraceJudge()
    for raw in lines:
        assert judge.feed(commit_from_json(parse_line(raw))) is None
    assert judge.runs["run-1"].batch is None and "run-1" not in judge.histories
    assert judge.retained()["ticket_keys"] == 3  # ticket ids stay: never reused, across Runs


def test_long_ids_are_kept_as_fixed_size_keys() -> None:
    from runkernel.specs.checker import KEY_CHARS, compact_key

    long_id = "t" * 10_000
    assert len(compact_key(long_id)) == 32 and compact_key("short") == "short"
    assert compact_key(long_id) != compact_key(long_id[:-1])
    assert compact_key("x" * KEY_CHARS) == "x" * KEY_CHARS
