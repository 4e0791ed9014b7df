"""A scripted Pydantic AI agent on runkernel, for the integration tests (in process and
as a subprocess that a test kills).

The model is a ``FunctionModel`` playing a script: step k (the number of responses already
in the history) answers with the script's k-th reply. Every tool body appends what it
starts to a downstream record (one JSON line per start, fsync'd before the effect), so a
test can count starts per operation id across processes. ``CRASH`` kills this process
with SIGKILL at one point: ``tool:NAME:ATTEMPT`` inside a tool body after its downstream
record, ``model:STEP`` after the model answered step STEP and before runkernel commits it,
``stream:STEP[:WORDS]`` after the first (or WORDS-th) word streamed at step STEP.
``CHECKPOINT_EVERY=N`` saves a stream checkpoint every N deltas.

As a script: ``python tests/pydantic_ai_app.py STORE RECORD SCRIPT start|resume [RUN_ID]
[ANSWERS_JSON]`` prints one JSON line with the outcome. As the app of ``runkernel worker
--app pydantic_ai_app:worker_app`` (app name ``pai``), it reads the store, record and
script from ``PAI_STORE``, ``PAI_RECORD`` and ``PAI_SCRIPT``.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel
from pydantic_ai import Agent, DeferredToolRequests, DeferredToolResults, RunContext
from pydantic_ai.capabilities import AbstractCapability
from pydantic_ai.exceptions import ApprovalRequired, ModelRetry, ToolFailed
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, DeltaToolCall, DeltaToolCalls, FunctionModel
from pydantic_ai.toolsets import ExternalToolset, FunctionToolset
from pydantic_ai.tools import ToolDefinition

from runkernel import OperationStatus, StatusReply, ToolPolicy
from runkernel.kernel import IndeterminateChoice
from runkernel.integrations.pydantic_ai import DurableAgentApp, RunkernelDurability, current_invocation

from agent_world import Downstream, together

class Weather(BaseModel):
    """The structured output of the ``structured`` script."""

    city: str
    sky: str


def _call(tool: str, call_id: str, **args: Any) -> ToolCallPart:
    return ToolCallPart(tool, args, call_id)


#: Scripts: one list of parts per model reply; a text-only reply is the final answer.
SCRIPTS: dict[str, list[list[Any]]] = {
    "group": [
        [_call("fetch", "g1", q="a"), _call("book", "g2", seats=2), _call("pay", "g3", cents=5), _call("note", "n1", text="x")],
        [TextPart("grouped")],
    ],
    "happy": [[TextPart("looking"), _call("search", "s1", q="a"), _call("note", "n1", text="x")], [TextPart("done")]],
    "approval": [[TextPart("mailing"), _call("search", "s1", q="a"), _call("send", "m1", to="bob")], [TextPart("sent")]],
    "two_approvals": [
        [_call("send", "m1", to="ann"), _call("search", "s1", q="a"), _call("send", "m2", to="bob")],
        [TextPart("handled")],
    ],
    "replay_crash": [[_call("search", "s1", q="a")], [TextPart("found")]],
    "indeterminate_crash": [[_call("note", "n1", text="x")], [TextPart("noted")]],
    "reconnect_crash": [[_call("charge", "c1", cents=5)], [TextPart("charged")]],
    "second_call_crash": [[_call("note", "n1", text="x"), _call("search", "s1", q="b")], [TextPart("both")]],
    "external": [[_call("ship", "x1", item="book")], [TextPart("shipped")]],
    "question": [[_call("ask_user", "q1", question="colour?")], [TextPart("thanks")]],
    "retry": [[_call("flaky", "f1", n=1)], [_call("flaky", "f2", n=2)], [TextPart("recovered")]],
    "tool_error": [[_call("boom", "b1")], [TextPart("never")]],
    "tool_failed": [[_call("decline", "d1")], [TextPart("declined, sorry")]],
    "deferral_in_body": [[_call("sneaky", "k1")], [TextPart("never")]],
    "structured": [[_call("search", "s1", q="oslo")], [_call("final_result", "o1", city="Oslo", sky="clear")]],
    "model_crash": [[_call("note", "n1", text="x")], [TextPart("after")]],
    "early": [[_call("final_result", "o1", city="Oslo", sky="clear"), _call("note", "n1", text="x")], [TextPart("-")]],
    "streamed": [[_call("search", "s1", q="a")], [TextPart("the answer is forty two")]],
    "conditional": [
        [_call("transfer", "t1", cents=5), _call("transfer", "t2", cents=500), _call("search", "s1", q="a")],
        [TextPart("transferred")],
    ],
}


def script_model(script: str) -> FunctionModel:
    """The scripted model of ``script``; it streams a text reply word by word."""

    def parts_for(messages: list[ModelMessage]) -> tuple[int, list[Any]]:
        step = sum(isinstance(m, ModelResponse) for m in messages)
        return step + 1, list(SCRIPTS[script][min(step, len(SCRIPTS[script]) - 1)])

    def reply(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        step, parts = parts_for(messages)
        if os.environ.get("CRASH", "") == f"model:{step}":
            _CRASH_AFTER_MODEL.append(step)
        return ModelResponse(parts=parts)

    async def stream(messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[str | DeltaToolCalls]:
        step, parts = parts_for(messages)
        for index, part in enumerate(parts):
            if isinstance(part, ToolCallPart):
                yield {index: DeltaToolCall(name=part.tool_name, json_args=json.dumps(part.args), tool_call_id=part.tool_call_id)}
                continue
            for number, word in enumerate(part.content.split(" ")):
                yield word if number == 0 else " " + word
                STREAMED.append(word)
                if os.environ.get("CRASH", "") in (f"stream:{step}", f"stream:{step}:{len(STREAMED)}"):
                    os.kill(os.getpid(), signal.SIGKILL)

    return FunctionModel(reply, stream_function=stream)


#: The text deltas streamed in this process.
STREAMED: list[str] = []


_CRASH_AFTER_MODEL: list[int] = []


@dataclass
class CrashAfterModel(AbstractCapability[Any]):
    """Kills the process after the model answered, before the durable capability (which
    wraps this one) commits the answer; or after the run's body, before its end commits."""

    async def wrap_model_request(self, ctx: RunContext[Any], *, request_context: Any, handler: Any) -> Any:
        response = await handler(request_context)
        if _CRASH_AFTER_MODEL:
            os.kill(os.getpid(), signal.SIGKILL)
        return response

    async def after_run(self, ctx: RunContext[Any], *, result: Any) -> Any:
        if os.environ.get("CRASH") == "after_run":  # the final answer is committed, the end is not
            os.kill(os.getpid(), signal.SIGKILL)
        return result


def build(
    store: str,
    record: str | os.PathLike[str],
    script: str,
    *,
    end_on_indeterminate: bool = False,
    checkpoint_every: int = 0,
    app: str | None = None,
    lease_duration: float = 30.0,
) -> tuple[Agent[None, Any], RunkernelDurability]:
    """The agent of ``script`` on ``store``, its tools recording to ``record`` (its Runs
    record ``app``, held under leases of ``lease_duration`` seconds)."""
    downstream = Downstream(record, store, invocation=current_invocation)

    def charge_status(operation_id: str, lease_epoch: int | None) -> StatusReply:
        done = any(s["operation_id"] == operation_id for s in downstream.starts())
        return StatusReply(OperationStatus.DONE, {"charged": True}) if done else StatusReply(OperationStatus.NOT_FOUND)

    def book_status(operation_id: str, lease_epoch: int | None) -> StatusReply:
        done = any(s["operation_id"] == operation_id for s in downstream.starts())
        return StatusReply(OperationStatus.DONE, "booked") if done else StatusReply(OperationStatus.NOT_FOUND)

    durable = RunkernelDurability(
        store,
        tools={
            # the strings and the one-call form: the crash tests see each do what it names
            "search": "replay", "note": "indeterminate", "send": "indeterminate", "charge": "reconnect",
            "ship": "indeterminate", "ask_user": "indeterminate", "flaky": ToolPolicy.replay(), "boom": "indeterminate",
            "sneaky": "indeterminate", "transfer": "indeterminate", "decline": ToolPolicy.indeterminate(),
            # a concurrent group: consecutive calls of these run together
            "fetch": ToolPolicy.replay(concurrent=True), "book": ToolPolicy.reconnect(concurrent=True),
            "pay": ToolPolicy.indeterminate(concurrent=True),
        },
        status={"charge": charge_status, "book": book_status},
        questions=frozenset({"ask_user"}),
        on_indeterminate=IndeterminateChoice.END_RUN if end_on_indeterminate else IndeterminateChoice.PUBLISH,
        checkpoint_every=checkpoint_every,
        app=app,
        lease_duration=lease_duration,
    )
    payments: FunctionToolset[None] = FunctionToolset()

    @payments.tool_plain
    def transfer(cents: int) -> str:
        downstream.start("transfer")
        return f"moved {cents}"

    big_ones = payments.approval_required(lambda ctx, tool_def, args: args["cents"] > 100)
    external = ExternalToolset(
        [
            ToolDefinition(name="ship", parameters_json_schema={"type": "object", "properties": {"item": {"type": "string"}}}),
            ToolDefinition(
                name="ask_user", parameters_json_schema={"type": "object", "properties": {"question": {"type": "string"}}}
            ),
        ]
    )
    structured = script in ("structured", "early")
    output: Any = [Weather, DeferredToolRequests] if structured else [str, DeferredToolRequests]
    agent: Agent[None, Any] = Agent(
        script_model(script), output_type=output, toolsets=[external, big_ones], capabilities=[durable, CrashAfterModel()],
        end_strategy="early" if script == "early" else "graceful",
    )

    @agent.tool_plain
    def search(q: str) -> dict[str, Any]:
        return {"q": q, **downstream.start("search")}

    @agent.tool_plain
    def note(text: str) -> str:
        downstream.start("note")
        return f"noted {text}"

    @agent.tool_plain(requires_approval=True)
    def send(to: str) -> str:
        downstream.start("send")
        return f"sent to {to}"

    @agent.tool_plain
    def charge(cents: int) -> dict[str, Any]:
        downstream.start("charge")
        return {"charged": True}

    @agent.tool_plain(retries=3)
    def flaky(n: int) -> str:
        downstream.start("flaky")
        if n == 1:
            raise ModelRetry("n must be 2")
        return "ok"

    @agent.tool_plain
    def boom() -> str:
        downstream.start("boom")
        raise ValueError("boom failed")

    @agent.tool_plain
    def decline() -> str:
        downstream.start("decline")
        raise ToolFailed("card declined")

    @agent.tool_plain
    async def fetch(q: str) -> str:
        downstream.start("fetch")
        await together("fetch")
        return f"fetched {q}"

    @agent.tool_plain
    async def book(seats: int) -> str:
        downstream.start("book")
        await together("book")
        return "booked"

    @agent.tool_plain
    async def pay(cents: int) -> str:
        downstream.start("pay")
        await together("pay")
        return f"paid {cents}"

    @agent.tool_plain
    def sneaky() -> str:
        downstream.start("sneaky")
        raise ApprovalRequired()

    return agent, durable


def outcome(result: Any) -> dict[str, Any]:
    """A JSON summary of an agent run's output."""
    output = result.output
    if isinstance(output, DeferredToolRequests):
        return {
            "deferred": True,
            "approvals": [c.tool_call_id for c in output.approvals],
            "calls": [c.tool_call_id for c in output.calls],
        }
    if isinstance(output, BaseModel):
        return {"deferred": False, "output": output.model_dump()}
    return {"deferred": False, "output": output}


def worker_app() -> DurableAgentApp:
    """The agent of ``PAI_SCRIPT`` as the worker app ``pai`` (``--app pydantic_ai_app:worker_app``)."""
    agent, durable = build(os.environ["PAI_STORE"], os.environ["PAI_RECORD"], os.environ["PAI_SCRIPT"], app="pai")
    return durable.worker_app(agent)


async def play(
    store: str, record: str, script: str, phase: str, run_id: str | None = None, answers: dict[str, Any] | None = None
) -> dict[str, Any]:
    """Start a Run of ``script`` (thread = the script's name) or resume ``run_id``."""
    agent, durable = build(store, record, script, checkpoint_every=int(os.environ.get("CHECKPOINT_EVERY", "0")))
    STREAMED.clear()  # count this play's deltas only: earlier plays in this process streamed too
    if phase == "start":
        result = await agent.run("go", conversation_id=f"thread-{script}")
    elif phase == "stream":
        async with agent.run_stream("go", conversation_id=f"thread-{script}") as streamed:
            async for _ in streamed.stream_text(delta=True):
                pass
            return {"deferred": False, "output": await streamed.get_output(), "deltas": len(STREAMED)}
    else:
        assert run_id is not None
        results = DeferredToolResults(**answers) if answers else None
        result = await durable.resume(agent, run_id, deferred_tool_results=results)
    return outcome(result)


if __name__ == "__main__":
    store_url, record_path, script_name, phase_name = sys.argv[1:5]
    run = sys.argv[5] if len(sys.argv) > 5 else None
    given = json.loads(sys.argv[6]) if len(sys.argv) > 6 else None
    print(json.dumps(asyncio.run(play(store_url, record_path, script_name, phase_name, run, given))))
