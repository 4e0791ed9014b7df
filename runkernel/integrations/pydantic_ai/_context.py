"""What the integration raises, and what it keeps for the run it serves."""

from __future__ import annotations

import contextvars

import attrs

from runkernel import AsyncDriver, EndCauseKind, PeerError, RunCall, UsageError
from runkernel._deprecation import RenamedClass
from runkernel.adapters.drive.actions import Answer
from runkernel.kernel import ResumePayload


class IntegrationError(UsageError):
    """The host's fault: the agent did something its durable Run cannot commit (a tool
    without a policy, a call out of runkernel's order, a new Run without a prompt); the
    message says what to use."""


class DeferredAfterStart(IntegrationError):
    """The host's fault: a tool body raised ``ApprovalRequired`` or ``CallDeferred`` after
    its Executing commit: the seed has no Executing→Awaiting edge for it. Declare the
    wait instead."""


class RunEnded(PeerError):
    """Not the host's fault: the Run ended while the agent still ran (an end from
    outside, such as ``runkernel cancel``, or ``on_indeterminate=END_RUN`` after a call
    whose outcome nobody knows): ``cause`` is committed, and ``operation_ids`` names the
    Indeterminate calls to reconcile downstream."""

    def __init__(self, message: str, cause: EndCauseKind, operation_ids: tuple[str, ...]) -> None:
        super().__init__(message)
        self.cause = cause
        self.operation_ids = operation_ids


class StillRunning(PeerError):
    """Not the host's fault: a reconnect tool's downstream still said "running" after
    ``status_asks`` questions: nothing was committed wrongly, the call stays Executing;
    resume the Run later (a worker does, at its next poll)."""


def _invocation(
    run_id: str, call_id: str, tool: str, operation_id: str, attempt: int, lease_epoch: int | None = None
) -> RunCall:
    """The ``RunCall`` an ``Invocation(...)`` of the old signature stands for (it carried
    no arguments)."""
    return RunCall(run_id, call_id, tool, None, operation_id, attempt, lease_epoch=lease_epoch)


class _Invocation(metaclass=RenamedClass):
    """Deprecated: a durable tool body's ``current_invocation()`` is the ``RunCall`` of
    its attempt, as everywhere in runkernel. ``isinstance(x, Invocation)`` is
    ``isinstance(x, RunCall)``, and ``Invocation(run_id, call_id, tool, operation_id,
    attempt, lease_epoch)`` builds a ``RunCall``."""

    __new_class__ = RunCall
    __build__ = staticmethod(_invocation)


@attrs.frozen
class PickUp:
    """The Run ``resume`` asks the next agent run to pick up: its answers by call id, and
    the driver to use (a worker's, holding the lease) or None for a fresh one."""

    run_id: str
    answers: dict[str, ResumePayload | Answer]
    driver: AsyncDriver | None = None


_PICK_UP: contextvars.ContextVar[PickUp | None] = contextvars.ContextVar("runkernel_pick_up", default=None)
