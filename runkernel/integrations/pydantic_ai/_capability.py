"""``RunkernelDurability``: the capability that maps an agent run onto the push-mode driver."""

from __future__ import annotations

import asyncio
import copy
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import attrs
from pydantic_ai import Agent, DeferredToolRequests, DeferredToolResults, ToolApproved
from pydantic_ai.capabilities import AbstractCapability
from pydantic_ai.exceptions import ApprovalRequired, CallDeferred, ModelRetry, ToolFailed, ToolFailedError, ToolRetryError
from pydantic_ai.messages import (
    AgentStreamEvent, ModelMessage, ModelMessagesTypeAdapter, ModelResponse, PartDeltaEvent, PartStartEvent, TextPart,
    TextPartDelta, ToolCallPart,
)
from pydantic_ai.tool_manager import ToolManager
from pydantic_ai.tools import RunContext
from pydantic_core import to_jsonable_python

from runkernel import (
    Approve, AsyncDriver, CallRequest, CheckStatus, Done, EndCauseKind, Hold, Infer, Permit, RunCall, StatusReply,
    StoreError, ToolPolicy, WaitFor, WaitKind, open_store,
)
from runkernel.adapters.drive.actions import Action
from runkernel.adapters.drive.invocation import invocation_scope
from runkernel.adapters.stores.contract import Store
from runkernel.errors import IllegalCommit, UnknownRun
from runkernel.integrations.pydantic_ai._context import (
    _PICK_UP, DeferredAfterStart, IntegrationError, PickUp, RunEnded, StillRunning,
)
from runkernel.integrations.pydantic_ai._mapping import (
    _answer_of, _approval_functions, _deferred_answer, _error_value, _payloads, _shown, to_model_messages,
)
from runkernel.kernel import (
    CallCompleted, CallIndeterminate, Ended, IndeterminateChoice, JsonValue, Message, RecoveryMode, Role, ToolCall,
    TypedError,
)
from runkernel.kernel.policies import tool_policies

#: A reconnect tool's ``status(operation_id, lease_epoch)``, sync or async (the
#: one-argument ``status(operation_id)`` still works, with a ``DeprecationWarning``).
StatusFunction = (
    Callable[[str, int | None], StatusReply | Awaitable[StatusReply]]
    | Callable[[str], StatusReply | Awaitable[StatusReply]]
)


@dataclass
class RunkernelDurability(AbstractCapability[Any]):
    """Attach to an ``Agent`` (``capabilities=[...]``) to make its runs durable Runs.

    ``store`` is a URL (``sqlite:///agent.db``) or an open ``Store``; ``tools`` gives every
    tool the model may call its ``ToolPolicy`` or one of ``"replay"``, ``"reconnect"``,
    ``"indeterminate"`` (declared external tools included);
    ``status`` gives each reconnect tool its ``status(operation_id, lease_epoch) ->
    StatusReply`` (the lease epoch: the fencing token, for the downstream);
    ``questions`` names the external tools a person answers (an input wait). The Thread is
    the run's ``conversation_id``, a new Run's id its ``run_id``.
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
    _opened: list[Store] = field(default_factory=list, repr=False)

    def __post_init__(self) -> None:
        policies = tool_policies(self.tools)  # "replay" and the like become their ToolPolicy
        self.tools = policies
        for name, policy in policies.items():
            if policy.recovery.mode is RecoveryMode.RECONNECT and name not in self.status:
                raise ValueError(f"tool {name!r} reconnects after a crash: give it status={{{name!r}: fn}}")
        self._reset()

    def _reset(self) -> None:
        self._driver: AsyncDriver | None = None
        self._action: Action | None = None
        self._tool_manager: ToolManager[Any] | None = None
        self._ctx: RunContext[Any] | None = None
        self._pick_up: PickUp | None = None
        self._streamed: list[str] = []

    # --- public -----------------------------------------------------------------------

    def open(self) -> Store:
        """The store, opened once and shared by this capability's runs."""
        if not self._opened:
            self._opened.append(open_store(self.store) if isinstance(self.store, str) else self.store)
        return self._opened[0]

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
        ``runkernel resume`` are applied first. ``driver``: one that already holds the
        Run's lease (what ``runkernel worker`` hands; see ``worker_app``). Returns
        ``agent.run``'s result."""
        store = driver.store if driver is not None else self.open()
        thread_id = store.thread_of(run_id)
        if thread_id is None:
            raise IntegrationError(f"run {run_id!r} is not in the store")
        token = _PICK_UP.set(PickUp(run_id, _payloads(deferred_tool_results), driver))  # refused here, before anything
        try:
            history = to_model_messages(store.messages(thread_id))
            return await agent.run(message_history=history, conversation_id=thread_id, **run)
        finally:
            _PICK_UP.reset(token)

    def worker_app(self, agent: Agent[Any, Any], *, name: str) -> DurableAgentApp:
        """``agent`` as the app of ``runkernel worker --app MODULE:ATTR``, for Runs whose
        app is ``name`` (``runkernel start --app NAME``): each Run with work (new, orphaned
        by a dead worker, or answered with ``runkernel resume``) is resumed under the
        worker's lease, and its tools see the lease epoch (``current_invocation()``)."""
        return DurableAgentApp(name, self, agent, self.tools, self.max_steps, self.on_indeterminate)

    # --- capability hooks -------------------------------------------------------------

    async def for_run(self, ctx: Any) -> RunkernelDurability:
        layer = copy.copy(self)  # shares the opened store, not the per-run driver
        layer._reset()
        return layer

    async def wrap_run(self, ctx: Any, *, handler: Any) -> Any:
        pick_up = self._pick_up = _PICK_UP.get()
        if pick_up is not None and pick_up.driver is not None:
            driver = pick_up.driver
            driver.gate = self  # Pydantic AI's declarations are known from here on
        else:
            driver = AsyncDriver(
                self.open(), self.tools, gate=self, max_steps=self.max_steps, on_indeterminate=self.on_indeterminate
            )
        self._driver = driver
        if pick_up is None:
            self._action = await self._start(ctx, driver)
        else:
            driver.answer_ahead(pick_up.answers)
        try:
            with ToolManager.parallel_execution_mode("sequential"):
                result = await handler()
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

    async def wrap_model_request(self, ctx: Any, *, request_context: Any, handler: Any) -> ModelResponse:
        driver = await self._ready(ctx)
        if isinstance(self._action, Done):
            raise self._ended(self._action)
        if not isinstance(self._action, Infer):
            raise IntegrationError(f"the agent asked its model while runkernel expects {self._action!r}")
        params = request_context.model_request_parameters
        if missing := sorted({t.name for t in params.function_tools} - set(self.tools)):
            raise IntegrationError(
                f"tools without a recovery policy: {missing}; give each a ToolPolicy in RunkernelDurability(tools=...)"
            )
        response: ModelResponse = await handler(request_context)
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

    async def wrap_tool_execute(self, ctx: Any, *, call: ToolCallPart, tool_def: Any, args: Any, handler: Any) -> Any:
        driver = await self._ready(ctx)
        while True:
            action, committed = self._action, driver.call(call.tool_call_id)
            if committed is not None and isinstance(committed.status, (CallCompleted, CallIndeterminate)):
                return _shown(committed)
            if not ctx.tool_call_approved and self._wait_kind(call.tool_name, call.args_as_dict()) is WaitKind.APPROVAL:
                raise ApprovalRequired()  # a toolset's approval function holds it: Pydantic AI defers it
            if isinstance(action, RunCall) and action.call_id == call.tool_call_id:
                return await self._execute(action, args, handler)
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

    @property
    def has_on_event(self) -> bool:
        """Listen to the run's events only to checkpoint a stream (listening makes
        Pydantic AI stream every model request)."""
        return self.checkpoint_every > 0

    def listens_to(self, event: AgentStreamEvent) -> bool:
        return self.checkpoint_every > 0 and isinstance(event, (PartStartEvent, PartDeltaEvent))

    async def on_event(self, ctx: Any, *, event: AgentStreamEvent) -> None:
        """Every ``checkpoint_every`` text deltas of a streamed response, save the text so
        far as the step's best-effort checkpoint (``Infer.partial`` after a crash; the
        model is asked again all the same)."""
        if isinstance(event, PartStartEvent) and isinstance(event.part, TextPart):
            self._streamed.append(event.part.content)
        elif isinstance(event, PartDeltaEvent) and isinstance(event.delta, TextPartDelta):
            self._streamed.append(event.delta.content_delta)
        else:
            return
        due = len(self._streamed) % self.checkpoint_every == 0
        if due and isinstance(self._action, Infer) and self._driver is not None:
            await self._driver.checkpoint({"text": "".join(self._streamed)})

    # --- the gate (the driver asks it before each call) -------------------------------

    def check(self, run_id: str, call: ToolCall) -> Permit | Hold:
        """runkernel's gate: Pydantic AI's declarations decide which calls wait."""
        wait = self._wait_kind(call.tool, call.arguments)
        # no request: the call's arguments are committed with it already
        return Permit() if wait is None else Hold(wait)

    def _wait_kind(self, tool: str, arguments: Any) -> WaitKind | None:
        """What a call of ``tool`` waits for before it runs: ``requires_approval=True`` or a
        toolset's approval function (an approval), a declared external tool (an external
        answer, or a person's input for ``questions``); None when it runs at once."""
        kind = self._kind(tool)
        if kind == "external":
            return WaitKind.INPUT if tool in self.questions else WaitKind.EXTERNAL
        if kind == "unapproved" or (kind == "function" and self._conditionally_approved(tool, arguments)):
            return WaitKind.APPROVAL
        return None

    def _conditionally_approved(self, tool: str, arguments: Any) -> bool:
        manager, ctx = self._tool_manager, self._ctx
        entry = manager.tools.get(tool) if manager is not None and manager.tools is not None else None
        if manager is None or entry is None or ctx is None or not isinstance(arguments, dict):
            return False
        return any(ask(ctx, entry.tool_def, arguments) for ask in _approval_functions(manager.toolset, entry.toolset))

    # --- plumbing ---------------------------------------------------------------------

    async def _start(self, ctx: Any, driver: AsyncDriver) -> Action:
        thread_id, store = ctx.conversation_id, self.open()
        head = store.thread_head(thread_id)
        if head is not None and head.active_run_id is not None:
            raise IntegrationError(
                f"run {head.active_run_id!r} of conversation {thread_id!r} is not Ended: continue it with"
                " RunkernelDurability.resume(agent, run_id), not a new agent.run"
            )
        if ctx.prompt is None:
            raise IntegrationError("a new durable Run needs a user prompt")
        prompt = Message(Role.USER, to_jsonable_python(ctx.prompt))
        return await driver.start([prompt], thread_id=thread_id, run_id=ctx.run_id)

    async def _ready(self, ctx: Any) -> AsyncDriver:
        """Every hook starts here. A Run is picked up in the first hook, where the tool
        manager knows which tools wait (the gate may be asked during recovery)."""
        if ctx is not None and ctx.tool_manager is not None:
            self._tool_manager, self._ctx = ctx.tool_manager, ctx
        assert self._driver is not None
        if self._pick_up is not None:
            run_id, self._pick_up = self._pick_up.run_id, None
            await self._driver.pick_up(run_id)
            await self._settle(await self._driver.next_action())
        return self._driver

    async def _settle(self, action: Action) -> None:
        """Finish body-less calls (an external tool's answer is its result)."""
        assert self._driver is not None
        while True:
            self._action = action
            if isinstance(action, RunCall) and self._kind(action.tool) == "external":
                action = await self._driver.call_returned(action.call_id, action.resume_value)  # the answer
            elif isinstance(action, Done) and not action.redelivery:
                raise self._ended(action)
            else:
                return

    def _ended(self, done: Done) -> RunEnded:
        unknown = self._driver.unreconciled if self._driver is not None else ()
        return RunEnded(
            f"run {done.run_id!r} ended {done.cause.kind.value}; reconcile operation ids {list(unknown)} downstream",
            done.cause.kind,
            unknown,
        )

    def _kind(self, tool: str) -> str | None:
        try:
            definition = self._tool_manager.get_tool_def(tool) if self._tool_manager is not None else None
        except ValueError:  # not prepared for a step yet
            return None
        return definition.kind if definition is not None else None

    async def _execute(self, action: RunCall, args: Any, handler: Any) -> Any:
        assert self._driver is not None
        driver, call_id = self._driver, action.call_id
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
                await self._settle(await driver.call_failed(call_id, _error_value(error)))
                raise
            except Exception as error:
                await self._settle(await driver.call_failed(call_id, {"type": type(error).__name__, "message": str(error)}))
                raise
        await self._settle(await driver.call_returned(call_id, to_jsonable_python(result)))
        return result


@attrs.frozen
class DurableAgentApp:
    """A durable agent as the app of ``runkernel worker`` (an ``AsyncPushApp``); made by
    ``RunkernelDurability.worker_app``. Each Run the worker hands it is resumed with the
    worker's driver until it waits or ends; a Run the agent ended (a failure, or an
    Indeterminate call under ``END_RUN``) is committed, so the worker goes on. ``tools``,
    ``max_steps`` and ``on_indeterminate`` are the capability's, for the worker's driver."""

    name: str
    durability: RunkernelDurability = attrs.field(repr=False)
    agent: Agent[Any, Any] = attrs.field(repr=False)
    tools: Mapping[str, ToolPolicy | str] = attrs.field(repr=False)
    max_steps: int = attrs.field(repr=False)
    on_indeterminate: IndeterminateChoice = attrs.field(repr=False)

    async def drive(self, driver: AsyncDriver, run_id: str) -> None:
        """Resume ``run_id`` with ``driver`` (it holds the worker's lease) until it is quiet."""
        try:
            await self.durability.resume(self.agent, run_id, driver=driver)
        except StillRunning:
            return  # quiet for now: the worker asks again at a later poll
        except Exception:
            snapshot = driver.snapshot
            if snapshot is None or not isinstance(snapshot.state, Ended):
                raise  # a store failure or a lost lease: the worker counts it
