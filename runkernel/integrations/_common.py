"""What every agent-framework integration shares: the errors a durable agent raises
(``IntegrationError``, ``RunEnded``, ``StillRunning``), the shape of a reconnect tool's
``status`` function, and the check of a tool mapping against the status functions.

Each integration exports these very objects under its own name
(``runkernel.integrations.pydantic_ai.RunEnded`` is
``runkernel.integrations.openai_agents.RunEnded``), so a host catches one class whatever
framework raised it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping

from runkernel import EndCauseKind, PeerError, StatusReply, ToolPolicy, UsageError
from runkernel.kernel import RecoveryMode
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


__all__ = ["IntegrationError", "RunEnded", "StatusFunction", "StillRunning", "checked_policies"]
