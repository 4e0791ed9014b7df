"""Commit validation, call by call: the edge each call takes, its attempt and conditions,
the order calls progress in, finalization and publication, and the disposition's shape.

``validate.py`` calls these in a fixed order; each raises ``Illegal`` naming its rule.

Why this module is long: it holds every per-call rule of the Tool-call table (edge,
attempt, edge condition, order, group rounds, reaction, delegation, disposition shape)
and the JSON sameness they compare with; each is short, and they are read together
whenever a row of the table changes.
"""


from __future__ import annotations

from collections.abc import Callable, Sequence

import msgspec

from runkernel.kernel.edges import (
    CALL_EDGES,
    RESULTS_BY_WAIT,
    AttemptRule,
    CallEdgeRule,
    CallPhase,
    call_phase,
)
from runkernel.kernel.policies import GroupKind, policy_group
from runkernel.kernel.rules import Rejection, Rule
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
    Message,
    RunSnapshot,
    ThreadCommit,
    Running,
    ToolCall,
    is_concurrent_delegation,
    is_terminal,
)
from runkernel.kernel.values import IndeterminateReason, ResultKind, Role, WaitKind


class Illegal(Exception):
    """Internal short-circuit; converted to a Rejection at the module boundary."""

    def __init__(self, rule: Rule, message: str) -> None:
        super().__init__(message)
        self.rejection = Rejection(rule, message)


def require(condition: bool, rule: Rule, message: str | Callable[[], str]) -> None:
    """Raise Illegal(rule) unless ``condition``. A message that needs formatting comes
    as a function, called only when the rule fails (a passing check builds no text)."""
    if not condition:
        raise Illegal(rule, message if isinstance(message, str) else message())



def check_open_batch(prev: RunSnapshot, prev_batch: ActiveToolBatch, commit: ThreadCommit) -> None:
    # the hot path of every later commit: a failing check raises Illegal directly, and
    # builds its message only then
    batch = commit.batch
    if batch is None or batch.batch_id != prev_batch.batch_id:
        raise Illegal(
            Rule.BATCH_IDENTITY,
            f"open batch {prev_batch.batch_id!r} cannot be dropped or replaced before it is finalized: "
            + ("the commit's batch is null" if batch is None else f"its batch_id changed to {batch.batch_id!r}"),
        )
    calls, old_calls = batch.calls, prev_batch.calls
    if len(calls) != len(old_calls) or not all(map(same_call, calls, old_calls)):
        raise Illegal(Rule.BATCH_IDENTITY, f"open batch {batch.batch_id!r}: {batch_change(prev_batch, batch)}")
    if batch.step != prev_batch.step:
        raise Illegal(
            Rule.BATCH_IDENTITY,
            f"open batch {batch.batch_id!r}: its step changed ({prev_batch.step} -> {batch.step})",
        )
    ending = isinstance(commit.disposition, Ended)
    resumed_call = prev.state.ticket.call_id if isinstance(prev.state, Awaiting) else None
    resuming = resumed_call is not None and not isinstance(commit.disposition, (Awaiting, Ended))
    for old, new in zip(old_calls, calls):
        check_call_change(old, new, ending=ending, resuming=resuming and old.call_id == resumed_call)
    if resuming:
        moved = batch.call(resumed_call) if resumed_call else None
        require(
            moved is not None and not isinstance(moved.status, CallAwaiting),
            Rule.RESUME,
            lambda: f"the resume commit must move call {resumed_call!r} on (to Executing or Completed)",
        )
    if not ending:
        check_order(calls)
        if any(map(is_group_member, calls)):  # only a group's members have gate rounds
            check_group_moves(prev_batch, batch)
    if batch.finalized:
        still_open = batch.first_open_call()
        if still_open is not None:
            raise Illegal(
                Rule.FINALIZE,
                f"batch {batch.batch_id!r} is finalized while call {still_open.call_id!r} is not terminal",
            )
        published = [m.call_id for m in commit.messages if m.role is Role.TOOL]
        expected = [c.call_id for c in calls]
        if published != expected:
            raise Illegal(
                Rule.PUBLISH,
                f"finalizing batch {batch.batch_id!r} must publish one tool result per call in call "
                f"order {expected}, got {published}",
            )
    else:
        if ending:
            raise Illegal(Rule.RUN_END_CLOSES, f"the run ends with batch {batch.batch_id!r} not finalized")
        for message in commit.messages:
            if message.role is Role.TOOL:
                raise Illegal(Rule.PUBLISH, "tool results are published only in the commit that finalizes the batch")


def check_reaction(old: ToolCall | None, new: ToolCall) -> None:
    """AfterTool's reaction is committed with the call's terminal result and never
    changes after (I7 extends to it); a call that is not terminal carries none."""
    if new.reaction is not None and not isinstance(new.status, _TERMINAL):
        raise Illegal(
            Rule.EDGE_CONDITION,
            f"call {new.call_id!r} carries a reaction while {call_phase(new.status).value}; "
            "a reaction is committed with the call's terminal result",
        )
    if old is not None and isinstance(old.status, _TERMINAL) and not same_json(old.reaction, new.reaction):
        raise Illegal(
            Rule.TERMINAL_IMMUTABLE, f"call {old.call_id!r} is terminal; its committed reaction never changes"
        )


def check_delegation(old: ToolCall | None, new: ToolCall) -> None:
    """A delegation's child is fixed by the call's Executing commit and never changes;
    a concurrent delegation never waits and completes only with its child's terminus."""
    policy = new.policy
    if (
        new.delegation is None
        and (old is None or old.delegation is None)
        and (
            policy is None
            or not (policy.concurrent or policy.terminal_only_delegation or policy.sequential_delegation)
        )
    ):
        return  # no delegation and none declared, not a group member: no rule below applies
    if old is not None and old.delegation is not None:
        require(
            new.delegation == old.delegation,
            Rule.DELEGATION_FIXED,
            lambda: f"call {old.call_id!r}: its delegation's child is fixed; it never changes",
        )
    elif new.delegation is not None:
        require(
            isinstance(new.status, CallExecuting) and not (old is not None and isinstance(old.status, CallExecuting)),
            Rule.DELEGATION_FIXED,
            lambda: f"call {new.call_id!r}: a delegation's child is fixed by the commit that moves the "
            f"call to Executing, not by one that leaves it {call_phase(new.status).value}",
        )
    if policy is not None and policy.concurrent:
        require(
            new.delegation is None,
            Rule.EDGE_CONDITION,
            lambda: f"call {new.call_id!r} is a concurrent call: it never delegates (no `delegation`)",
        )
        require(
            not (isinstance(new.status, CallAwaiting) and old is not None and isinstance(old.status, CallExecuting)),
            Rule.EDGE_CONDITION,
            lambda: f"call {new.call_id!r} is a concurrent call: it never moves Executing -> Awaiting "
            "(while a group runs the Run is Running and cannot become Awaiting)",
        )
    if policy is not None and isinstance(new.status, CallExecuting):
        # a declared delegation runs only with its child fixed, of its declared kind
        kind = True if policy.terminal_only_delegation else False if policy.sequential_delegation else None
        require(
            kind is None or (new.delegation is not None and new.delegation.concurrent is kind),
            Rule.DELEGATION_FIXED,
            lambda: f"call {new.call_id!r} is a {'terminal-only' if kind else 'sequential'} delegation: its "
            f"Executing commit fixes its child (`delegation` with concurrent {str(kind).lower()})",
        )
    status = new.status
    if new.delegation is not None and isinstance(status, CallAwaiting) and status.wait.kind is WaitKind.DELEGATION:
        require(
            status.wait.child == new.delegation.run_id,
            Rule.DELEGATION_FIXED,
            lambda: f"call {new.call_id!r} waits for child {status.wait.child!r}, not the child "
            f"{new.delegation.run_id if new.delegation else ''!r} its Executing commit fixed",
        )
    if new.delegation is not None and new.delegation.concurrent:
        require(
            not isinstance(new.status, CallAwaiting),
            Rule.EDGE_CONDITION,
            lambda: f"call {new.call_id!r} is a concurrent delegation: it never waits (its Run stays Running)",
        )
        if isinstance(new.status, CallCompleted):
            require(
                new.status.result.kind is ResultKind.OUTPUT,
                Rule.EDGE_CONDITION,
                lambda: f"call {new.call_id!r} is a concurrent delegation: it completes with its child's "
                f"terminus (result kind output), not {new.status.result.kind.value!r}"
                if isinstance(new.status, CallCompleted) else "",
            )


#: Each call status class's phase and the Tool-call edges by the classes of their two
#: ends: looked up by ``type`` (hashed by identity, in C) where ``call_phase`` and the
#: enum-keyed ``CALL_EDGES`` would run Python for every call of every commit.
_PHASE_OF: dict[type, CallPhase] = {
    CallRequested: CallPhase.REQUESTED,
    CallExecuting: CallPhase.EXECUTING,
    CallAwaiting: CallPhase.AWAITING,
    CallCompleted: CallPhase.COMPLETED,
    CallIndeterminate: CallPhase.INDETERMINATE,
}
_EDGE_BY_CLASSES: dict[tuple[type, type], CallEdgeRule] = {
    (source_class, target_class): rule
    for (source, target), rule in CALL_EDGES.items()
    for source_class, source_phase in _PHASE_OF.items()
    for target_class, target_phase in _PHASE_OF.items()
    if source_phase is source and target_phase is target
}
_TERMINAL = (CallCompleted, CallIndeterminate)


def check_call_change(old: ToolCall, new: ToolCall, *, ending: bool, resuming: bool) -> None:
    """The rules on one call of the open batch between its committed self and the commit."""
    if not same_status(old.status, new.status):
        check_call_move(old, new, ending=ending, resuming=resuming)
        return
    check_reaction(old, new)
    check_delegation(old, new)
    if resuming and isinstance(old.status, CallAwaiting):
        raise Illegal(Rule.RESUME, f"the resume commit leaves call {old.call_id!r} Awaiting")


def check_call_move(old: ToolCall, new: ToolCall, *, ending: bool, resuming: bool) -> None:
    """``check_call_change`` for a call whose status changed (``same_status`` is false):
    the edge it takes, its attempt and the edge's conditions."""
    check_reaction(old, new)
    check_delegation(old, new)
    old_status, new_status = old.status, new.status
    if isinstance(old_status, _TERMINAL):
        raise Illegal(
            Rule.TERMINAL_IMMUTABLE,
            f"call {old.call_id!r} is terminal ({call_phase(old_status).value}); its committed result never changes",
        )
    rule = _EDGE_BY_CLASSES.get((type(old_status), type(new_status)))
    if rule is None:
        source, target = call_phase(old_status), call_phase(new_status)
        rule = CALL_EDGES.get((source, target))  # a status of a subclass: by its phase
        if rule is None:
            raise Illegal(
                Rule.CALL_EDGE,
                f"call {old.call_id!r}: {source.value} -> {target.value} is not an edge of the Tool-call machine",
            )
    assert rule.source is not None
    check_started(old, new, rule.source, rule.target)
    check_attempt(old, new, rule)
    check_edge_condition(old, new, rule, ending=ending, resuming=resuming)


#: What only a started attempt leaves behind: a tool's result, an outcome that may have
#: happened. A call reaches them from Executing, never before it.
_ATTEMPT_RESULTS = frozenset({ResultKind.OUTPUT, ResultKind.ERROR})
_ATTEMPT_REASONS = frozenset({IndeterminateReason.OUTCOME_UNKNOWN, IndeterminateReason.ATTEMPTS_EXHAUSTED})


def check_started(old: ToolCall, new: ToolCall, source: CallPhase, target: CallPhase) -> None:
    """I5: an attempt starts only after its Executing commit. A call that moves to
    anything but Executing with a higher attempt, or from Requested or Awaiting with
    what only an attempt produces (a tool's output or error, an outcome unknown from
    Requested), skipped an Executing commit: say so, not the symptom. (A gate wait of a
    tool's own kind stays an ``edge-condition``: which waits a gate may take.)"""
    if target is CallPhase.EXECUTING:
        return  # the Executing commit itself (its attempt is check_attempt's)
    status = new.status
    started = status.attempt > old.status.attempt
    if source is not CallPhase.EXECUTING:
        if isinstance(status, CallCompleted):
            started = started or status.result.kind in _ATTEMPT_RESULTS
        elif isinstance(status, CallIndeterminate):
            started = started or (source is CallPhase.REQUESTED and status.reason in _ATTEMPT_REASONS)
    if started:
        attempt = max(new.status.attempt, old.status.attempt + 1)
        raise Illegal(
            Rule.EXECUTING_FIRST,
            f"call {old.call_id!r}: {source.value} -> {target.value} (attempt {new.status.attempt}) "
            f"without its Executing commit: an attempt starts only after Executing{{{attempt}}} is committed (I5)",
        )


def check_attempt(old: ToolCall, new: ToolCall, rule: CallEdgeRule) -> None:
    before, after = old.status.attempt, new.status.attempt
    how = rule.attempt
    if how is AttemptRule.INCREMENT:
        expected = before + 1
    elif how is AttemptRule.UNCHANGED:
        expected = before
    elif how is AttemptRule.FIRST:
        expected = 1
    elif how is AttemptRule.ZERO:
        expected = 0
    else:
        expected = after
    if after != expected:
        raise Illegal(
            Rule.ATTEMPT,
            f"call {old.call_id!r}: {rule.source.value if rule.source else '[*]'} -> "
            f"{rule.target.value} takes attempt {before} to {expected} ({how.value if how else ''}), "
            f"got {after}",
        )


def _edge_where(old: ToolCall, rule: CallEdgeRule) -> str:
    return f"call {old.call_id!r}: {rule.source.value if rule.source else '[*]'} -> {rule.target.value}"


def check_edge_condition(
    old: ToolCall, new: ToolCall, rule: CallEdgeRule, *, ending: bool, resuming: bool
) -> None:
    status: CallStatus = new.status
    old_status = old.status
    if isinstance(status, CallAwaiting):
        require(
            status.wait.kind in rule.waits,
            Rule.EDGE_CONDITION,
            lambda: f"{_edge_where(old, rule)} allows waits {sorted(k.value for k in rule.waits)}, "
            f"got {status.wait.kind.value!r}",
        )
    elif isinstance(status, CallCompleted):
        require(
            status.result.kind in rule.results,
            Rule.EDGE_CONDITION,
            lambda: f"{_edge_where(old, rule)} allows results {sorted(k.value for k in rule.results)}, got "
            f"{status.result.kind.value!r}",
        )
        if isinstance(old_status, CallAwaiting):
            wait = old_status.wait.kind
            allowed = RESULTS_BY_WAIT[wait]
            require(
                status.result.kind in allowed,
                Rule.EDGE_CONDITION,
                lambda: f"{_edge_where(old, rule)}: a {wait.value} wait completes only as "
                f"{sorted(k.value for k in allowed) or 'nothing'}, got {status.result.kind.value!r}",
            )
    elif isinstance(status, CallIndeterminate):
        require(
            status.reason in rule.reasons,
            Rule.EDGE_CONDITION,
            lambda: f"{_edge_where(old, rule)} allows reasons {sorted(k.value for k in rule.reasons)}, "
            f"got {status.reason.value!r}",
        )
        if isinstance(old_status, CallAwaiting):
            expected = (
                IndeterminateReason.RUN_ENDED
                if old_status.attempt == 0
                else IndeterminateReason.OUTCOME_UNKNOWN
            )
            require(
                status.reason is expected,
                Rule.EDGE_CONDITION,
                lambda: f"{_edge_where(old, rule)}: a call that "
                f"{'never started' if old_status.attempt == 0 else 'had started'} "
                f"closes as {expected.value!r}, got {status.reason.value!r}",
            )
    if rule.needs_run_end and not ending:
        raise Illegal(Rule.EDGE_CONDITION, f"{_edge_where(old, rule)} happens only in the commit that ends the run")
    if (rule.needs_resume or (isinstance(old_status, CallAwaiting) and not ending)) and not resuming:
        raise Illegal(Rule.RESUME, f"{_edge_where(old, rule)} happens only in the commit that applies its resume")


def check_order(calls: Sequence[ToolCall]) -> None:
    """Calls are terminal, then at most one ordinary call in progress or the current group
    (of concurrent delegations, or of concurrent ordinary calls), then Requested (I8).
    Inside the group no member waits while another is Executing, and an Executing
    member of a group of delegations is a concurrent delegation."""
    index = 0
    while index < len(calls) and is_terminal(calls[index].status):
        index += 1
    kind = group_member_kind(calls[index]) if index < len(calls) else None
    if kind is not None:
        end = index
        while end < len(calls) and group_member_kind(calls[end]) is kind:
            end += 1
        executing = [c for c in calls[index:end] if isinstance(c.status, CallExecuting)]
        for member in executing if kind is GroupKind.DELEGATIONS else ():
            require(
                is_concurrent_delegation(member),
                Rule.DELEGATION_FIXED,
                lambda: f"call {member.call_id!r} is a terminal-only delegation Executing without its child "
                "fixed (`delegation` with concurrent true)",
            )
        waiting = [c for c in calls[index:end] if isinstance(c.status, CallAwaiting)]
        require(
            not (executing and waiting),
            Rule.GROUP_GATE,
            lambda: f"call {waiting[0].call_id!r} waits while {executing[0].call_id!r} of its group is Executing: "
            "while a group runs the Run is Running and cannot become Awaiting",
        )
        index = end
    elif index < len(calls) and isinstance(calls[index].status, (CallExecuting, CallAwaiting)):
        index += 1
    for later in calls[index:]:
        if isinstance(later.status, CallRequested):
            continue
        raise Illegal(
            Rule.CALL_ORDER,
            f"call {later.call_id!r} progressed ({call_phase(later.status).value}) before every "
            "earlier call was terminal (only the members of one group, of concurrent delegations or of calls "
            "whose committed policy says concurrent, run together)",
        )


def check_group_moves(prev_batch: ActiveToolBatch, batch: ActiveToolBatch) -> None:
    """A group's gate round (``CONCURRENCY_RULE``): while a member is Executing no other
    member leaves Requested; members leave Requested for Executing only all together,
    in one commit that leaves none of its group Requested. Not for the commit that ends
    the Run, which closes every open call."""
    old_calls, new_calls = prev_batch.calls, batch.calls
    index = 0
    while index < len(new_calls):
        kind = group_member_kind(new_calls[index])
        if kind is None:
            index += 1
            continue
        end = index
        while end < len(new_calls) and group_member_kind(new_calls[end]) is kind:
            end += 1
        span = range(index, end)
        leaving = [i for i in span if isinstance(old_calls[i].status, CallRequested)
                   and not isinstance(new_calls[i].status, CallRequested)]
        if leaving:
            running = [old_calls[i] for i in span if isinstance(old_calls[i].status, CallExecuting)]
            require(
                not running,
                Rule.GROUP_GATE,
                lambda: f"call {new_calls[leaving[0]].call_id!r} leaves Requested while {running[0].call_id!r} "
                "of its group is Executing (a gate answer is handled before its group starts)",
            )
            started = [i for i in leaving if isinstance(new_calls[i].status, CallExecuting)]
            still = [new_calls[i] for i in span if isinstance(new_calls[i].status, CallRequested)]
            require(
                not (started and still),
                Rule.GROUP_GATE,
                lambda: f"call {new_calls[started[0]].call_id!r} starts while {still[0].call_id!r} of its group "
                "is still Requested: the allowed members of a group start together, in one commit",
            )
        index = end


def group_member_kind(call: ToolCall) -> GroupKind | None:
    """The group the call's committed policy puts it in: terminal-only delegations (or,
    for a runtime that records no policy, a call that runs as a concurrent delegation),
    or concurrent ordinary calls. None: an ordinary call, run alone. A trace without
    ``concurrent`` in its policies is sequential."""
    kind = policy_group(call.policy)
    if kind is None and is_concurrent_delegation(call):
        return GroupKind.DELEGATIONS
    return kind


def is_group_member(call: ToolCall) -> bool:
    """Whether the call belongs to a group (``group_member_kind`` is not None: a
    terminal-only delegation or a concurrent call by its policy, or a concurrent
    delegation), answered without building the kind."""
    policy, delegation = call.policy, call.delegation
    return (policy is not None and (policy.terminal_only_delegation or policy.concurrent)) or (
        delegation is not None and delegation.concurrent
    )


def check_waits_with_run(commit: ThreadCommit) -> None:
    """A call waits if and only if its Run does: an Awaiting commit has exactly one
    Awaiting call and its ticket names that call's wait; a Running one has none. (A
    Run's later commits and a fork's first line are both held to it.)"""
    batch = commit.batch
    calls = batch.calls if batch is not None else ()
    awaiting_calls = [c for c in calls if isinstance(c.status, CallAwaiting)]
    disposition = commit.disposition
    if not awaiting_calls and type(disposition) is Running:
        return  # the common case: nothing waits, and nothing must
    if isinstance(disposition, Awaiting):
        ticket = disposition.ticket
        require(
            len(awaiting_calls) == 1,
            Rule.CALL_WAITS_WITH_RUN,
            lambda: f"an Awaiting run has exactly one Awaiting call, found {len(awaiting_calls)}",
        )
        target = awaiting_calls[0]
        assert isinstance(target.status, CallAwaiting)
        wait = target.status.wait
        require(
            target.call_id == ticket.call_id
            and wait.kind is ticket.wait
            and wait.correlation == ticket.ticket_id,
            Rule.TICKET_SHAPE,
            lambda: f"ticket {ticket.ticket_id!r} ({ticket.wait.value}, call {ticket.call_id!r}) does not "
            f"match awaiting call {target.call_id!r} ({wait.kind.value}, correlation "
            f"{wait.correlation!r})",
        )
    elif not isinstance(disposition, Ended):
        require(
            not awaiting_calls,
            Rule.CALL_WAITS_WITH_RUN,
            lambda: f"call {awaiting_calls[0].call_id if awaiting_calls else ''!r} is Awaiting while the run is "
            "Running; a call waits only in the commit that moves the run to Awaiting",
        )


def check_disposition_shape(prev: RunSnapshot, commit: ThreadCommit) -> None:
    check_waits_with_run(commit)
    batch = commit.batch
    if isinstance(commit.disposition, Ended):
        if not (batch is None or (batch.finalized and batch.all_terminal())):
            raise Illegal(Rule.RUN_END_CLOSES, "an Ended run has no open batch: every call terminal, the batch finalized")
        if batch is None and prev.open_batch is not None:
            raise Illegal(Rule.RUN_END_CLOSES, "the commit that ends a run must close and publish its open batch")


_ENCODE = msgspec.json.Encoder().encode


def same_json(a: object, b: object) -> bool:
    """JSON equality: like ``==`` except that booleans never equal numbers (1 != true).

    Fast path, decided in C: values that are ``==`` and encode to the same bytes are the
    same JSON (``==`` keeps NaN and bytes from passing as null or text); anything else
    (a different key order, 1 and 1.0, a tuple for a list) takes the exact recursion.
    """
    if a is b:
        return True
    try:
        if a == b and _ENCODE(a) == _ENCODE(b):
            return True
    except (TypeError, ValueError, OverflowError, msgspec.EncodeError):
        pass
    return _same_json(a, b)


def _same_json(a: object, b: object) -> bool:
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same_json(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(_same_json(x, y) for x, y in zip(a, b))
    return a == b


def same_status(a: CallStatus, b: CallStatus) -> bool:
    if a is b:
        return True
    if type(a) is not type(b):
        return False  # attrs equality holds only between instances of one class
    if isinstance(a, CallCompleted):
        assert isinstance(b, CallCompleted)
        return a == b and same_json(a.result.value, b.result.value)
    return a == b


def same_call(new: ToolCall, old: ToolCall) -> bool:
    if new is old:
        return True
    return (
        new.call_id == old.call_id
        and new.tool == old.tool
        and new.operation_id == old.operation_id
        and (new.policy is old.policy or new.policy == old.policy)
        and new.arguments == old.arguments  # as ToolCall.same_identity: a tuple is not a list here
        and same_json(new.arguments, old.arguments)
    )


#: A call's fields that never change once its batch is committed, in report order.
IDENTITY_FIELDS = ("call_id", "tool", "arguments", "operation_id", "policy")


def call_change(old: ToolCall, new: ToolCall) -> str | None:
    """The first identity field of a call that differs (JSON sameness for arguments:
    1 is not true), or None when the call is its committed self."""
    for name in IDENTITY_FIELDS:
        before, after = getattr(old, name), getattr(new, name)
        same = same_json(before, after) if name == "arguments" else before == after
        if not same:
            return name
    return None


def batch_change(old: ActiveToolBatch, new: ActiveToolBatch) -> str:
    """Which field of a batch changed, named, for ``batch-identity-stable``'s messages."""
    if len(old.calls) != len(new.calls):
        return f"its calls changed in number ({len(old.calls)} -> {len(new.calls)}); calls are never added or removed"
    for index, (before, after) in enumerate(zip(old.calls, new.calls)):
        name = call_change(before, after)
        if name is not None:
            return f"call {index + 1} ({before.call_id!r}) changed its {name}; a call's {', '.join(IDENTITY_FIELDS)} never change"
    if old.step != new.step:
        return f"its step changed ({old.step} -> {new.step})"
    if old.finalized != new.finalized:
        return f"its finalized changed ({str(old.finalized).lower()} -> {str(new.finalized).lower()})"
    for index, (before, after) in enumerate(zip(old.calls, new.calls)):
        if not same_status(before.status, after.status):
            return f"call {index + 1} ({before.call_id!r}) changed its status or result"
        if not same_json(before.reaction, after.reaction):
            return f"call {index + 1} ({before.call_id!r}) changed its reaction"
        if before.delegation != after.delegation:
            return f"call {index + 1} ({before.call_id!r}) changed its delegation"
    return "it changed"


def same_batch(a: ActiveToolBatch, b: ActiveToolBatch) -> bool:
    return a == b and all(
        same_call(x, y) and same_status(x.status, y.status) and same_json(x.reaction, y.reaction)
        for x, y in zip(a.calls, b.calls)
    )



def tool_messages(messages: Sequence[Message]) -> list[Message]:
    return [m for m in messages if m.role is Role.TOOL]
