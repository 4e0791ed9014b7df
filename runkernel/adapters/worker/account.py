"""What a worker tells of itself (Workers and leases: what an operator
sees): its report's counts, what a drive waits for, which failure of a drive is a store
outage rather than a failed drive, which Run a drive ended ``failed``, and which lease
was a take-over."""

from __future__ import annotations

from attrs import define, fields

from runkernel.adapters.drive.events import Acknowledged, Position
from runkernel.adapters.stores.contract import Store, StoreUnavailable
from runkernel.kernel.state import CallExecuting, Ended, Running, RunSnapshot


@define
class WorkerReport:
    """What a worker did (counts; printed by ``runkernel worker`` and the race test)."""

    drives: int = 0
    commits: int = 0
    #: leases taken on a Run some other worker had leased before (epoch > 1)
    takeovers: int = 0
    #: Runs another worker held when this one tried to take them
    contended: int = 0
    #: drives stopped because a commit lost (another writer won)
    conflicts: int = 0
    #: drives stopped because the lease was gone
    leases_lost: int = 0
    #: failed drives: stopped by an exception the host's hooks, gate or push host (any
    #: app kind) raised, or a store that refused (damaged, not an outage); nothing more
    #: was committed, and the Run is picked up again later
    failures: int = 0
    #: Runs this worker's drives ended ``failed`` (a model error that is not transient or
    #: ran out of attempts, a host or agent that raised and ended its Run, too many steps)
    runs_failed: int = 0
    #: tool calls whose executor raised (``ToolRaised``): each committed as its call's
    #: outcome (a retryable error for a replay tool, an unknown outcome otherwise)
    tool_exceptions: int = 0
    #: model calls that raised (``ModelFailed``): each either waits for another attempt,
    #: nothing committed, or ends its Run failed
    model_failures: int = 0
    #: store outages ridden out (W6): each one line when it began and one when it ended
    outages: int = 0
    #: drives cut short by a store outage (not failures: each continues from committed
    #: facts once the store answers)
    interrupted: int = 0
    #: the most Runs this worker had in flight at once (at most its ``concurrency``)
    in_flight_peak: int = 0


def add_counts(total: WorkerReport, part: WorkerReport) -> None:
    """Add a slot's counts to its worker's report (not ``outages``: the slots share the
    worker's one count; not ``in_flight_peak``: the worker's own)."""
    for field in fields(WorkerReport):
        if field.name not in ("outages", "in_flight_peak"):
            setattr(total, field.name, getattr(total, field.name) + getattr(part, field.name))


def add_slots(total: WorkerReport, slots: list[tuple[int, WorkerReport | None]], peak: int) -> None:
    """Add to ``total`` each slot's drives refused (its store could not be opened) and its
    worker's counts, if it has one, and a drain's in-flight peak."""
    for refused, report in slots:
        total.failures += refused
        if report is not None:
            add_counts(total, report)
    total.in_flight_peak = max(total.in_flight_peak, peak)


def version_of(snapshot: RunSnapshot | None) -> int:
    """The Run's version, -1 for a Run the store does not have."""
    return -1 if snapshot is None else snapshot.version


def store_outage_in(error: BaseException) -> StoreUnavailable | None:
    """The ``StoreUnavailable`` a failed drive stopped on, if it did: raised itself, or
    the cause of what the driver or the host raised (``DriverStopped``, an agent
    framework's wrapper)."""
    seen: BaseException | None = error
    for _ in range(8):  # a short chain: a host's wrappers, never a cycle
        if seen is None:
            return None
        if isinstance(seen, StoreUnavailable):
            return seen
        seen = seen.__cause__ or seen.__context__
    return None


def in_flight_after(event: Acknowledged) -> str:
    """What a drive waits for after the commit ``event`` acknowledges."""
    if event.position in (Position.CALL_START, Position.CALL_RETRY) and event.commit.batch is not None:
        running = [c for c in event.commit.batch.calls if isinstance(c.status, CallExecuting)]
        if running:
            named = ", ".join(f"{c.tool} (call {c.call_id})" for c in running)
            return f"its tool {named} to return, then the commit of its outcome"
    return "the step in flight (a model call or a tool) and its commit"


def taken_over(store: Store, run_id: str, worker_id: str) -> bool:
    """Whether the Run's last commit was written under another worker's lease."""
    snapshot = store.run(run_id)
    if snapshot is None or not isinstance(snapshot.state, Running):
        return False
    writer = store.writer_of(snapshot.thread_id, snapshot.version)
    return writer is not None and writer.worker_id != worker_id


def ended_since_listed(store: Store, snapshot: RunSnapshot | None) -> bool:
    """Whether a Run a pass listed has nothing left to drive: Ended (by another worker,
    since the poll) with no pending command, an Ended Run's only work. Driving it anyway
    would take and release a lease for nothing: two durable transactions. (A Run this
    worker set aside is driven on instead: its drive finds the lapsed lease itself.)"""
    return snapshot is not None and isinstance(snapshot.state, Ended) and not store.pending_commands(snapshot.run_id)
