"""A durable agent's MCP toolsets: each ``MCPToolset`` of a run is wrapped (the user's
toolset itself is left as it is) so that its tools say which server they come from and
whether the user trusts it, and each call carries its operation id and lease epoch in the
request's ``_meta`` (``runkernel.integrations.mcp``)."""

from __future__ import annotations

import sys
from collections.abc import Collection, Sequence
from dataclasses import dataclass, replace
from typing import Any

from pydantic_ai.tools import RunContext, ToolDefinition
from pydantic_ai.toolsets import AbstractToolset, WrapperToolset
from pydantic_ai.toolsets.abstract import ToolsetTool

from runkernel import ToolPolicy
from runkernel.adapters.drive.invocation import current_invocation
from runkernel.integrations.mcp import mcp_tool_policy, operation_meta
from runkernel.kernel import JsonValue

#: The key a wrapped MCP toolset adds to its tools' definition metadata (never sent to
#: the model): ``{"trusted": bool}``, read when the model's request is made.
MARK = "runkernel_mcp"


@dataclass
class DurableMCPToolset(WrapperToolset[Any]):
    """An ``MCPToolset`` of a durable run: its tools marked with the server's trust, each
    call sent through the toolset's own ``process_tool_call`` (if any) and
    ``direct_call_tool`` with runkernel's entry added to the request's ``_meta``."""

    trusted: bool = False

    async def get_tools(self, ctx: RunContext[Any]) -> dict[str, ToolsetTool[Any]]:
        """The server's tools, their definitions marked with this server's trust."""
        tools = await self.wrapped.get_tools(ctx)
        mark = {MARK: {"trusted": self.trusted}}
        return {
            name: replace(tool, tool_def=replace(tool.tool_def, metadata={**(tool.tool_def.metadata or {}), **mark}))
            for name, tool in tools.items()
        }

    async def call_tool(self, name: str, tool_args: dict[str, Any], ctx: RunContext[Any], tool: ToolsetTool[Any]) -> Any:
        """Call the tool as ``MCPToolset.call_tool`` does, its ``_meta`` carrying the
        current invocation's operation id and lease epoch."""
        leaf: Any = self.wrapped
        call = current_invocation()  # set around the tool body by the capability
        use_task = bool((tool.tool_def.metadata or {}).get("task"))

        async def with_meta(name: str, args: dict[str, Any], *, metadata: dict[str, Any] | None = None) -> Any:
            return await leaf.direct_call_tool(name, args, metadata=operation_meta(call, metadata), use_task=use_task)

        if leaf.process_tool_call is not None:  # the user's hook sees runkernel's call function
            return await leaf.process_tool_call(ctx, with_meta, name, tool_args)
        return await with_meta(name, tool_args)


def durable_mcp(toolset: AbstractToolset[Any], trusted: Collection[str]) -> AbstractToolset[Any] | None:
    """``toolset`` with each ``MCPToolset`` in it wrapped (trusted if its ``id`` is in
    ``trusted``), or None if it has none (Pydantic AI's MCP module is not even loaded)."""
    kind = getattr(sys.modules.get("pydantic_ai.mcp"), "MCPToolset", None)
    if kind is None:
        return None
    found: list[AbstractToolset[Any]] = []
    toolset.apply(lambda each: found.append(each) if isinstance(each, kind) else None)
    if not found:
        return None

    def wrap(each: AbstractToolset[Any]) -> AbstractToolset[Any]:
        return DurableMCPToolset(each, trusted=each.id in trusted) if isinstance(each, kind) else each

    return toolset.visit_and_replace(wrap)


def has_mcp(agent: Any) -> bool:
    """Whether ``agent`` (None: no agent) has an ``MCPToolset`` among its toolsets."""
    kind = getattr(sys.modules.get("pydantic_ai.mcp"), "MCPToolset", None)
    if kind is None or agent is None:
        return False
    found: list[object] = []
    for toolset in getattr(agent, "toolsets", ()):
        toolset.apply(lambda each: found.append(each) if isinstance(each, kind) else None)
    return bool(found)


def mcp_policies(tool_defs: Sequence[ToolDefinition], named: Collection[str]) -> dict[str, ToolPolicy]:
    """The policy of each MCP tool of a model request that is not ``named`` in the explicit
    mapping, derived from its server's trust and annotations (``mcp_tool_policy``)."""
    derived: dict[str, ToolPolicy] = {}
    for tool_def in tool_defs:
        metadata = tool_def.metadata or {}
        mark: JsonValue = metadata.get(MARK)
        if isinstance(mark, dict) and tool_def.name not in named:
            trusted = mark.get("trusted") is True
            derived[tool_def.name] = mcp_tool_policy(tool_def.name, metadata.get("annotations"), trusted=trusted)
    return derived
