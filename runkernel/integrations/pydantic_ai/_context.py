"""What the integration raises, and the invocation a durable tool body runs for."""

from __future__ import annotations

import contextvars
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import attrs

from runkernel import Answer, AsyncDriver, EndCauseKind, PeerError, UsageError
from runkernel.kernel.protocol import ResumePayload


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


@attrs.frozen
class Invocation:
    """The call a tool body runs for: ``operation_id`` is the idempotency key downstream,
    the same for every attempt; ``attempt`` counts from 1. ``lease_epoch`` is the fencing
    token under a worker's lease (pass it downstream beside ``operation_id``: it rises
    when another worker takes the Run over); None when no worker drives the Run."""

    run_id: str
    call_id: str
    tool: str
    operation_id: str
    attempt: int
    lease_epoch: int | None = None


@attrs.frozen
class PickUp:
    """The Run ``resume`` asks the next agent run to pick up: its answers by call id, and
    the driver to use (a worker's, holding the lease) or None for a fresh one."""

    run_id: str
    answers: dict[str, ResumePayload | Answer]
    driver: AsyncDriver | None = None


_INVOCATION: contextvars.ContextVar[Invocation | None] = contextvars.ContextVar("runkernel_invocation", default=None)
_PICK_UP: contextvars.ContextVar[PickUp | None] = contextvars.ContextVar("runkernel_pick_up", default=None)


def current_invocation() -> Invocation:
    """The runkernel call the running tool body serves (for its idempotency key)."""
    invocation = _INVOCATION.get()
    if invocation is None:
        raise LookupError("no runkernel invocation: current_invocation() works only inside a durable tool body")
    return invocation


@asynccontextmanager
async def invocation_scope(invocation: Invocation) -> AsyncIterator[Invocation]:
    """Test helper: run a tool body outside an agent as if runkernel had started it."""
    token = _INVOCATION.set(invocation)
    try:
        yield invocation
    finally:
        _INVOCATION.reset(token)
