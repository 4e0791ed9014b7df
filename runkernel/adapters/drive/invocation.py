"""The call a tool body runs for, for tools whose signatures the host does not own
(framework tools): ``current_invocation()`` answers inside an executor runkernel started,
contextvar-style (ambient context for what a signature cannot carry), with the ``RunCall`` of that attempt: the same
value a push-mode host is handed and a pull-mode tool is given. It carries the operation
id (the idempotency key) and the lease epoch (the fencing token: a downstream that
remembers the highest epoch it saw for a Run refuses a start with a lower one). The one
accessor serves the pull-mode runtime, the integrations and hosts that set it
themselves with ``invocation_scope``."""

from __future__ import annotations

import contextvars
from types import TracebackType

from runkernel.adapters.drive.actions import RunCall
from runkernel.errors import NoInvocation as NoInvocation

_CURRENT: contextvars.ContextVar[RunCall | None] = contextvars.ContextVar(
    "runkernel_current_invocation", default=None
)


def current_invocation() -> RunCall:
    """The ``RunCall`` whose executor runs now (``operation_id``: the idempotency key;
    ``lease_epoch``: the fencing token under a worker); ``NoInvocation`` (a
    ``LookupError`` too) outside one."""
    invocation = _CURRENT.get()
    if invocation is None:
        raise NoInvocation("no tool invocation is in progress: current_invocation() works only inside a tool runkernel runs")
    return invocation


class invocation_scope:  # noqa: N801 - a context manager used like a function
    """Make ``call`` the current invocation inside ``with invocation_scope(call):`` (or
    ``async with``): what a driver does around an executor, and the test helper for
    calling a tool body directly."""

    def __init__(self, call: RunCall) -> None:
        self.call = call
        self._tokens: list[contextvars.Token[RunCall | None]] = []

    def __enter__(self) -> RunCall:
        self._tokens.append(_CURRENT.set(self.call))
        return self.call

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        _CURRENT.reset(self._tokens.pop())

    async def __aenter__(self) -> RunCall:
        return self.__enter__()

    async def __aexit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        self.__exit__(kind, error, trace)


__all__ = ["NoInvocation", "current_invocation", "invocation_scope"]
