"""What a store keeps per Run so that workers find work and ``runkernel runs`` lists
Runs without decoding any history: a summary row, rewritten by each commit in its own
transaction (constant size, so the cost model holds).

A Run has work (DESIGN.md, Workers and leases) when nobody holds a valid lease on it
and it is Running (new, or orphaned by a worker that died), or it has a pending inbox
command (Awaiting, or Ended with commands left to refuse), or it is Awaiting a wait
whose time came (a due timer, an expired approval).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, assert_never

from attrs import frozen

from runkernel.kernel.state import Awaiting, CallAwaiting, Ended, Running, RunSnapshot
from runkernel.kernel.values import WaitKind, instant


@frozen
class RunSummary:
    """One Run as ``runkernel runs`` lists it and work discovery filters it."""

    run_id: str
    thread_id: str
    state: str  # "running" | "awaiting" | "ended"
    step: int
    version: int
    app: str | None
    #: what an Awaiting Run waits for (the wait kind), else None
    waiting_for: str | None
    #: an Awaiting Run's due timer or approval deadline, in seconds since the epoch
    #: (the clock leases use), else None
    wake_at: float | None


def state_name(snapshot: RunSnapshot) -> str:
    """The disposition's name, as the trace spells it."""
    match snapshot.state:
        case Running():
            return "running"
        case Awaiting():
            return "awaiting"
        case Ended():
            return "ended"
        case _:
            assert_never(snapshot.state)


def wake_time(snapshot: RunSnapshot) -> float | None:
    """When an Awaiting Run's wait needs a worker without any command: a scheduled
    call's due time, or an approval's deadline. None otherwise (or unreadable)."""
    if not isinstance(snapshot.state, Awaiting):
        return None
    batch = snapshot.open_batch
    call = batch.call(snapshot.state.ticket.call_id) if batch else None
    if call is None or not isinstance(call.status, CallAwaiting):
        return None
    wait = call.status.wait
    when = wait.due_at if wait.kind is WaitKind.SCHEDULED else wait.expires_at
    if when is None:
        return None
    try:
        return instant(when).timestamp()
    except ValueError:
        return None


def summary_of(snapshot: RunSnapshot, app: str | None) -> RunSummary:
    """The summary row of a Run's latest snapshot."""
    waiting = snapshot.state.ticket.wait.value if isinstance(snapshot.state, Awaiting) else None
    return RunSummary(
        snapshot.run_id,
        snapshot.thread_id,
        state_name(snapshot),
        snapshot.step,
        snapshot.version,
        app,
        waiting,
        wake_time(snapshot),
    )


def has_work(summary: RunSummary, has_pending_command: bool, now: float) -> bool:
    """Whether an unleased Run needs a worker now (the rule every store's query keeps)."""
    if has_pending_command:
        return True
    if summary.state == "running":
        return True
    return summary.state == "awaiting" and summary.wake_at is not None and summary.wake_at <= now


#: the summary columns, in RunSummary's field order, as both SQL stores keep them
SUMMARY_COLUMNS = "run_id, thread_id, state, step, version, app, waiting_for, wake_at"


def listing_query(
    placeholder: str, newest_first: str, *, state: str | None, thread_id: str | None, limit: int | None
) -> tuple[str, list[object]]:
    """The ``runkernel runs`` query over a store's ``runs`` table, in the SQL dialect whose
    parameter ``placeholder`` and newest-first ordering expression are given."""
    query = f"SELECT {SUMMARY_COLUMNS} FROM runs WHERE 1 = 1"
    params: list[object] = []
    if state is not None:
        query += f" AND state = {placeholder}"
        params.append(state)
    if thread_id is not None:
        query += f" AND thread_id = {placeholder}"
        params.append(thread_id)
    query += f" ORDER BY {newest_first} DESC"
    if limit is not None:
        query += f" LIMIT {placeholder}"
        params.append(limit)
    return query, params


def summary_from_row(row: Sequence[Any]) -> RunSummary:
    """A RunSummary from a row of ``SUMMARY_COLUMNS``."""
    return RunSummary(
        str(row[0]),
        str(row[1]),
        str(row[2]),
        int(row[3]),
        int(row[4]),
        row[5],
        row[6],
        None if row[7] is None else float(row[7]),
    )
