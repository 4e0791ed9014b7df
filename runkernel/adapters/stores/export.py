"""Export a Thread as ``runkernel/2`` lines, optionally with ticket ids redacted.

A ticket id is a correlation, not a credential, but a trace shared outside may still
want it hidden: ``redact_lines`` replaces every occurrence (the ticket, the wait's
correlation, the resumed event and its command) by a digest that is the same for the
same id, and recomputes each resumed event's digest, so the redacted trace is exactly
as legal as the original.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Iterator
from typing import Any

from runkernel.adapters.stores.serial import judged_dumps
from runkernel.adapters.stores.contract import Store
from runkernel.kernel.canonical import jcs_digest
from runkernel.kernel.codec import commit_to_json
from runkernel.kernel.state import RESUMED_EVENT

Line = dict[str, Any]


def redacted_ticket(ticket_id: str) -> str:
    """The stand-in of a ticket id: 128 bits of its SHA-256, the same for the same id."""
    return "tk_redacted_" + hashlib.sha256(ticket_id.encode("utf-8")).hexdigest()[:32]


#: Fields whose values are the format's closed vocabularies: never rewritten, so that a
#: ticket id that happens to spell "running" or "approval" cannot change a line's shape.
_VOCABULARY = frozenset({"trace", "state", "status", "kind", "wait", "role", "type", "reason", "recovery"})


def _replace(value: Any, mapping: dict[str, str]) -> Any:
    if isinstance(value, str):
        return mapping.get(value, value)
    if isinstance(value, list):
        return [_replace(v, mapping) for v in value]
    if isinstance(value, dict):
        return {k: v if k in _VOCABULARY and isinstance(v, str) else _replace(v, mapping) for k, v in value.items()}
    return value


def ticket_ids(lines: Iterable[Line]) -> set[str]:
    """Every ticket id the lines commit (each Awaiting disposition's ticket)."""
    found: set[str] = set()
    for line in lines:
        disposition = line.get("disposition")
        ticket = disposition.get("ticket") if isinstance(disposition, dict) else None
        if isinstance(ticket, dict) and isinstance(ticket.get("ticket_id"), str):
            found.add(ticket["ticket_id"])
    return found


def redact_lines(lines: list[Line]) -> list[Line]:
    """The lines with every ticket id replaced and every resumed digest recomputed."""
    mapping = {ticket_id: redacted_ticket(ticket_id) for ticket_id in ticket_ids(lines)}
    if not mapping:
        return lines
    out: list[Line] = []
    for line in lines:
        copied: Line = _replace(line, mapping)
        for event in copied.get("events") or ():
            if isinstance(event, dict) and event.get("type") == RESUMED_EVENT and isinstance(event.get("command"), dict):
                event["digest"] = jcs_digest(event["command"])
        out.append(copied)
    return out


def export_lines(store: Store, thread_id: str, *, redact: bool) -> Iterator[str]:
    """The Thread's commits, one JSON line each, in version order."""
    lines = [commit_to_json(commit) for commit in store.commits(thread_id)]
    for line in redact_lines(lines) if redact else lines:
        yield judged_dumps(line)
