"""``RunkernelDurability``: the capability that maps an agent run onto the push-mode driver.

Why this module is long: it is one class, whose methods are the hooks Pydantic AI calls
on a capability (the run, each model request, each tool call, deferred calls, the tool
definitions); each maps one framework event onto the driver, and they share the Run's
standing action.
"""

from __future__ import annotations

import asyncio
import copy
import dataclasses
from collections.abc import Awaitable, Callable, Collection, Mapping
from dataclasses import dataclass, field
from typing import Any

from pydantic_ai import Agent, DeferredToolRequests, DeferredToolResults, ToolApproved
from pydantic_ai.agent import EventStreamHandler
from pydantic_ai.capabilities import AbstractCapability
from pydantic_ai.exceptions import (
    ApprovalRequired, CallDeferred, ModelRetry, RetryModelRequest, ToolFailed, ToolFailedError, ToolRetryError,
)
from pydantic_ai.messages import ModelMessage, ModelMessagesTypeAdapter, ModelResponse, ToolCallPart
from pydantic_ai.tool_manager import ToolManager
from pydantic_ai.tools import RunContext, ToolDefinition
from pydantic_ai.toolsets import AbstractToolset
from pydantic_core import to_jsonable_python

from runkernel import (
    Approve, AsyncDriver, CallRequest, CheckStatus, Done, EndCauseKind, Infer, RunCall, StoreError,
    ToolPolicy, WaitFor, WaitKind,
)
from runkernel.adapters.drive.actions import Action
from runkernel.adapters.drive.invocation import invocation_scope
from runkernel.adapters.drive.model_errors import DEFAULT_MODEL_ATTEMPTS, TransientPredicate
from runkernel.adapters.stores.contract import Store
from runkernel.errors import IllegalCommit, UnknownRun
from runkernel.adapters.worker.loop import Worker
from runkernel.integrations._common import IntegrationError, RunEnded, StatusFunction, StillRunning, app_name
from runkernel.integrations._common import CallTurns, handed_call
from runkernel.integrations._common import app_version, checked_policies, held_by, host_leases, serve_app, start_run
from runkernel.integrations.pydantic_ai._context import (
    _PICK_UP, DeferredAfterStart, DepsMismatch, PickUp, _warn_if_system_prompt, cannot_stream,
)
from runkernel.integrations.pydantic_ai._errors import ended_message, pydantic_ai_transient
from runkernel.integrations.pydantic_ai._events import StreamListener
from runkernel.integrations.mcp import checked_trust
from runkernel.integrations.pydantic_ai._gate import DeclaredGate
from runkernel.integrations.pydantic_ai._mcp import durable_mcp, has_mcp, mcp_policies
from runkernel.integrations.pydantic_ai._mapping import (
    _answer_of, _deferred_answer, _deps_type, _error_value, _payloads, _recorded_deps_type, _shown, to_model_messages,
)
from runkernel.integrations.pydantic_ai._stores import ThreadStores
from runkernel.integrations.pydantic_ai._worker import DepsFactory, DurableAgentApp
from runkernel.kernel import (
    CallCompleted, CallIndeterminate, IndeterminateChoice, JsonValue, Message, Role, TypedError,
)

@dataclass
class RunkernelDurability(StreamListener, DeclaredGate, AbstractCapability[Any]):
    """Attach to an ``Agent`` (``capabilities=[durable]``) to make each of its runs a
    durable runkernel Run: every model response committed as an inference step, every
    tool call committed ``Executing{n}`` before its body runs, approvals and external
    tools committed waits. A module-level instance is safe to use from any thread.

    - ``store``: a URL (``sqlite:///agent.db``, ``postgresql://...``), opened once per
      thread that runs the agent, or an open ``Store`` (then yours to share safely).
    - ``tools``: every tool the model may call, with its recovery policy: a
      ``ToolPolicy`` or ``"replay"``, ``"reconnect"``, ``"indeterminate"`` (declared
      external tools included). ``status``: each reconnect tool's
      ``status(operation_id, lease_epoch) -> StatusReply`` (the lease epoch: the fencing
      token, for the downstream). ``questions``: the external tools a person
      answers (an input wait).
    - ``trusted_mcp``: the ``id`` of each ``MCPToolset`` whose tool annotations are trusted
      (an MCP tool ``tools`` does not name gets its policy from them: docs/mcp.md).
    - ``transient(error)``: which model errors are retried (default
      ``pydantic_ai_transient``: HTTP 408/409/429/5xx, connection errors, timeouts);
      ``model_attempts`` attempts of one model call, waiting ``sleep(seconds)`` between
      them (capped exponential backoff: 1, 2, 4, 8, then 10 s). The Run stays Running
      meanwhile; a non-transient error, or the last attempt's, ends it ``failed`` and is
      raised to the caller.
    - ``event_stream_handler(ctx, events)``: called once per event of the run, with an
      async iterable of that one event (as Pydantic AI's durable engines call theirs).
    - ``app``: the app name, given here once: recorded on the Runs ``agent.run`` starts,
      so that ``serve(agent)`` (at launch) or ``runkernel worker`` with
      ``worker_app(agent)`` continues them (after a crash, or ``runkernel resume``). A
      Run of ``app`` driven here holds its lease (``lease_duration`` s, renewed): no
      worker drives it too, until the process is gone and the lease ran out. ``version``:
      the version of this code its Runs record beside ``app`` (default: the digest of
      ``tools``); an agent with MCP toolsets must declare it (``VersionRequired``).
    - ``max_steps``: steps before the Run ends ``step_limit``. ``on_indeterminate``: a
      call nobody knows the outcome of is shown to the model with its operation id
      (``PUBLISH``) or ends the Run ``outcome_unknown`` (``END_RUN``). ``status_asks``
      and ``poll_interval``: how often, and how far apart, a reconnect tool is asked in
      one go while it says running. ``checkpoint_every``: save a streamed response's
      text every N deltas (a best-effort checkpoint, never truth).

    The Thread is the run's ``conversation_id``, a new Run's id its ``run_id``; the
    activation records the type of the run's ``deps``, and ``resume`` refuses deps of
    another type (``DepsMismatch``). Continue a Run with ``resume``; host it under
    ``runkernel worker`` with ``worker_app``. ``system_prompt`` parts are not committed
    (``SystemPromptNotKept`` is warned): use ``instructions=``.
    """

    store: str | Store
    tools: Mapping[str, ToolPolicy | str] = field(default_factory=dict)
    status: Mapping[str, StatusFunction] = field(default_factory=dict)
    questions: frozenset[str] = frozenset()
    max_steps: int = 50
    on_indeterminate: IndeterminateChoice = IndeterminateChoice.PUBLISH
    poll_interval: float = 0.2
    #: how often a reconnect tool is asked in one go while it says running (None: until
    #: it says something else; give a number under a worker, which another Run may need)
    status_asks: int | None = None
    #: save a best-effort stream checkpoint every this many streamed text deltas (0: never)
    checkpoint_every: int = 0
    #: which exceptions of a model call are worth another attempt
    transient: TransientPredicate = pydantic_ai_transient
    #: attempts of one model call before the Run ends failed (in one process's hands)
    model_attempts: int = DEFAULT_MODEL_ATTEMPTS
    #: waits out a transient model error's backoff (a test gives one that only records)
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep
    #: Pydantic AI's event stream handler, called per event (see the class docstring)
    event_stream_handler: EventStreamHandler[Any] | None = None
    #: the app the Runs ``agent.run`` starts record (a worker of that app continues them)
    app: str | None = None
    #: how long the lease of a Run of ``app`` lasts unless renewed (in process and in ``serve``)
    lease_duration: float = 30.0
    trusted_mcp: Collection[str] = frozenset()
    #: the version of the agent's code its Runs record beside ``app`` (None: the digest
    #: of ``tools``); an agent with MCP toolsets must declare it (docs/how-to/deploy-new-code.md)
    version: str | None = None

    def __post_init__(self) -> None:
        self.tools = checked_policies(self.tools, self.status)  # "replay" and the like become their ToolPolicy
        self.trusted_mcp = checked_trust(self.trusted_mcp)
        self._stores = ThreadStores(self.store)
        self._reset()

    def _reset(self) -> None:
        self._driver: AsyncDriver | None = None
        self._action: Action | None = None
        self._tool_manager: ToolManager[Any] | None = None
        self._ctx: RunContext[Any] | None = None
        self._pick_up: PickUp | None = None
        self._streamed: list[str] = []
        self._turns = CallTurns()

    # --- public -----------------------------------------------------------------------

    def open(self) -> Store:
        """The store, as this thread uses it (a URL is opened once per thread)."""
        return self._stores.get()

    def close(self) -> None:
        """Close the stores this capability opened, in every thread (an open ``Store``
        given to it stays open)."""
        self._stores.close()

    def active_run(self, conversation_id: str) -> str | None:
        """The conversation's Run that is not Ended (at most one), if any."""
        head = self.open().thread_head(conversation_id)
        return head.active_run_id if head is not None else None

    def history(self, thread_id: str) -> list[ModelMessage]:
        """The Thread's committed messages as Pydantic AI's message history (user prompts,
        responses, tool results; ``system_prompt`` parts are not committed)."""
        return to_model_messages(self.open().messages(thread_id))

    async def resume(
        self,
        agent: Agent[Any, Any],
        run_id: str,
        *,
        deferred_tool_results: DeferredToolResults | None = None,
        driver: AsyncDriver | None = None,
        **run: Any,
    ) -> Any:
        """Continue Run ``run_id`` from the store alone (after a crash, in any process, or
        with the answers to its ``DeferredToolRequests``): the one documented call.
        Answers are applied ticket by ticket in call order; commands queued with
        ``runkernel resume`` are applied first. ``run`` goes to ``agent.run`` (``deps=``
        must be of the type the Run started with, else ``DepsMismatch``). ``driver``:
        one that already holds the Run's lease (what ``runkernel worker`` hands; see
        ``worker_app``). Returns ``agent.run``'s result."""
        store = driver.store if driver is not None else self.open()
        thread_id = store.thread_of(run_id)
        if thread_id is None:
            raise IntegrationError(f"run {run_id!r} is not in the store")
        messages = store.messages(thread_id)
        pick_up = PickUp(run_id, _payloads(deferred_tool_results), driver, _recorded_deps_type(messages, run_id))
        token = _PICK_UP.set(pick_up)  # answers refused above, before anything
        try:
            return await agent.run(message_history=to_model_messages(messages), conversation_id=thread_id, **run)
        finally:
            _PICK_UP.reset(token)

    def worker_app(
        self, agent: Agent[Any, Any], *, name: str | None = None, deps: DepsFactory | None = None
    ) -> DurableAgentApp:
        """``agent`` as the app of ``runkernel worker --app MODULE:ATTR``, for Runs of the
        capability's ``app`` (``name`` may repeat it; another name raises
        ``IntegrationError`` naming both): each Run with work (new, orphaned by a dead
        process, or answered with ``runkernel resume``) is resumed under the worker's
        lease, and its tools see the lease epoch (``current_invocation()``).
        ``deps(run_id)`` (sync or async) makes each Run's deps."""
        _warn_if_system_prompt(agent)
        return DurableAgentApp(
            app_name(self.app, name, "RunkernelDurability"), self, agent, self.tools, self.max_steps,
            self.on_indeterminate, self.transient, self.model_attempts, deps, self.version, has_mcp(agent),
        )

    def serve(self, agent: Agent[Any, Any], *, deps: DepsFactory | None = None, **worker: Any) -> Worker:
        """Recovery at launch: start an embedded worker of ``agent`` for the Runs of ``app``
        (a background thread, its own store connection) and return it; call its ``stop()``
        at shutdown. It continues the Runs a crash left behind once their leases ran out,
        and those answered with ``runkernel resume``. ``worker``: ``Worker``'s options."""
        return serve_app(self.store, self.worker_app(agent, deps=deps), self.lease_duration, worker)

    # --- capability hooks -------------------------------------------------------------

    def for_agent(self, agent: Any) -> RunkernelDurability:
        """Bound to ``agent`` at its construction: warns ``SystemPromptNotKept`` if it has
        ``system_prompt`` parts (a resumed run would be sent none of them)."""
        _warn_if_system_prompt(agent)
        return self

    async def for_run(self, ctx: Any) -> RunkernelDurability:
        """A copy for one agent run: the per-run driver is its own, the stores shared."""
        layer = copy.copy(self)  # shares the opened store, not the per-run driver
        layer._reset()
        return layer

    def get_wrapper_toolset(self, toolset: AbstractToolset[Any]) -> AbstractToolset[Any] | None:
        """The run's toolset, each ``MCPToolset`` in it wrapped (``_mcp.DurableMCPToolset``)."""
        return durable_mcp(toolset, self.trusted_mcp)

    async def wrap_run(self, ctx: Any, *, handler: Any) -> Any:
        """Start a Run (``agent.run``) or pick one up (``resume``), run the agent, and end
        the Run with its final answer, or ``failed`` if the agent raised."""
        if self.has_on_event and (why := cannot_stream(ctx.model)) is not None:  # refused before the Run starts
            raise IntegrationError(f"event_stream_handler and checkpoint_every need a model that streams: {why}")
        pick_up = self._pick_up = _PICK_UP.get()
        if pick_up is not None and pick_up.deps_type is not None and pick_up.deps_type != _deps_type(ctx.deps):
            raise DepsMismatch(
                f"run {pick_up.run_id!r} started with deps of type {pick_up.deps_type}; resume it with deps of that"
                f" type, not {_deps_type(ctx.deps)} (its tools would otherwise see other deps than before the crash)"
            )
        if ctx.agent is not None:
            _warn_if_system_prompt(ctx.agent)  # system_prompt functions registered after construction
        if pick_up is not None and pick_up.driver is not None:
            driver = pick_up.driver
            driver.gate = self  # Pydantic AI's declarations are known from here on
        else:
            driver = AsyncDriver(
                self.open(), self.tools, gate=self, max_steps=self.max_steps, on_indeterminate=self.on_indeterminate,
                transient=self.transient, model_attempts=self.model_attempts, app=self.app,
                leases=host_leases(self.open(), self.app, self.lease_duration),
                app_version=app_version(self.app, self.version, has_mcp(ctx.agent), "RunkernelDurability"),
            )
        self._driver = driver
        if pick_up is None:
            self._action = await self._start(ctx, driver)
        else:
            driver.answer_ahead(pick_up.answers)
        try:
            result = await handler()  # calls of concurrent tools run together (prepare_tools)
            await self._ready(None)
        except (StoreError, IllegalCommit, UnknownRun, RunEnded, StillRunning, asyncio.CancelledError):
            raise  # the Run stays as committed: resume() continues it (DriverStopped is a StoreError)
        except Exception as error:
            if not isinstance(self._action, Done):
                await driver.end(EndCauseKind.FAILED, TypedError(type(error).__name__, str(error)))
            raise
        if not isinstance(self._action, Done) and not isinstance(result.output, DeferredToolRequests):
            # the final answer; calls Pydantic AI skipped for it (end_strategy='early') never ran
            self._action = await driver.end(EndCauseKind.COMPLETED)
        return result

    async def prepare_tools(self, ctx: Any, tool_defs: list[ToolDefinition]) -> list[ToolDefinition]:
        """A tool not declared ``concurrent`` runs alone (Pydantic AI's ``sequential``
        barrier, on copies of the definitions): consecutive calls of concurrent tools,
        a runkernel group, run together and the others one at a time, as committed."""
        return [
            d if self._concurrent(d.name) or d.sequential else dataclasses.replace(d, sequential=True)
            for d in tool_defs
        ]

    def _concurrent(self, tool: str) -> bool:
        policy = self.tools.get(tool)
        return isinstance(policy, ToolPolicy) and policy.concurrent

    async def wrap_model_request(self, ctx: Any, *, request_context: Any, handler: Any) -> ModelResponse:
        """Commit the model's complete response as the step (its calls the step's batch).
        A transient model error commits nothing: the same request is sent again after the
        backoff; any other (or the last attempt's) ends the Run ``failed`` and is raised."""
        driver = await self._ready(ctx)
        if isinstance(self._action, Done):
            raise self._ended(self._action)
        if not isinstance(self._action, Infer):
            raise IntegrationError(f"the agent asked its model while runkernel expects {self._action!r}")
        params = request_context.model_request_parameters
        if mcp := mcp_policies(params.function_tools, self.tools):  # listed by now: committed with the batch
            driver.declare_tools(mcp)
        if missing := sorted({t.name for t in params.function_tools} - set(self.tools) - set(mcp)):
            raise IntegrationError(
                f"tools without a recovery policy: {missing}; give each a ToolPolicy in RunkernelDurability(tools=...)"
            )
        response: ModelResponse = await handler(request_context)  # failed attempts: on_model_request_error
        output_tools = {tool.name for tool in params.output_tools}
        calls = [c for c in response.tool_calls if c.tool_name not in output_tools]
        calls.sort(key=lambda c: self._wait_kind(c.tool_name, c.args_as_dict()) is not None)  # stable sort
        outputs = [c.args_as_dict() for c in response.tool_calls if c.tool_name in output_tools]
        content: JsonValue = response.text if response.text is not None else (outputs[0] if outputs else None)
        metadata = ModelMessagesTypeAdapter.dump_python([response], mode="json")[0]
        requests = [CallRequest(c.tool_name, c.args_as_dict(), call_id=c.tool_call_id) for c in calls]
        self._streamed = []  # deltas are never truth: only the complete response is committed
        await self._settle(await driver.inferred(content, requests, metadata=metadata))
        return response

    async def on_model_request_error(self, ctx: Any, *, request_context: Any, error: Exception) -> ModelResponse:
        """A model call raised: nothing is committed. The interpreter decides (``transient``,
        ``model_attempts``): another attempt of the same request after its backoff
        (Pydantic AI's ``RetryModelRequest``), or the Run ends ``failed`` and ``error`` is
        raised."""
        assert self._driver is not None
        self._action = action = await self._driver.inference_failed(error)
        if not isinstance(action, Infer):
            raise error  # the Run is Ended failed with it, committed
        await self.sleep(action.retry_after)
        raise RetryModelRequest()

    async def wrap_tool_execute(self, ctx: Any, *, call: ToolCallPart, tool_def: Any, args: Any, handler: Any) -> Any:
        """Run a call only as runkernel hands it (``Executing{n}`` durable first); a call
        already terminal shows its committed result, never runs again."""
        driver = await self._ready(ctx)
        while True:
            action, committed = self._action, driver.call(call.tool_call_id)
            if committed is not None and isinstance(committed.status, (CallCompleted, CallIndeterminate)):
                return _shown(committed)
            if not ctx.tool_call_approved and self._wait_kind(call.tool_name, call.args_as_dict()) is WaitKind.APPROVAL:
                raise ApprovalRequired()  # a toolset's approval function holds it: Pydantic AI defers it
            if (mine := handed_call(action, call.tool_call_id)) is not None:
                return await self._execute(mine, args, handler)
            if self._turns.running and committed is not None:
                await self._turns.wait()  # another call of the step runs: this one's turn comes
                continue
            if isinstance(action, CheckStatus) and action.call_id == call.tool_call_id:
                status, interval = self.status[action.tool], self.poll_interval
                asked = await driver.ask_status(status, interval=interval, asks=self.status_asks)
                if isinstance(asked, CheckStatus) and asked.call_id == action.call_id:
                    raise StillRunning(f"tool {action.tool!r} is still running operation {action.operation_id!r}")
                await self._settle(asked)
                continue
            if isinstance(action, WaitFor) and action.call.call_id == call.tool_call_id and ctx.tool_call_approved:
                await self._settle(await driver.resume(Approve()))
                continue
            raise IntegrationError(f"tool call {call.tool_call_id!r} out of runkernel's order (it expects {action!r})")

    async def handle_deferred_tool_calls(self, ctx: Any, *, requests: DeferredToolRequests) -> DeferredToolResults | None:
        """Answer the deferred calls runkernel already has answers for (committed, or
        given to ``resume``); the others go back to the caller as ``DeferredToolRequests``."""
        driver = await self._ready(ctx)
        results = DeferredToolResults()
        for part in [*requests.approvals, *requests.calls]:
            call_id, action = part.tool_call_id, self._action
            committed = driver.call(call_id)
            if committed is not None and isinstance(committed.status, (CallCompleted, CallIndeterminate)):
                answer = _deferred_answer(committed) if part in requests.approvals else _shown(committed)
            elif isinstance(action, (RunCall, CheckStatus)) and action.call_id == call_id:
                answer = ToolApproved()  # approved earlier: its attempt is durable, Pydantic AI runs it
            elif (payload := driver.answers_ahead.get(call_id)) is not None:
                answer = _answer_of(payload)  # applied when runkernel's order reaches it
            else:
                continue
            if part in requests.approvals:
                results.approvals[call_id] = answer
            else:
                results.calls[call_id] = answer
        return results if results.approvals or results.calls else None

    async def _start(self, ctx: Any, driver: AsyncDriver) -> Action:
        thread_id, store = ctx.conversation_id, self.open()
        if ctx.prompt is None:
            raise held_by(store, thread_id) or IntegrationError("a new durable Run needs a user prompt")
        recorded = {"runkernel": {"run_id": ctx.run_id, "deps_type": _deps_type(ctx.deps)}}  # resume checks it
        prompt = Message(Role.USER, to_jsonable_python(ctx.prompt), metadata=recorded)
        return await start_run(driver, store, [prompt], thread_id, ctx.run_id)  # ConversationBusy if held

    async def _ready(self, ctx: Any) -> AsyncDriver:
        """Every hook starts here. A Run is picked up in the first hook, where the tool
        manager knows which tools wait (the gate may be asked during recovery)."""
        if ctx is not None and ctx.tool_manager is not None:
            self._tool_manager, self._ctx = ctx.tool_manager, ctx
        assert self._driver is not None
        if self._pick_up is not None:
            async with self._turns.report:  # the calls of a step, started together, pick up once
                if self._pick_up is not None:
                    await self._driver.pick_up(self._pick_up.run_id)
                    await self._settle(await self._driver.next_action())
                    self._pick_up = None
        return self._driver

    async def _settle(self, action: Action) -> None:
        """Finish body-less calls (an external tool's answer is its result)."""
        assert self._driver is not None
        while True:
            self._action = action
            self._turns.changed()
            if isinstance(action, RunCall) and self._kind(action.tool) == "external":
                action = await self._driver.call_returned(action.call_id, action.resume_value)  # the answer
            elif isinstance(action, Done) and not action.redelivery:
                raise self._ended(action)
            else:
                return

    def _ended(self, done: Done) -> RunEnded:
        unknown = self._driver.unreconciled if self._driver is not None else ()
        return RunEnded(ended_message(done.run_id, done.cause, unknown), done.cause.kind, unknown)

    async def _execute(self, action: RunCall, args: Any, handler: Any) -> Any:
        assert self._driver is not None
        driver, call_id, turns = self._driver, action.call_id, self._turns
        with turns.body():
            with invocation_scope(action):  # the tool body's current_invocation() is this RunCall
                try:
                    result = await handler(args)
                except (ApprovalRequired, CallDeferred) as deferral:
                    declaration = "requires_approval=True" if isinstance(deferral, ApprovalRequired) else "a declared external tool"
                    raise DeferredAfterStart(
                        f"tool {action.tool!r} raised {type(deferral).__name__} after its Executing commit; runkernel has"
                        f" no Executing→Awaiting edge for it: declare the wait with {declaration} instead"
                    ) from deferral
                except (ModelRetry, ToolRetryError, ToolFailed, ToolFailedError) as error:
                    async with turns.report:  # the calls of a group answer one at a time
                        await self._settle(await driver.call_failed(call_id, _error_value(error)))
                    raise
                except Exception as error:
                    async with turns.report:
                        await self._settle(await driver.call_failed(call_id, {"type": type(error).__name__, "message": str(error)}))
                    raise
            async with turns.report:
                await self._settle(await driver.call_returned(call_id, to_jsonable_python(result)))
            return result
