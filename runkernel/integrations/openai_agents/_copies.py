"""The durable copy of a user's agent graph: ``DurableRunner`` runs copies of the user's
agents, with the model wrapped (``DurableModel``) and each function tool and handoff
copied around its own, so the user's ``Agent``, ``Model`` and ``FunctionTool`` objects are
never changed: a ``@function_tool`` shared with a plain ``Runner.run`` keeps working
there, and the agent stays a normal agent outside its durable Runs."""

from __future__ import annotations

import copy
import weakref
from collections.abc import Collection, Mapping
from typing import Any

from agents import Agent, FunctionTool, Handoff
from agents.models.interface import Model

from runkernel import ToolPolicy
from runkernel.integrations._common import IntegrationError
from runkernel.integrations.openai_agents._binding import DurableModel, durable_tool
from runkernel.integrations.openai_agents._mcp import with_durable_mcp


def agents_of(agent: Agent[Any]) -> list[Agent[Any]]:
    """``agent`` and every agent reachable through its handoffs, each once."""
    found: list[Agent[Any]] = []
    todo = [agent]
    while todo:
        each = todo.pop(0)
        if any(each is seen for seen in found):
            continue
        found.append(each)
        for entry in each.handoffs:
            target = entry if isinstance(entry, Agent) else (entry._agent_ref() if entry._agent_ref is not None else None)
            if isinstance(target, Agent):
                todo.append(target)
    return found


def handoff_names(agent: Agent[Any]) -> dict[str, str]:
    """Every handoff's tool name in the agent graph, with the agent it hands to."""
    names: dict[str, str] = {}
    for each in agents_of(agent):
        for entry in each.handoffs:
            if isinstance(entry, Handoff):
                names[entry.tool_name] = entry.agent_name
            else:
                names[Handoff.default_tool_name(entry)] = entry.name
    return names


class DurableCopies:
    """The durable copy of each agent graph a runner was given, made at its first use and
    kept (a ``RunState`` of a durable run names the copy: the same copy continues it)."""

    def __init__(self) -> None:
        self._policies: Mapping[str, ToolPolicy] = {}
        self._trusted: Collection[str] = frozenset()
        self._made: dict[int, tuple[Agent[Any], Agent[Any]]] = {}  # id(user's agent) -> (it, its copy)
        self._copies: dict[int, Agent[Any]] = {}  # id(a copy) -> the copy: a copy is its own durable copy

    def of(self, agent: Agent[Any], policies: Mapping[str, ToolPolicy], trusted: Collection[str] = frozenset()) -> Agent[Any]:
        """The durable copy of ``agent`` and of every agent it hands off to (each function
        tool needs its policy in ``policies``; an MCP tool not named there gets one derived,
        trusting the annotations of the MCP servers named in ``trusted``)."""
        self._policies, self._trusted = policies, trusted
        return self._copy(agent)

    def _copy(self, agent: Agent[Any]) -> Agent[Any]:
        if self._copies.get(id(agent)) is agent:
            return agent
        kept = self._made.get(id(agent))
        if kept is not None and kept[0] is agent:
            return kept[1]
        if not isinstance(agent.model, Model):
            raise IntegrationError(f"agent {agent.name!r}: give it a Model instance, not {agent.model!r}")
        tools: list[Any] = []
        for tool in agent.tools:
            if isinstance(tool, FunctionTool):
                if tool.name not in self._policies:
                    raise IntegrationError(f"tool {tool.name!r} has no recovery policy: give it one in DurableRunner(tools=...)")
                tool = durable_tool(tool)
            tools.append(tool)
        clone = agent.clone(model=DurableModel(agent.model, agent.name), tools=tools, handoffs=[])
        if agent.mcp_servers:
            with_durable_mcp(clone, self._trusted, self._policies)
        self._made[id(agent)], self._copies[id(clone)] = (agent, clone), clone  # before its handoffs: a cycle of handoffs ends here
        clone.handoffs = [self._handoff(entry) for entry in agent.handoffs]
        return clone

    def _handoff(self, entry: Agent[Any] | Handoff[Any, Any]) -> Agent[Any] | Handoff[Any, Any]:
        if isinstance(entry, Agent):
            return self._copy(entry)
        target = entry._agent_ref() if entry._agent_ref is not None else None
        handed = copy.copy(entry)
        invoke = entry.on_invoke_handoff

        async def on_invoke_handoff(context: Any, arguments: str) -> Agent[Any]:
            return self._copy(await invoke(context, arguments))  # the SDK goes on with the copy

        handed.on_invoke_handoff = on_invoke_handoff
        if isinstance(target, Agent):
            handed._agent_ref = weakref.ref(self._copy(target))
        return handed
