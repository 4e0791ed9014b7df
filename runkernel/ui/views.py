"""What the console shows, read from a store: plain data for the templates, no HTTP.

Every page is answered from committed facts only, through the same functions as the
CLI (``list_runs`` as ``runkernel runs``, ``inspect_json`` as ``runkernel inspect``).
The Runs list costs a fixed number of queries per page whatever the store holds: one
page query and one capped count per state, each a range of an index with a limit.
"""

from __future__ import annotations

from typing import Any

import attrs
from attrs import frozen

from runkernel.adapters.stores.contract import Store
from runkernel.adapters.stores.serial import answer_name, answered_ticket
from runkernel.adapters.stores.work import RunSummary, state_name
from runkernel.adapters.stores.inspect_view import inspect_json
from runkernel.adapters.stores.run_views import lease_text
from runkernel.kernel.edges import call_phase
from runkernel.kernel.state import Awaiting, CallAwaiting, CallIndeterminate, RunSnapshot
from runkernel.kernel.values import WaitKind
from runkernel.specs.export import labelled_edges
from runkernel.specs.machines import MACHINES, state_names

#: Runs per page of the Runs list and of Approvals
PAGE_SIZE = 50

#: A state's count stops here ("1000+"): counting is a range of an index with a limit
COUNT_CAP = 1000

STATES = ("running", "awaiting", "ended")


@frozen
class RunFilter:
    """The Runs list's filters; None is "any"."""

    state: str | None = None
    app: str | None = None
    thread_id: str | None = None


@frozen
class RunsPage:
    """One page of the Runs list, newest first."""

    runs: list[RunSummary]
    #: per shown Run, its lease as ``inspect`` tells it (holder, epoch, expiry by the
    #: store's clock; "unleased")
    leases: dict[str, str]
    #: per state, the number of Runs matching the other filters, at most COUNT_CAP
    counts: dict[str, int]
    #: the run id the next page starts after, None on the last page
    next_after: str | None


def runs_page(store: Store, where: RunFilter, after: str | None = None) -> RunsPage:
    """A page of Runs: ``PAGE_SIZE`` + 1 rows read (the extra one says whether a next
    page exists), the shown Runs' leases in one keyed read, then one capped count per
    state: ``2 + len(STATES)`` queries."""
    rows = store.list_runs(
        state=where.state, app=where.app, thread_id=where.thread_id, limit=PAGE_SIZE + 1, after=after
    )
    counts = {
        state: store.count_runs(state=state, app=where.app, thread_id=where.thread_id, cap=COUNT_CAP)
        for state in STATES
    }
    more = len(rows) > PAGE_SIZE
    shown = rows[:PAGE_SIZE]
    statuses = store.lease_statuses([r.run_id for r in shown])
    leases = {r.run_id: lease_text(statuses[r.run_id], r.state) for r in shown}
    return RunsPage(shown, leases, counts, shown[-1].run_id if more and shown else None)


@frozen
class PendingWait:
    """One Awaiting Run's open wait, as Approvals shows it."""

    run_id: str
    thread_id: str
    app: str | None
    ticket_id: str
    wait: str
    call_id: str
    tool: str | None
    arguments: Any
    expires_at: str | None
    #: the gate's request (the JSON given with a hold), committed with the wait; None
    #: when the hold gave none
    request: Any
    #: the answer already pending in the inbox for this wait (its command number and
    #: what it answers, ``approve``...): a wait takes one, so no form offers a second
    answer_command: int | None = None
    answer: str | None = None


def with_answer(store: Store, wait: PendingWait | None) -> PendingWait | None:
    """``wait`` with the answer pending for its ticket, if one is."""
    if wait is None:
        return None
    for entry in store.pending_commands(wait.run_id):
        if answered_ticket(entry.body) == wait.ticket_id:
            return attrs.evolve(wait, answer_command=entry.entry_id, answer=answer_name(entry.body))
    return wait


def pending_waits(store: Store, after: str | None = None) -> tuple[list[PendingWait], str | None]:
    """The open waits of a page of Awaiting Runs (newest first): one listing query, then
    one key lookup per Run on the page."""
    rows = store.list_runs(state="awaiting", limit=PAGE_SIZE + 1, after=after)
    found = []
    for summary in rows[:PAGE_SIZE]:
        snapshot = store.run(summary.run_id)
        if snapshot is None:
            continue
        wait = with_answer(store, pending_wait(snapshot, summary.app))
        if wait is not None:
            found.append(wait)
    more = len(rows) > PAGE_SIZE
    return found, rows[PAGE_SIZE - 1].run_id if more else None


def pending_wait(snapshot: RunSnapshot, app: str | None) -> PendingWait | None:
    """The Run's open wait, if it is Awaiting."""
    state = snapshot.state
    if not isinstance(state, Awaiting):
        return None
    batch = snapshot.batch
    call = batch.call(state.ticket.call_id) if batch is not None else None
    status = call.status if call is not None else None
    wait = status.wait if isinstance(status, CallAwaiting) else None
    return PendingWait(
        run_id=snapshot.run_id,
        thread_id=snapshot.thread_id,
        app=app,
        ticket_id=state.ticket.ticket_id,
        wait=state.ticket.wait.value,
        call_id=state.ticket.call_id,
        tool=None if call is None else call.tool,
        arguments=None if call is None else call.arguments,
        expires_at=None if wait is None else wait.expires_at,
        request=None if wait is None else wait.request,
    )


@frozen
class Unreconciled:
    """An Indeterminate call nobody has reconciled yet, as Approvals shows it."""

    run_id: str
    call_id: str
    tool: str
    arguments: Any
    operation_id: str
    reason: str


def unreconciled_calls(store: Store) -> list[Unreconciled]:
    """The Indeterminate calls without a recorded reconciliation in the latest batch of
    each of the newest ``PAGE_SIZE`` Runs: one listing query, then a key lookup per Run
    and one per Indeterminate call. (A call of an earlier batch is reconciled from its
    Run's page, which reads the Run's whole log as ``inspect`` does.)"""
    found = []
    for summary in store.list_runs(limit=PAGE_SIZE):
        snapshot = store.run(summary.run_id)
        batch = snapshot.batch if snapshot is not None else None
        for call in batch.calls if batch is not None else ():
            if isinstance(call.status, CallIndeterminate) and not store.reconciliations(call.operation_id):
                found.append(
                    Unreconciled(
                        summary.run_id, call.call_id, call.tool, call.arguments, call.operation_id, call.status.reason.value
                    )
                )
    return found


#: the payload forms Approvals offers per wait kind (the others are for programs: the CLI)
FORMS_BY_WAIT = {WaitKind.APPROVAL.value: ("approve", "deny"), WaitKind.INPUT.value: ("input",)}


@frozen
class Diagram:
    """One machine's states and edges, generated from the spec, with current states."""

    title: str
    states: list[str]
    edges: list[tuple[str, str, str]]
    current: dict[str, list[str]]  # state -> what is in it ("run", or call ids)


def diagrams(snapshot: RunSnapshot, calls: list[dict[str, Any]]) -> list[Diagram]:
    """The Run machine with the Run's state marked, and the tool-call machine with each
    call's latest state marked (``calls``: inspect's batch histories' calls)."""
    run_machine, call_machine = MACHINES
    run_state = {"running": "Running", "awaiting": "Awaiting", "ended": "Ended"}[state_name(snapshot)]
    call_states: dict[str, list[str]] = {}
    for call in calls:
        call_states.setdefault(str(call["phase"]), []).append(str(call["call_id"]))
    return [
        Diagram("Run state machine", state_names(run_machine), _edges(run_machine), {run_state: ["this Run"]}),
        Diagram("Tool-call state machine", state_names(call_machine), _edges(call_machine), call_states),
    ]


def _edges(machine: type[Any]) -> list[tuple[str, str, str]]:
    return [(source or "[*]", target or "[*]", label or "") for source, target, label in labelled_edges(machine)]


def run_detail(store: Store, snapshot: RunSnapshot) -> dict[str, Any]:
    """Everything the One Run page shows: ``runkernel inspect``'s JSON, the timeline of
    the Run's commits with their writers, its calls with their current phase, its
    parent and children, the diagrams, and its lease."""
    view = inspect_json(store, snapshot)
    log = [c for c in store.commits(snapshot.thread_id) if c.run_id == snapshot.run_id]
    timeline = []
    for commit in log:
        writer = store.writer_of(commit.thread_id, commit.version)
        changed = []
        if commit.messages:
            changed.append(f"{len(commit.messages)} message{'s' if len(commit.messages) != 1 else ''}")
        if commit.batch is not None:
            phases = ", ".join(f"{c.call_id}: {call_phase(c.status).value}" for c in commit.batch.calls)
            changed.append(f"batch {commit.batch.batch_id} ({phases})" if phases else f"batch {commit.batch.batch_id}")
        changed += [f"event {e.type}" for e in commit.events]
        timeline.append(
            {
                "version": commit.version,
                "step": commit.step,
                "state": type(commit.disposition).__name__,
                "changed": changed,
                "writer": None if writer is None else writer.worker_id,
                "epoch": None if writer is None else writer.epoch,
            }
        )
    calls = []
    children = []
    for batch in view["batches"]:
        for call in batch["calls"]:
            latest = call["latest"] or {}
            phase = str(latest.get("status", "?")).capitalize()
            if batch["finalized"] and phase in ("Completed", "Indeterminate"):
                phase = "Finalized"  # the machine's last state: every call of the batch terminal
            calls.append({**call, "batch_id": batch["batch_id"], "phase": phase})
        for call in batch["calls"]:
            delegation = (call["latest"] or {}).get("delegation") or call.get("delegation")
            if isinstance(delegation, dict) and delegation.get("run_id"):
                children.append({"run_id": delegation["run_id"], "call_id": call["call_id"]})
    parent = store.parent_of(snapshot.run_id)
    lease = lease_text(store.lease_status(snapshot.run_id), state_name(snapshot))
    return {
        "view": view,
        "timeline": timeline,
        "calls": calls,
        "children": children,
        "parent": None if parent is None else {"run_id": parent.run_id, "call_id": parent.call_id},
        "diagrams": diagrams(snapshot, calls),
        "pending": with_answer(store, pending_wait(snapshot, view["app"])),
        # its holder, epoch and expiry by the store's clock, as `inspect` tells them
        "lease": lease,
    }
