"""Every call of every batch of a Run, with its history, read from the Run's commits
(``inspect``): a finalized batch may be dropped from later commits, so the snapshot
alone cannot answer what a Run did. Arguments, results and resume payloads stay JSON."""

from __future__ import annotations

from typing import Any

from runkernel.kernel.codec import call_to_json
from runkernel.kernel.state import RESUMED_EVENT, ThreadCommit

#: the call fields that never change once the batch is opened
_FIXED = ("call_id", "tool", "arguments", "operation_id", "policy")


def batch_histories(log: list[ThreadCommit]) -> list[dict[str, Any]]:
    """The Run's batches in order, each with every call: its fixed fields, its latest
    status, and each committed change of status (version, status, attempt, wait,
    result, reason, reaction) and each resume applied to it (version, payload)."""
    batches: dict[str, dict[str, Any]] = {}
    calls: dict[tuple[str, str], dict[str, Any]] = {}
    for commit in log:
        batch = commit.batch
        if batch is not None:
            entry = batches.setdefault(
                batch.batch_id, {"batch_id": batch.batch_id, "step": batch.step, "finalized": False, "calls": []}
            )
            entry["finalized"] = entry["finalized"] or batch.finalized
            for call in batch.calls:
                now = call_to_json(call)
                key = (batch.batch_id, call.call_id)
                record = calls.get(key)
                if record is None:
                    record = {k: now[k] for k in _FIXED if k in now}
                    record.update(latest=None, history=[], resumes=[])
                    calls[key] = record
                    entry["calls"].append(record)
                changing = {k: v for k, v in now.items() if k not in _FIXED}
                if changing != record["latest"]:
                    record["history"].append({"version": commit.version, **changing})
                    record["latest"] = changing
        for event in commit.events:
            if event.type != RESUMED_EVENT:
                continue
            call_id = event.data.get("call_id")
            for (_, known), record in calls.items():
                if known == call_id:
                    command = event.data.get("command")
                    payload = command.get("payload") if isinstance(command, dict) else None
                    record["resumes"].append(
                        {"version": commit.version, "ticket_id": event.data.get("ticket_id"), "payload": payload}
                    )
    return list(batches.values())
