"""Side-by-side speed ratios, measured in one run on this machine (never asserted in tests).

    python bench/bench_kernel.py [--seconds S]

Each pair runs interleaved, best of several rounds, so the ratio holds on a noisy
shared machine even when the absolute numbers do not:

- kernel ``decide`` (one tool call through gate, execute, result) vs the same edges
  sent to the python-statemachine spec machine: why the spec is never the engine;
- ``validate_commit`` vs encoding the commit to its ``runkernel/2`` line;
- SQLite append with ``synchronous=FULL`` (the default) vs ``NORMAL``;
- reading a Run's latest state at 10 vs 2,000 commits of history (flat by design).
"""

from __future__ import annotations

import argparse
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from runkernel.adapters.serial import commit_text
from runkernel.adapters.sqlite_store import SqliteStore
from runkernel.kernel.decide import decide
from runkernel.kernel.protocol import (
    Activate,
    Allow,
    GateVerdict,
    InferenceResult,
    ProposedCall,
    ToolFinished,
    ToolOutput,
)
from runkernel.kernel.rules import Rejection
from runkernel.kernel.state import Message, RunSnapshot, ThreadCommit, ThreadHead
from runkernel.kernel.validate import validate_commit
from runkernel.kernel.values import EndCauseKind, Role
from runkernel.specs.machines import ToolCallMachine


def rate(action: Callable[[], object], seconds: float) -> float:
    """Operations per second, best of three rounds."""
    best = 0.0
    for _ in range(3):
        count, started = 0, time.perf_counter()
        while time.perf_counter() - started < seconds / 3:
            action()
            count += 1
        best = max(best, count / (time.perf_counter() - started))
    return best


def one_call_run() -> RunSnapshot:
    decision = decide(None, Activate("t", "r", 0, (Message(Role.USER, "go"),)))
    assert not isinstance(decision, Rejection)
    state = decision.state
    for event in (
        InferenceResult("call", (ProposedCall("c", "tool", {}, "op"),), "b"),
        GateVerdict("c", Allow()),
        ToolFinished("c", 1, ToolOutput("ok")),
    ):
        verdict = decide(state, event)
        assert not isinstance(verdict, Rejection)
        state = verdict.state
    return state


def spec_machine_run() -> None:
    machine = ToolCallMachine()
    machine.send("first_attempt_committed")
    machine.send("tool_output_committed")
    machine.send("every_call_terminal")


def text_commits(steps: int) -> list[ThreadCommit]:
    decision = decide(None, Activate("t", "r", 0, (Message(Role.USER, "go"),)))
    assert not isinstance(decision, Rejection)
    commits = [decision.commit]
    state = decision.state
    for index in range(steps):
        end = EndCauseKind.COMPLETED if index == steps - 1 else None
        verdict = decide(state, InferenceResult(f"step {index}", end=end))
        assert not isinstance(verdict, Rejection)
        commits.append(verdict.commit)
        state = verdict.state
    return [c for c in commits if c is not None]


def sqlite_append_rate(synchronous: str, seconds: float) -> float:
    commits = text_commits(5000)
    with tempfile.TemporaryDirectory() as scratch:
        store = SqliteStore(Path(scratch) / "bench.db", synchronous=synchronous)
        position = 0

        def append() -> None:
            nonlocal position
            store.append(commits[position])
            position += 1

        started, count = time.perf_counter(), 0
        while time.perf_counter() - started < seconds and position < len(commits):
            append()
            count += 1
        elapsed = time.perf_counter() - started
        store.close()
    return count / elapsed


def latest_read_rate(history: int, seconds: float) -> float:
    with tempfile.TemporaryDirectory() as scratch:
        store = SqliteStore(Path(scratch) / "read.db", synchronous="NORMAL")
        for commit in text_commits(history):
            store.append(commit)
        measured = rate(lambda: store.run("r"), seconds)
        store.close()
    return measured


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=1.5, help="time per measurement (default 1.5)")
    seconds = parser.parse_args().seconds

    kernel = rate(one_call_run, seconds)
    spec = rate(spec_machine_run, seconds)
    print(f"one tool call through decide:        {kernel:>10.0f}/s")
    print(f"same edges on the statemachine spec: {spec:>10.0f}/s   kernel/spec = {kernel / spec:.1f}x")

    commits = text_commits(3)
    head = ThreadHead("t", commits[0].version, "r")
    first = validate_commit(None, None, commits[0])
    assert not isinstance(first, Rejection)
    validate = rate(lambda: validate_commit(head, first.run, commits[1]), seconds)
    encode = rate(lambda: commit_text(commits[1]), seconds)
    print(f"validate_commit:                     {validate:>10.0f}/s")
    print(f"encode a runkernel/2 line:           {encode:>10.0f}/s   validate/encode = {validate / encode:.2f}x")

    full = sqlite_append_rate("FULL", seconds)
    normal = sqlite_append_rate("NORMAL", seconds)
    print(f"SQLite append, synchronous=FULL:     {full:>10.0f}/s")
    print(f"SQLite append, synchronous=NORMAL:   {normal:>10.0f}/s   NORMAL/FULL = {normal / full:.2f}x")

    short = latest_read_rate(10, seconds)
    long = latest_read_rate(2000, seconds)
    print(f"latest state, 10 commits of history: {short:>10.0f}/s")
    print(f"latest state, 2000 commits:          {long:>10.0f}/s   2000/10 = {long / short:.2f}x (flat is 1.0)")


if __name__ == "__main__":
    main()
