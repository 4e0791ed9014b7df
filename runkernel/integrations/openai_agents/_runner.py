"""``DurableRunner``: runs an OpenAI Agents SDK agent as a durable Run, resumes it from
the store, and serves it to ``runkernel worker``."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import AsyncIterator, Collection, Mapping
from typing import Any

import attrs
from agents import Agent, FunctionTool, InputGuardrailTripwireTriggered, OutputGuardrailTripwireTriggered, RunConfig, RunState
from agents import Runner
from agents.result import RunResult, RunResultStreaming
from openai import APIConnectionError

from runkernel import AsyncDriver, Done, EndCauseKind, StoreError, ToolPolicy, open_store
from runkernel.adapters.drive.model_errors import transient_model_error
from runkernel.adapters.stores.contract import Store
from runkernel.errors import IllegalCommit, UnknownRun
from runkernel.adapters.worker.account import WorkerReport
from runkernel.adapters.worker.loop import Worker
from runkernel.integrations._common import IntegrationError, RunEnded, StatusFunction, StillRunning, app_name
from runkernel.integrations._common import app_version, checked_policies, host_leases, serve_app, start_run
from runkernel.integrations.mcp import checked_trust
from runkernel.integrations.openai_agents._binding import _BINDING, Binding, GuardrailTripped
from runkernel.integrations.openai_agents._copies import DurableCopies, agents_of, handoff_names
from runkernel.integrations.openai_agents._mapping import input_items, last_response, replayed_response
from runkernel.integrations.openai_agents._mcp import HOME_LOOP, home_loop
from runkernel.kernel import Ended, IndeterminateChoice, Message, Role, TypedError


def openai_transient(error: BaseException) -> bool:
    """The default transient-error predicate: runkernel's (timeouts, dropped connections,
    HTTP 408/409/429/5xx on ``status_code``) and the OpenAI client's connection errors
    and timeouts (``APIConnectionError``, ``APITimeoutError``)."""
    return isinstance(error, APIConnectionError) or transient_model_error(error)


class DurableRunner:
    """Runs OpenAI Agents SDK agents as durable Runs of ``store`` (a URL or an open ``Store``).

    ``tools`` gives every function tool its ``ToolPolicy`` or ``"replay"``,
    ``"reconnect"``, ``"indeterminate"`` (handoffs get ``replay`` unless named here);
    ``status`` gives each reconnect tool its ``status(operation_id, lease_epoch) -> StatusReply``.
    ``transient`` says which model errors are retried (default ``openai_transient``),
    ``model_attempts`` how often. ``trusted_mcp`` names the MCP servers (their ``name``)
    whose tool annotations are trusted: an MCP tool that ``tools`` does not name gets
    ``replay`` if its server is trusted and says ``readOnlyHint`` or ``idempotentHint``,
    else ``indeterminate``; each call's ``_meta`` carries its operation id and lease epoch
    (docs/mcp.md). The user's agents, models and tools are never changed:
    the first call on an agent makes a durable copy of it and of every agent it hands off
    to (their models wrapped, their function tools and handoffs copied around their own),
    and its Runs run the copy. Tracing is off inside durable Runs, per Run
    (``RunConfig(tracing_disabled=True)``, never the SDK's global switch), unless
    ``tracing=True``: then the run's own ``run_config`` decides.

    ``app`` is the app name, given here once: recorded on the Runs ``run`` starts, so
    that ``serve(agent)`` (the embedded worker, at launch) or ``runkernel worker`` with
    ``worker_app(agent)`` continues them after a crash. A Run of ``app`` driven here
    holds its lease (``lease_duration`` seconds, renewed as it goes): no worker drives
    it too, until this process is gone and the lease ran out. ``version`` is the version
    of this code its Runs record beside ``app`` (default: the digest of the tools'
    policies); an agent with MCP servers must declare it (``VersionRequired``)."""

    def __init__(
        self,
        store: str | Store,
        tools: Mapping[str, ToolPolicy | str],
        *,
        status: Mapping[str, StatusFunction] | None = None,
        max_steps: int = 50,
        on_indeterminate: IndeterminateChoice = IndeterminateChoice.PUBLISH,
        transient: Any = openai_transient,
        model_attempts: int = 5,
        poll_interval: float = 0.2,
        status_asks: int | None = None,
        app: str | None = None,
        lease_duration: float = 30.0,
        tracing: bool = False,
        trusted_mcp: Collection[str] = frozenset(),
        version: str | None = None,
    ) -> None:
        self.status = dict(status or {})
        self.store, self.policies = store, checked_policies(tools, self.status)
        self.max_steps, self.on_indeterminate = max_steps, on_indeterminate
        self.transient, self.model_attempts = transient, model_attempts
        self.poll_interval, self.status_asks = poll_interval, status_asks
        self.app, self.lease_duration, self.tracing = app, lease_duration, tracing
        self.trusted_mcp = checked_trust(trusted_mcp)
        self.version = version
        self._opened: list[Store] = []
        self._copies = DurableCopies()

    def open(self) -> Store:
        """The store, opened once and shared by this runner's runs."""
        if not self._opened:
            self._opened.append(open_store(self.store) if isinstance(self.store, str) else self.store)
        return self._opened[0]

    def tools(self, agent: Agent[Any]) -> dict[str, ToolPolicy]:
        """Every tool of the agent graph with its policy: the given ones and the handoffs."""
        wrapped = self.wrap(agent)
        handoffs = {name: ToolPolicy.replay() for name in handoff_names(wrapped) if name not in self.policies}
        return {**handoffs, **self.policies}

    def wrap(self, agent: Agent[Any]) -> Agent[Any]:
        """The durable copy of ``agent`` (and of the agents it hands off to) that its Runs
        run, made once; ``agent`` itself is left as it is."""
        return self._copies.of(agent, self.policies, self.trusted_mcp)

    def configured(self, run: dict[str, Any]) -> dict[str, Any]:
        """``Runner.run``'s options for a durable Run: tracing off in its ``run_config``
        unless ``tracing=True`` (the SDK's global switch is never touched)."""
        if self.tracing:
            return run
        config = run.get("run_config") or RunConfig()
        return {**run, "run_config": dataclasses.replace(config, tracing_disabled=True)}

    # --- runs ---------------------------------------------------------------------------

    async def run(
        self, agent: Agent[Any], input: str | list[Any] | RunState[Any], *, thread_id: str, run_id: str | None = None, **run: Any
    ) -> RunResult:
        """Start a Run in Thread ``thread_id`` with ``input`` (the user's prompt), or, with
        the SDK's ``RunState`` (``result.to_state()``, then ``approve``/``reject``), continue
        the Thread's Run with those answers. ``run`` goes to ``Runner.run``."""
        binding, first, durable = await self._bind(agent, input, thread_id, run_id, run.get("context"))
        token = _BINDING.set(binding)
        try:
            result: RunResult = await self._finish(binding, Runner.run(durable, first, **self.configured(run)))
        finally:
            _BINDING.reset(token)
        return result

    def run_streamed(
        self, agent: Agent[Any], input: str | list[Any], *, thread_id: str, run_id: str | None = None, **run: Any
    ) -> DurableStream:
        """``Runner.run_streamed`` as a durable Run: iterate ``stream_events()``; only
        complete responses are committed (a crash mid-stream asks the model again)."""
        return DurableStream(self, agent, input, thread_id, run_id, run)

    async def resume(self, agent: Agent[Any], run_id: str, *, driver: AsyncDriver | None = None, **run: Any) -> RunResult:
        """Continue Run ``run_id`` from the store alone (after a crash, in any process, or
        once ``runkernel resume`` answered it): the SDK is given the Thread up to the last
        committed response and that response again, so it goes on from the calls the driver
        hands out. ``driver``: one that already holds the Run's lease (a worker's)."""
        agent = self.wrap(agent)
        store = driver.store if driver is not None else self.open()
        thread_id = store.thread_of(run_id)
        if thread_id is None:
            raise IntegrationError(f"run {run_id!r} is not in the store")
        messages = list(store.messages(thread_id))
        last = last_response(messages)
        driver = driver or self._driver(agent)
        replay = replayed_response(messages[last].metadata) if last is not None else None
        binding = Binding(driver, self._functions(agent), handoff_names(agent), self.status, pick_up=run_id, replay=replay,
                          poll_interval=self.poll_interval, status_asks=self.status_asks, context=run.get("context"))
        start = agent
        if last is not None:
            start = self._agent_named(agent, messages[last].metadata)
        token = _BINDING.set(binding)
        items = input_items(messages[:last] if last is not None else messages)
        try:
            result: RunResult = await self._finish(binding, Runner.run(start, items, **self.configured(run)))
            return result
        finally:
            _BINDING.reset(token)

    def worker_app(self, agent: Agent[Any], *, name: str | None = None) -> DurableAgentApp:
        """``agent`` as the app of ``runkernel worker --app MODULE:ATTR`` for Runs of the
        runner's ``app`` (``name`` may repeat it; another name raises ``IntegrationError``
        naming both): each Run with work is resumed under the worker's lease; a tool body
        finds the lease epoch in ``current_invocation()``. An agent with MCP servers is
        made into an app on the event loop its servers were connected on (in a coroutine,
        inside ``async with server:``): the worker's drives send their MCP requests to that
        loop; without a running loop this raises ``IntegrationError``."""
        home = home_loop(agents_of(agent), "DurableRunner.worker_app()")
        return DurableAgentApp(app_name(self.app, name, "DurableRunner"), self, agent, self.tools(agent), self.max_steps,
                               self.on_indeterminate, self.transient, self.model_attempts, home, self.version,
                               any(each.mcp_servers for each in agents_of(agent)))

    def serve(self, agent: Agent[Any], **worker: Any) -> Worker:
        """Recovery at launch: start an embedded worker of ``agent`` for the Runs of ``app``
        (a background thread, its own store connection) and return it; call its ``stop()``
        at shutdown. It continues the Runs a crash left behind once their leases ran out,
        and those answered with ``runkernel resume``. ``worker``: ``Worker``'s options.
        An agent with MCP servers: call ``serve`` on the loop its servers are connected on
        (``worker_app`` says why), and stop the worker off that loop, ``await
        asyncio.to_thread(worker.stop)``: a ``stop()`` that would block the loop raises
        ``IntegrationError``, since a drive may wait for an MCP request on it."""
        return serve_app(self.store, self.worker_app(agent), self.lease_duration, worker, kind=_HomeLoopWorker)

    # --- plumbing -----------------------------------------------------------------------

    def _driver(self, agent: Agent[Any]) -> AsyncDriver:
        return AsyncDriver(self.open(), self.tools(agent), max_steps=self.max_steps, on_indeterminate=self.on_indeterminate,
                           transient=self.transient, model_attempts=self.model_attempts, app=self.app,
                           leases=host_leases(self.open(), self.app, self.lease_duration),
                           app_version=app_version(self.app, self.version, any(each.mcp_servers for each in agents_of(agent)),
                                                   "DurableRunner"))

    def _functions(self, agent: Agent[Any]) -> dict[str, FunctionTool]:
        return {t.name: t for each in agents_of(agent) for t in each.tools if isinstance(t, FunctionTool)}

    def _agent_named(self, agent: Agent[Any], metadata: Any) -> Agent[Any]:
        name = metadata.get("agent") if isinstance(metadata, dict) else None
        return next((each for each in agents_of(agent) if each.name == name), agent)

    async def _bind(
        self, agent: Agent[Any], input: Any, thread_id: str, run_id: str | None, context: Any
    ) -> tuple[Binding, Any, Agent[Any]]:
        agent = self.wrap(agent)
        driver, store = self._driver(agent), self.open()
        head = store.thread_head(thread_id)
        active = head.active_run_id if head is not None else None
        binding = Binding(driver, self._functions(agent), handoff_names(agent), self.status,
                          poll_interval=self.poll_interval, status_asks=self.status_asks, context=context)
        if isinstance(input, RunState):
            if active is None:
                raise IntegrationError(f"thread {thread_id!r} has no Run that is not Ended to continue")
            binding._pick_up = active
            return binding, input, agent
        prompt = [Message(Role.USER, input)] if isinstance(input, str) else [Message(Role.USER, item) for item in input]
        await binding.settle(await start_run(driver, store, prompt, thread_id, run_id))  # ConversationBusy if held
        return binding, input, agent

    async def _finish(self, binding: Binding, running: Any) -> Any:
        try:
            result = await running
        except BaseException as error:
            own = _kept(error)
            if own is not None and own is not error:
                raise own  # the SDK wrapped it ("Error running tool ..."); its own __cause__ kept for the worker
            await self._failed(binding, error)
            raise
        await self._completed(binding, result)
        return result

    async def _failed(self, binding: Binding, error: BaseException) -> None:
        """A guardrail's tripwire or any other error of the agent ends the Run ``failed``;
        store trouble, a lost lease, an ended Run and cancellation leave it as committed."""
        if _kept(error) is not None or isinstance(error, (asyncio.CancelledError, KeyboardInterrupt, SystemExit)):
            return
        if isinstance(binding.action, Done) or binding.action is None:
            return
        if isinstance(error, (InputGuardrailTripwireTriggered, OutputGuardrailTripwireTriggered)):
            kind = "input" if isinstance(error, InputGuardrailTripwireTriggered) else "output"
            tripped = GuardrailTripped(error.guardrail_result.guardrail.get_name(), kind)
            binding.action = await binding.driver.end(EndCauseKind.FAILED, TypedError(type(tripped).__name__, str(tripped)))
            raise tripped from error
        binding.action = await binding.driver.end(EndCauseKind.FAILED, TypedError(type(error).__name__, str(error)))

    async def _completed(self, binding: Binding, result: Any) -> None:
        """The final output ends the Run ``completed``; interruptions leave it Awaiting."""
        if isinstance(binding.action, Done) or getattr(result, "interruptions", None):
            return
        binding.action = await binding.driver.end(EndCauseKind.COMPLETED)


#: Errors that leave the Run as committed (store trouble, a lost lease, an ended Run, a
#: reconnect tool still running, the host's misuse): never a reason to end it ``failed``.
_LEAVE_AS_COMMITTED = (StoreError, IllegalCommit, UnknownRun, RunEnded, StillRunning, IntegrationError)


def _kept(error: BaseException) -> BaseException | None:
    """The error of ``_LEAVE_AS_COMMITTED`` that ``error`` is or wraps (the SDK wraps what
    a tool raises in a ``UserError``), if any."""
    seen: BaseException | None = error
    for _ in range(8):  # the SDK wraps once or twice; a bound keeps a cycle harmless
        if seen is None:
            return None
        if isinstance(seen, _LEAVE_AS_COMMITTED):
            return seen
        seen = seen.__cause__ or seen.__context__
    return None


class DurableStream:
    """A streamed durable run (``DurableRunner.run_streamed``): ``stream_events()`` gives
    the SDK's events; ``result`` is the SDK's ``RunResultStreaming`` once started."""

    def __init__(self, runner: DurableRunner, agent: Agent[Any], input: Any, thread_id: str, run_id: str | None,
                 run: dict[str, Any]) -> None:
        self._runner, self._agent, self._input, self._thread_id, self._run_id, self._run = runner, agent, input, thread_id, run_id, run
        self.result: RunResultStreaming | None = None

    async def stream_events(self) -> AsyncIterator[Any]:
        """The SDK's stream events; the Run's end is committed once the stream is done."""
        runner = self._runner
        binding, first, durable = await runner._bind(self._agent, self._input, self._thread_id, self._run_id, self._run.get("context"))
        token = _BINDING.set(binding)
        try:
            self.result = Runner.run_streamed(durable, first, **runner.configured(self._run))  # its task copies the binding
        finally:
            _BINDING.reset(token)

        async def drained() -> RunResultStreaming:
            assert self.result is not None
            async for event in self.result.stream_events():
                events.put_nowait(event)
            return self.result

        events: asyncio.Queue[Any] = asyncio.Queue()
        draining = asyncio.ensure_future(self._runner._finish(binding, drained()))
        while not (draining.done() and events.empty()):
            getter = asyncio.ensure_future(events.get())
            await asyncio.wait({getter, draining}, return_when=asyncio.FIRST_COMPLETED)
            if getter.done():
                yield getter.result()
            else:
                getter.cancel()
        draining.result()  # the run's error, if it failed


@attrs.frozen
class DurableAgentApp:
    """A durable agent as the app of ``runkernel worker`` (an ``AsyncPushApp``), made by
    ``DurableRunner.worker_app``: each Run the worker hands it is resumed with the
    worker's driver until it waits or ends."""

    name: str
    runner: DurableRunner = attrs.field(repr=False)
    agent: Agent[Any] = attrs.field(repr=False)
    tools: Mapping[str, ToolPolicy | str] = attrs.field(repr=False)
    max_steps: int = attrs.field(repr=False)
    on_indeterminate: IndeterminateChoice = attrs.field(repr=False)
    transient: Any = attrs.field(repr=False)
    model_attempts: int = attrs.field(repr=False)
    #: the event loop the agent's MCP servers were connected on (None: the agent has none)
    mcp_loop: asyncio.AbstractEventLoop | None = attrs.field(default=None, repr=False)
    #: the version its Runs record (``apps.version_of``; None: the digest of ``tools``)
    version: str | None = None
    #: whether the agents have MCP servers, whose tools are listed while they run (then
    #: ``version`` must be declared)
    dynamic_tools: bool = False

    async def drive(self, driver: AsyncDriver, run_id: str) -> None:
        """Resume ``run_id`` with ``driver`` (it holds the worker's lease) until it is
        quiet; its MCP requests go to ``mcp_loop``."""
        token = HOME_LOOP.set(self.mcp_loop)
        try:
            await self.runner.resume(self.agent, run_id, driver=driver)
        except StillRunning:
            return  # quiet for now: the worker asks again at a later poll
        except Exception:
            snapshot = driver.snapshot
            if snapshot is None or not isinstance(snapshot.state, Ended):
                raise  # a store failure or a lost lease: the worker counts it
        finally:
            HOME_LOOP.reset(token)


class _HomeLoopWorker(Worker):
    """``serve()``'s embedded worker: its ``stop()`` refuses to block the event loop of
    the app's MCP servers, where a drive may wait for a request (it would wait for ever)."""

    def stop(self, timeout: float | None = None) -> WorkerReport:
        home = getattr(self.app, "mcp_loop", None)
        try:
            here: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:
            here = None
        if home is not None and here is home:
            raise IntegrationError(
                "worker.stop() on the event loop of the agent's MCP servers would block it while a drive may wait"
                " for an MCP request on it: await asyncio.to_thread(worker.stop) instead"
            )
        return super().stop(timeout)
