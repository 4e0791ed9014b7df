"""A group of concurrent calls carried out one call at a time (Step and ToolBatch,
"Concurrent ordinary calls").

When the kernel starts a group, one decision carries the group's Executing commit and
then one ``Execute`` per member (a recovery: a replay's ``Execute`` and a reconnect's
``QueryStatus`` per member). The core hands the first one out and keeps the rest here;
each later one is handed out at a quiet point, before ``recover`` is asked (a member's
retry, handed out at once, keeps the others waiting, never drops them), so
every member's executor starts exactly once, after its own Executing commit, each under
its own lease check (W1) and fence (W5). A member no longer Executing that attempt (the
Run ended and closed it) is dropped, never started.
"""

from __future__ import annotations

from collections.abc import Sequence

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
    batch = state.open_batch
    while kept:
        effect = kept.pop(0)
        call = batch.call(effect.call_id) if batch is not None else None
        if call is not None and call.status == CallExecuting(effect.attempt):
            return effect
    return None
