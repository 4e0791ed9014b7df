"""The vocabulary between the push-mode driver's core and its shells.

The core (``core.py``) yields *operations* (store calls, the gate, and ``Hand``:
give the host an action) and is sent their answers; a host's answer to a ``Hand`` is a
*report*. Both shells (``driver.py``) speak exactly this, nothing else.
"""

from __future__ import annotations

from collections.abc import Generator
from typing import Any, TypeAlias

from attrs import frozen

from runkernel.adapters.drive.actions import Action, CallRequest, DriverError
from runkernel.adapters.drive.events import ModelFailed, Recovered
from runkernel.adapters.stores.contract import Checkpoint, InboxEntry, Settlement
from runkernel.kernel.protocol import NotifyWait, OperationStatus, PublishResults, ResumePayload, RunHook, ToolOutcome
from runkernel.kernel.state import Delegation, EndCause, RunSnapshot, Staged, ThreadCommit, ToolCall
from runkernel.kernel.values import EndCauseKind, JsonValue

# --- operations the core yields ------------------------------------------------------


@frozen
class Append:
    """Write the commit (settling ``settle``'s inbox command in the same transaction);
    answer with the store's new snapshot. ``prev`` is the Run's snapshot before it (None
    for an activation), which names the commit's position; ``applies`` is the inbox
    command ``settle`` settles. ``quiet``: the commit leaves the Run Awaiting or Ended,
    so a leased host gives the Run's lease up in the commit's own transaction."""

    commit: ThreadCommit
    settle: Settlement | None = None
    prev: RunSnapshot | None = None
    applies: InboxEntry | None = None
    quiet: bool = False


@frozen
class ReadLookups:
    """Answer with the Run's committed history as keyed lookups (``Store.history``)."""

    run_id: str


@frozen
class ReadPickUp:
    """Answer with the Run's pick-up reads (``stores.folded_reads.PickUp``: its latest
    snapshot or None, its Thread's messages, its checkpoint, its parent's call and its
    pending commands), in one store call."""

    run_id: str


@frozen
class ReadHead:
    """Answer with the Thread's head, or None."""

    thread_id: str


@frozen
class ReadMessages:
    """Answer with the Thread's committed messages (read once per pick-up)."""

    thread_id: str


@frozen
class Pending:
    """Answer with the Run's pending inbox commands. ``committed``: the version this
    drive just committed, with nothing handed to the host since (the store may answer
    with what it saw in that commit's transaction, ``stores.folded_reads``)."""

    run_id: str
    committed: int | None = None


@frozen
class ReadCommands:
    """Answer with every inbox command of the Run still kept, pending or settled (to
    name the command a duplicate repeats)."""

    run_id: str


@frozen
class Settle:
    """Record what became of an inbox command; answer with None."""

    entry: InboxEntry
    outcome: str


@frozen
class Compact:
    """The Run is Ended and its inbox settled: keep only the commands that were applied
    (``Store.compact_commands``); answer with None."""

    run_id: str


@frozen
class SaveCheckpoint:
    """Save a partial inference output, best effort; answer with None."""

    checkpoint: Checkpoint


@frozen
class DropCheckpoint:
    """Delete the Run's checkpoint, best effort; answer with None."""

    run_id: str


@frozen
class ReadChild:
    """Answer with what the store holds of a delegation's child Run (``ChildFound``)."""

    child: Delegation


@frozen
class ActivateChild:
    """Write a child Run's activation (the delegation's executor: a worker re-checks the
    parent's lease first, W1), under no lease of its own, so any worker of the app may
    drive the child; answer with the child's snapshot, or None if another writer
    activated it first (an activation is checked on identity)."""

    commit: ThreadCommit


@frozen
class SendCancel:
    """Put a cancel in a child Run's inbox (the parent ended first); answer with None."""

    child: Delegation


@frozen
class Observe:
    """An observation the kernel planned (a hook ran, a wait began, results were
    published): for the host's observer, never read back; answer with None."""

    run_id: str
    effect: RunHook | NotifyWait | PublishResults


@frozen
class Tell:
    """What the core did that a host may report (``on_event``); answer with None."""

    event: Recovered | ModelFailed


@frozen
class ReadTrace:
    """Answer with the trace context stored with the Run's activation, or None (asked
    only for a ``Telemetry`` that ``reads_trace``)."""

    run_id: str


@frozen
class CancelOwed:
    """The Run picked up is a child Run: if the Run it was activated for has ended,
    queue the cancel that end owed it (a crash between the parent's end commit and its
    cancels would otherwise leave the child running for nobody); answer with None."""

    run_id: str


@frozen
class KeepLease:
    """The Run waits before it acts again (a model call backing off after a transient
    error) and commits nothing meanwhile: renew its lease now if its renewal is due, so
    the wait cannot outlive it; answer with None."""

    run_id: str


@frozen
class AskGate:
    """Ask the permission gate about a call; answer with its ``GateAnswer``."""

    run_id: str
    call: ToolCall


@frozen
class Hand:
    """Give the host ``action`` (raising ``refused`` first if its last answer was
    refused); answer with the host's next report."""

    action: Action
    refused: DriverError | None = None


Operation: TypeAlias = (
    Append
    | ReadPickUp
    | ReadLookups
    | ReadHead
    | ReadMessages
    | Pending
    | ReadCommands
    | Settle
    | Compact
    | SaveCheckpoint
    | DropCheckpoint
    | ReadChild
    | ActivateChild
    | SendCancel
    | Observe
    | Tell
    | ReadTrace
    | KeepLease
    | CancelOwed
    | AskGate
    | Hand
)

# --- what the host reports -------------------------------------------------------------


@frozen
class Inferred:
    """The model's complete reply (``inferred``)."""

    content: JsonValue
    calls: tuple[CallRequest, ...]
    end: EndCauseKind | None
    metadata: JsonValue
    #: the host's StepStart/BeforeInference staged state for this Step (None: unchanged)
    staged: Staged | None = None


@frozen
class CallEnded:
    """What an attempt of a call ended with (``call_returned`` and its siblings)."""

    call_id: str
    outcome: ToolOutcome
    metadata: JsonValue
    #: the host's AfterTool reaction, committed with the call's terminal result
    reaction: JsonValue = None


@frozen
class Status:
    """A reconnect tool's answer about an operation (``status``)."""

    call_id: str
    status: OperationStatus
    value: JsonValue


@frozen
class Fenced:
    """The host fenced the call a ``Fence`` named (``fenced``)."""

    call_id: str


@frozen
class Resume:
    """A typed answer to the standing wait (``resume``)."""

    payload: ResumePayload


@frozen
class End:
    """End the Run now (``end``, ``cancel``)."""

    cause: EndCause


@frozen
class Partial:
    """The model's output so far, while an ``Infer`` stands."""

    data: JsonValue


@frozen
class InferenceFailed:
    """The model call ``Infer`` asked for raised ``error`` (``inference_failed``)."""

    error: BaseException


@frozen
class Poll:
    """The host asks what to do next without reporting anything."""


Report: TypeAlias = Inferred | InferenceFailed | CallEnded | Status | Fenced | Resume | End | Partial | Poll

Steps: TypeAlias = Generator[Operation, Any, None]


__all__ = [
    "ActivateChild",
    "Append",
    "AskGate",
    "CallEnded",
    "CancelOwed",
    "Compact",
    "DropCheckpoint",
    "End",
    "Fenced",
    "Hand",
    "InferenceFailed",
    "Inferred",
    "KeepLease",
    "Observe",
    "Operation",
    "Partial",
    "Pending",
    "ReadChild",
    "ReadCommands",
    "Poll",
    "ReadHead",
    "ReadMessages",
    "ReadLookups",
    "ReadPickUp",
    "ReadTrace",
    "Report",
    "Resume",
    "SaveCheckpoint",
    "SendCancel",
    "Settle",
    "Status",
    "Steps",
    "Tell",
]
