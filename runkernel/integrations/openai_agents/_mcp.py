"""A durable copy's MCP servers and tools: the copy of an agent lists its MCP tools as
the SDK does, then gives each its policy (``runkernel.integrations.mcp``: the server's
trust, its annotations, the explicit mapping), declares them to the Run's driver before
the model's reply that calls them is committed, and runs each through the bound Run like
a function tool. Each server is seen through ``MetaServer``, which adds the call's
operation id and lease epoch to the request's ``_meta``; the user's servers are never
changed."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Collection, Mapping
from typing import Any

from agents import Agent, FunctionTool, RunContextWrapper
from agents.tool import Tool, get_function_tool_origin

from runkernel import ToolPolicy
from runkernel.adapters.drive.invocation import current_invocation
from runkernel.integrations.mcp import mcp_tool_policy, operation_meta
from runkernel.integrations.openai_agents._binding import _BINDING, durable_tool


class MetaServer:
    """The user's MCP server as a durable copy of an agent sees it: everything is the
    server's own, except that each ``call_tool`` adds runkernel's entry to the ``_meta``
    the SDK sends (after the tool's static ``_meta`` and the server's
    ``tool_meta_resolver``: a server's own tool ``_meta`` cannot replace it)."""

    def __init__(self, server: Any) -> None:
        self.server = server

    def __getattr__(self, name: str) -> Any:
        return getattr(self.server, name)

    async def call_tool(self, tool_name: str, arguments: dict[str, Any] | None, meta: dict[str, Any] | None = None) -> Any:
        """The server's ``call_tool``, its ``_meta`` carrying the operation id and lease epoch."""
        return await self.server.call_tool(tool_name, arguments, meta=operation_meta(current_invocation(), meta))


def durable_mcp_tools(tools: list[Tool], trusted: Collection[str], explicit: Mapping[str, ToolPolicy]) -> list[Tool]:
    """Each MCP function tool wrapped as a durable tool, its policy derived and declared to
    the bound Run's driver (outside a durable run, only wrapped: its body refuses to run)."""
    policies: dict[str, ToolPolicy] = {}
    wrapped: list[Tool] = []
    for tool in tools:
        if isinstance(tool, FunctionTool):
            origin = get_function_tool_origin(tool)
            server = origin.mcp_server_name if origin is not None else None
            annotations = getattr(tool, "mcp_annotations", None)
            policies[tool.name] = mcp_tool_policy(tool.name, annotations, trusted=server in trusted, explicit=explicit)
            tool = durable_tool(tool)
        wrapped.append(tool)
    binding = _BINDING.get()
    if binding is not None:
        binding.learned(policies, {t.name: t for t in wrapped if isinstance(t, FunctionTool)})
    return wrapped


def with_durable_mcp(clone: Agent[Any], trusted: Collection[str], explicit: Mapping[str, ToolPolicy]) -> None:
    """Make the durable copy ``clone`` see its MCP servers through ``MetaServer`` and list
    its MCP tools as durable tools."""
    clone.mcp_servers = [MetaServer(server) for server in clone.mcp_servers]  # type: ignore[misc]
    listed: Callable[[RunContextWrapper[Any]], Awaitable[list[Tool]]] = clone.get_mcp_tools

    async def get_mcp_tools(run_context: RunContextWrapper[Any]) -> list[Tool]:
        return durable_mcp_tools(await listed(run_context), trusted, explicit)

    # the copy's own listing (an instance attribute): the SDK asks the agent for its MCP
    # tools at every turn, and the copy is runkernel's, never the user's agent
    clone.get_mcp_tools = get_mcp_tools  # type: ignore[method-assign]
