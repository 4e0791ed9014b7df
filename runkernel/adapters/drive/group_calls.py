"""A group of concurrent calls handed out together (Step and ToolBatch, "Concurrent
ordinary calls").

When the kernel starts a group, one decision carries the group's Executing commit and
then one ``Execute`` per member; a recovery's decision carries an ``Execute`` per
replayed member, then a ``QueryStatus`` per reconnect member. The core hands every
start out at once, as one ``RunCalls`` (one start alone stays a ``RunCall``), and keeps
the calls it handed out until each is answered: while any is unanswered, ``RunCalls``
is what the core hands out next (with a member's retry added to it), before any inbox
command or ``recover`` is looked at, so no call that runs is planned again. A status
query is handed out alone; the group's other queries are planned again by ``recover``
once the starts and that query are answered (nothing was started for them). Every
member's executor starts exactly once, after its own Executing commit, each under the
lease check of the action that lists it first (W1) and its own fence (W5). A member no
longer Executing that attempt (the Run ended and closed it) is dropped, never started,
and no longer listed.
"""

from __future__ import annotations

from collections.abc import Sequence

from runkernel.adapters.drive.actions import RunCall
from runkernel.kernel.protocol import Effect, Execute
from runkernel.kernel.state import CallExecuting, RunSnapshot


def later_starts(effects: Sequence[Effect], index: int) -> list[Execute]:
    """The group members' starts that follow ``effects[index]``."""
    return [e for e in effects[index + 1 :] if isinstance(e, Execute)]


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
