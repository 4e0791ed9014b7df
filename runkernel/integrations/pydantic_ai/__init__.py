"""Durable Pydantic AI agents: runkernel as the durability backend of an ``Agent``.

::

    durable = RunkernelDurability("sqlite:///agent.db", tools={"search": "replay", "send_email": "indeterminate"})
    agent = Agent(model, output_type=[str, DeferredToolRequests], capabilities=[durable])
    result = await agent.run("...", conversation_id="inbox-1")  # a Run in Thread inbox-1
    result = await durable.resume(agent, run_id)                # after a crash, or with answers

(each tool's recovery policy is a ``ToolPolicy`` or one of ``"replay"``,
``"reconnect"``, ``"indeterminate"``; docs/pydantic-ai.md has the whole guide).

Each model request is one inference step (its ``ModelResponse`` kept verbatim as message
metadata where the build has it); the response's function calls form the step's ordered
batch (call id = the tool call id); ``Executing{n}`` is durable before a tool body runs;
``requires_approval=True`` and declared external tools are the gate (Requested→Awaiting).

Why a plain capability and not ``BaseDurabilityCapability`` (the engine API of Temporal,
DBOS and Prefect): that API is journal-and-replay. The agent loop runs again from the
start and every durable unit returns its journaled result, so a unit interrupted midway
simply runs again: what a unit is, and whether it may run twice, is the engine's, not the
tool's. runkernel decides the opposite way round: a Run continues from committed facts,
never by replaying the loop, and what happens to a call found Executing is the tool's
committed recovery policy (replay with its operation id, ask a reconnect tool its status,
or never again). The hooks this needs are public capability hooks (``wrap_run``,
``wrap_model_request``, ``wrap_tool_execute``, ``handle_deferred_tool_calls``); the
engine API would add a replay journal that runkernel's store already replaces, and its
backend sees an opaque cache key where runkernel needs the tool call id (which
``wrap_tool_execute`` has).

Recovery is ``RunkernelDurability.resume(agent, run_id)``: it rebuilds the history from
the store and runs the agent on it; the driver's pick-up decides what each call gets
(its committed result, a replay attempt, a status question). With the app named once,
``RunkernelDurability(..., app="NAME")``, ``durable.serve(agent)`` at launch starts the
embedded worker that does it for every Run of the app a crash left behind (recovery at
launch), and ``durable.worker_app(agent)`` makes the agent the app of ``runkernel worker
--app MODULE:ATTR``, which resumes each Run of app NAME that has work under its lease; a tool body then finds the
lease epoch, its fencing token, in ``current_invocation().lease_epoch``
(``current_invocation()`` is runkernel's one accessor: it returns the attempt's
``RunCall``, as a pull-mode tool and a push-mode host get it). With
``status_asks=N`` a reconnect tool still running after N questions ends the agent run
with ``StillRunning`` and leaves the Run as committed (a worker goes on to other Runs).

A streamed response (``agent.run_stream``, ``iter``) is committed only once complete;
with ``checkpoint_every=N`` the text so far is saved every N deltas as a best-effort
checkpoint, never truth: after a crash the model is asked again.

A module-level durable agent works from any thread (the store URL is opened once per
thread). A model error that ``transient`` calls transient (default
``pydantic_ai_transient``: HTTP 408/409/429/5xx, connection errors, timeouts) commits
nothing: the request is sent again after a capped backoff, up to ``model_attempts``
times; any other ends the Run ``failed``. The activation records the type of the run's
``deps``; ``resume`` with deps of another type raises ``DepsMismatch``, and
``worker_app(agent, deps=factory)`` (and ``serve``) give each Run under a worker its deps.

Pydantic AI runs function tools first and collects deferred ones at the end of the step,
so the batch is committed in that order (function calls, then deferred calls, each in the
model's order) and tools run one at a time (``parallel_execution_mode('sequential')``).
"""

from runkernel.adapters.drive.invocation import current_invocation, invocation_scope
from runkernel.integrations._common import ConversationBusy, IntegrationError, RunEnded, StatusFunction, StillRunning
from runkernel.integrations.pydantic_ai._capability import RunkernelDurability
from runkernel.integrations.pydantic_ai._context import (
    DeferredAfterStart,
    DepsMismatch,
    SystemPromptNotKept,
)
from runkernel.integrations.pydantic_ai._errors import pydantic_ai_transient
from runkernel.integrations.pydantic_ai._mapping import to_model_messages
from runkernel.integrations.pydantic_ai._worker import DepsFactory, DurableAgentApp

__all__ = [
    "ConversationBusy",
    "DeferredAfterStart",
    "DepsFactory",
    "DepsMismatch",
    "DurableAgentApp",
    "IntegrationError",
    "RunEnded",
    "RunkernelDurability",
    "StatusFunction",
    "StillRunning",
    "SystemPromptNotKept",
    "current_invocation",
    "invocation_scope",
    "pydantic_ai_transient",
    "to_model_messages",
]
