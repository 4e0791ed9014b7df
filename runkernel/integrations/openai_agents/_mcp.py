"""A durable copy's MCP servers and tools: the copy of an agent lists its MCP tools as
the SDK does, then gives each its policy (``runkernel.integrations.mcp``: the server's
trust, its annotations, the explicit mapping), declares them to the Run's driver before
the model's reply that calls them is committed, and runs each through the bound Run like
a function tool. Each server is seen through ``MetaServer``, which adds the call's
operation id and lease epoch to the request's ``_meta``; the user's servers are never
changed.

A server's client session belongs to the event loop it was connected on (``async with
server:``), its home loop: awaited from another loop, a request can wait for ever. A
worker drives a Run on its own loop, so ``MetaServer`` sends each request that its
drive makes to the home loop (``DurableRunner.serve`` records the loop it is called on)
and waits for the answer without blocking the worker's loop."""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import Awaitable, Callable, Collection, Coroutine, Mapping
from typing import Any, TypeVar

from agents import Agent, FunctionTool, RunContextWrapper
from agents.tool import Tool, get_function_tool_origin

from runkernel import ToolPolicy
from runkernel.adapters.drive.invocation import current_invocation
from runkernel.integrations._common import IntegrationError
from runkernel.integrations.mcp import mcp_tool_policy, operation_meta
from runkernel.integrations.openai_agents._binding import _BINDING, durable_tool

T = TypeVar("T")

#: The home loop of the MCP servers of the agent a worker drives now (``DurableAgentApp.drive``
#: sets it); None in process, where the run's own loop is the servers' loop.
HOME_LOOP: contextvars.ContextVar[asyncio.AbstractEventLoop | None] = contextvars.ContextVar(
    "runkernel_mcp_home_loop", default=None
)

#: What the SDK (or a tool) awaits on an MCP server during a run: each uses the server's
#: session, so each is sent to the home loop (connecting and cleaning up are the user's).
SESSION_CALLS = frozenset(
    {"list_tools", "call_tool", "list_prompts", "get_prompt", "list_resources", "list_resource_templates", "read_resource"}
)


async def on_home_loop(request: Callable[[], Coroutine[Any, Any, T]]) -> T:
    """Await ``request()`` on the MCP servers' home loop: here if this is it (or none is
    set), else as a task of the home loop whose answer this loop awaits. A home loop that
    is not running raises ``IntegrationError`` (the request is not sent)."""
    home = HOME_LOOP.get()
    if home is None or home is asyncio.get_running_loop():
        return await request()
    refused = IntegrationError(
        "the event loop the agent's MCP servers were connected on (where DurableRunner.serve() or worker_app() was called)"
        " is not running: stop the worker (await asyncio.to_thread(worker.stop)) before leaving `async with server:`"
    )
    if not home.is_running():
        raise refused
    coroutine = request()
    try:
        sent = asyncio.run_coroutine_threadsafe(coroutine, home)
    except RuntimeError:  # closed since
        coroutine.close()
        raise refused from None
    return await asyncio.wrap_future(sent)  # cancelled here: cancelled there too


class MetaServer:
    """The user's MCP server as a durable copy of an agent sees it: everything is the
    server's own, except that each ``call_tool`` adds runkernel's entry to the ``_meta``
    the SDK sends (after the tool's static ``_meta`` and the server's
    ``tool_meta_resolver``: a server's own tool ``_meta`` cannot replace it), and that
    what uses the server's session (``SESSION_CALLS``) runs on its home loop."""

    def __init__(self, server: Any) -> None:
        self.server = server

    def __getattr__(self, name: str) -> Any:
        found = getattr(self.server, name)
        if name not in SESSION_CALLS:
            return found

        async def on_home(*args: Any, **kwargs: Any) -> Any:
            return await on_home_loop(lambda: found(*args, **kwargs))

        return on_home

    async def call_tool(self, tool_name: str, arguments: dict[str, Any] | None, meta: dict[str, Any] | None = None) -> Any:
        """The server's ``call_tool`` (on its home loop), its ``_meta`` carrying the
        operation id and lease epoch."""
        sent = operation_meta(current_invocation(), meta)  # read here: the invocation is this task's
        return await on_home_loop(lambda: self.server.call_tool(tool_name, arguments, meta=sent))


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


def home_loop(agents: list[Agent[Any]], where: str) -> asyncio.AbstractEventLoop | None:
    """The home loop of the MCP servers of ``agents`` (an agent graph) for a worker app:
    the loop running here, where ``where`` was called (None if no agent has MCP servers).
    No loop running here raises ``IntegrationError``: a worker could not tell which loop
    the servers are on, and a request from its own loop could wait for ever."""
    if not any(agent.mcp_servers for agent in agents):
        return None
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        raise IntegrationError(
            f"{where}: the agent has MCP servers, and a worker sends their requests to the event loop they were"
            " connected on: call it from a coroutine on that loop (inside `async with server:`); runkernel worker"
            " --app cannot serve such an agent (no loop runs at import): call serve() in your app instead"
        ) from None
