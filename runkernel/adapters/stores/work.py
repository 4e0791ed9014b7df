"""What a store keeps per Run so that workers find work and ``runkernel runs`` lists
Runs without decoding any history: a summary row, rewritten by each commit in its own
transaction (constant size, so the cost model holds).

A Run has work (Workers and leases) when nobody holds a valid lease on it
and it is Running (new, or orphaned by a worker that died) and not quiet, or it has a
pending inbox command (Awaiting, or Ended with commands left to refuse), or it is
Awaiting a wait whose time came (a due timer, an expired approval), or it is a quiet
parent one of whose children has ended (or was never activated: a crash fell between
the delegation's Executing commit and the child's activation).

A Run is quiet while its only open work is Executing concurrent delegations. Each
commit tells its store whether the Run is quiet and which children it then waits for
(``awaited_children``), and each activation names its parent call, so a store answers
both questions from indexed rows, never from history.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, assert_never

from attrs import frozen

from runkernel.kernel.delegation import executing_delegations, next_to_gate
from runkernel.kernel.policies import Policies, ToolPolicy
from runkernel.kernel.state import Awaiting, CallAwaiting, Ended, ParentCall, Running, RunSnapshot
from runkernel.kernel.values import WaitKind, instant

#: The tables of a runkernel store, the same on SQLite and PostgreSQL (each store module
#: gives their dialect's definitions; a store holding anything else is not opened).
STORE_TABLES = (
    "meta",
    "threads",
    "runs",
    "commits",
    "tickets",
    "closed_batches",
    "applied_resumes",
    "inbox",
    "checkpoints",
    "reconciliations",
    "leases",
    "awaited_children",
    "workers",
    "compatible_versions",
)

#: How a store reads a call committed without a policy when it judges quietness: as a
#: delegation that may start now. A store has no host policies, and taking such a Run
#: for not quiet only costs a drive, where the other reading could leave it undriven.
_UNKNOWN_MAY_START = Policies(default=ToolPolicy(terminal_only_delegation=True))


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
    #: the version of its app its activation recorded (None: activated before versions
    #: existed, or without an app)
    app_version: str | None = None


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


def summary_of(snapshot: RunSnapshot, app: str | None, app_version: str | None = None) -> RunSummary:
    """The summary row of a Run's latest snapshot (``app`` and ``app_version``: its
    activation's)."""
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
        app_version,
    )


def awaited_children(snapshot: RunSnapshot) -> tuple[str, ...]:
    """The Run ids of the children a quiet Run waits for, in call order; empty when the
    Run is not quiet (it is not Running, or something besides Executing concurrent
    delegations can move: the next call to gate, a call after a finished group)."""
    if not isinstance(snapshot.state, Running):
        return ()
    batch = snapshot.open_batch
    if batch is None:
        return ()
    running = executing_delegations(batch)
    if not running or next_to_gate(batch, _UNKNOWN_MAY_START) is not None:
        return ()
    return tuple(c.delegation.run_id for c in running if c.delegation is not None)


def has_work(
    summary: RunSummary, has_pending_command: bool, now: float, *, quiet: bool = False, child_done: bool = False
) -> bool:
    """Whether an unleased Run needs a worker now (the rule every store's query keeps):
    ``quiet`` says the Run waits only for children, ``child_done`` that one of them has
    ended or was never activated."""
    if has_pending_command:
        return True
    if summary.state == "running":
        return not quiet or child_done
    return summary.state == "awaiting" and summary.wake_at is not None and summary.wake_at <= now


def parent_columns(parent: ParentCall | None) -> tuple[str | None, str | None, str | None]:
    """The ``parent_thread_id, parent_run_id, parent_call_id`` columns of a Run's row."""
    return (None, None, None) if parent is None else (parent.thread_id, parent.run_id, parent.call_id)


def parent_from_columns(row: Sequence[Any]) -> ParentCall | None:
    """The parent call those three columns name, or None."""
    if row[0] is None or row[1] is None or row[2] is None:
        return None
    return ParentCall(str(row[0]), str(row[1]), str(row[2]))


def activation_parent(line: Mapping[str, Any]) -> ParentCall | None:
    """The parent call a stored commit line names (a child's activation), or None:
    what a migration fills the parent columns from."""
    parent = line.get("parent")
    if parent is None:
        return None
    return ParentCall(str(parent["thread_id"]), str(parent["run_id"]), str(parent["call_id"]))
