"""A scripted OpenAI Agents SDK agent on runkernel, for the integration tests (in process
and as a subprocess that a test kills). Offline: tracing export off, a scripted ``Model``.

The model plays a script: step k (the number of model turns already in its input) answers
with the script's k-th reply. Every tool body appends what it starts to a downstream
record (one JSON line per start, fsync'd before the effect), so a test can count starts
per operation id across processes. ``CRASH`` kills this process with SIGKILL at one
point: ``tool:NAME:ATTEMPT`` inside a tool body after its downstream record,
``model:STEP`` after the model answered step STEP and before runkernel commits it,
``stream:STEP`` after the first text delta of step STEP reached the caller.

As a script: ``python tests/openai_agents_app.py STORE RECORD SCRIPT start|stream|resume
[RUN_ID]`` prints one JSON line with the outcome. As the app of ``runkernel worker --app
openai_agents_app:worker_app`` (app name ``oa``), it reads the store, record and script
from ``OA_STORE``, ``OA_RECORD`` and ``OA_SCRIPT``.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

os.environ.setdefault("OPENAI_AGENTS_DISABLE_TRACING", "1")

from agents import (  # noqa: E402
    Agent, GuardrailFunctionOutput, InputGuardrail, ModelResponse, OutputGuardrail, RunContextWrapper, RunHooks, function_tool,
    set_tracing_disabled,
)
from agents.models.interface import Model  # noqa: E402
from agents.testing import ModelStep, ScriptedModel, assistant_message, function_call  # noqa: E402
from pydantic import BaseModel  # noqa: E402

from runkernel import OperationStatus, StatusReply, ToolPolicy, current_invocation  # noqa: E402
from runkernel.integrations.openai_agents import DurableAgentApp, DurableRunner  # noqa: E402

from agent_world import Downstream, together  # noqa: E402

set_tracing_disabled(True)  # no test connects outside the machine


class Weather(BaseModel):
    """The structured output of the ``structured`` script."""

    city: str
    sky: str


def _call(tool: str, call_id: str, **args: Any) -> Any:
    return function_call(tool, args, call_id=call_id)


def _text(text: str, step: int = 0) -> Any:
    return assistant_message(text, item_id=f"msg-{step}")


#: Scripts: one list of output items per model reply; a text-only reply is the final answer.
SCRIPTS: dict[str, list[list[Any]]] = {
    "group": [
        [_call("fetch", "g1", q="a"), _call("book", "g2", seats=2), _call("pay", "g3", cents=5), _call("note", "n1", text="x")],
        [_text("grouped", 2)],
    ],
    "happy": [[_text("looking"), _call("search", "s1", q="a"), _call("note", "n1", text="x")], [_text("done", 2)]],
    "order": [[_call("note", "n1", text="first"), _call("search", "s1", q="second")], [_text("both", 2)]],
    "approval": [[_text("mailing"), _call("send", "m1", to="bob"), _call("search", "s1", q="a")], [_text("sent", 2)]],
    "conditional": [[_call("transfer", "t1", cents=5), _call("transfer", "t2", cents=500)], [_text("moved", 2)]],
    "replay_crash": [[_call("search", "s1", q="a")], [_text("found", 2)]],
    "indeterminate_crash": [[_call("note", "n1", text="x")], [_text("noted", 2)]],
    "reconnect_crash": [[_call("charge", "c1", cents=5)], [_text("charged", 2)]],
    "second_call_crash": [[_call("note", "n1", text="x"), _call("search", "s1", q="b")], [_text("both", 2)]],
    "model_crash": [[_call("note", "n1", text="x")], [_text("after", 2)]],
    "streamed": [[_call("search", "s1", q="a")], [_text("the answer is forty two", 2)]],
    "structured": [[_call("search", "s1", q="oslo")], [_text('{"city": "Oslo", "sky": "clear"}', 2)]],
    "handoff": [[_text("to billing"), _call("transfer_to_billing", "h1")], [_call("charge", "c1", cents=7)], [_text("billed", 3)]],
    "guardrail": [[_text("never")]],
    "output_guardrail": [[_text("the password is hunter2")]],
    "flaky_model": [[_text("after the outage")]],
}


def model_turns(input: Any) -> int:
    """How many model replies the input already holds (runs of output items)."""
    turns, in_reply = 0, False
    for item in input if isinstance(input, list) else []:
        data = item if isinstance(item, dict) else item.model_dump()
        output = data.get("type") == "function_call" or (data.get("role") == "assistant")
        turns += output and not in_reply
        in_reply = output
    return turns


#: The model calls made in this process (step numbers), and transient errors still to raise.
ASKED: list[int] = []
OUTAGES: list[Exception] = []


class ScriptModel(Model):
    """The scripted model of ``script`` (streams a text reply word by word)."""

    def __init__(self, script: str) -> None:
        self.script = script

    def _step(self, input: Any) -> tuple[int, ScriptedModel]:
        step = model_turns(input) + 1
        ASKED.append(step)
        if OUTAGES:
            return step, ScriptedModel([ModelStep.raise_error(OUTAGES.pop(0))])
        replies = SCRIPTS[self.script]
        return step, ScriptedModel([ModelStep(output=list(replies[min(step, len(replies)) - 1]), response_id=None)])

    async def get_response(self, *args: Any, **kwargs: Any) -> ModelResponse:
        step, model = self._step(kwargs.get("input", args[1] if len(args) > 1 else None))
        response = await model.get_response(*args, **kwargs)
        if os.environ.get("CRASH", "") == f"model:{step}":
            os.kill(os.getpid(), signal.SIGKILL)
        return response

    async def stream_response(self, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:
        step, model = self._step(kwargs.get("input", args[1] if len(args) > 1 else None))
        async for event in model.stream_response(*args, **kwargs):
            yield event
            if getattr(event, "type", "") == "response.output_text.delta" and os.environ.get("CRASH", "") == f"stream:{step}":
                os.kill(os.getpid(), signal.SIGKILL)


def build(
    store: str, record: str | os.PathLike[str], script: str, *, app: str | None = None, lease_duration: float = 30.0
) -> tuple[Agent[Any], DurableRunner]:
    """The agent of ``script`` on ``store``, its tools recording to ``record`` (its Runs
    record ``app``, held under leases of ``lease_duration`` seconds)."""
    downstream = Downstream(record, store, invocation=current_invocation)

    def charge_status(operation_id: str, lease_epoch: int | None) -> StatusReply:
        done = any(s["operation_id"] == operation_id for s in downstream.starts())
        return StatusReply(OperationStatus.DONE, "charged") if done else StatusReply(OperationStatus.NOT_FOUND)

    def book_status(operation_id: str, lease_epoch: int | None) -> StatusReply:
        done = any(s["operation_id"] == operation_id for s in downstream.starts())
        return StatusReply(OperationStatus.DONE, "booked") if done else StatusReply(OperationStatus.NOT_FOUND)

    durable = DurableRunner(
        store,
        tools={"search": "replay", "note": "indeterminate", "send": "indeterminate", "charge": "reconnect",
               "transfer": "indeterminate",
               # a concurrent group: consecutive calls of these run together
               "fetch": ToolPolicy.replay(concurrent=True), "book": ToolPolicy.reconnect(concurrent=True),
               "pay": ToolPolicy.indeterminate(concurrent=True)},
        status={"charge": charge_status, "book": book_status},
        app=app,
        lease_duration=lease_duration,
    )

    @function_tool
    async def search(q: str) -> str:
        """Search for q."""
        entry = downstream.start("search")
        return f"found {q} (op {entry['operation_id']})"

    @function_tool
    def note(text: str) -> str:
        """Note text down."""
        downstream.start("note")
        return f"noted {text}"

    @function_tool(needs_approval=True)
    def send(to: str) -> str:
        """Send mail to someone."""
        downstream.start("send")
        return f"sent to {to}"

    @function_tool
    def charge(cents: int) -> str:
        """Charge a card."""
        downstream.start("charge")
        return "charged"

    @function_tool
    async def fetch(q: str) -> str:
        """Fetch q."""
        downstream.start("fetch")
        await together("fetch")
        return f"fetched {q}"

    @function_tool
    async def book(seats: int) -> str:
        """Book seats."""
        downstream.start("book")
        await together("book")
        return "booked"

    @function_tool
    async def pay(cents: int) -> str:
        """Pay cents."""
        downstream.start("pay")
        await together("pay")
        return f"paid {cents}"

    async def big(context: RunContextWrapper[Any], args: dict[str, Any], call_id: str) -> bool:
        limits = context.context if isinstance(context.context, dict) else {}
        return bool(args.get("cents", 0) > limits.get("limit", 100))  # the run's context= may raise the limit

    @function_tool(needs_approval=big)
    def transfer(cents: int) -> str:
        """Move money."""
        downstream.start("transfer")
        return f"moved {cents}"

    async def no_secrets(context: RunContextWrapper[Any], agent: Agent[Any], input: Any) -> GuardrailFunctionOutput:
        return GuardrailFunctionOutput(output_info=None, tripwire_triggered="secret" in str(input))

    async def no_passwords(context: RunContextWrapper[Any], agent: Agent[Any], output: Any) -> GuardrailFunctionOutput:
        return GuardrailFunctionOutput(output_info=None, tripwire_triggered="password" in str(output))

    model = ScriptModel(script)
    billing = Agent(name="billing", instructions="Bill.", model=model, tools=[charge])
    agent: Agent[Any] = Agent(
        name="assistant", instructions="Help.", model=model, tools=[search, note, send, transfer, charge, fetch, book, pay],
        handoffs=[billing] if script == "handoff" else [],
        output_type=Weather if script == "structured" else None,
        input_guardrails=[InputGuardrail(no_secrets, name="no_secrets")],  # the SDK's default: beside the model call
        output_guardrails=[OutputGuardrail(no_passwords, name="no_passwords")],
    )
    return agent, durable


class CrashAtTheEnd(RunHooks[Any]):
    """Kills the process once the agent produced its final output: the final response
    is committed, the Run's end is not (``CRASH=end``)."""

    async def on_agent_end(self, context: Any, agent: Any, output: Any) -> None:
        if os.environ.get("CRASH") == "end":
            os.kill(os.getpid(), signal.SIGKILL)


def outcome(result: Any) -> dict[str, Any]:
    """A JSON summary of an agent run's output."""
    if result.interruptions:
        return {"interrupted": [i.raw_item.call_id for i in result.interruptions]}
    output = result.final_output
    return {"output": output.model_dump() if isinstance(output, BaseModel) else output, "agent": result.last_agent.name}


def worker_app() -> DurableAgentApp:
    """The agent of ``OA_SCRIPT`` as the worker app ``oa`` (``--app openai_agents_app:worker_app``)."""
    agent, durable = build(os.environ["OA_STORE"], os.environ["OA_RECORD"], os.environ["OA_SCRIPT"], app="oa")
    return durable.worker_app(agent)


async def play(store: str, record: str, script: str, phase: str, run_id: str | None = None, prompt: str = "go") -> dict[str, Any]:
    """Start a Run of ``script`` (thread ``thread-SCRIPT``), stream one, or resume ``run_id``."""
    agent, durable = build(store, record, script)
    ASKED.clear()
    if phase == "start":
        result = await durable.run(agent, prompt, thread_id=f"thread-{script}", hooks=CrashAtTheEnd())
    elif phase == "stream":
        stream = durable.run_streamed(agent, prompt, thread_id=f"thread-{script}")
        deltas = [e for e in [event async for event in stream.stream_events()]
                  if getattr(e, "type", "") == "raw_response_event" and getattr(e.data, "type", "") == "response.output_text.delta"]
        assert stream.result is not None
        return {**outcome(stream.result), "deltas": len(deltas)}
    else:
        assert run_id is not None
        result = await durable.resume(agent, run_id)
    return outcome(result)


if __name__ == "__main__":
    store_url, record_path, script_name, phase_name = sys.argv[1:5]
    run = sys.argv[5] if len(sys.argv) > 5 and sys.argv[5] else None
    print(json.dumps(asyncio.run(play(store_url, record_path, script_name, phase_name, run))))
