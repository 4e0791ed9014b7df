"""Parallel tool calls under both framework integrations (issue 34): consecutive calls of
tools declared ``concurrent=True`` in one model response run together, under Pydantic
AI and under the OpenAI Agents SDK; the call after them runs once every one of them is
terminal; a crash inside one of them recovers each call by its own policy. Offline, on
SQLite; each scenario ends with a legal exported trace."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

import agent_world

#: each framework's world module and the package it needs
FRAMEWORKS = {"pydantic_ai": ("pydantic_ai_world", "pydantic_ai"), "openai_agents": ("openai_agents_world", "agents")}


def _world(framework: str, tmp_path: Path) -> agent_world.World:
    module, package = FRAMEWORKS[framework]
    if importlib.util.find_spec(package) is None:
        pytest.skip(f"the {framework.replace('_', '-')} extra is not installed")
    world_class: type[agent_world.World] = __import__(module).World
    return world_class(tmp_path)


def _play(world: agent_world.World, *args: str | None) -> dict[str, object]:
    played: dict[str, object] = world.play(*args)  # type: ignore[attr-defined]
    return played


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_the_calls_of_a_group_run_together_and_the_next_call_after_them(
    framework: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    world = _world(framework, tmp_path)
    monkeypatch.setenv("TOGETHER", "3")  # each group body waits for the three: one at a time would fail
    agent_world.reset_together()
    assert _play(world, "group")["output"] == "grouped"
    starts = world.starts()
    print(f"{framework}: starts {[(s['tool'], s['terminal']) for s in starts]}")
    assert [s["tool"] for s in starts[:3]] == ["fetch", "book", "pay"]
    assert all(s["terminal"] == [] for s in starts[:3]), "no group call waited for another to end"
    assert starts[3]["tool"] == "note" and sorted(starts[3]["terminal"]) == ["g1", "g2", "g3"]
    world.check("group")


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_a_crash_inside_a_group_call_recovers_each_call_by_its_policy(framework: str, tmp_path: Path) -> None:
    """Killed inside ``book`` (reconnect), the group's second call: ``fetch`` (replay) had
    started, ``pay`` (indeterminate) had not. The resumed Run runs ``fetch`` again, asks
    ``book`` its status instead of booking again, and closes ``pay`` Indeterminate: it
    never runs, since nobody can tell it did not."""
    world = _world(framework, tmp_path)
    agent_world.reset_together()
    world.killed("group", "tool:book:1")  # type: ignore[attr-defined]
    assert [s["tool"] for s in world.starts()] == ["fetch", "book"]
    assert _play(world, "group", "resume", world.run_id("group"))["output"] == "grouped"
    print(f"{framework}: starts {[(s['tool'], s['attempt']) for s in world.starts()]}")
    assert [s["attempt"] for s in world.starts("fetch")] == [1, 2]
    assert len(world.starts("book")) == 1 and world.starts("pay") == []
    assert len(world.starts("note")) == 1
    assert type(world.call("group", "g3").status).__name__ == "CallIndeterminate"
    world.check("group")
