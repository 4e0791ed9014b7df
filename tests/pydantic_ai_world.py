"""The harness of the Pydantic AI integration tests: the app's scripts played by the
shared ``agent_world.World`` (store file, downstream record, SIGKILLed subprocess, the
checks every scenario ends with), and what the model was shown."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import attrs
import pytest
from pydantic_ai.messages import ModelMessage, ModelRequest, ToolReturnPart

import agent_world
from agent_world import ROOT, once_each, status_of
from pydantic_ai_app import play
from runkernel.kernel import Message

HAS_METADATA = "metadata" in attrs.fields_dict(Message)
__all__ = ["HAS_METADATA", "ROOT", "World", "once_each", "shown_results", "status_of", "world"]


class World(agent_world.World):
    """The Pydantic AI app's scripts played in and out of process."""

    app = Path(__file__).resolve().parent / "pydantic_ai_app.py"
    replayed = frozenset({"search", "flaky", "fetch"})  # the app's tools with the replay policy

    def play(self, script: str, phase: str = "start", run_id: str | None = None, answers: Any = None) -> dict[str, Any]:
        return asyncio.run(play(self.url, str(self.record), script, phase, run_id, answers))

    def killed(self, script: str, crash: str, phase: str = "start", run_id: str | None = None, answers: Any = None) -> None:
        """Play in a subprocess that SIGKILLs itself at ``crash``."""
        self.run_killed(crash, script, phase, *([run_id or "", json.dumps(answers)] if run_id or answers else []))


@pytest.fixture
def world(tmp_path: Path) -> World:
    return World(tmp_path)


def shown_results(messages: list[ModelMessage]) -> dict[str, tuple[str, Any]]:
    """What the model was shown per tool call: (outcome, content)."""
    return {
        p.tool_call_id: (p.outcome, p.content)
        for m in messages if isinstance(m, ModelRequest) for p in m.parts if isinstance(p, ToolReturnPart)
    }
