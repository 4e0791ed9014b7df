"""What an operator sees of a Run beside its committed state: who holds its lease and
until when (by the store's clock), and what an Awaiting Run waits for (its ticket, wait
kind, call and the hold's request). ``inspect`` and ``runs`` show these, in text and
JSON; each is read from the store's rows, never from a worker."""

from __future__ import annotations

import datetime
import math
from typing import Any

from runkernel.adapters.stores.contract import LeaseStatus
from runkernel.kernel.state import Awaiting, CallAwaiting, RunSnapshot


def store_instant(seconds: float) -> str:
    """A store-clock time (seconds since the epoch) as ISO-8601 UTC, to the second."""
    moment = datetime.datetime.fromtimestamp(seconds, tz=datetime.timezone.utc)
    return moment.replace(microsecond=0).isoformat().replace("+00:00", "Z")


def lease_json(status: LeaseStatus) -> dict[str, Any]:
    """The lease as JSON: ``state`` is ``held`` (valid now), ``expired`` (never
    released; the next poll of a worker of the Run's app takes the Run over if it has
    work), ``released`` (given up by its worker: unleased, the last holder named) or
    ``unleased`` (never leased); ``expires_in`` is in seconds of store time (negative
    once expired)."""
    lease = status.lease
    if lease is None:
        return {"state": "unleased"}
    if status.released:
        state = "released"
    elif lease.expires_at > status.now:
        state = "held"
    else:
        state = "expired"
    view: dict[str, Any] = {"state": state, "worker_id": lease.worker_id, "epoch": lease.epoch}
    if state != "released":  # a released lease ended when it was released
        view["expires_at"] = store_instant(lease.expires_at)
        view["expires_in"] = round(lease.expires_at - status.now, 3)
    return view


def lease_text(status: LeaseStatus, run_state: str) -> str:
    """One line: ``leased by W (epoch E) until T, in 24 s``, ``lease expired T: the next
    poll takes it over``, ``unleased``. ``run_state`` is the Run's disposition name: an
    expired lease of a Running Run is taken over by the next poll, one of an Awaiting or
    Ended Run waits for work to come (a command, a due time)."""
    view = lease_json(status)
    state = view["state"]
    if state == "unleased":
        return "unleased"
    holder = f"{view['worker_id']} (epoch {view['epoch']})"
    if state == "released":
        return f"unleased (last held by {holder}, released)"
    if state == "held":
        return f"leased by {holder} until {view['expires_at']}, in {_seconds(view['expires_in'])}"
    then = ": the next poll takes it over" if run_state == "running" else ""
    return f"lease of {holder} expired {view['expires_at']}{then}"


def lease_cell(status: LeaseStatus) -> str:
    """The lease in a column of ``runs``: ``W/E 24 s left``, ``expired``, ``-``."""
    view = lease_json(status)
    if view["state"] == "held":
        return f"{view['worker_id']}/{view['epoch']} {_seconds(view['expires_in'])} left"
    return "expired" if view["state"] == "expired" else "-"


def _seconds(value: float) -> str:
    return f"{max(0, math.ceil(value))} s"


def awaiting_json(snapshot: RunSnapshot) -> dict[str, Any] | None:
    """What an Awaiting Run waits for (None when it is not Awaiting): the ticket to
    answer (``runkernel resume --ticket``), the wait kind, the call (``--call``), its
    tool and the hold's committed request."""
    state = snapshot.state
    if not isinstance(state, Awaiting):
        return None
    call = snapshot.batch.call(state.ticket.call_id) if snapshot.batch is not None else None
    wait = call.status.wait if call is not None and isinstance(call.status, CallAwaiting) else None
    return {
        "ticket_id": state.ticket.ticket_id,
        "wait": state.ticket.wait.value,
        "call_id": state.ticket.call_id,
        "tool": None if call is None else call.tool,
        "request": None if wait is None else wait.request,
    }


__all__ = ["awaiting_json", "lease_cell", "lease_json", "lease_text", "store_instant"]
