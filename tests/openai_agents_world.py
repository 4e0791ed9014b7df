"""The harness of the OpenAI Agents SDK integration tests: a store file, the tools'
downstream record, the app played in process or in a subprocess that SIGKILLs itself, and
the checks every scenario ends with (legal exported trace, durable-before-start, no
non-replay tool started twice)."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from openai_agents_app import Downstream, play
from runkernel import EndCauseKind, check_trace, open_store
from runkernel.adapters.stores.contract import Store
from runkernel.adapters.stores.export import export_lines
from runkernel.kernel import Awaiting, CallCompleted, CallIndeterminate, Ended, ThreadCommit, ToolCall

REPLAYED = {"search"}  # the app's tools with the replay policy
APP = Path(__file__).resolve().parent / "openai_agents_app.py"
ROOT = APP.parent.parent


class World:
    """One store file and one downstream record; plays scripts in and out of process."""

    def __init__(self, tmp_path: Path) -> None:
        self.url = f"sqlite:///{tmp_path / 'agent.db'}"
        self.record = tmp_path / "downstream.jsonl"
        self.tmp_path = tmp_path

    def play(self, script: str, phase: str = "start", run_id: str | None = None, prompt: str = "go") -> dict[str, Any]:
        return asyncio.run(play(self.url, str(self.record), script, phase, run_id, prompt))

    def killed(self, script: str, crash: str, phase: str = "start", run_id: str | None = None) -> None:
        """Play in a subprocess that SIGKILLs itself at ``crash``."""
        argv = [sys.executable, str(APP), self.url, str(self.record), script, phase, run_id or ""]
        env = {**os.environ, "CRASH": crash, "PYTHONPATH": str(ROOT)}
        done = subprocess.run(argv, capture_output=True, text=True, timeout=120, env=env, cwd=ROOT)
        assert done.returncode == -9, (done.returncode, done.stdout, done.stderr)
        print(f"{script}: killed at {crash}")

    @property
    def store(self) -> Store:
        return open_store(self.url)

    def commits(self, script: str) -> list[ThreadCommit]:
        return list(self.store.commits(f"thread-{script}"))

    def run_id(self, script: str) -> str:
        return self.commits(script)[-1].run_id

    def ticket(self, script: str) -> str:
        state = self.store.run(self.run_id(script))
        assert state is not None and isinstance(state.state, Awaiting), state
        return state.state.ticket.ticket_id

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
        once = [s["operation_id"] for s in starts if s["tool"] not in REPLAYED]
        assert len(once) == len(set(once)), "a non-replay tool started twice"
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


def status_of(call: ToolCall) -> tuple[str, Any]:
    if isinstance(call.status, CallCompleted):
        return call.status.result.kind.value, call.status.result.value
    if isinstance(call.status, CallIndeterminate):
        return "indeterminate", call.status.reason.value
    return type(call.status).__name__, None


def shown(world: World, script: str) -> str:
    """Everything the Thread's messages say, as one JSON string."""
    return json.dumps([m.content for m in world.store.messages(f"thread-{script}")])


@pytest.fixture
def world(tmp_path: Path) -> World:
    return World(tmp_path)
