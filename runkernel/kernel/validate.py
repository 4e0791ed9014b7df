"""Commit validation: is this ThreadCommit a legal successor of the committed state?

This accepts every commit the machines permit, which is a superset of what ``decide``
emits: other runtimes make other legal choices (for example finalizing a batch in a
commit of its own). The checks run in a fixed order so that a commit breaking several
rules is always reported under the same one.

Why this module is long: it is the full judge's walk of one commit, in the fixed order
the rules are reported in; spreading the branches of ``_check_next`` over modules would
hide that order. The per-call rules live in ``validate_calls.py``, the resume event in
``validate_resume.py``, and the store's shorter path by a named edge in
``validate_edge.py``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from attrs import frozen

from runkernel.kernel.edges import (
    RUN_EDGES,
    RunPhase,
    call_phase,
    run_phase,
)
from runkernel.kernel.history import NO_HISTORY, NO_KEYS, History, HistoryKeys, commit_keys
from runkernel.kernel.rules import Rejection, Rule
from runkernel.kernel.state import (
    RESUMED_EVENT,
    Awaiting,
    CallRequested,
    Ended,
    Event,
    Message,
    ProvidedInput,
    Running,
    RunSnapshot,
    ThreadCommit,
    ThreadHead,
    has_unknown_outcome,
)
from runkernel.kernel.validate_calls import (
    Illegal,
    batch_change,
    check_disposition_shape,
    check_delegation,
    check_open_batch,
    check_reaction,
    require,
    same_batch,
    same_json,
    tool_messages,
)
from runkernel.kernel.validate_fork import check_fork_first
from runkernel.kernel.validate_resume import check_resumed_event, same_id
from runkernel.kernel.values import AWAITING_END_CAUSES, EndCauseKind, JsonValue, Role


@frozen
class Accepted:
    """A legal commit, the state it produces and the history facts it adds (``keys``),
    which a store inserts as indexed rows in the commit's transaction."""

    head: ThreadHead
    run: RunSnapshot
    keys: HistoryKeys = NO_KEYS


#: Answers whether a ticket id was used before, by any Run of any Thread.
TicketSeen = Callable[[str], bool]


def NO_TICKETS_SEEN(ticket_id: str) -> bool:
    """The ``ticket_seen`` of a caller that judges one Run in isolation and knows no
    other Run's tickets (the kernel's self-check, a proof that builds one Run): no ticket
    id counts as used outside the Run's own ``history``. Whoever keeps several Runs (a
    store, the trace judge) must answer from all of them instead."""
    return False


def validate_commit(
    head: ThreadHead | None,
    run: RunSnapshot | None,
    commit: ThreadCommit,
    history: History = NO_HISTORY,
    *,
    ticket_seen: TicketSeen,
) -> Accepted | Rejection:
    """Judge ``commit`` against the Thread head and the committed snapshot of its Run.

    ``run`` is the latest snapshot of ``commit.run_id`` (None if the Run has no commit
    yet) and ``history`` the keyed history of that Run. ``ticket_seen`` answers whether
    a ticket id was used anywhere before, by any Run of any Thread (ticket ids are never
    reused); a commit entering Awaiting on such a ticket is refused under
    ``ticket-never-reused``. It is required: a caller that judges one Run alone passes
    ``NO_TICKETS_SEEN`` and so says that reuse across Runs is checked elsewhere.
    """
    try:
        new_head = check_thread(head, run, commit)
        if run is None:
            snapshot, keys = _check_first(commit), NO_KEYS
        else:
            snapshot, keys = _check_next(run, history, commit)
        if isinstance(commit.disposition, Awaiting):
            ticket_id = commit.disposition.ticket.ticket_id
            require(
                not ticket_seen(ticket_id),
                Rule.TICKET_REUSED,
                lambda: f"ticket {ticket_id!r} was already used",
            )
    except Illegal as illegal:
        return illegal.rejection
    return Accepted(head=new_head, run=snapshot, keys=keys)


def check_thread(
    head: ThreadHead | None, run: RunSnapshot | None, commit: ThreadCommit
) -> ThreadHead:
    # on every commit's path, named edge or full: a failing check raises Illegal
    # directly and builds its message only then
    if head is None:
        if commit.expected_version != 0:
            raise Illegal(
                Rule.VERSION,
                f"the first commit of thread {commit.thread_id!r} must be version 1, got {commit.version}",
            )
    else:
        if head.thread_id != commit.thread_id:
            raise Illegal(
                Rule.IDENTITY, f"commit for thread {commit.thread_id!r} offered to thread {head.thread_id!r}"
            )
        if commit.expected_version != head.version:
            raise Illegal(Rule.VERSION, f"expected version {head.version + 1}, got {commit.version}")
    if run is None:
        active = head.active_run_id if head is not None else None
        if active is not None:
            raise Illegal(
                Rule.ONE_ACTIVE_RUN,
                f"run {commit.run_id!r} starts while run {active!r} of the thread is not Ended",
            )
    else:
        if run.run_id != commit.run_id or run.thread_id != commit.thread_id:
            raise Illegal(
                Rule.IDENTITY,
                f"commit for run {commit.run_id!r} of thread {commit.thread_id!r} does not "
                f"match run {run.run_id!r} of thread {run.thread_id!r}",
            )
        state = run.state
        if isinstance(state, Ended):
            raise Illegal(
                Rule.AFTER_ENDED,
                f"run {run.run_id!r} is Ended ({state.cause.kind.value}); nothing may be committed after Ended",
            )
    active_run_id = None if isinstance(commit.disposition, Ended) else commit.run_id
    return ThreadHead(commit.thread_id, commit.version, active_run_id)


# --- first commit ------------------------------------------------------------------


def _check_first(commit: ThreadCommit) -> RunSnapshot:
    if commit.forked_from is not None:
        check_fork_first(commit)  # an activation that carries history (validate_fork.py)
        return successor(None, commit)
    require(
        run_phase(commit.disposition) is RunPhase.RUNNING,
        Rule.FIRST_COMMIT,
        lambda: f"the first commit of run {commit.run_id!r} must be Running, not "
        f"{run_phase(commit.disposition).value} (there is no [*]->"
        f"{run_phase(commit.disposition).value} edge)",
    )
    assistants = _assistant_messages(commit.messages)
    require(
        commit.step == len(assistants) <= 1,
        Rule.FIRST_COMMIT,
        lambda: f"the first commit of a run is step 0 (activation) or step 1 (with the first "
        f"inference result); step {commit.step} with {len(assistants)} assistant message(s)",
    )
    require(
        not _resumed_events(commit.events),
        Rule.RESUME,
        "a first commit cannot carry a resume",
    )
    require(
        not tool_messages(commit.messages),
        Rule.PUBLISH,
        "tool results are published only when a batch is finalized",
    )
    require(
        commit.app_version is None or commit.app is not None,
        Rule.APP_VERSION,
        lambda: f"the activation of run {commit.run_id!r} records app_version {commit.app_version!r} "
        "without an app: a version is the version of the Run's app",
    )
    check_new_batch(commit, assistants, NO_HISTORY)
    return successor(None, commit)


# --- later commits -----------------------------------------------------------------


def _check_next(
    prev: RunSnapshot, history: History, commit: ThreadCommit
) -> tuple[RunSnapshot, HistoryKeys]:
    # the full judge's path for every later commit: a failing check raises Illegal
    # directly and builds its message only then
    if commit.parent is not None:
        raise Illegal(
            Rule.CHILD_ONCE,
            f"run {commit.run_id!r} names a parent after its first commit: only a child's "
            "activation names its parent, and a child is activated once (I15)",
        )
    if commit.forked_from is not None:
        raise Illegal(Rule.FORK, f"run {commit.run_id!r} names a fork source after its first commit")
    if commit.app_version is not None:
        raise Illegal(
            Rule.APP_VERSION,
            f"run {commit.run_id!r} records app_version {commit.app_version!r} after its first "
            "commit: only the activation records the Run's app version",
        )
    state, disposition = prev.state, commit.disposition
    source = _RUN_PHASE_OF.get(type(state)) or run_phase(state)
    target = _RUN_PHASE_OF.get(type(disposition)) or run_phase(disposition)
    if (type(state), type(disposition)) not in _RUN_EDGE_CLASSES and (source, target) not in RUN_EDGES:
        raise Illegal(Rule.RUN_EDGE, f"{source.value} -> {target.value} is not an edge of the Run machine")
    assistants = _assistant_messages(commit.messages) if commit.messages else []
    if len(assistants) > 1:
        raise Illegal(Rule.STEP, f"a commit carries at most one inference result, got {len(assistants)}")
    if commit.step != prev.step + len(assistants):
        raise Illegal(
            Rule.STEP,
            f"step must be {prev.step + len(assistants)} "
            f"({'one new' if assistants else 'no new'} inference result), got {commit.step}",
        )
    prev_open = prev.open_batch
    if assistants and prev_open is not None:
        raise Illegal(
            Rule.INFERENCE_OPEN_BATCH,
            f"an inference result is committed while batch {prev.batch.batch_id if prev.batch else ''!r} "
            "is still open",
        )
    resumed = _resumed_events(commit.events) if commit.events else []
    if source is RunPhase.AWAITING and target is RunPhase.RUNNING:
        _check_resume(prev, resumed)
    else:
        require(
            not resumed,
            Rule.RESUME,
            "a 'resumed' event is only legal on the commit that moves Awaiting to Running",
        )
    if source is RunPhase.AWAITING and isinstance(commit.disposition, Ended):
        cause = commit.disposition.cause.kind
        require(
            cause in AWAITING_END_CAUSES,
            Rule.AWAITING_END,
            lambda: f"an Awaiting run ends only by cancel, stop or failure, not {cause.value!r}",
        )

    if prev_open is not None:
        check_open_batch(prev, prev_open, commit)
        if resumed and isinstance(prev.state, Awaiting) and commit.batch is not None:
            ticket = prev.state.ticket
            check_resumed_event(prev.run_id, ticket, resumed[0].data, commit.batch.call(ticket.call_id))
    else:
        if (
            commit.batch is not None
            and prev.batch is not None
            and commit.batch.batch_id == prev.batch.batch_id
        ):
            kept, finalized = commit.batch, prev.batch
            require(
                same_batch(kept, finalized),
                Rule.BATCH_IDENTITY,
                lambda: f"finalized batch {finalized.batch_id!r} may be carried only unchanged: "
                f"{batch_change(finalized, kept)}",
            )
            require(
                not (assistants and assistants[0].tool_calls),
                Rule.BATCH_NEW,
                "an assistant tool-use message must be committed with its complete batch",
            )
            require(
                not tool_messages(commit.messages),
                Rule.PUBLISH,
                "tool results were already published when the batch was finalized",
            )
        else:
            if _has_tool_message(commit.messages):
                raise Illegal(Rule.PUBLISH, "tool results are published only when a batch is finalized")
            check_new_batch(commit, assistants, history)

    check_disposition_shape(prev, commit)
    if isinstance(commit.disposition, Ended) and commit.disposition.cause.kind is EndCauseKind.OUTCOME_UNKNOWN:
        carried = commit.batch if commit.batch is not None else prev.batch
        require(
            carried is not None and has_unknown_outcome(carried),
            Rule.EDGE_CONDITION,
            "a run ends as outcome_unknown only when one of its calls is Indeterminate "
            "(outcome_unknown or attempts_exhausted)",
        )
    if isinstance(commit.disposition, Awaiting):
        ticket_id = commit.disposition.ticket.ticket_id
        require(
            not history.ticket_used(ticket_id),
            Rule.TICKET_REUSED,
            lambda: f"ticket {ticket_id!r} was already used by this run",
        )
    return successor(prev, commit), commit_keys(prev, commit)


#: The Run machine state of each RunState class, looked up by ``type`` (hashed by
#: identity, in C); ``run_phase`` answers for anything else.
_RUN_PHASE_OF: dict[type, RunPhase] = {Running: RunPhase.RUNNING, Awaiting: RunPhase.AWAITING, Ended: RunPhase.ENDED}
_RUN_EDGE_CLASSES = frozenset(
    (source_class, target_class)
    for source_class, source in _RUN_PHASE_OF.items()
    for target_class, target in _RUN_PHASE_OF.items()
    if (source, target) in RUN_EDGES
)


def successor(prev: RunSnapshot | None, commit: ThreadCommit) -> RunSnapshot:
    """The snapshot ``commit`` produces on top of ``prev``, without judging it: what a
    driver computes for a commit it built itself (the store judges it, once)."""
    if prev is None:
        return RunSnapshot(
            thread_id=commit.thread_id,
            run_id=commit.run_id,
            version=commit.version,
            step=commit.step,
            state=commit.disposition,
            batch=commit.batch,
            staged=commit.staged.value if commit.staged is not None else None,
        )
    inputs = prev.provided_inputs if prev.open_batch is not None else ()
    for event in commit.events:
        if event.type == RESUMED_EVENT:
            answer = _input_answer(event.data)
            if answer is not None:
                inputs = inputs + answer
            break
    # plain construction: RunSnapshot has no validators, and evolve's field walk is the
    # larger part of the work on every commit's path
    return RunSnapshot(
        prev.thread_id,
        prev.run_id,
        commit.version,
        commit.step,
        commit.disposition,
        commit.batch,
        inputs,
        commit.staged.value if commit.staged is not None else prev.staged,
    )


def _input_answer(data: Mapping[str, JsonValue]) -> tuple[ProvidedInput] | None:
    """The input a resume committed, when its command is an input answer."""
    command = data.get("command")
    payload = command.get("payload") if isinstance(command, dict) else None
    if isinstance(payload, dict) and payload.get("type") == "input":
        return (ProvidedInput(str(data.get("call_id", "")), payload.get("value")),)
    return None


def _check_resume(prev: RunSnapshot, resumed: Sequence[Event]) -> None:
    assert isinstance(prev.state, Awaiting)
    ticket = prev.state.ticket
    require(
        len(resumed) == 1,
        Rule.RESUME,
        f"Awaiting -> Running needs exactly one 'resumed' event for ticket "
        f"{ticket.ticket_id!r}, got {len(resumed)}",
    )
    data = resumed[0].data
    named = data.get("ticket_id")
    require(
        isinstance(named, str) and same_id(named, ticket.ticket_id),
        Rule.RESUME,
        f"the resume names ticket {named!r}, the committed ticket is "
        f"{ticket.ticket_id!r}",
    )
    call_id = data.get("call_id")
    require(
        isinstance(call_id, str) and call_id == ticket.call_id,
        Rule.RESUME,
        f"the resume targets call {call_id!r}, the ticket targets {ticket.call_id!r}",
    )


def check_new_batch(
    commit: ThreadCommit, assistants: Sequence[Message], history: History
) -> None:
    tool_uses = assistants[0].tool_calls if assistants else None
    batch = commit.batch
    if batch is None:
        if tool_uses:
            raise Illegal(Rule.BATCH_NEW, "an assistant tool-use message must be committed with its complete batch")
        return
    if not tool_uses:
        raise Illegal(
            Rule.BATCH_NEW, f"batch {batch.batch_id!r} is new but the commit carries no assistant tool-use message"
        )
    if history.batch_closed(batch.batch_id):
        raise Illegal(Rule.BATCH_IDENTITY, f"batch id {batch.batch_id!r} was already used by this run")
    if batch.finalized:
        raise Illegal(
            Rule.BATCH_NEW, f"new batch {batch.batch_id!r} cannot be finalized in the commit that creates it"
        )
    if batch.step != commit.step:
        raise Illegal(
            Rule.BATCH_NEW, f"batch {batch.batch_id!r} says step {batch.step}, its inference is step {commit.step}"
        )
    calls = batch.calls
    if len(tool_uses) != len(calls) or not all(
        use.call_id == call.call_id
        and use.tool == call.tool
        and use.arguments == call.arguments
        and same_json(use.arguments, call.arguments)
        for use, call in zip(tool_uses, calls)
    ):
        raise Illegal(
            Rule.BATCH_NEW, f"batch {batch.batch_id!r} does not hold exactly the tool-use block's calls in order"
        )
    for call in calls:
        check_reaction(None, call)
        check_delegation(None, call)
        if not isinstance(call.status, CallRequested):
            raise Illegal(
                Rule.BATCH_NEW,
                f"call {call.call_id!r} of a new batch must be Requested, is {call_phase(call.status).value}",
            )


def _assistant_messages(messages: Sequence[Message]) -> list[Message]:
    return [m for m in messages if m.role is Role.ASSISTANT]


def _has_tool_message(messages: Sequence[Message]) -> bool:
    for message in messages:
        if message.role is Role.TOOL:
            return True
    return False


def _resumed_events(events: Sequence[Event]) -> list[Event]:
    return [e for e in events if e.type == RESUMED_EVENT]
