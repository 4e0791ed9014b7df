"""What every agent-framework integration shares: the errors a durable agent raises
(``IntegrationError``, ``RunEnded``, ``StillRunning``), the shape of a reconnect tool's
``status`` function, the check of a tool mapping against the status functions, the lease
a Run of an app holds while the host drives it in process, the embedded worker that
``serve()`` starts (recovery at launch), and the turns of tool calls a framework starts
together (``CallTurns``).

Each integration exports these very objects under its own name
(``runkernel.integrations.pydantic_ai.RunEnded`` is
``runkernel.integrations.openai_agents.RunEnded``), so a host catches one class whatever
framework raised it.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Iterator, Mapping
from typing import Any

from runkernel.errors import VersionRequired
from runkernel import EndCauseKind, PeerError, StatusReply, ToolPolicy, UsageError, open_store
from runkernel.adapters.drive.actions import Action, RunCall, RunCalls
from runkernel.adapters.drive.driver_async import AsyncDriver
from runkernel.adapters.drive.lease_keeper import LeaseKeeper
from runkernel.errors import ConversationBusy, DriverError, StoreError
from runkernel.adapters.stores.contract import Store
from runkernel.adapters.worker.apps import AsyncPushApp
from runkernel.adapters.worker.loop import Worker, default_worker_id
from runkernel.kernel import Message, RecoveryMode
from runkernel.kernel.policies import tool_policies

#: A reconnect tool's ``status(operation_id, lease_epoch)``, sync or async.
StatusFunction = Callable[[str, int | None], StatusReply | Awaitable[StatusReply]]


class IntegrationError(UsageError):
    """The host's fault: the agent did something its durable Run cannot commit (a tool
    without a policy, a call out of runkernel's order, a new Run without a prompt, an
    agent run outside its durable runner); the message says what to use."""


class RunEnded(PeerError):
    """Not the host's fault: the Run is Ended (it failed, reached ``max_steps``, was
    cancelled with ``runkernel cancel``, or ended ``outcome_unknown`` under
    ``on_indeterminate=END_RUN``): ``cause`` is committed, the message says what to do
    for it, and ``operation_ids`` names the Indeterminate calls to reconcile downstream
    (empty when there are none). An Ended Run is never resumed."""

    def __init__(self, message: str, cause: EndCauseKind, operation_ids: tuple[str, ...]) -> None:
        super().__init__(message)
        self.cause = cause
        self.operation_ids = operation_ids


class StillRunning(PeerError):
    """Not the host's fault: a reconnect tool's downstream still said "running" after
    ``status_asks`` questions: nothing was committed wrongly, the call stays Executing;
    resume the Run later (a worker does, at its next poll)."""


def checked_policies(tools: Mapping[str, ToolPolicy | str], status: Mapping[str, object]) -> Mapping[str, ToolPolicy]:
    """Each tool's ``ToolPolicy`` (``"replay"`` and the like become theirs); a reconnect
    tool without a ``status`` function raises ``ValueError`` naming it."""
    policies = tool_policies(tools)
    for name, policy in policies.items():
        if policy.recovery.mode is RecoveryMode.RECONNECT and name not in status:
            raise ValueError(f"tool {name!r} reconnects after a crash: give it status={{{name!r}: fn}}")
    return policies


def held_by(store: Store, thread_id: str, own_run: str | None = None) -> ConversationBusy | None:
    """``ConversationBusy`` if a Run of the conversation other than ``own_run`` is not
    Ended (the one situation both integrations raise it for), else None."""
    head = store.thread_head(thread_id)
    active = head.active_run_id if head is not None else None
    return None if active is None or active == own_run else ConversationBusy(thread_id, active)


async def start_run(
    driver: AsyncDriver, store: Store, messages: list[Message], thread_id: str, run_id: str | None
) -> Action:
    """Start a new Run in the conversation: ``ConversationBusy`` if another Run holds it,
    whether found before the start or by the activation that lost the race to it."""
    if (busy := held_by(store, thread_id)) is not None:
        raise busy
    try:
        return await driver.start(messages, thread_id=thread_id, run_id=run_id)
    except (StoreError, DriverError) as error:  # another submission won: found by the driver, or at activation
        if (busy := held_by(store, thread_id, driver.run_id)) is not None:
            if driver.leases is not None and driver.run_id is not None:
                driver.leases.release(driver.run_id)  # the lease taken for a Run that never was
            raise busy from error
        raise


def host_leases(store: Store, app: str | None, duration: float) -> LeaseKeeper | None:
    """The lease a Run of ``app`` holds while the host drives it in process (``agent.run``,
    ``resume``): a worker of that app (``serve()``'s, or ``runkernel worker``) finds it
    leased and leaves it alone; if the process dies, the lease runs out after
    ``duration`` seconds and a worker takes the Run over. None without an app (no worker
    looks for such Runs)."""
    return None if app is None else LeaseKeeper(store, default_worker_id(), duration=duration)


def app_name(own: str | None, given: str | None, where: str) -> str:
    """The one app name of a durable agent: the one it records on its Runs (``own``) and
    the one a worker app is given (``given``) must agree; either alone will do."""
    if own is not None and given is not None and own != given:
        raise IntegrationError(f"app name mismatch: {where} records app={own!r} but the worker app is named {given!r}")
    name = own if own is not None else given
    if name is None:
        raise IntegrationError(f"{where} has no app name: give it app='NAME' (the name its Runs record for a worker)")
    return name


def app_version(app: str | None, version: str | None, has_mcp: bool, where: str) -> str | None:
    """The version a durable agent's Runs record beside ``app``: the one declared
    (``version=``), else None (the driver's default: its tool table's digest). An agent
    with MCP tools (listed by their servers while it runs, so no table names them) of an
    app must declare one: ``VersionRequired``."""
    if app is None or version is not None:
        return version
    if has_mcp:
        raise VersionRequired(
            f"{where} app={app!r} has MCP tools, listed while the agent runs, so its tool table cannot name "
            "its code: declare its version (version='...'), and change it when the code changes"
        )
    return None


def serve_app(
    store: str | Store, app: AsyncPushApp, lease_duration: float, worker: Mapping[str, Any], kind: type[Worker] = Worker
) -> Worker:
    """Start an embedded worker of ``app`` on ``store`` (its own connection) and return it:
    at launch it takes over the Runs a crash left behind, once their leases ran out, and
    keeps driving queued resumes; ``worker`` holds ``Worker``'s other options, ``kind``
    is ``Worker`` or a subclass."""
    opened = open_store(store) if isinstance(store, str) else store.reopen()
    embedded = kind(opened, app, lease_duration=lease_duration, **worker)
    embedded.start()
    return embedded


def handed_call(action: Action | None, call_id: str) -> RunCall | None:
    """The ``RunCall`` of ``call_id`` that ``action`` hands out, alone or as one call of
    a concurrent group (``RunCalls``); None if it hands out something else."""
    if isinstance(action, RunCall):
        return action if action.call_id == call_id else None
    if isinstance(action, RunCalls):
        return next((call for call in action.calls if call.call_id == call_id), None)
    return None


class CallTurns:
    """The tool calls of one Run that a framework starts together (Pydantic AI and the
    OpenAI Agents SDK run a step's calls as concurrent tasks): each call's task runs its
    body when the driver hands the call out, alone or in a group, and waits while
    another call's body runs; the reports go to the driver one at a time (``report``),
    since a driver takes one answer at a time."""

    def __init__(self) -> None:
        self._changed = asyncio.Event()
        #: the bodies that run now
        self.running = 0
        #: held around each answer to the driver and what follows it
        self.report = asyncio.Lock()

    def changed(self) -> None:
        """The driver's standing action changed: every waiting call looks again."""
        self._changed.set()
        self._changed = asyncio.Event()

    async def wait(self) -> None:
        """Until the standing action changes (only while another call's body runs:
        otherwise nothing would change it)."""
        await self._changed.wait()

    @contextlib.contextmanager
    def body(self) -> Iterator[None]:
        """Around a call's body and its answer: counted in ``running`` meanwhile, so the
        calls waiting for their turn wait until the answer changed the standing action."""
        self.running += 1
        try:
            yield
        finally:
            self.running -= 1


__all__ = [
    "CallTurns", "ConversationBusy", "IntegrationError", "RunEnded", "StatusFunction", "StillRunning", "app_name",
    "checked_policies", "handed_call", "held_by", "host_leases", "serve_app", "start_run",
]
