"""A durable agent calling MCP tools, for the integration tests (in process and as a
subprocess that a test kills), in either framework: Pydantic AI (an ``MCPToolset``) or the
OpenAI Agents SDK (an agent's ``mcp_servers``). Offline: the ``mcp`` package's
``MCPServer`` is reached through its in-memory transport, in this process.

The server ``inventory`` offers four tools, each with the annotations it declares:
``lookup`` (``readOnlyHint``), ``reserve`` (``idempotentHint``), ``send`` (none) and
``charge`` (``readOnlyHint``, a lie: the app's explicit mapping makes it ``reconnect``).
A script names the tool the model calls first and whether the app trusts the server
(``SCRIPTS``); the model's second reply is the final answer.

Each tool body records its start in the downstream record (``agent_world.Downstream``)
with the operation id and lease epoch the request's ``_meta`` carried (the server knows
nothing else of runkernel; the call id and attempt are looked up in the store by that
operation id), and returns the ``_meta`` keys it was sent. ``CRASH=tool:NAME:ATTEMPT``
SIGKILLs the process (the server with it) right after the start is recorded.

As a script: ``python tests/mcp_app.py STORE RECORD FRAMEWORK SCRIPT start|resume
[RUN_ID]`` (FRAMEWORK: ``pydantic_ai`` or ``openai_agents``) prints one JSON line; with
``serve`` or ``restart``, the app serves its Runs (``SERVES``).
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from collections.abc import Callable, Coroutine, Mapping
from typing import Any

import attrs

os.environ.setdefault("OPENAI_AGENTS_DISABLE_TRACING", "1")

from mcp.server.mcpserver import Context, MCPServer  # noqa: E402
from mcp.types import ToolAnnotations  # noqa: E402

from agent_world import Downstream  # noqa: E402
from runkernel import OperationStatus, StatusReply, open_store  # noqa: E402
from runkernel.integrations.mcp import MCP_META_KEY  # noqa: E402
from runkernel.kernel import CallExecuting  # noqa: E402

#: Scripts: (the tool the model calls, its arguments, whether the app trusts the server).
SCRIPTS: dict[str, tuple[str, dict[str, Any], bool]] = {
    "served": ("lookup", {"q": "a"}, True),  # then ``send``: a tool first listed to the worker's driver
    "trusted_lookup": ("lookup", {"q": "a"}, True),
    "untrusted_lookup": ("lookup", {"q": "a"}, False),
    "trusted_reserve": ("reserve", {"seat": "4A"}, True),
    "trusted_send": ("send", {"to": "bob"}, True),
    "explicit_charge": ("charge", {"cents": 5}, True),
}

#: The server's name (Pydantic AI: the ``MCPToolset``'s ``id``; the Agents SDK: the server's ``name``).
SERVER = "inventory"

#: The app's explicit mapping: ``charge`` reconnects, whatever the server says of it.
EXPLICIT: dict[str, str] = {"charge": "reconnect"}


@attrs.frozen
class MetaStarted:
    """A tool start as the server knows it: the operation id and lease epoch from the
    request's ``_meta``; the Run, call id and attempt of the call Executing under that
    operation id (attempt 0: no such call is Executing, the body ran too early)."""

    run_id: str
    call_id: str
    operation_id: str
    attempt: int
    lease_epoch: int | None


def started_from(meta: Mapping[str, Any] | None, store_url: str, thread_id: str) -> MetaStarted:
    """The start that a request with ``meta`` makes, looked up in the store by its operation id."""
    entry = (meta or {}).get(MCP_META_KEY)
    assert isinstance(entry, dict), f"no {MCP_META_KEY!r} in the request's _meta: {meta}"
    store = open_store(store_url, create=False)
    try:
        head = store.thread_head(thread_id)
        run_id = head.active_run_id if head is not None else None
        assert run_id is not None, "a tool ran with no Run active"
        state = store.run(run_id)
        calls = state.batch.calls if state is not None and state.batch is not None else ()
    finally:
        store.close()
    call = next(c for c in calls if c.operation_id == entry["operation_id"])
    attempt = call.status.attempt if isinstance(call.status, CallExecuting) else 0
    return MetaStarted(run_id, call.call_id, entry["operation_id"], attempt, entry["lease_epoch"])


def inventory(store: str, record: str | os.PathLike[str], thread_id: str) -> MCPServer:
    """The MCP server; its tools record each start in ``record``."""
    server = MCPServer(SERVER)

    def start(tool: str, ctx: Context[Any, Any]) -> dict[str, Any]:
        meta = dict(ctx.request_context.meta or {})
        entry = Downstream(record, store, invocation=lambda: started_from(meta, store, thread_id)).start(tool)
        return {**entry, "meta_keys": sorted(meta)}

    @server.tool(annotations=ToolAnnotations(read_only_hint=True))
    async def lookup(q: str, ctx: Context[Any, Any]) -> str:
        """Look q up."""
        return json.dumps({"found": q, **start("lookup", ctx)})

    @server.tool(annotations=ToolAnnotations(idempotent_hint=True))
    async def reserve(seat: str, ctx: Context[Any, Any]) -> str:
        """Reserve a seat (again: no second seat)."""
        return json.dumps({"reserved": seat, **start("reserve", ctx)})

    @server.tool()
    async def send(to: str, ctx: Context[Any, Any]) -> str:
        """Send mail."""
        return json.dumps({"sent": to, **start("send", ctx)})

    @server.tool(annotations=ToolAnnotations(read_only_hint=True))
    async def charge(cents: int, ctx: Context[Any, Any]) -> str:
        """Charge a card (the hint says read-only: it is not)."""
        return json.dumps({"charged": cents, **start("charge", ctx)})

    return server


def charge_status(record: str | os.PathLike[str]) -> Callable[[str, int | None], StatusReply]:
    """The reconnect tool's status: done once the downstream recorded a start of the operation."""

    def status(operation_id: str, lease_epoch: int | None) -> StatusReply:
        done = any(s["operation_id"] == operation_id for s in Downstream(record).starts())
        return StatusReply(OperationStatus.DONE, "charged") if done else StatusReply(OperationStatus.NOT_FOUND)

    return status


def first_call(script: str) -> tuple[str, dict[str, Any]]:
    tool, arguments, _ = SCRIPTS[script]
    return tool, arguments


def trusted(script: str) -> frozenset[str]:
    return frozenset({SERVER}) if SCRIPTS[script][2] else frozenset()


# --- Pydantic AI ------------------------------------------------------------------------


def pydantic_ai_agent(
    store: str, record: str | os.PathLike[str], script: str, *, app: str | None = None, process_tool_call: Any = None
) -> tuple[Any, Any]:
    """The Pydantic AI agent of ``script`` and its ``RunkernelDurability``."""
    from pydantic_ai import Agent
    from pydantic_ai.mcp import MCPToolset
    from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
    from pydantic_ai.models.function import AgentInfo, FunctionModel

    from runkernel.integrations.pydantic_ai import RunkernelDurability

    tool, arguments = first_call(script)

    def reply(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        turns = sum(isinstance(m, ModelResponse) for m in messages)
        if turns == 0:
            return ModelResponse(parts=[ToolCallPart(tool, arguments, "c1")])
        if turns == 1 and script == "served":
            return ModelResponse(parts=[ToolCallPart("send", {"to": "bob"}, "c2")])
        return ModelResponse(parts=[TextPart("done")])

    durable = RunkernelDurability(
        store, tools=EXPLICIT, status={"charge": charge_status(record)}, trusted_mcp=trusted(script), app=app,
        version=None if app is None else "mcp-1",
        lease_duration=LEASE,
    )
    toolset = MCPToolset(inventory(store, record, f"thread-{script}"), id=SERVER, process_tool_call=process_tool_call)
    agent = Agent(FunctionModel(reply), toolsets=[toolset], capabilities=[durable])
    return agent, durable


#: The served app (``serve`` and ``restart``): its name, lease and poll, in seconds.
APP, LEASE, POLL = "mcp", 2.0, 0.1


def serve_pydantic_ai(store: str, record: str, script: str, phase: str) -> dict[str, Any]:
    """The app as one process that calls ``serve()`` at launch: ``serve`` starts a Run in
    process too (a tool may SIGKILL it); ``restart`` only serves until every Run ended."""
    agent, durable = pydantic_ai_agent(store, record, script, app=APP)
    worker = durable.serve(agent, poll_interval=POLL)
    if phase == "serve":
        asyncio.run(agent.run("go", conversation_id=f"thread-{script}"))
    every_run_ended(store)
    report = worker.stop()
    return {"drives": report.drives, "takeovers": report.takeovers, "failures": report.failures}


async def play_pydantic_ai(store: str, record: str, script: str, phase: str, run_id: str | None) -> dict[str, Any]:
    agent, durable = pydantic_ai_agent(store, record, script)
    if phase == "start":
        result = await agent.run("go", conversation_id=f"thread-{script}")
    else:
        assert run_id is not None
        result = await durable.resume(agent, run_id)
    return {"output": result.output}


# --- the OpenAI Agents SDK ----------------------------------------------------------------


def openai_agents_server(server: MCPServer, **options: Any) -> Any:
    """``server`` as the Agents SDK's MCP server: its client session over the ``mcp``
    package's in-memory transport (a stdio server whose streams are that transport);
    ``options`` go to the SDK's server (``require_approval=...``)."""
    from agents.mcp import MCPServerStdio
    from mcp.client._memory import InMemoryTransport  # what mcp's own Client(server) uses

    class InMemory(MCPServerStdio):
        def create_streams(self) -> Any:
            return InMemoryTransport(server)

    return InMemory({"command": "in-memory"}, name=SERVER, cache_tools_list=True, **options)


def openai_agents_agent(
    store: str, record: str | os.PathLike[str], script: str, server: Any, *, app: str | None = None
) -> tuple[Any, Any]:
    """The OpenAI Agents SDK agent of ``script`` on the connected ``server``, and its ``DurableRunner``."""
    from agents import Agent, ModelResponse
    from agents.models.interface import Model
    from agents.testing import ModelStep, ScriptedModel, assistant_message, function_call

    from openai_agents_app import model_turns
    from runkernel.integrations.openai_agents import DurableRunner

    tool, arguments = first_call(script)

    class Script(Model):
        async def get_response(self, *args: Any, **kwargs: Any) -> ModelResponse:
            turns = model_turns(kwargs.get("input", args[1] if len(args) > 1 else None))
            output = [assistant_message("done", item_id="m2")]
            if turns == 0:
                output = [function_call(tool, arguments, call_id="c1")]
            elif turns == 1 and script == "served":
                output = [function_call("send", {"to": "bob"}, call_id="c2")]
            return await ScriptedModel([ModelStep(output=output, response_id=None)]).get_response(*args, **kwargs)

        def stream_response(self, *args: Any, **kwargs: Any) -> Any:
            raise NotImplementedError("not streamed")

    durable = DurableRunner(
        store, tools=EXPLICIT, status={"charge": charge_status(record)}, trusted_mcp=trusted(script), app=app,
        version=None if app is None else "mcp-1",
        lease_duration=LEASE,
    )
    return Agent(name="assistant", model=Script(), mcp_servers=[server]), durable


async def play_openai_agents(store: str, record: str, script: str, phase: str, run_id: str | None) -> dict[str, Any]:
    from agents import set_tracing_disabled

    set_tracing_disabled(True)  # no test connects outside the machine
    async with openai_agents_server(inventory(store, record, f"thread-{script}")) as server:
        agent, durable = openai_agents_agent(store, record, script, server)
        if phase == "start":
            result = await durable.run(agent, "go", thread_id=f"thread-{script}")
        else:
            assert run_id is not None
            result = await durable.resume(agent, run_id)
    return {"output": result.final_output}


async def serve_openai_agents(store: str, record: str, script: str, phase: str, concurrency: int = 32) -> dict[str, Any]:
    """``serve_pydantic_ai`` for the Agents SDK: ``serve()`` is called on the loop the
    server is connected on (its home loop), where the worker's drives send their MCP
    requests; the worker is stopped off that loop, before the server closes."""
    from agents import set_tracing_disabled

    set_tracing_disabled(True)
    async with openai_agents_server(inventory(store, record, f"thread-{script}")) as server:
        agent, durable = openai_agents_agent(store, record, script, server, app=APP)
        worker = durable.serve(agent, poll_interval=POLL, concurrency=concurrency)
        try:
            if phase == "serve":
                await durable.run(agent, "go", thread_id=f"thread-{script}")
            await asyncio.to_thread(every_run_ended, store)
        finally:
            report = await asyncio.to_thread(worker.stop)
    return {"drives": report.drives, "takeovers": report.takeovers, "failures": report.failures}


def every_run_ended(store: str) -> None:
    """Wait (a poll at a time) until the store has Runs and every one is ended."""
    opened = open_store(store, create=False)
    try:
        while not opened.list_runs() or any(s.state != "ended" for s in opened.list_runs()):
            time.sleep(POLL)
    finally:
        opened.close()


PLAYS: dict[str, Callable[[str, str, str, str, str | None], Coroutine[Any, Any, dict[str, Any]]]] = {
    "pydantic_ai": play_pydantic_ai,
    "openai_agents": play_openai_agents,
}

#: How each framework's app serves its Runs (``serve`` and ``restart``).
SERVES: dict[str, Callable[[str, str, str, str], dict[str, Any]]] = {
    "pydantic_ai": serve_pydantic_ai,
    "openai_agents": lambda *args: asyncio.run(serve_openai_agents(*args)),
}


if __name__ == "__main__":
    store_url, record_path, framework, script_name, phase_name = sys.argv[1:6]
    run = sys.argv[6] if len(sys.argv) > 6 and sys.argv[6] else None
    if phase_name in ("serve", "restart"):
        print(json.dumps(SERVES[framework](store_url, record_path, script_name, phase_name)))
    else:
        print(json.dumps(asyncio.run(PLAYS[framework](store_url, record_path, script_name, phase_name, run))))
