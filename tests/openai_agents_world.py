"""The harness of the OpenAI Agents SDK integration tests: the app's scripts played by
the shared ``agent_world.World`` (store file, downstream record, SIGKILLed subprocess, the
checks every scenario ends with), and what the Thread's messages say."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

import agent_world
from agent_world import ROOT, status_of
from openai_agents_app import play
from runkernel.kernel import Awaiting

__all__ = ["ROOT", "World", "shown", "status_of", "world"]


class World(agent_world.World):
    """The OpenAI Agents SDK app's scripts played in and out of process."""

    app = Path(__file__).resolve().parent / "openai_agents_app.py"
    replayed = frozenset({"search", "fetch"})  # the app's tools with the replay policy

    def play(self, script: str, phase: str = "start", run_id: str | None = None, prompt: str = "go") -> dict[str, Any]:
        return asyncio.run(play(self.url, str(self.record), script, phase, run_id, prompt))

    def killed(self, script: str, crash: str, phase: str = "start", run_id: str | None = None) -> None:
        """Play in a subprocess that SIGKILLs itself at ``crash``."""
        self.run_killed(crash, script, phase, run_id or "")

    def ticket(self, script: str) -> str:
        state = self.store.run(self.run_id(script))
        assert state is not None and isinstance(state.state, Awaiting), state
        return state.state.ticket.ticket_id


def shown(world: World, script: str) -> str:
    """Everything the Thread's messages say, as one JSON string."""
    return json.dumps([m.content for m in world.store.messages(f"thread-{script}")])


@pytest.fixture
def world(tmp_path: Path) -> World:
    return World(tmp_path)
