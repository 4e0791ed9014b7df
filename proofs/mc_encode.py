"""Compact, hashable, canonical encodings of snapshots, commits and queued effects.

Two model states with equal keys behave the same from then on, so the search merges
them. Canonicalization beyond plain structure:

* versions are left out of snapshots, and a commit's expected version is encoded
  relative to the committed version: the kernel only ever compares versions for
  contiguity, so states that differ only by how many commits led to them merge;
* ids need no renaming, because the model derives every id from committed facts
  (batch and call ids from the step, ticket ids from the tickets already used).
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from typing import Any

from runkernel.kernel.history import RunHistory
from runkernel.kernel.protocol import (
    CancelChild,
    DeliverTerminus,
    Effect,
    Execute,
    NotifyWait,
    PublishResults,
    QueryStatus,
    RequestInference,
    RunGate,
    RunHook,
    StartChild,
)
from runkernel.kernel.state import (
    ActiveToolBatch,
    Awaiting,
    CallAwaiting,
    CallCompleted,
    CallExecuting,
    CallIndeterminate,
    CallRequested,
    CallStatus,
    Ended,
    Event,
    Message,
    RunSnapshot,
    RunState,
    ThreadCommit,
    ToolCall,
    Wait,
)

Key = Hashable


def freeze(value: Any) -> Hashable:
    """A hashable stand-in for a JSON value (dicts and lists become tuples).

    The type is part of the encoding, so ``1``, ``1.0`` and ``True`` stay distinct.
    """
    if value is None or isinstance(value, str):
        return value
    kind = type(value)
    if kind is int or kind is float or kind is bool:
        return (kind.__name__, value)
    if isinstance(value, Mapping):
        return ("{", tuple(sorted((str(k), freeze(v)) for k, v in value.items())))
    if isinstance(value, (list, tuple)):
        return ("[", tuple(freeze(v) for v in value))
    return ("?", kind.__name__, repr(value))


def enc_wait(wait: Wait) -> Key:
    return (wait.kind._value_, wait.correlation, wait.child, wait.due_at, wait.expires_at)


def enc_status(status: CallStatus) -> Key:
    if isinstance(status, CallRequested):
        return "q"
    if isinstance(status, CallExecuting):
        return ("x", status.attempt)
    if isinstance(status, CallAwaiting):
        return ("w", status.attempt, enc_wait(status.wait))
    if isinstance(status, CallCompleted):
        return ("c", status.attempt, status.result.kind._value_, freeze(status.result.value))
    if isinstance(status, CallIndeterminate):
        return ("i", status.attempt, status.reason._value_)
    return ("?", repr(status))


class _IdentityCache:
    """Encodings by object identity: frozen kernel objects are shared between states.

    Each entry keeps its object alive, so an id is never reused while it is cached.
    """

    def __init__(self, limit: int = 20_000) -> None:
        self.limit = limit
        self.entries: dict[int, tuple[object, Key]] = {}

    def get(self, obj: object) -> Key | None:
        entry = self.entries.get(id(obj))
        if entry is not None and entry[0] is obj:
            return entry[1]
        return None

    def put(self, obj: object, key: Key) -> Key:
        if len(self.entries) >= self.limit:
            self.entries.clear()
        self.entries[id(obj)] = (obj, key)
        return key


_CALLS = _IdentityCache()
_SNAPSHOTS = _IdentityCache()


def enc_call(call: ToolCall) -> Key:
    cached = _CALLS.get(call)
    if cached is not None:
        return cached
    key = (call.call_id, call.tool, freeze(call.arguments), call.operation_id, enc_status(call.status))
    return _CALLS.put(call, key)


def enc_batch(batch: ActiveToolBatch | None) -> Key:
    if batch is None:
        return None
    return (batch.batch_id, batch.step, batch.finalized, tuple(enc_call(c) for c in batch.calls))


def enc_run_state(state: RunState) -> Key:
    if isinstance(state, Awaiting):
        t = state.ticket
        return ("A", t.ticket_id, t.wait._value_, t.call_id)
    if isinstance(state, Ended):
        error = state.cause.error
        return ("E", state.cause.kind._value_, None if error is None else (error.type, error.message))
    return "R"


def enc_snapshot(snap: RunSnapshot | None) -> Key:
    """Everything recovery and validation read, except the absolute version."""
    if snap is None:
        return None
    cached = _SNAPSHOTS.get(snap)
    if cached is not None:
        return cached
    return _SNAPSHOTS.put(snap, (
        snap.thread_id,
        snap.run_id,
        snap.step,
        enc_run_state(snap.state),
        enc_batch(snap.batch),
        # answered inputs and staged state: a later attempt's gate and tools, and the
        # hooks, read them (two snapshots differing only here are two states)
        tuple((p.call_id, freeze(p.value)) for p in snap.provided_inputs),
        freeze(snap.staged),
    ))


def enc_history(history: RunHistory) -> Key:
    """A Run's history facts: the same facts, the same key."""
    return (
        history.tickets,
        tuple((a.ticket_id, a.digest) for a in history.resumes),
        history.closed_batches,
    )


def enc_message(message: Message) -> Key:
    uses = None
    if message.tool_calls is not None:
        uses = tuple((u.call_id, u.tool, freeze(u.arguments)) for u in message.tool_calls)
    return (message.role._value_, freeze(message.content), uses, message.call_id)


def enc_event(event: Event) -> Key:
    return (event.type, freeze(dict(event.data)))


def enc_commit(commit: ThreadCommit, committed_version: int) -> Key:
    """A commit, with its expected version relative to the committed version."""
    return (
        commit.thread_id,
        commit.run_id,
        commit.expected_version - committed_version,
        commit.step,
        enc_run_state(commit.disposition),
        enc_batch(commit.batch),
        tuple(enc_message(m) for m in commit.messages),
        tuple(enc_event(e) for e in commit.events),
    )


def enc_effect(effect: Effect) -> Key:
    """Effects other than Commit (the model queues commits in a wrapper of its own)."""
    if isinstance(effect, RequestInference):
        return ("I", effect.run_id, effect.step)
    if isinstance(effect, RunGate):
        return ("G", enc_call(effect.call))
    if isinstance(effect, Execute):
        return (
            "X",
            effect.call_id,
            effect.tool,
            freeze(effect.arguments),
            effect.operation_id,
            effect.attempt,
            freeze(effect.resume_value),
        )
    if isinstance(effect, QueryStatus):
        return ("Q", effect.call_id, effect.tool, effect.operation_id, effect.attempt)
    if isinstance(effect, NotifyWait):
        t = effect.ticket
        return ("N", t.ticket_id, t.wait._value_, t.call_id, enc_wait(effect.wait))
    if isinstance(effect, PublishResults):
        return ("P", enc_batch(effect.batch))
    if isinstance(effect, DeliverTerminus):
        return ("D", effect.cause.kind._value_, effect.redelivery)
    if isinstance(effect, RunHook):
        return ("H", effect.hook._value_, effect.call_id)
    if isinstance(effect, StartChild):
        return ("S", effect.call_id, effect.attempt, effect.child.run_id)
    if isinstance(effect, CancelChild):
        return ("K", effect.child.run_id)
    return ("?", repr(effect))
