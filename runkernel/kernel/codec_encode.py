"""The typed writing of a ``runkernel/2`` line: the kernel's values straight to bytes.

``commit_line(commit)`` is the line ``codec.commit_to_json`` describes, encoded without
building its dicts: each part of the line is a msgspec Struct in the line's shape (its
fields in the line's key order; ``omit_defaults`` leaves out what the dict leaves out),
and enums are encoded by msgspec from their members (no ``.value`` read in Python).
msgspec encodes the whole line in C. (The kernel's attrs values are not handed to
msgspec as they are: it writes their fields in an order of its own, not the line's.)

The bytes are exactly those of ``msgspec.json.encode(commit_to_json(commit))``
(``tests/kernel/test_codec_typed.py`` compares both on random commits): the dict stays
the format's description (export, the JSON-value scan, the schema), this is its fast
writer. A new optional top-level field goes in ``_Line`` (at its place in the key
order, default None), in ``commit_line``'s call, and beside it in ``commit_to_json``.
"""

from __future__ import annotations

from typing import Any

import msgspec

from runkernel.kernel.policies import RecoveryMode, ToolPolicy
from runkernel.kernel.state import (
    Awaiting,
    CallAwaiting,
    CallCompleted,
    CallExecuting,
    CallIndeterminate,
    CallRequested,
    Delegation,
    EndCause,
    Event,
    Message,
    RunDisposition,
    Running,
    ThreadCommit,
    ToolCall,
    Wait,
)
from runkernel.kernel.values import EndCauseKind, IndeterminateReason, ResultKind, Role, WaitKind

# Never tracked by the garbage collector (gc=False): they live for one encode and hold
# only the commit's own values, which are immutable and make no cycle through them.


class _Wait(msgspec.Struct, omit_defaults=True, gc=False):
    kind: WaitKind
    correlation: str
    child: str | None = None
    due_at: str | None = None
    expires_at: str | None = None
    request: Any = None  # absent when none was given: old traces stay byte-identical


class _Policy(msgspec.Struct, omit_defaults=True, gc=False):
    recovery: RecoveryMode
    max_attempts: int
    retries: int
    delegation: str | None = None  # an extra field: the format allows it
    concurrent: bool = False  # absent: false (a trace without it is sequential)


class _Result(msgspec.Struct, gc=False):
    kind: ResultKind
    value: Any


class _Delegation(msgspec.Struct, gc=False):
    thread_id: str
    run_id: str
    concurrent: bool


class _Call(msgspec.Struct, omit_defaults=True, gc=False):
    call_id: str
    tool: str
    arguments: Any
    operation_id: str
    status: str
    attempt: int
    wait: _Wait | None = None
    result: _Result | None = None
    reason: IndeterminateReason | None = None
    reaction: Any = None
    policy: msgspec.Raw | None = None  # the policy's own encoding, kept per policy
    delegation: _Delegation | None = None


class _Batch(msgspec.Struct, gc=False):
    batch_id: str
    step: int
    finalized: bool
    calls: list[_Call]


class _Running(msgspec.Struct, tag_field="state", tag="running", gc=False):
    pass


class _Ticket(msgspec.Struct, gc=False):
    ticket_id: str
    wait: WaitKind
    call_id: str


class _Awaiting(msgspec.Struct, tag_field="state", tag="awaiting", gc=False):
    ticket: _Ticket


class _Error(msgspec.Struct, gc=False):
    type: str
    message: str


class _Cause(msgspec.Struct, omit_defaults=True, gc=False):
    kind: EndCauseKind
    error: _Error | None = None


class _Ended(msgspec.Struct, tag_field="state", tag="ended", gc=False):
    cause: _Cause


class _ToolUse(msgspec.Struct, gc=False):
    call_id: str
    tool: str
    arguments: Any


class _Message(msgspec.Struct, omit_defaults=True, gc=False):
    role: Role
    content: Any
    tool_calls: list[_ToolUse] | None = None
    call_id: str | None = None
    metadata: Any = None


class _Parent(msgspec.Struct, gc=False):
    thread_id: str
    run_id: str
    call_id: str


class _ForkedFrom(msgspec.Struct, gc=False):
    thread_id: str
    run_id: str
    version: int


class _Line(msgspec.Struct, omit_defaults=True, gc=False):
    trace: str
    thread_id: str
    run_id: str
    version: int
    step: int
    disposition: _Running | _Awaiting | _Ended
    batch: _Batch | None
    messages: list[_Message]
    events: list[dict[str, Any]]
    staged: Any = msgspec.UNSET  # absent: unchanged; null: cleared
    parent: _Parent | None = None
    forked_from: _ForkedFrom | None = None
    app: str | None = None
    app_version: str | None = None


_ENCODER = msgspec.json.Encoder()
_RUNNING = _Running()
_STATUS_NAMES: dict[type, str] = {
    CallRequested: "requested",
    CallExecuting: "executing",
    CallAwaiting: "awaiting",
    CallCompleted: "completed",
    CallIndeterminate: "indeterminate",
}
#: the encoding of each policy met, by the policy's identity (the policy is kept with
#: it, so its id is never reused while it is here); a process has a few policies
_POLICIES: dict[int, tuple[ToolPolicy, msgspec.Raw]] = {}
_POLICIES_KEPT = 256


def commit_line(commit: ThreadCommit) -> bytes:
    """The commit's ``runkernel/2`` line, as ``msgspec.json.encode(commit_to_json(commit))``."""
    disposition = commit.disposition
    batch = commit.batch
    staged = commit.staged
    parent = commit.parent
    forked = commit.forked_from
    return _ENCODER.encode(
        _Line(
            "runkernel/2",
            commit.thread_id,
            commit.run_id,
            commit.expected_version + 1,
            commit.step,
            _RUNNING if type(disposition) is Running else _disposition(disposition),
            None if batch is None else _Batch(batch.batch_id, batch.step, batch.finalized, [*map(_call, batch.calls)]),
            list(map(_message, commit.messages)) if commit.messages else [],
            list(map(_event, commit.events)) if commit.events else [],
            # the optional fields, by name: a new one is one line here and one in _Line
            staged=msgspec.UNSET if staged is None else staged.value,
            parent=None if parent is None else _Parent(parent.thread_id, parent.run_id, parent.call_id),
            forked_from=None if forked is None else _ForkedFrom(forked.thread_id, forked.run_id, forked.version),
            app=commit.app,
            app_version=commit.app_version,
        )
    )


def _disposition(disposition: RunDisposition) -> _Running | _Awaiting | _Ended:
    if isinstance(disposition, Running):
        return _RUNNING
    if isinstance(disposition, Awaiting):
        ticket = disposition.ticket
        return _Awaiting(_Ticket(ticket.ticket_id, ticket.wait, ticket.call_id))
    cause: EndCause = disposition.cause
    error = cause.error
    return _Ended(_Cause(cause.kind, None if error is None else _Error(error.type, error.message)))


def _call(call: ToolCall) -> _Call:
    status = call.status
    kind = type(status)
    policy = call.policy
    out = None
    if policy is not None:
        known = _POLICIES.get(id(policy))
        out = known[1] if known is not None and known[0] is policy else _policy(policy)
    delegation = call.delegation
    if kind is CallExecuting or kind is CallRequested:
        return _Call(
            call.call_id, call.tool, call.arguments, call.operation_id, _STATUS_NAMES[kind], status.attempt,
            None, None, None, call.reaction, out, None if delegation is None else _delegation(delegation),
        )
    wait = result = reason = None
    if isinstance(status, CallAwaiting):
        wait = _wait(status.wait)
    elif isinstance(status, CallCompleted):
        result = _Result(status.result.kind, status.result.value)
    elif isinstance(status, CallIndeterminate):
        reason = status.reason
    return _Call(
        call.call_id, call.tool, call.arguments, call.operation_id, _STATUS_NAMES[kind], status.attempt,
        wait, result, reason, call.reaction, out, None if delegation is None else _delegation(delegation),
    )


def _delegation(delegation: Delegation) -> _Delegation:
    return _Delegation(delegation.thread_id, delegation.run_id, delegation.concurrent)


def _wait(wait: Wait) -> _Wait:
    return _Wait(wait.kind, wait.correlation, wait.child, wait.due_at, wait.expires_at, wait.request)


def _policy(policy: ToolPolicy) -> msgspec.Raw:
    delegation = (
        "terminal_only" if policy.terminal_only_delegation else "sequential" if policy.sequential_delegation else None
    )
    out = msgspec.Raw(
        msgspec.json.encode(  # as _ENCODER would (its default settings), once per policy
            _Policy(
                policy.recovery.mode,
                policy.recovery.max_attempts,
                policy.retry.max_attempts - 1,
                delegation,
                policy.concurrent,
            )
        )
    )
    if len(_POLICIES) < _POLICIES_KEPT:
        _POLICIES[id(policy)] = (policy, out)
    return out


def _message(message: Message) -> _Message:
    uses = message.tool_calls
    return _Message(
        message.role,
        message.content,
        None if uses is None else [_ToolUse(u.call_id, u.tool, u.arguments) for u in uses],
        message.call_id,
        message.metadata,
    )


def _event(event: Event) -> dict[str, Any]:
    data = event.data
    return {**data, "type": event.type} if data else {"type": event.type}
