"""Fencing that reaches the downstream (Workers and leases, W5).

A worker that stalls between its lease re-check and its tool's effect can start that
effect after another worker took the Run over and moved past the call. The new epoch
must reach the downstream before that happens, so a downstream that keeps the highest
epoch per operation refuses the late start:

- every question to the downstream carries the epoch: a reconnect tool's
  ``status(operation_id, lease_epoch)``, and a running tool reads ``lease_epoch`` from
  its ``RunCall`` (``current_invocation()``);
- before a commit makes terminal a call this drive found Executing and did not start
  (recovery's outcome, or the Run's end by a cancel, stop or failure), the driver calls
  the tool's optional ``fence(operation_id, lease_epoch)`` (in push mode it hands the
  host a ``Fence`` action). A fence that raises fails the drive: nothing is committed.
  Its answer never changes the decision (I11).

This module holds the pure part: which calls a commit must fence first, and the
``Fence`` actions the core hands out for them.
"""

from __future__ import annotations

from collections.abc import Collection, Generator, Set
from typing import Any

from runkernel.adapters.drive.actions import DriverError, Fence, HostProtocolError
from runkernel.adapters.drive.protocol import Fenced, Hand, Operation, Poll, Report
from runkernel.adapters.drive.reports import EXPECTED, REPORT_NAMES
from runkernel.kernel.state import CallCompleted, CallExecuting, CallIndeterminate, RunSnapshot, ThreadCommit, ToolCall


def calls_to_fence(
    before: RunSnapshot | None,
    commit: ThreadCommit,
    started: Set[tuple[str, int]],
    fenced_tools: Collection[str],
) -> tuple[ToolCall, ...]:
    """The calls ``commit`` makes terminal that were Executing in ``before`` and whose
    attempt this drive did not start (``started``: ``(call_id, attempt)`` pairs handed
    out as ``RunCall``), of a tool in ``fenced_tools``, in call order. A delegation is
    left out: its downstream is its child Run, sent a cancel by the same end."""
    batch = before.open_batch if before is not None else None
    after = commit.batch
    if batch is None or after is None or after.batch_id != batch.batch_id or not fenced_tools:
        return ()
    found = []
    for call in batch.calls:
        status = call.status
        if not isinstance(status, CallExecuting) or call.delegation is not None or call.tool not in fenced_tools:
            continue
        if (call.call_id, status.attempt) in started:
            continue
        now = after.call(call.call_id)
        if now is not None and isinstance(now.status, (CallCompleted, CallIndeterminate)):
            found.append(call)
    return tuple(found)


def fence(
    state: RunSnapshot | None, commit: ThreadCommit, started: Set[tuple[str, int]], fences: Collection[str]
) -> Generator[Operation, Any, None]:
    """W5: hand out a ``Fence`` for each call ``commit`` makes terminal that the core
    found Executing in ``state`` and did not start, and return once the host fenced
    each. A host that cannot fence answers nothing: the commit is never written."""
    for call in calls_to_fence(state, commit, started, fences):
        action = Fence(commit.run_id, call.call_id, call.tool, call.operation_id)
        refused: DriverError | None = None
        while True:
            report: Report = yield Hand(action, refused)
            if isinstance(report, Fenced) and report.call_id == call.call_id:
                break
            refused = None if isinstance(report, Poll) else HostProtocolError(
                f"Fence expects {EXPECTED[Fence]}, not {REPORT_NAMES[type(report)]}", None, action
            )


__all__ = ["calls_to_fence", "fence"]
