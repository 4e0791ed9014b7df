"""Durable OpenAI Agents SDK agents: runkernel as the durability backend of an ``Agent``.

::

    durable = DurableRunner("sqlite:///agent.db", tools={"search": "replay", "send": "indeterminate"})
    result = await durable.run(agent, "...", thread_id="t1")    # a Run in Thread t1
    result = await durable.resume(agent, run_id)                # after a crash, or once answered

Each model response is one inference step, committed before the SDK sees it (its output
items kept verbatim as the message's metadata, with the answering agent's name); its
function calls form the step's ordered batch (call id = the SDK's ``call_id``).
``Executing{n}`` is durable before a tool body runs; a tool's ``needs_approval`` is the
gate (Requested→Awaiting), answered with ``runkernel resume`` or with the SDK's own
``RunState.approve``/``reject`` (``durable.run(agent, state, thread_id=...)``).

The SDK runs the function tools of one response concurrently; under runkernel they start
one at a time, in the batch's order, each after the previous one is terminal: function
calls first, then handoffs, then calls that wait for an approval (the order the SDK runs
them in), each group in the model's order.

A handoff is a call of the batch (``transfer_to_<agent>``, recovery ``replay``, result
``{"assistant": "<agent>"}``), committed with no body: changing the agent is the SDK's,
and the next step's metadata names the agent that answered. A guardrail's tripwire ends
the Run ``failed`` (``GuardrailTripped`` names the guardrail). A model error the
``transient`` predicate accepts is retried with capped backoff; any other ends the Run
``failed``. A streamed response (``durable.run_streamed``) is committed only complete.

Recovery: ``durable.resume(agent, run_id)`` gives the SDK the Thread up to the last
committed response and that response again (no model call), so each call gets what the
driver decides from committed facts (its result, a replay attempt, a status question,
never a second start of an indeterminate tool). With the app named once,
``DurableRunner(..., app="NAME")``, ``durable.serve(agent)`` at launch starts the embedded
worker that does it for every Run of the app a crash left behind (recovery at launch);
``durable.worker_app(agent)`` serves ``runkernel worker``; a tool body reads its operation id and lease epoch from
``current_invocation()``.
"""

from runkernel.adapters.drive.invocation import current_invocation
from runkernel.integrations._common import ConversationBusy, IntegrationError, RunEnded, StatusFunction, StillRunning
from runkernel.integrations.openai_agents._binding import DurableModel, GuardrailTripped
from runkernel.integrations.openai_agents._mapping import input_items
from runkernel.integrations.openai_agents._runner import DurableAgentApp, DurableRunner, DurableStream, openai_transient

__all__ = [
    "ConversationBusy",
    "DurableAgentApp",
    "DurableModel",
    "DurableRunner",
    "DurableStream",
    "GuardrailTripped",
    "IntegrationError",
    "RunEnded",
    "StatusFunction",
    "StillRunning",
    "current_invocation",
    "input_items",
    "openai_transient",
]
