"""The tool invocation in progress, for tools whose signatures the host does not own
(framework tools): ``current_invocation()`` answers inside an executor the runtime
started, contextvar-style (STYLE.md principle 5). It carries the operation id (the
idempotency key) and the lease epoch (the fencing token: a downstream that remembers
the highest epoch it saw for a Run refuses a start with a lower one)."""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator

from runkernel.adapters.ports import ToolInvocation
from runkernel.errors import NoInvocation as NoInvocation

_CURRENT: contextvars.ContextVar[ToolInvocation | None] = contextvars.ContextVar(
    "runkernel_current_invocation", default=None
)


def current_invocation() -> ToolInvocation:
    """The invocation of the executor running now; ``NoInvocation`` outside one."""
    invocation = _CURRENT.get()
    if invocation is None:
        raise NoInvocation("no tool invocation is in progress: current_invocation() works only inside a tool runkernel runs")
    return invocation


@contextlib.contextmanager
def invocation_scope(invocation: ToolInvocation) -> Iterator[ToolInvocation]:
    """Make ``invocation`` the current one for the block: what the runtime does around
    an executor, and the test helper for calling a tool directly."""
    token = _CURRENT.set(invocation)
    try:
        yield invocation
    finally:
        _CURRENT.reset(token)
