"""Export a Thread as ``runkernel/2`` lines, optionally with ticket ids redacted.

A ticket id is a correlation, not a credential, but a trace shared outside may still
want it hidden: ``redact`` replaces every occurrence by a digest that is the same for
the same id, so the redacted trace is exactly as legal as the original.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from typing import Any

from runkernel.adapters.serial import dumps
from runkernel.adapters.store import Store
from runkernel.kernel.codec import commit_to_json
from runkernel.kernel.state import Awaiting


def redacted_ticket(ticket_id: str) -> str:
    return "tk_redacted_" + hashlib.sha256(ticket_id.encode("utf-8")).hexdigest()[:32]


def _replace(value: Any, mapping: dict[str, str]) -> Any:
    if isinstance(value, str):
        return mapping.get(value, value)
    if isinstance(value, list):
        return [_replace(v, mapping) for v in value]
    if isinstance(value, dict):
        return {k: _replace(v, mapping) for k, v in value.items()}
    return value


def export_lines(store: Store, thread_id: str, *, redact: bool) -> Iterator[str]:
    """The Thread's commits, one JSON line each, in version order."""
    commits = list(store.commits(thread_id))
    mapping: dict[str, str] = {}
    if redact:
        for commit in commits:
            if isinstance(commit.disposition, Awaiting):
                ticket_id = commit.disposition.ticket.ticket_id
                mapping[ticket_id] = redacted_ticket(ticket_id)
    for commit in commits:
        line = commit_to_json(commit)
        yield dumps(_replace(line, mapping) if mapping else line)
