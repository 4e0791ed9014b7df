"""What the two framework integrations' tests share (Pydantic AI, OpenAI Agents SDK): the
tools' downstream record, kept outside runkernel's store, and the ``World`` that plays an
app's scripts in process or in a subprocess that SIGKILLs itself, with the checks every
scenario ends with (legal exported trace, durable-before-start, no non-replay tool
started twice)."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

from runkernel import EndCauseKind, check_trace, open_store
from runkernel.kernel import CallCompleted, CallExecuting, CallIndeterminate, Ended, ThreadCommit, ToolCall
from runkernel.adapters.stores.contract import Store
from runkernel.adapters.stores.export import export_lines

ROOT = Path(__file__).resolve().parent.parent


class Started(Protocol):
    """What a tool knows of its own invocation, in both integrations."""

    @property
    def run_id(self) -> str: ...
    @property
    def call_id(self) -> str: ...
    @property
    def operation_id(self) -> str: ...
    @property
    def attempt(self) -> int: ...
    @property
    def lease_epoch(self) -> int | None: ...


class Downstream:
    """The tools' own record of what they started. Each start also records whether its
    ``Executing{attempt}`` was already committed and which calls of its batch were already
    terminal (read from the store through a connection of its own); ``CRASH=tool:T:N``
    kills the process right after tool T's attempt N is recorded."""

    def __init__(
        self, path: str | os.PathLike[str], store: str | None = None, *, invocation: Callable[[], Started] | None = None
    ) -> None:
        self.path = Path(path)
        self.store = store
        self._invocation = invocation

    def _calls(self, started: Started) -> tuple[ToolCall, ...]:
        if self.store is None:
            return ()
        store = open_store(self.store, create=False)
        try:
            state = store.run(started.run_id)
            return state.batch.calls if state is not None and state.batch is not None else ()
        finally:
            store.close()

    def start(self, tool: str) -> dict[str, Any]:
        assert self._invocation is not None, "a Downstream that records starts needs the invocation"
        started = self._invocation()
        calls = self._calls(started)
        entry = {
            "tool": tool, "call_id": started.call_id, "operation_id": started.operation_id,
            "attempt": started.attempt, "lease_epoch": started.lease_epoch,
            "durable": any(c.call_id == started.call_id and c.status == CallExecuting(started.attempt) for c in calls),
            "terminal": [c.call_id for c in calls if isinstance(c.status, (CallCompleted, CallIndeterminate))],
        }
        with self.path.open("a") as record:
            record.write(json.dumps(entry) + "\n")
            record.flush()
            os.fsync(record.fileno())
        if os.environ.get("CRASH") == f"tool:{tool}:{started.attempt}":
            os.kill(os.getpid(), signal.SIGKILL)
        return entry

    def starts(self) -> list[dict[str, Any]]:
        if not self.path.exists():
            return []
        return [json.loads(line) for line in self.path.read_text().splitlines()]


#: the bodies of a concurrent group's tools that started in this process
_TOGETHER: list[str] = []


async def together(tool: str) -> None:
    """With ``TOGETHER=N``, a group tool's body waits until N group bodies started in
    this process: run one at a time, the first would wait alone, and the guard below
    fails it. Without it, nothing waits."""
    _TOGETHER.append(tool)
    expected = int(os.environ.get("TOGETHER", "0"))
    for _ in range(12_000):  # a guard against a hang, not a measure: 120 s at most
        if len(_TOGETHER) >= expected:
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"the group's bodies did not run together: only {_TOGETHER} started")


def reset_together() -> None:
    _TOGETHER.clear()


class World:
    """One store file and one downstream record; plays an app's scripts in and out of
    process. A framework's world names its app file and its replay tools."""

    app: Path
    replayed: frozenset[str]

    def __init__(self, tmp_path: Path) -> None:
        self.url = f"sqlite:///{tmp_path / 'agent.db'}"
        self.record = tmp_path / "downstream.jsonl"
        self.tmp_path = tmp_path

    def run_killed(self, crash: str, *args: str) -> None:
        """Run the app file with ``args`` in a subprocess that SIGKILLs itself at ``crash``."""
        argv = [sys.executable, str(self.app), self.url, str(self.record), *args]
        env = {**os.environ, "CRASH": crash, "PYTHONPATH": str(ROOT)}
        done = subprocess.run(argv, capture_output=True, text=True, timeout=120, env=env, cwd=ROOT)
        assert done.returncode == -9, (done.returncode, done.stdout, done.stderr)
        print(f"{args[0]}: killed at {crash}")

    @property
    def store(self) -> Store:
        return open_store(self.url)

    def commits(self, script: str) -> list[ThreadCommit]:
        return list(self.store.commits(f"thread-{script}"))

    def run_id(self, script: str) -> str:
        return self.commits(script)[-1].run_id

    def call(self, script: str, call_id: str) -> ToolCall:
        for commit in reversed(self.commits(script)):
            if commit.batch is not None and (call := commit.batch.call(call_id)) is not None:
                return call
        raise AssertionError(f"no call {call_id}")

    def starts(self, tool: str | None = None) -> list[dict[str, Any]]:
        return [s for s in Downstream(self.record).starts() if tool is None or s["tool"] == tool]

    def check(self, script: str, cause: EndCauseKind | None = EndCauseKind.COMPLETED) -> None:
        """The exported trace is legal; the Run ended with ``cause`` (None: not Ended); every
        tool start came after its Executing commit, and no non-replay tool started twice."""
        starts = self.starts()
        print(f"{script}: downstream starts {[(s['tool'], s['attempt']) for s in starts]}")
        assert all(s["durable"] for s in starts), "a tool body ran before its Executing commit"
        assert once_each([s for s in starts if s["tool"] not in self.replayed]), "a non-replay tool started twice"
        trace = self.tmp_path / f"{script}.jsonl"
        trace.write_text("".join(line + "\n" for line in export_lines(self.store, f"thread-{script}", redact=False)))
        finding = check_trace(trace)
        print(f"{script}: {finding.commits} commits, verdict {finding.verdict.name}")
        assert finding.verdict.name == "LEGAL", finding
        state = self.store.run(self.run_id(script))
        assert state is not None
        if cause is None:
            assert not isinstance(state.state, Ended)
        else:
            assert isinstance(state.state, Ended) and state.state.cause.kind is cause, state.state


def once_each(starts: list[dict[str, Any]]) -> bool:
    ops = [s["operation_id"] for s in starts]
    return len(ops) == len(set(ops))


def status_of(call: ToolCall) -> tuple[str, Any]:
    if isinstance(call.status, CallCompleted):
        return call.status.result.kind.value, call.status.result.value
    if isinstance(call.status, CallIndeterminate):
        return "indeterminate", call.status.reason.value
    return type(call.status).__name__, None
