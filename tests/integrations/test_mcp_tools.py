"""MCP tools of a durable agent, in both frameworks (Pydantic AI's ``MCPToolset``, the
OpenAI Agents SDK's MCP servers), offline: the ``mcp`` package's server in memory
(tests/mcp_app.py). A real crash inside each kind of MCP tool (the process SIGKILLed
with the server in it, after the tool's effect) is recovered by its policy: ``replay``
for a trusted server's read-only or idempotent tool (started again under the same
operation id), ``indeterminate`` for an untrusted server's tool or a trusted one's
write (never started again), and what the explicit mapping says (``reconnect``: asked its
status). The server sees each call's operation id and lease epoch in ``_meta``; every
exported trace is legal; an MCP server's ``require_approval`` is the gate; the user's toolsets
and servers are left as they were."""

from __future__ import annotations

import asyncio
import importlib.util
import json
import os
import subprocess
import threading
from functools import partial
import sys
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mcp.server.mcpserver", reason="the mcp extra is not installed (pip install -e '.[mcp]')")

import agent_world  # noqa: E402
import mcp_app  # noqa: E402
from agent_world import status_of  # noqa: E402
from runkernel import ToolPolicy  # noqa: E402
from runkernel.integrations.mcp import MCP_META_KEY  # noqa: E402

FRAMEWORKS = [
    pytest.param(
        "pydantic_ai",
        marks=pytest.mark.skipif(
            importlib.util.find_spec("pydantic_ai") is None or importlib.util.find_spec("fastmcp") is None,
            reason="Pydantic AI's MCP client is not installed (pip install -e '.[pydantic-ai,mcp]')",
        ),
    ),
    pytest.param(
        "openai_agents",
        marks=pytest.mark.skipif(
            importlib.util.find_spec("agents") is None,
            reason="the openai-agents extra is not installed (pip install -e '.[openai-agents]')",
        ),
    ),
]
frameworks = pytest.mark.parametrize("framework", FRAMEWORKS)


class World(agent_world.World):
    """tests/mcp_app.py's scripts played in process, or in a subprocess that SIGKILLs itself."""

    app = Path(__file__).resolve().parent.parent / "mcp_app.py"
    replayed = frozenset({"lookup", "reserve"})  # replayed when the server is trusted (never started twice otherwise)

    def play(self, framework: str, script: str, phase: str = "start", run_id: str | None = None) -> dict[str, Any]:
        return asyncio.run(mcp_app.PLAYS[framework](self.url, str(self.record), script, phase, run_id))

    def killed(self, framework: str, script: str, crash: str, phase: str = "start") -> None:
        self.run_killed(crash, framework, script, phase)

    def served_again(self, framework: str, script: str) -> dict[str, Any]:
        """The app started again: it only serves, until every Run ended."""
        argv = [sys.executable, str(self.app), self.url, str(self.record), framework, script, "restart"]
        env = {**os.environ, "PYTHONPATH": str(agent_world.ROOT)}
        done = subprocess.run(argv, capture_output=True, text=True, timeout=120, env=env, cwd=agent_world.ROOT)
        assert done.returncode == 0, done.stderr
        report: dict[str, Any] = json.loads(done.stdout.splitlines()[-1])
        return report


@pytest.fixture
def world(tmp_path: Path) -> World:
    return World(tmp_path)


#: (script, the committed policy, the attempts started downstream, the call's end).
CRASHES = [
    pytest.param("trusted_lookup", ToolPolicy.replay(), [1, 2], "output", id="trusted-read-only-replays"),
    pytest.param("trusted_reserve", ToolPolicy.replay(), [1, 2], "output", id="trusted-idempotent-replays"),
    pytest.param("untrusted_lookup", ToolPolicy.indeterminate(), [1], "indeterminate", id="untrusted-is-indeterminate"),
    pytest.param("trusted_send", ToolPolicy.indeterminate(), [1], "indeterminate", id="trusted-write-is-indeterminate"),
    pytest.param("explicit_charge", ToolPolicy.reconnect(), [1], "output", id="explicit-reconnect-is-asked"),
]


@frameworks
@pytest.mark.parametrize(("script", "policy", "attempts", "end"), CRASHES)
def test_a_crash_inside_an_mcp_tool_is_recovered_by_its_policy(
    world: World, framework: str, script: str, policy: ToolPolicy, attempts: list[int], end: str
) -> None:
    tool = mcp_app.SCRIPTS[script][0]
    world.killed(framework, script, f"tool:{tool}:1")
    assert world.play(framework, script, "resume", world.run_id(script)) == {"output": "done"}
    call = world.call(script, "c1")
    starts = world.starts(tool)
    print(f"{framework} {script}: policy {call.policy.recovery.mode.value if call.policy else None},"
          f" attempts started {[s['attempt'] for s in starts]}, end {status_of(call)}")
    assert call.policy == policy, "the policy derived when the tool was listed is committed with the call"
    assert [s["attempt"] for s in starts] == attempts
    assert {s["operation_id"] for s in starts} == {call.operation_id}, "the server saw the call's operation id in _meta"
    assert status_of(call)[0] == end
    if end == "indeterminate":
        assert status_of(call) == ("indeterminate", "outcome_unknown")
    if policy == ToolPolicy.reconnect():
        assert status_of(call) == ("output", "charged"), "the status answered: the tool was never started again"
    world.check(script)


def test_the_meta_keeps_what_a_process_tool_call_hook_adds_and_carries_the_lease_epoch(world: World) -> None:
    pytest.importorskip("pydantic_ai.mcp", reason="Pydantic AI's MCP client is not installed (pip install -e '.[pydantic-ai,mcp]')")
    from pydantic_ai.mcp import MCPToolset

    from runkernel.integrations.pydantic_ai import current_invocation

    seen: list[tuple[str, int | None]] = []

    async def hook(ctx: Any, call_tool: Any, name: str, args: dict[str, Any]) -> Any:
        invocation = current_invocation()
        seen.append((invocation.operation_id, invocation.lease_epoch))
        return await call_tool(name, args, metadata={"example.com/tenant": "acme"})

    agent, durable = mcp_app.pydantic_ai_agent(world.url, str(world.record), "trusted_lookup", app="mcp", process_tool_call=hook)
    (toolset,) = [t for t in agent.toolsets if isinstance(t, MCPToolset)]
    assert asyncio.run(agent.run("go", conversation_id="thread-trusted_lookup")).output == "done"
    (start,) = world.starts("lookup")
    print("the server saw:", start)
    assert seen == [(start["operation_id"], start["lease_epoch"])], "the hook ran inside the call, which _meta names"
    assert isinstance(start["lease_epoch"], int), "a Run of an app is leased: its epoch is the fencing token"
    result = status_of(world.call("trusted_lookup", "c1"))[1]
    keys = json.loads(result)["meta_keys"]
    assert {MCP_META_KEY, "example.com/tenant"} <= set(keys), keys
    assert toolset in agent.toolsets and toolset.process_tool_call is hook, "the user's toolset is not changed"
    world.check("trusted_lookup")


def test_the_users_mcp_server_and_agent_are_left_as_they_were(world: World) -> None:
    pytest.importorskip("agents", reason="the openai-agents extra is not installed (pip install -e '.[openai-agents]')")

    async def scenario() -> tuple[Any, Any, dict[str, Any], dict[str, Any]]:
        server = mcp_app.openai_agents_server(mcp_app.inventory(world.url, str(world.record), "thread-trusted_lookup"))
        async with server:
            agent, durable = mcp_app.openai_agents_agent(world.url, str(world.record), "trusted_lookup", server)
            before = {"agent": dict(vars(agent)), "server": dict(vars(server))}
            servers = agent.mcp_servers
            result = await durable.run(agent, "go", thread_id="thread-trusted_lookup")
            assert agent.mcp_servers is servers and servers == [server]
            return result, agent, before, {"agent": dict(vars(agent)), "server": dict(vars(server))}

    result, agent, before, after = asyncio.run(scenario())
    assert result.final_output == "done"
    assert before["agent"] == after["agent"], "no attribute of the user's agent changed"
    assert before["server"].keys() == after["server"].keys()
    assert "call_tool" not in after["server"] and "tool_meta_resolver" in after["server"]
    assert after["server"]["tool_meta_resolver"] is None, "the user's server is not given runkernel's resolver"
    assert "get_mcp_tools" not in vars(agent), "only runkernel's copy lists durable MCP tools"
    world.check("trusted_lookup")


def test_an_mcp_servers_require_approval_is_the_gate(world: World) -> None:
    pytest.importorskip("agents", reason="the openai-agents extra is not installed (pip install -e '.[openai-agents]')")

    async def scenario() -> tuple[list[str], Any]:
        server = mcp_app.openai_agents_server(
            mcp_app.inventory(world.url, str(world.record), "thread-trusted_send"), require_approval="always"
        )
        async with server:
            agent, durable = mcp_app.openai_agents_agent(world.url, str(world.record), "trusted_send", server)
            first = await durable.run(agent, "go", thread_id="thread-trusted_send")
            waiting = [str(getattr(i.raw_item, "call_id", None)) for i in first.interruptions]
            assert world.starts() == [], "nothing is sent before the approval"
            state = first.to_state()
            state.approve(first.interruptions[0])
            return waiting, await durable.run(agent, state, thread_id="thread-trusted_send")

    waiting, done = asyncio.run(scenario())
    print("waited for:", waiting, "then:", done.final_output)
    assert waiting == ["c1"] and done.final_output == "done"
    assert [s["attempt"] for s in world.starts("send")] == [1]
    statuses = [type(call.status).__name__ for commit in world.commits("trusted_send") if commit.batch is not None
                for call in commit.batch.calls]
    assert "CallAwaiting" in statuses, "the approval was a committed wait"
    world.check("trusted_send")


@frameworks
def test_a_served_app_killed_inside_an_mcp_tool_finishes_its_run_under_the_next_epoch(world: World, framework: str) -> None:
    # the Agents SDK's server is connected on the app's loop, where serve() is called: the
    # worker's drives send their MCP requests there (a request from the worker's own loop
    # would wait for ever)
    world.killed(framework, "served", "tool:lookup:1", "serve")  # serve() at launch, the Run driven in process
    report = world.served_again(framework, "served")
    starts = [(s["tool"], s["attempt"], s["lease_epoch"]) for s in world.starts()]
    print(f"{framework} served again: {report}; the server saw (tool, attempt, lease epoch): {starts}"
          f" (lease {mcp_app.LEASE} s, poll {mcp_app.POLL} s)")
    assert report == {"drives": 1, "takeovers": 1, "failures": 0}
    # the fencing token in _meta: the dead process's epoch, then the worker's; the second
    # step's tool was first listed to the worker's driver, which learned its policy
    assert starts == [("lookup", 1, 1), ("lookup", 2, 2), ("send", 1, 2)]
    assert world.call("served", "c2").policy == ToolPolicy.indeterminate()
    world.check("served")


#: How long a test waits for what would otherwise hang (a hang guard, never a measure).
HANG_GUARD = 60.0


def test_a_served_agent_on_one_loop_per_worker_sends_its_mcp_requests_to_the_servers_loop(world: World) -> None:
    # concurrency=1: the worker's drives run on an event loop of the worker's own thread
    # (not a shared loop's thread, as in the subprocess test above)
    pytest.importorskip("agents", reason="the openai-agents extra is not installed (pip install -e '.[openai-agents]')")
    world.killed("openai_agents", "served", "tool:lookup:1", "serve")
    reports: list[dict[str, Any]] = []
    serving = mcp_app.serve_openai_agents(world.url, str(world.record), "served", "restart", concurrency=1)
    app = threading.Thread(target=lambda: reports.append(asyncio.run(serving)), daemon=True)
    app.start()
    app.join(HANG_GUARD)
    assert reports, "the app did not finish: it hangs"
    (report,) = reports
    starts = [(s["tool"], s["attempt"], s["lease_epoch"]) for s in world.starts()]
    print(f"served again in process, one loop per worker: {report}; the server saw {starts}")
    assert report == {"drives": 1, "takeovers": 1, "failures": 0}
    assert starts == [("lookup", 1, 1), ("lookup", 2, 2), ("send", 1, 2)]
    world.check("served")


def test_an_agent_with_mcp_servers_is_refused_a_worker_where_no_event_loop_runs(world: World) -> None:
    pytest.importorskip("agents", reason="the openai-agents extra is not installed (pip install -e '.[openai-agents]')")
    from runkernel.integrations.openai_agents import IntegrationError

    server = mcp_app.openai_agents_server(mcp_app.inventory(world.url, str(world.record), "thread-served"))
    agent, durable = mcp_app.openai_agents_agent(world.url, str(world.record), "served", server, app=mcp_app.APP)
    threads = threading.active_count()
    # runkernel worker --app MODULE:ATTR builds its app like this: at import, no loop running
    for make in [partial(durable.worker_app, agent), partial(durable.serve, agent)]:
        with pytest.raises(IntegrationError, match=r"async with server:.*runkernel worker") as refused:
            make()
        print("refused:", refused.value)
    assert threading.active_count() == threads, "serve() started no worker"


def test_a_worker_whose_mcp_servers_loop_is_gone_fails_its_drive_and_sends_nothing(world: World) -> None:
    pytest.importorskip("agents", reason="the openai-agents extra is not installed (pip install -e '.[openai-agents]')")
    from runkernel import Worker, open_store
    from runkernel.integrations.openai_agents import IntegrationError

    world.killed("openai_agents", "served", "tool:lookup:1", "serve")  # a Run of the app for a worker to take over

    async def made_on_a_loop_that_ends() -> Any:
        async with mcp_app.openai_agents_server(mcp_app.inventory(world.url, str(world.record), "thread-served")) as server:
            agent, durable = mcp_app.openai_agents_agent(world.url, str(world.record), "served", server, app=mcp_app.APP)
            return durable.worker_app(agent)

    app = asyncio.run(made_on_a_loop_that_ends())  # its loop is closed now
    failures: list[BaseException] = []
    failed = threading.Event()

    def on_failure(run_id: str, error: BaseException) -> None:
        failures.append(error)
        failed.set()

    worker = Worker(open_store(world.url), app, lease_duration=mcp_app.LEASE, poll_interval=mcp_app.POLL, on_failure=on_failure)
    worker.start()
    try:
        assert failed.wait(HANG_GUARD), "the drive neither failed nor finished: it hangs"
    finally:
        report = worker.stop(timeout=HANG_GUARD)
    print(f"the drive failed with: {failures[0]!r}; report: drives {report.drives}, failures {report.failures}")
    assert isinstance(failures[0], IntegrationError) and "is not running" in str(failures[0])
    assert [(s["tool"], s["attempt"]) for s in world.starts()] == [("lookup", 1)], "no request was sent"
    world.check("served", None)  # the Run is left as committed: not Ended


def test_a_served_workers_stop_refuses_to_block_its_mcp_servers_loop(world: World) -> None:
    pytest.importorskip("agents", reason="the openai-agents extra is not installed (pip install -e '.[openai-agents]')")
    from runkernel.integrations.openai_agents import IntegrationError

    async def scenario() -> tuple[str, int]:
        async with mcp_app.openai_agents_server(mcp_app.inventory(world.url, str(world.record), "thread-served")) as server:
            agent, durable = mcp_app.openai_agents_agent(world.url, str(world.record), "served", server, app=mcp_app.APP)
            worker = durable.serve(agent, poll_interval=mcp_app.POLL)
            with pytest.raises(IntegrationError, match=r"asyncio\.to_thread\(worker\.stop\)") as refused:
                worker.stop()  # a drive waiting for an MCP request on this loop would wait for ever
            report = await asyncio.wait_for(asyncio.to_thread(worker.stop, HANG_GUARD), HANG_GUARD)
            return str(refused.value), report.failures

    refused, failures = asyncio.run(scenario())
    print("refused:", refused)
    assert failures == 0
