"""One agent run bound to its Run: the driver, the action it stands at, and the wrappers
the SDK calls (the model, each function tool, each tool's approval question)."""

from __future__ import annotations

import asyncio
import contextvars
import copy
import inspect
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from typing import Any

from agents import FunctionTool, ModelResponse, RunContextWrapper
from agents.models.interface import Model
from openai.types.responses import ResponseCompletedEvent, ResponseFunctionToolCall
from pydantic_core import to_jsonable_python

from runkernel import (
    Approve, AsyncDriver, CheckStatus, Deny, Done, Hold, Infer, Permit, PeerError, RunCall, ToolPolicy, WaitFor, WaitKind,
)
from runkernel.adapters.drive.actions import Action, RunCalls
from runkernel.adapters.drive.invocation import invocation_scope
from runkernel.integrations._common import CallTurns, IntegrationError, RunEnded, StatusFunction, StillRunning, handed_call
from runkernel.integrations.openai_agents._mapping import DENIED, arguments_of, function_calls, shown, step_of
from runkernel.kernel import CallAwaiting, CallCompleted, CallIndeterminate, CallRequested, ToolCall

class GuardrailTripped(PeerError):
    """Not the host's fault: guardrail ``guardrail`` tripped its wire (``kind`` is
    ``"input"`` or ``"output"``); the Run ended ``failed`` with this error's type name and
    message committed. The SDK's own exception is the ``__cause__``."""

    def __init__(self, guardrail: str, kind: str) -> None:
        super().__init__(f"{kind} guardrail {guardrail!r} tripped its wire: the Run ended failed")
        self.guardrail = guardrail
        self.kind = kind


_BINDING: contextvars.ContextVar[Binding | None] = contextvars.ContextVar("runkernel_openai_agents", default=None)


def bound() -> Binding:
    """The Run this agent run serves (set by ``DurableRunner``)."""
    binding = _BINDING.get()
    if binding is None:
        raise IntegrationError("a durable agent runs only through DurableRunner.run / run_streamed / resume")
    return binding


class Binding:
    """The per-run state: ``DurableRunner`` makes one per agent run and sets it for the
    SDK's task (tool tasks inherit it)."""

    def __init__(
        self,
        driver: AsyncDriver,
        tools: Mapping[str, FunctionTool],
        handoffs: Mapping[str, str],
        status: Mapping[str, StatusFunction],
        *,
        pick_up: str | None = None,
        replay: ModelResponse | None = None,
        poll_interval: float = 0.2,
        status_asks: int | None = None,
        context: Any = None,
    ) -> None:
        self.driver, self.tools, self.handoffs, self.status = driver, dict(tools), handoffs, status
        self.action: Action | None = None
        #: what approval functions get: the SDK's run context once a wrapper saw it, until
        #: then one around the ``context=`` given to the run (what they usually read)
        self.context: RunContextWrapper[Any] = RunContextWrapper(context=context)
        self._seen_context = False
        self.agent = ""  # the name of the agent whose model was asked last
        self.replay = replay  # the committed response the SDK asks for again after a pick-up
        self.poll_interval, self.status_asks = poll_interval, status_asks
        self._pick_up = pick_up
        self._approvals: dict[str, bool] = {}
        self._turns = CallTurns()
        driver.gate = self

    def learned(self, policies: Mapping[str, ToolPolicy], tools: Mapping[str, FunctionTool]) -> None:
        """Tools listed at this turn (an agent's MCP tools): their policies declared to the
        driver before the reply that calls them is committed, their approval questions kept."""
        self.driver.declare_tools(policies)
        self.tools.update(tools)

    async def ready(self, context: RunContextWrapper[Any] | None = None) -> AsyncDriver:
        """Every wrapper starts here; a Run is picked up in the first one, where the run
        context (which approval functions take) is known."""
        if context is not None and not self._seen_context:
            self.context, self._seen_context = context, True
        if self._pick_up is not None:
            async with self._turns.report:  # the calls of a step, started together, pick up once
                if self._pick_up is not None:
                    await self.settle(await self.driver.pick_up(self._pick_up))
                    self._pick_up = None
        return self.driver

    async def settle(self, action: Action) -> None:
        """Stand at ``action``; finish a handoff's call at once (its effect, changing the
        agent, is the SDK's); wake the tools waiting for their turn."""
        while True:
            self.action = action
            if isinstance(action, RunCall) and action.tool in self.handoffs:
                action = await self.driver.call_returned(action.call_id, {"assistant": self.handoffs[action.tool]})
                continue
            self._turns.changed()
            if isinstance(action, Done) and not action.redelivery:
                raise self.ended(action)
            return

    def ended(self, done: Done) -> RunEnded:
        unknown = self.driver.unreconciled
        advice = f"; reconcile operation ids {list(unknown)} downstream" if unknown else ""
        return RunEnded(f"run {done.run_id!r} ended {done.cause.kind.value}{advice}", done.cause.kind, unknown)

    # --- the gate: the driver asks it before each call ----------------------------------

    async def check(self, run_id: str, call: ToolCall) -> Permit | Hold:
        """runkernel's gate: a tool's ``needs_approval`` decides which calls wait."""
        needs = await self.approval_needed(call.tool, call.arguments, call.call_id)
        # no request: the call's arguments are committed with it already (a copy would
        # count against the request's limits and change nothing an approver sees)
        return Hold(WaitKind.APPROVAL) if needs else Permit()

    async def approval_needed(self, tool: str, arguments: Any, call_id: str) -> bool:
        """The tool's own ``needs_approval`` for this call, asked once and kept."""
        if call_id not in self._approvals:
            function = self.tools.get(tool)
            setting = getattr(function, "runkernel_needs_approval", False) if function is not None else False
            if callable(setting):
                answer = setting(self.context, arguments if isinstance(arguments, dict) else {}, call_id)
                setting = await answer if inspect.isawaitable(answer) else answer
            self._approvals[call_id] = bool(setting)
        return self._approvals[call_id]

    # --- the model ----------------------------------------------------------------------

    async def infer(self, input: Any, ask: Callable[[], Awaitable[ModelResponse]]) -> ModelResponse:
        """One model request: the committed response again after a pick-up, or the model's
        answer (retried while transient), committed before the SDK sees it."""
        await self.ready()
        if self.replay is not None:
            response, self.replay = self.replay, None
            return response
        await self._rejected_by_the_sdk(input)
        while True:
            action = self.action
            if isinstance(action, Done):
                raise self.ended(action)
            if not isinstance(action, Infer):
                raise IntegrationError(f"the agent asked its model while runkernel expects {action!r}")
            if action.retry_after:
                await asyncio.sleep(action.retry_after)
            try:
                response = await ask()
            except Exception as error:  # the transient-error predicate decides: ask again, or the Run ends failed
                retried = await self.driver.inference_failed(error)
                self.action = retried
                if isinstance(retried, Infer):
                    continue
                raise
            await self.commit(response)
            return response

    async def commit(self, response: ModelResponse) -> None:
        """The complete response as the step: function calls first, then handoffs, then
        calls that wait for an approval (the order the SDK runs them in), each group in
        the model's order."""
        calls = function_calls(response)
        rank = {c.call_id: (c.name in self.handoffs) + 2 * await self._waits(c) for c in calls}
        calls.sort(key=lambda c: rank[c.call_id])
        content, requests, metadata = step_of(response, self.agent, calls)
        await self.settle(await self.driver.inferred(content, requests, metadata=metadata))

    async def _waits(self, call: ResponseFunctionToolCall) -> bool:
        return call.name in self.tools and await self.approval_needed(call.name, arguments_of(call), call.call_id)

    async def _rejected_by_the_sdk(self, input: Any) -> None:
        """A call the SDK answered without running it (``RunState.reject``) while runkernel
        awaits its approval: commit the deny, with the SDK's message as the reason."""
        outputs = {i.get("call_id"): i.get("output") for i in input if isinstance(i, dict)} if isinstance(input, list) else {}
        while isinstance(action := self.action, WaitFor) and action.call.call_id in outputs:
            message = outputs[action.call.call_id]
            await self.settle(await self.driver.resume(Deny(message if isinstance(message, str) else DENIED)))

    # --- a function tool ------------------------------------------------------------------

    async def invoke(self, call_id: str, run_body: Callable[[], Awaitable[Any]]) -> Any:
        """A function tool's call: its committed result if it has one; else, at its turn
        (one call at a time, in batch order), the body under its recovery policy."""
        driver = self.driver
        while True:
            action, committed = self.action, driver.call(call_id)
            if committed is not None and isinstance(committed.status, (CallCompleted, CallIndeterminate)):
                return shown(committed)
            if (mine := handed_call(action, call_id)) is not None:
                return await self._execute(mine, run_body)
            if isinstance(action, CheckStatus) and action.call_id == call_id:
                asked = await driver.ask_status(self.status[action.tool], interval=self.poll_interval, asks=self.status_asks)
                if isinstance(asked, CheckStatus) and asked.call_id == call_id:
                    raise StillRunning(f"tool {action.tool!r} is still running operation {action.operation_id!r}")
                await self.settle(asked)
                continue
            if isinstance(action, WaitFor) and action.call.call_id == call_id:  # the SDK approved it (RunState.approve)
                await self.settle(await driver.resume(Approve()))
                continue
            if committed is not None and isinstance(action, (RunCall, RunCalls, CheckStatus)):
                await self._turns.wait()  # another call's turn: I8, one call (or one group) at a time
                continue
            raise IntegrationError(f"tool call {call_id!r} out of runkernel's order (it expects {action!r})")

    async def _execute(self, action: RunCall, run_body: Callable[[], Awaitable[Any]]) -> Any:
        turns = self._turns
        with turns.body():
            with invocation_scope(action):  # the body's current_invocation() is this RunCall
                try:
                    result = await run_body()
                except Exception as error:
                    failure = {"type": type(error).__name__, "message": str(error)}
                    async with turns.report:  # the calls of a group answer one at a time
                        await self.settle(await self.driver.call_failed(action.call_id, failure))
                    raise
            async with turns.report:
                await self.settle(await self.driver.call_returned(action.call_id, to_jsonable_python(result, fallback=str)))
            return result

    async def needs_approval(self, tool: str, arguments: Any, call_id: str) -> bool:
        """What the SDK asks before it runs a call: the committed wait decides (an
        answered or never-held call runs, and its wrapper shows what was committed)."""
        committed = self.driver.call(call_id)
        if committed is None or isinstance(committed.status, CallRequested):
            return await self.approval_needed(tool, arguments, call_id)
        return isinstance(committed.status, CallAwaiting) and call_id not in self.driver.answers_ahead


def durable_tool(tool: FunctionTool) -> FunctionTool:
    """A copy of ``tool`` whose body and approval question go through the bound Run
    (``tool`` itself is left as it is: a plain ``Runner.run`` still runs it)."""
    body, setting = tool.on_invoke_tool, tool.needs_approval

    async def on_invoke_tool(context: Any, arguments: str) -> Any:
        binding = bound()
        await binding.ready(context)
        return await binding.invoke(context.tool_call_id, lambda: body(context, arguments))

    async def needs_approval(context: RunContextWrapper[Any], arguments: dict[str, Any], call_id: str) -> bool:
        binding = bound()
        await binding.ready(context)
        return await binding.needs_approval(wrapped.name, arguments, call_id)

    wrapped = copy.copy(tool)
    wrapped.on_invoke_tool, wrapped.needs_approval = on_invoke_tool, needs_approval
    setattr(wrapped, "runkernel_needs_approval", setting)
    return wrapped


class DurableModel(Model):
    """The agent's model, each complete response committed as an inference step before
    the SDK sees it (a stream is passed through and committed at its completed event)."""

    def __init__(self, model: Model, agent: str) -> None:
        self.model, self.agent = model, agent

    async def get_response(self, *args: Any, **kwargs: Any) -> ModelResponse:
        binding = bound()
        binding.agent = self.agent
        return await binding.infer(kwargs.get("input", args[1] if len(args) > 1 else None),
                                   lambda: self.model.get_response(*args, **kwargs))

    async def stream_response(self, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:
        binding = bound()
        binding.agent = self.agent
        await binding.ready()
        if binding.replay is not None:
            raise IntegrationError("a picked-up Run continues with DurableRunner.resume (not streamed)")
        await binding._rejected_by_the_sdk(kwargs.get("input", args[1] if len(args) > 1 else None))
        action = binding.action
        if isinstance(action, Done):
            raise binding.ended(action)
        if not isinstance(action, Infer):
            raise IntegrationError(f"the agent asked its model while runkernel expects {action!r}")
        try:
            async for event in self.model.stream_response(*args, **kwargs):
                if isinstance(event, ResponseCompletedEvent):  # complete: committed before the SDK takes it
                    usage_free = ModelResponse(output=list(event.response.output), usage=_usage(), response_id=None)
                    await binding.commit(usage_free)
                yield event
        except IntegrationError:
            raise
        except Exception as error:
            if binding.action is action:
                binding.action = await binding.driver.inference_failed(error)
            raise


def _usage() -> Any:
    from agents import Usage

    return Usage()

