"""Commit validation: is this ThreadCommit a legal successor of the committed state?

This accepts every commit the seed permits, which is a superset of what ``decide``
emits: other runtimes make other legal choices (for example finalizing a batch in a
commit of its own). The checks run in a fixed order so that a commit breaking several
rules is always reported under the same one.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import attrs
from attrs import frozen

from runkernel.kernel.edges import (
    CALL_EDGES,
    RUN_EDGES,
    AttemptRule,
    CallEdgeRule,
    CallPhase,
    RunPhase,
    call_phase,
    run_phase,
)
from runkernel.kernel.rules import Rejection, Rule
from runkernel.kernel.state import (
    RESUMED_EVENT,
    ActiveToolBatch,
    AppliedResume,
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
    ThreadCommit,
    ThreadHead,
    ToolCall,
    is_terminal,
)
from runkernel.kernel.values import AWAITING_END_CAUSES, IndeterminateReason, Role


@frozen
class Accepted:
    """A legal commit and the state it produces."""

    head: ThreadHead
    run: RunSnapshot


TicketSeen = Callable[[str], bool]


class _Illegal(Exception):
    """Internal short-circuit; converted to a Rejection at the module boundary."""

    def __init__(self, rule: Rule, message: str) -> None:
        super().__init__(message)
        self.rejection = Rejection(rule, message)


def _require(condition: bool, rule: Rule, message: str) -> None:
    if not condition:
        raise _Illegal(rule, message)


def validate_commit(
    head: ThreadHead | None,
    run: RunSnapshot | None,
    commit: ThreadCommit,
    ticket_seen: TicketSeen | None = None,
) -> Accepted | Rejection:
    """Judge ``commit`` against the Thread head and the committed snapshot of its Run.

    ``run`` is the latest snapshot of ``commit.run_id`` (None if the Run has no commit
    yet). ``ticket_seen`` answers whether a ticket id was used anywhere before (ticket
    ids are never reused across Runs); without it only the Run's own tickets count.
    """
    try:
        new_head = _check_thread(head, run, commit)
        if run is None:
            snapshot = _check_first(commit)
        else:
            snapshot = _check_next(run, commit)
        if isinstance(commit.disposition, Awaiting) and ticket_seen is not None:
            ticket_id = commit.disposition.ticket.ticket_id
            _require(
                not ticket_seen(ticket_id),
                Rule.TICKET_REUSED,
                f"ticket {ticket_id!r} was already used",
            )
    except _Illegal as illegal:
        return illegal.rejection
    return Accepted(head=new_head, run=snapshot)


def _check_thread(
    head: ThreadHead | None, run: RunSnapshot | None, commit: ThreadCommit
) -> ThreadHead:
    if head is None:
        _require(
            commit.expected_version == 0,
            Rule.VERSION,
            f"the first commit of thread {commit.thread_id!r} must be version 1, "
            f"got {commit.version}",
        )
    else:
        _require(
            head.thread_id == commit.thread_id,
            Rule.IDENTITY,
            f"commit for thread {commit.thread_id!r} offered to thread {head.thread_id!r}",
        )
        _require(
            commit.expected_version == head.version,
            Rule.VERSION,
            f"expected version {head.version + 1}, got {commit.version}",
        )
    if run is None:
        active = head.active_run_id if head is not None else None
        _require(
            active is None,
            Rule.ONE_ACTIVE_RUN,
            f"run {commit.run_id!r} starts while run {active!r} of the thread is not Ended",
        )
    else:
        _require(
            run.run_id == commit.run_id and run.thread_id == commit.thread_id,
            Rule.IDENTITY,
            f"commit for run {commit.run_id!r} of thread {commit.thread_id!r} does not "
            f"match run {run.run_id!r} of thread {run.thread_id!r}",
        )
        _require(
            not isinstance(run.state, Ended),
            Rule.AFTER_ENDED,
            f"run {run.run_id!r} is Ended ({run.state.cause.kind.value if isinstance(run.state, Ended) else ''}); "
            "nothing may be committed after Ended",
        )
    active_run_id = None if isinstance(commit.disposition, Ended) else commit.run_id
    return ThreadHead(commit.thread_id, commit.version, active_run_id)


# --- first commit ------------------------------------------------------------------


def _check_first(commit: ThreadCommit) -> RunSnapshot:
    _require(
        run_phase(commit.disposition) is RunPhase.RUNNING,
        Rule.FIRST_COMMIT,
        f"the first commit of run {commit.run_id!r} must be Running, not "
        f"{run_phase(commit.disposition).value} (there is no [*]->"
        f"{run_phase(commit.disposition).value} edge)",
    )
    assistants = _assistant_messages(commit.messages)
    _require(
        commit.step == len(assistants) <= 1,
        Rule.FIRST_COMMIT,
        f"the first commit of a run is step 0 (activation) or step 1 (with the first "
        f"inference result); step {commit.step} with {len(assistants)} assistant message(s)",
    )
    _require(
        not _resumed_events(commit.events),
        Rule.RESUME,
        "a first commit cannot carry a resume",
    )
    _require(
        not _tool_messages(commit.messages),
        Rule.PUBLISH,
        "tool results are published only when a batch is finalized",
    )
    closed: frozenset[str] = frozenset()
    _check_new_batch(commit, assistants, closed)
    return RunSnapshot(
        thread_id=commit.thread_id,
        run_id=commit.run_id,
        version=commit.version,
        step=commit.step,
        state=commit.disposition,
        batch=commit.batch,
    )


# --- later commits -----------------------------------------------------------------


def _check_next(prev: RunSnapshot, commit: ThreadCommit) -> RunSnapshot:
    source, target = run_phase(prev.state), run_phase(commit.disposition)
    _require(
        (source, target) in RUN_EDGES,
        Rule.RUN_EDGE,
        f"{source.value} -> {target.value} is not an edge of the Run machine",
    )
    assistants = _assistant_messages(commit.messages)
    _require(
        len(assistants) <= 1,
        Rule.STEP,
        f"a commit carries at most one inference result, got {len(assistants)}",
    )
    _require(
        commit.step == prev.step + len(assistants),
        Rule.STEP,
        f"step must be {prev.step + len(assistants)} "
        f"({'one new' if assistants else 'no new'} inference result), got {commit.step}",
    )
    if assistants:
        _require(
            prev.open_batch is None,
            Rule.INFERENCE_OPEN_BATCH,
            f"an inference result is committed while batch {prev.batch.batch_id if prev.batch else ''!r} "
            "is still open",
        )
    resumed = _resumed_events(commit.events)
    if source is RunPhase.AWAITING and target is RunPhase.RUNNING:
        _check_resume(prev, resumed)
    else:
        _require(
            not resumed,
            Rule.RESUME,
            "a 'resumed' event is only legal on the commit that moves Awaiting to Running",
        )
    if source is RunPhase.AWAITING and isinstance(commit.disposition, Ended):
        cause = commit.disposition.cause.kind
        _require(
            cause in AWAITING_END_CAUSES,
            Rule.AWAITING_END,
            f"an Awaiting run ends only by cancel, stop or failure, not {cause.value!r}",
        )

    prev_open = prev.open_batch
    if prev_open is not None:
        _check_open_batch(prev, prev_open, commit)
        closed = prev.closed_batch_ids
    else:
        closed = prev.closed_batch_ids
        if prev.batch is not None:
            closed = closed | {prev.batch.batch_id}
        if (
            commit.batch is not None
            and prev.batch is not None
            and commit.batch.batch_id == prev.batch.batch_id
        ):
            _require(
                _same_batch(commit.batch, prev.batch),
                Rule.BATCH_IDENTITY,
                f"finalized batch {prev.batch.batch_id!r} may be carried only unchanged",
            )
            _require(
                not (assistants and assistants[0].tool_calls),
                Rule.BATCH_NEW,
                "an assistant tool-use message must be committed with its complete batch",
            )
            _require(
                not _tool_messages(commit.messages),
                Rule.PUBLISH,
                "tool results were already published when the batch was finalized",
            )
        else:
            _require(
                not _tool_messages(commit.messages),
                Rule.PUBLISH,
                "tool results are published only when a batch is finalized",
            )
            _check_new_batch(commit, assistants, closed)

    _check_disposition_shape(prev, commit)
    tickets = prev.tickets_used
    if isinstance(commit.disposition, Awaiting):
        ticket_id = commit.disposition.ticket.ticket_id
        _require(
            ticket_id not in tickets,
            Rule.TICKET_REUSED,
            f"ticket {ticket_id!r} was already used by this run",
        )
        tickets = tickets | {ticket_id}
    applied = prev.resumes_applied
    if resumed:
        data = resumed[0].data
        applied = applied + (
            AppliedResume(str(data.get("ticket_id", "")), str(data.get("digest", ""))),
        )
    new_batch = commit.batch
    if prev_open is not None and new_batch is not None and new_batch.finalized:
        closed = closed | {new_batch.batch_id}
    return attrs.evolve(
        prev,
        version=commit.version,
        step=commit.step,
        state=commit.disposition,
        batch=new_batch,
        tickets_used=tickets,
        resumes_applied=applied,
        closed_batch_ids=closed,
    )


def _check_resume(prev: RunSnapshot, resumed: Sequence[Event]) -> None:
    assert isinstance(prev.state, Awaiting)
    ticket = prev.state.ticket
    _require(
        len(resumed) == 1,
        Rule.RESUME,
        f"Awaiting -> Running needs exactly one 'resumed' event for ticket "
        f"{ticket.ticket_id!r}, got {len(resumed)}",
    )
    data = resumed[0].data
    _require(
        data.get("ticket_id") == ticket.ticket_id,
        Rule.RESUME,
        f"the resume names ticket {data.get('ticket_id')!r}, the committed ticket is "
        f"{ticket.ticket_id!r}",
    )
    call_id = data.get("call_id", ticket.call_id)
    _require(
        call_id == ticket.call_id,
        Rule.RESUME,
        f"the resume targets call {call_id!r}, the ticket targets {ticket.call_id!r}",
    )


def _check_new_batch(
    commit: ThreadCommit, assistants: Sequence[Message], closed: frozenset[str]
) -> None:
    tool_uses = assistants[0].tool_calls if assistants else None
    batch = commit.batch
    if batch is None:
        _require(
            not tool_uses,
            Rule.BATCH_NEW,
            "an assistant tool-use message must be committed with its complete batch",
        )
        return
    _require(
        bool(tool_uses),
        Rule.BATCH_NEW,
        f"batch {batch.batch_id!r} is new but the commit carries no assistant tool-use message",
    )
    assert tool_uses is not None
    _require(
        batch.batch_id not in closed,
        Rule.BATCH_IDENTITY,
        f"batch id {batch.batch_id!r} was already used by this run",
    )
    _require(
        not batch.finalized,
        Rule.BATCH_NEW,
        f"new batch {batch.batch_id!r} cannot be finalized in the commit that creates it",
    )
    _require(
        batch.step == commit.step,
        Rule.BATCH_NEW,
        f"batch {batch.batch_id!r} says step {batch.step}, its inference is step {commit.step}",
    )
    uses = [(u.call_id, u.tool, u.arguments) for u in tool_uses]
    calls = [(c.call_id, c.tool, c.arguments) for c in batch.calls]
    _require(
        uses == calls
        and all(_same_json(u.arguments, c.arguments) for u, c in zip(tool_uses, batch.calls)),
        Rule.BATCH_NEW,
        f"batch {batch.batch_id!r} does not hold exactly the tool-use block's calls in order",
    )
    for call in batch.calls:
        _require(
            isinstance(call.status, CallRequested),
            Rule.BATCH_NEW,
            f"call {call.call_id!r} of a new batch must be Requested, is "
            f"{call_phase(call.status).value}",
        )


def _check_open_batch(prev: RunSnapshot, prev_batch: ActiveToolBatch, commit: ThreadCommit) -> None:
    batch = commit.batch
    _require(
        batch is not None and batch.batch_id == prev_batch.batch_id,
        Rule.BATCH_IDENTITY,
        f"open batch {prev_batch.batch_id!r} cannot be dropped or replaced before it is finalized",
    )
    assert batch is not None
    _require(
        len(batch.calls) == len(prev_batch.calls)
        and all(_same_call(new, old) for new, old in zip(batch.calls, prev_batch.calls)),
        Rule.BATCH_IDENTITY,
        f"the calls of batch {batch.batch_id!r} (ids, tools, arguments, operation ids, order) "
        "must not change",
    )
    _require(
        batch.step == prev_batch.step,
        Rule.BATCH_IDENTITY,
        f"batch {batch.batch_id!r} belongs to step {prev_batch.step}, not {batch.step}",
    )
    ending = isinstance(commit.disposition, Ended)
    resumed_call = prev.state.ticket.call_id if isinstance(prev.state, Awaiting) else None
    resuming = resumed_call is not None and not isinstance(commit.disposition, (Awaiting, Ended))
    for old, new in zip(prev_batch.calls, batch.calls):
        _check_call_change(old, new, ending=ending, resuming=resuming and old.call_id == resumed_call)
    if resuming:
        moved = batch.call(resumed_call) if resumed_call else None
        _require(
            moved is not None and not isinstance(moved.status, CallAwaiting),
            Rule.RESUME,
            f"the resume commit must move call {resumed_call!r} on (to Executing or Completed)",
        )
    if not ending:
        _check_order(batch.calls)
    if batch.finalized:
        still_open = batch.first_open_call()
        _require(
            still_open is None,
            Rule.FINALIZE,
            f"batch {batch.batch_id!r} is finalized while call "
            f"{still_open.call_id if still_open else ''!r} is not terminal",
        )
        published = [m.call_id for m in _tool_messages(commit.messages)]
        expected = [c.call_id for c in batch.calls]
        _require(
            published == expected,
            Rule.PUBLISH,
            f"finalizing batch {batch.batch_id!r} must publish one tool result per call in call "
            f"order {expected}, got {published}",
        )
    else:
        _require(
            not ending,
            Rule.RUN_END_CLOSES,
            f"the run ends with batch {batch.batch_id!r} not finalized",
        )
        _require(
            not _tool_messages(commit.messages),
            Rule.PUBLISH,
            "tool results are published only in the commit that finalizes the batch",
        )


def _check_call_change(old: ToolCall, new: ToolCall, *, ending: bool, resuming: bool) -> None:
    if _same_status(old.status, new.status):
        _require(
            not (resuming and isinstance(old.status, CallAwaiting)),
            Rule.RESUME,
            f"the resume commit leaves call {old.call_id!r} Awaiting",
        )
        return
    source, target = call_phase(old.status), call_phase(new.status)
    _require(
        source not in (CallPhase.COMPLETED, CallPhase.INDETERMINATE),
        Rule.TERMINAL_IMMUTABLE,
        f"call {old.call_id!r} is terminal ({source.value}); its committed result never changes",
    )
    rule = CALL_EDGES.get((source, target))
    _require(
        rule is not None,
        Rule.CALL_EDGE,
        f"call {old.call_id!r}: {source.value} -> {target.value} is not an edge of the "
        "Tool-call machine",
    )
    assert rule is not None
    _check_attempt(old, new, rule)
    _check_edge_condition(old, new, rule, ending=ending, resuming=resuming)


def _check_attempt(old: ToolCall, new: ToolCall, rule: CallEdgeRule) -> None:
    before, after = old.status.attempt, new.status.attempt
    expected = {
        AttemptRule.FIRST: 1,
        AttemptRule.INCREMENT: before + 1,
        AttemptRule.UNCHANGED: before,
        AttemptRule.ZERO: 0,
        None: after,
    }[rule.attempt]
    _require(
        after == expected,
        Rule.ATTEMPT,
        f"call {old.call_id!r}: {rule.source.value if rule.source else '[*]'} -> "
        f"{rule.target.value} takes attempt {before} to {expected} ({rule.attempt.value if rule.attempt else ''}), "
        f"got {after}",
    )


def _check_edge_condition(
    old: ToolCall, new: ToolCall, rule: CallEdgeRule, *, ending: bool, resuming: bool
) -> None:
    where = f"call {old.call_id!r}: {rule.source.value if rule.source else '[*]'} -> {rule.target.value}"
    status: CallStatus = new.status
    if isinstance(status, CallAwaiting):
        _require(
            status.wait.kind in rule.waits,
            Rule.EDGE_CONDITION,
            f"{where} allows waits {sorted(k.value for k in rule.waits)}, got {status.wait.kind.value!r}",
        )
    if isinstance(status, CallCompleted):
        _require(
            status.result.kind in rule.results,
            Rule.EDGE_CONDITION,
            f"{where} allows results {sorted(k.value for k in rule.results)}, got "
            f"{status.result.kind.value!r}",
        )
    if isinstance(status, CallIndeterminate):
        _require(
            status.reason in rule.reasons,
            Rule.EDGE_CONDITION,
            f"{where} allows reasons {sorted(k.value for k in rule.reasons)}, got {status.reason.value!r}",
        )
        if isinstance(old.status, CallAwaiting):
            expected = (
                IndeterminateReason.RUN_ENDED
                if old.status.attempt == 0
                else IndeterminateReason.OUTCOME_UNKNOWN
            )
            _require(
                status.reason is expected,
                Rule.EDGE_CONDITION,
                f"{where}: a call that {'never started' if old.status.attempt == 0 else 'had started'} "
                f"closes as {expected.value!r}, got {status.reason.value!r}",
            )
    if rule.needs_run_end:
        _require(ending, Rule.EDGE_CONDITION, f"{where} happens only in the commit that ends the run")
    if rule.needs_resume:
        _require(resuming, Rule.RESUME, f"{where} happens only in the commit that applies its resume")
    if isinstance(old.status, CallAwaiting) and not ending:
        _require(resuming, Rule.RESUME, f"{where} happens only in the commit that applies its resume")


def _check_order(calls: Sequence[ToolCall]) -> None:
    """Calls are terminal, then at most one in progress, then Requested (I8)."""
    index = 0
    while index < len(calls) and is_terminal(calls[index].status):
        index += 1
    if index < len(calls) and isinstance(calls[index].status, (CallExecuting, CallAwaiting)):
        index += 1
    for later in calls[index:]:
        _require(
            isinstance(later.status, CallRequested),
            Rule.CALL_ORDER,
            f"call {later.call_id!r} progressed ({call_phase(later.status).value}) before every "
            "earlier call was terminal",
        )


def _check_disposition_shape(prev: RunSnapshot, commit: ThreadCommit) -> None:
    batch = commit.batch
    calls = batch.calls if batch is not None else ()
    awaiting_calls = [c for c in calls if isinstance(c.status, CallAwaiting)]
    disposition = commit.disposition
    if isinstance(disposition, Awaiting):
        ticket = disposition.ticket
        _require(
            len(awaiting_calls) == 1,
            Rule.CALL_WAITS_WITH_RUN,
            f"an Awaiting run has exactly one Awaiting call, found {len(awaiting_calls)}",
        )
        target = awaiting_calls[0]
        assert isinstance(target.status, CallAwaiting)
        wait = target.status.wait
        _require(
            target.call_id == ticket.call_id
            and wait.kind is ticket.wait
            and wait.correlation == ticket.ticket_id,
            Rule.TICKET_SHAPE,
            f"ticket {ticket.ticket_id!r} ({ticket.wait.value}, call {ticket.call_id!r}) does not "
            f"match awaiting call {target.call_id!r} ({wait.kind.value}, correlation "
            f"{wait.correlation!r})",
        )
    elif isinstance(disposition, Ended):
        _require(
            batch is None or (batch.finalized and batch.all_terminal()),
            Rule.RUN_END_CLOSES,
            "an Ended run has no open batch: every call terminal, the batch finalized",
        )
        _require(
            prev.open_batch is None or batch is not None,
            Rule.RUN_END_CLOSES,
            "the commit that ends a run must close and publish its open batch",
        )
    else:
        _require(
            not awaiting_calls,
            Rule.CALL_WAITS_WITH_RUN,
            f"call {awaiting_calls[0].call_id if awaiting_calls else ''!r} is Awaiting while the run is "
            "Running; a call waits only in the commit that moves the run to Awaiting",
        )


def _same_json(a: object, b: object) -> bool:
    """JSON equality: like ``==`` except that booleans never equal numbers (1 != true)."""
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same_json(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(_same_json(x, y) for x, y in zip(a, b))
    return a == b


def _same_status(a: CallStatus, b: CallStatus) -> bool:
    if isinstance(a, CallCompleted) and isinstance(b, CallCompleted):
        return a == b and _same_json(a.result.value, b.result.value)
    return a == b


def _same_call(new: ToolCall, old: ToolCall) -> bool:
    return new.same_identity(old) and _same_json(new.arguments, old.arguments)


def _same_batch(a: ActiveToolBatch, b: ActiveToolBatch) -> bool:
    return a == b and all(
        _same_call(x, y) and _same_status(x.status, y.status) for x, y in zip(a.calls, b.calls)
    )


def _assistant_messages(messages: Sequence[Message]) -> list[Message]:
    return [m for m in messages if m.role is Role.ASSISTANT]


def _tool_messages(messages: Sequence[Message]) -> list[Message]:
    return [m for m in messages if m.role is Role.TOOL]


def _resumed_events(events: Sequence[Event]) -> list[Event]:
    return [e for e in events if e.type == RESUMED_EVENT]
