"""A group of concurrent calls handed out together (Step and ToolBatch, "Concurrent
ordinary calls").

When the kernel starts a group, one decision carries the group's Executing commit and
then one ``Execute`` per member (a recovery: a replay's ``Execute`` and a reconnect's
``QueryStatus`` per member). The core hands every start out at once, as one
``RunCalls``, and keeps the calls it handed out until each is answered: while any is
unanswered, ``RunCalls`` is what the core hands out next (with a member's retry added
to it), before any inbox command or ``recover`` is looked at, so no call that runs is
planned again. Status queries are kept here and handed out one at a time at quiet
points. Every member's executor starts exactly once, after its own Executing commit,
each under the lease check of the action that lists it first (W1) and its own fence
(W5). A member no longer Executing that attempt (the Run ended and closed it) is
dropped, never started, and no longer listed.
"""

from __future__ import annotations

from collections.abc import Sequence

from runkernel.adapters.drive.actions import RunCall
from runkernel.kernel.protocol import Effect, Execute, QueryStatus
from runkernel.kernel.state import CallExecuting, RunSnapshot

#: An executor start or a status query of a group member, still to hand out.
Asked = Execute | QueryStatus


def later_asks(effects: Sequence[Effect], index: int) -> list[Asked]:
    """The group members' starts and queries that follow ``effects[index]``."""
    return [e for e in effects[index + 1 :] if isinstance(e, (Execute, QueryStatus))]


def next_asked(kept: list[Asked], state: RunSnapshot) -> Asked | None:
    """The next kept start or query whose call is still Executing that attempt (taken
    off ``kept``), or None; the ones whose call moved on are dropped."""
    while kept:
        effect = kept.pop(0)
        if is_executing(state, effect.call_id, effect.attempt):
            return effect
    return None


def take_starts(kept: list[Asked], state: RunSnapshot) -> list[Execute]:
    """Every kept start whose call is still Executing that attempt, taken off ``kept``
    (the queries stay; starts whose call moved on are dropped)."""
    starts = [e for e in kept if isinstance(e, Execute)]
    kept[:] = [e for e in kept if not isinstance(e, Execute)]
    return [e for e in starts if is_executing(state, e.call_id, e.attempt)]


def unanswered(handed: dict[str, RunCall], state: RunSnapshot) -> tuple[RunCall, ...]:
    """The calls handed out together that are still Executing their attempt, in call
    order (``handed`` loses the others: a Run's end closed them)."""
    batch = state.open_batch
    for call_id, call in list(handed.items()):
        if not is_executing(state, call_id, call.attempt):
            del handed[call_id]
    if batch is None:
        return ()
    return tuple(handed[c.call_id] for c in batch.calls if c.call_id in handed)


def is_executing(state: RunSnapshot, call_id: str, attempt: int) -> bool:
    """Whether ``call_id`` of the open batch is Executing ``attempt``."""
    batch = state.open_batch
    call = batch.call(call_id) if batch is not None else None
    return call is not None and call.status == CallExecuting(attempt)
