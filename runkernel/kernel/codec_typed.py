"""The typed reading of a ``runkernel/2`` line: msgspec Structs in the line's shape.

msgspec checks the types, the enums and the integer bounds of the whole line in C,
and builds the kernel's own attrs values wherever the line's fields are theirs (a
message and its tool uses, a ticket, a result, a delegation, a parent): no Struct in
between, only their checks run (one post-init call each). What is left in Python is
the commit, its batch, calls and statuses (the kernel's unions, which msgspec cannot
tell apart, and the call's status spread over the call's fields), and the few rules
that span fields. This is the decoder's fast path, never its judge: ``typed_commit`` returns
None for anything it is not certain of (a type msgspec refuses, a rule between fields,
a value a kernel class refuses, a field the strict decoder reads leniently in a shape
this one does not take), and ``codec.commit_from_json`` then decodes the line with its
strict, field-by-field reader, which names the exact path of what it refuses. So an
error is always the strict reader's, and a line this path reads is read to the same
commit (``tests/kernel/test_codec_typed.py`` compares both readers on the random kernel
driver's lines and on every catalogued mutation of them).
"""

from __future__ import annotations

from typing import Annotated, Any

import msgspec

from runkernel.kernel.policies import RecoveryMode, RetryPolicy, ToolPolicy, ToolRecoveryPolicy
from runkernel.kernel.state import (
    ActiveToolBatch,
    Awaiting,
    CallAwaiting,
    CallCompleted,
    CallExecuting,
    CallIndeterminate,
    CallRequested,
    CallStatus,
    Delegation,
    EndCause,
    Ended,
    Event,
    Message,
    ForkedFrom,
    ParentCall,
    ResumeTicket,
    RunDisposition,
    Running,
    Staged,
    ThreadCommit,
    ToolCall,
    ToolResult,
    TypedError,
    Wait,
)
from runkernel.kernel.values import EndCauseKind, IndeterminateReason, WaitKind

# The Structs are never tracked by the garbage collector (gc=False): they live for one
# line and hold only decoded JSON, which cannot make a reference cycle.

#: The format's integers: within 0..2^53-1 (``codec.MAX_TRACE_INTEGER``).
TraceInt = Annotated[int, msgspec.Meta(ge=0, le=2**53 - 1)]


class _Wait(msgspec.Struct, frozen=True, gc=False):
    kind: WaitKind
    correlation: str
    child: Any = None  # extra fields of the format: kept when strings, else ignored
    due_at: Any = None
    expires_at: Any = None
    request: Any = None


class _Policy(msgspec.Struct, frozen=True, gc=False):  # frozen: hashable, the key of _BY_WIRE
    recovery: RecoveryMode
    max_attempts: TraceInt
    retries: TraceInt
    delegation: str | None = None
    concurrent: bool = False


class _Call(msgspec.Struct, frozen=True, gc=False):
    call_id: str
    tool: str
    arguments: Any
    operation_id: str
    status: str
    attempt: TraceInt
    wait: _Wait | None = None
    result: ToolResult | None = None
    reason: IndeterminateReason | None = None
    reaction: Any = None
    policy: _Policy | None = None
    delegation: Delegation | None = None


class _Batch(msgspec.Struct, frozen=True, gc=False):
    batch_id: str
    step: TraceInt
    finalized: bool
    calls: list[_Call]


class _Cause(msgspec.Struct, frozen=True, gc=False):
    kind: EndCauseKind
    error: Any = None


class _Disposition(msgspec.Struct, frozen=True, gc=False):
    state: str
    ticket: ResumeTicket | None = None
    cause: _Cause | None = None


class _ForkedFrom(msgspec.Struct, frozen=True, gc=False):
    thread_id: str
    run_id: str
    version: TraceInt


class _Line(msgspec.Struct, frozen=True, gc=False):
    trace: str
    thread_id: str
    run_id: str
    version: TraceInt
    step: TraceInt
    disposition: _Disposition
    batch: _Batch | None
    messages: tuple[Message, ...]
    events: list[dict[str, Any]]
    staged: Any = msgspec.UNSET  # absent: unchanged; null: cleared
    parent: ParentCall | None = None
    app: str | None = None
    forked_from: _ForkedFrom | None = None
    app_version: str | None = None


class _NotCertain(Exception):
    """The line is not one this path reads the same as the strict reader: ask it."""


_REQUESTED = CallRequested()
_RUNNING = Running()
#: a policy's wire fields: recovery, max_attempts, retries, delegation, concurrent
PolicyKey = tuple[str, int, int, Any, Any]
#: the policies both readers built, by wire fields (one ``ToolPolicy`` per distinct policy)
_POLICIES: dict[PolicyKey, ToolPolicy] = {}
_POLICIES_KEPT = 256  # distinct policies remembered; a trace has a few, a hostile one no more


def remembered_policy(key: PolicyKey) -> ToolPolicy | None:
    """The policy either reader built earlier from these wire fields, if any."""
    return _POLICIES.get(key)


def remember_policy(key: PolicyKey, policy: ToolPolicy) -> ToolPolicy:
    """Keep ``policy`` for ``key`` (while fewer than ``_POLICIES_KEPT`` are kept) and return it."""
    if len(_POLICIES) < _POLICIES_KEPT:
        _POLICIES[key] = policy
    return policy
_DELEGATION_KINDS = (None, "terminal_only", "sequential")


def typed_commit(value: Any) -> ThreadCommit | None:
    """The commit of a parsed line (a dict), or None when only the strict reader may
    say what the line is (see the module docstring)."""
    try:
        line = msgspec.convert(value, _Line)
    except msgspec.ValidationError:
        return None
    return _commit_of(line)


def typed_commit_of_text(text: str | bytes) -> ThreadCommit | None:
    """The commit of a line's text decoded straight into the Structs, or None as
    ``typed_commit`` (also for text that is not JSON)."""
    try:
        line = _LINE_DECODER.decode(text)
    except (msgspec.ValidationError, msgspec.DecodeError):
        return None
    return _commit_of(line)


_LINE_DECODER = msgspec.json.Decoder(_Line)


def _commit_of(line: _Line) -> ThreadCommit | None:
    if line.trace != "runkernel/2" or line.version < 1:
        return None
    messages, events, batch = line.messages, line.events, line.batch
    try:
        for message in messages:  # msgspec built them; what it cannot see is checked here
            if message.tool_calls == ():  # Message refuses a stray call id, tool uses off an assistant
                raise _NotCertain  # the strict reader drops an empty tool-use block
        return ThreadCommit(
            line.thread_id,
            line.run_id,
            line.version - 1,
            line.step,
            _disposition(line.disposition),
            None if batch is None else _batch(batch),
            messages,
            tuple(map(_event, events)) if events else (),
            # the optional fields, by name: a new one is one line here and one in _Line
            app=line.app,
            staged=None if line.staged is msgspec.UNSET else Staged(line.staged),
            parent=line.parent,
            forked_from=_forked_from(line.forked_from),
            app_version=line.app_version,
        )
    except (_NotCertain, ValueError, TypeError, msgspec.ValidationError):
        return None


def _forked_from(raw: _ForkedFrom | None) -> ForkedFrom | None:
    return None if raw is None else ForkedFrom(raw.thread_id, raw.run_id, raw.version)


def _disposition(raw: _Disposition) -> RunDisposition:
    state = raw.state
    if state == "running" and raw.ticket is None:
        return _RUNNING
    if state == "awaiting" and raw.ticket is not None:
        return Awaiting(raw.ticket)
    if state == "ended" and raw.ticket is None and raw.cause is not None:
        kind, error = raw.cause.kind, raw.cause.error
        if kind is not EndCauseKind.FAILED:
            return Ended(EndCause(kind))
        if isinstance(error, dict):
            return Ended(EndCause(kind, msgspec.convert(error, TypedError)))
    raise _NotCertain


def _batch(raw: _Batch) -> ActiveToolBatch:
    if raw.step < 1 or not raw.calls:
        raise _NotCertain
    return ActiveToolBatch(raw.batch_id, raw.step, raw.finalized, tuple(map(_call, raw.calls)))


def _call(raw: _Call) -> ToolCall:
    policy = raw.policy
    return ToolCall(
        raw.call_id,
        raw.tool,
        raw.arguments,
        raw.operation_id,
        _status(raw),
        None if policy is None else _policy(policy),
        raw.reaction,
        raw.delegation,
    )


def _status(raw: _Call) -> CallStatus:
    status, attempt = raw.status, raw.attempt
    wait, result, reason = raw.wait, raw.result, raw.reason
    if status == "executing" and wait is None and result is None and reason is None and attempt >= 1:
        return CallExecuting(attempt)
    if status == "requested" and wait is None and result is None and reason is None and attempt == 0:
        return _REQUESTED
    if status == "completed" and result is not None and wait is None and reason is None:
        return CallCompleted(attempt, result)
    if status == "awaiting" and wait is not None and result is None and reason is None:
        return CallAwaiting(
            attempt,
            Wait(
                wait.kind,
                wait.correlation,
                wait.child if isinstance(wait.child, str) else None,
                wait.due_at if isinstance(wait.due_at, str) else None,
                wait.expires_at if isinstance(wait.expires_at, str) else None,
                wait.request,
            ),
        )
    if status == "indeterminate" and reason is not None and wait is None and result is None:
        return CallIndeterminate(attempt, reason)
    raise _NotCertain


#: the policies this reader met, by their wire fields as msgspec typed them (hashed in C)
_BY_WIRE: dict[_Policy, ToolPolicy] = {}


def _policy(raw: _Policy) -> ToolPolicy:
    known = _BY_WIRE.get(raw)
    if known is not None:
        return known
    key = (raw.recovery._value_, raw.max_attempts, raw.retries, raw.delegation, raw.concurrent)
    known = remembered_policy(key)
    if known is not None:
        return _remember_wire(raw, known)
    if raw.max_attempts < 1 or raw.delegation not in _DELEGATION_KINDS or (raw.concurrent and raw.delegation):
        raise _NotCertain
    policy = ToolPolicy(
        ToolRecoveryPolicy(raw.recovery, raw.max_attempts),
        RetryPolicy(raw.retries + 1),
        terminal_only_delegation=raw.delegation == "terminal_only",
        sequential_delegation=raw.delegation == "sequential",
        concurrent=raw.concurrent,
    )
    return _remember_wire(raw, remember_policy(key, policy))


def _remember_wire(raw: _Policy, policy: ToolPolicy) -> ToolPolicy:
    if len(_BY_WIRE) < _POLICIES_KEPT:
        _BY_WIRE[raw] = policy
    return policy


def _event(raw: dict[str, Any]) -> Event:
    kind = raw.get("type")
    if not isinstance(kind, str) or kind == "resumed":
        raise _NotCertain  # a resumed event's typed fields are the strict reader's to check
    return Event(kind, {k: v for k, v in raw.items() if k != "type"})
