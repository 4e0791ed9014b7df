"""How the runtime carries out a Decision: validated commits, observer effects, crashes.

``adopt`` takes a Decision as the runtime's new queue, checking that every commit it
carries is accepted by ``validate_commit`` and produces the Decision's state; ``drain``
carries out what cannot branch; ``written`` makes a commit durable and keeps the
tool-use / tool-result pairing of the committed log.
"""

from __future__ import annotations

from runkernel.kernel.history import RunHistory
from runkernel.kernel.protocol import (
    CancelChild,
    StartChild,
    Commit,
    Decision,
    DeliverTerminus,
    Execute,
    NotifyWait,
    PublishResults,
    QueryStatus,
    RequestInference,
    RunGate,
    RunHook,
)
from runkernel.kernel.rules import Rejection
from runkernel.kernel.state import (
    CallCompleted,
    CallExecuting,
    Delegation,
    EndCause,
    TypedError,
    Awaiting,
    CallAwaiting,
    Ended,
    RunSnapshot,
    ThreadCommit,
    ThreadHead,
    is_terminal,
)
from runkernel.kernel.delegation import terminus
from runkernel.kernel.validate_edge import by_named_edge
from runkernel.kernel.values import EndCauseKind, JsonValue, Role

import mc_config as cfg
from mc_kernel import Commits, Context, Pending, QueueItem, State, Violation

_INPUT_EFFECTS = (RequestInference, RunGate, Execute, QueryStatus)  # StartChild asks only on reconnect


def validate(
    ctx: Context, prev: RunSnapshot | None, history: RunHistory, commit: ThreadCommit
) -> tuple[RunSnapshot, RunHistory]:
    """``validate_commit`` must accept every commit the kernel emits (I1-I4, I6-I8, I13, I14)."""
    head = None
    if prev is not None:
        active = None if isinstance(prev.state, Ended) else prev.run_id
        head = ThreadHead(prev.thread_id, prev.version, active)
    verdict = ctx.validate(head, prev, commit, history)
    if isinstance(verdict, Rejection):
        raise Violation("I1-I14 validate_commit", f"the kernel emitted an illegal commit: {verdict}", commit)
    if head is not None and prev is not None:
        # the kernel's self-check asks the same of every commit it emits
        named = by_named_edge(head, prev, commit, history)
        if named is not None and named != verdict:
            raise Violation("named edge", f"the verdict by the named edge {commit.edge} is not the full judge's", commit)
    return verdict.run, ctx.intern(history.plus(verdict.keys))


def self_check_implied(prev: RunSnapshot | None, decision: Decision | Rejection) -> bool:
    """Whether ``adopt`` accepting ``decision`` implies that ``decide``'s self-check
    (``check_decision``) would accept it too, so that the search may skip the self-check.

    The self-check judges each commit with ``validate_commit`` under the head
    ``(thread, version, run_id)`` and ``NO_TICKETS_SEEN``, compares the named edge's
    verdict with it, and compares the last snapshot with the decision's state. ``adopt``
    does all of it (``validate``, the ``store`` check) with the store's head, which is
    the same while the snapshot judged is not Ended, and with the Run's used tickets as
    ``ticket_seen``, which can only refuse more (``validate_commit`` reads it in one
    ``require``). After an Ended snapshot the heads differ, so there the self-check runs.
    """
    if not isinstance(decision, Decision):
        return True
    ended = prev is not None and isinstance(prev.state, Ended)
    for effect in decision.effects:
        if isinstance(effect, Commit):
            if ended:
                return False
            ended = isinstance(effect.commit.disposition, Ended)
    return True


def prune(state: State, snap: RunSnapshot) -> State:
    """Forget world facts that can no longer matter once ``snap`` is committed.

    Attempts only grow and terminal results never change (both validated), so the only
    execution that a correct or broken kernel could start twice is the current attempt
    of a call that is not terminal; and only such a call can be started again at all.
    """
    live: dict[str, int] = {}
    batch = snap.open_batch
    if batch is not None:
        for call in batch.calls:
            if not is_terminal(call.status):
                live[call.operation_id] = call.status.attempt
    executed = frozenset(p for p in state.executed if live.get(p[0]) == p[1])
    fenced = frozenset(o for o in state.fenced if o in live)
    # an answer for a call no longer Executing that attempt is discarded (W5's fence)
    calls = {c.call_id: c.status for c in batch.calls} if batch is not None else {}
    running = tuple(r for r in state.running if calls.get(r[1]) == CallExecuting(r[2]))
    return State(snap, state.queue, executed, fenced, state.pairing, state.crashes, state.recovering, state.history, children=state.children, child_crashes=state.child_crashes, running=running)


def written(state: State, item: Pending) -> State:
    """The state once ``item`` is durable: the new snapshot and the tool-result pairing."""
    counts = dict(state.pairing)
    order = [call_id for call_id, _ in state.pairing]
    for message in item.commit.messages:
        if message.role is Role.ASSISTANT and message.tool_calls:
            for use in message.tool_calls:
                if use.call_id in counts:
                    raise Violation("pairing", f"tool-use call id {use.call_id!r} used twice", item.commit)
                counts[use.call_id] = 0
                order.append(use.call_id)
        if message.role is Role.TOOL and message.call_id is not None:
            if message.call_id not in counts:
                raise Violation("pairing", f"tool result for unknown call {message.call_id!r}", item.commit)
            counts[message.call_id] += 1
            if counts[message.call_id] > 1:
                raise Violation("pairing", f"call {message.call_id!r} has two tool results", item.commit)
    snap = item.after
    if isinstance(snap.state, Ended):
        missing = [c for c in order if counts[c] != 1]
        if missing:
            raise Violation("I13 pairing", f"the run ended but calls {missing} have no tool result", item.commit)
        batch = snap.batch
        if batch is not None and not (batch.finalized and batch.all_terminal()):
            raise Violation("I13", "an Ended run holds an open batch", item.commit)
    pairing = tuple((c, counts[c]) for c in order)
    check_termini(item.commit, state.children)
    after = State(snap, state.queue, state.executed, state.fenced, pairing, state.crashes, state.recovering, item.history, children=state.children, child_crashes=state.child_crashes, running=state.running)
    return prune(after, snap)


def adopt(ctx: Context, state: State, decision: Decision | Rejection, what: str) -> tuple[State, Commits]:
    """The runtime takes ``decision`` as its new queue (after the kernel answered ``what``)."""
    if isinstance(decision, Rejection):
        raise Violation("protocol", f"the kernel refused {what}, which the world produced: {decision}")
    items: list[QueueItem] = []
    prev = state.snap
    history = state.history
    asked = False
    for effect in decision.effects:
        if asked and not isinstance(effect, RunHook):
            raise Violation("protocol", f"{type(effect).__name__} follows an effect that asks the world; never carried out")
        if parks(effect, decision.state):
            items.append(effect)  # a concurrent call's executor or query: it does not block
            continue
        if isinstance(effect, Commit):
            after, history = validate(ctx, prev, history, effect.commit)
            items.append(Pending(effect.commit, after, history))
            prev = after
        elif not isinstance(effect, RunHook):
            asked = isinstance(effect, _INPUT_EFFECTS)
            items.append(effect)
    if prev != decision.state:
        raise Violation("store", "the decision's state is not what its commits produce (store and kernel disagree)")
    return drain(
        ctx, State(state.snap, tuple(items), state.executed, state.fenced, state.pairing, state.crashes, history=state.history, children=state.children, child_crashes=state.child_crashes, running=state.running)
    )


def parks(effect: object, after: RunSnapshot) -> bool:
    """Whether ``effect`` starts a concurrent call's executor or status query: the
    runtime starts it and goes on; its answer comes later, in any order."""
    if not isinstance(effect, (Execute, QueryStatus)):
        return False
    batch = after.open_batch
    call = batch.call(effect.call_id) if batch is not None else None
    return call is not None and call.policy is not None and call.policy.concurrent


def drain(ctx: Context, state: State) -> tuple[State, Commits]:
    """Carry out the head of the queue as far as it cannot branch.

    Observer effects are checked against the committed snapshot and consumed. A commit
    once the crash budget is spent can only succeed, so it is applied at once instead
    of becoming a state of its own (a chain reduction: nothing else can happen there).
    """
    queue = state.queue
    done: Commits = ()
    children = state.children
    while queue:
        effect = queue[0]
        snap = state.snap
        if isinstance(effect, Pending):
            if state.crashes < ctx.profile.max_crashes:
                break
            try:
                state = written(state, effect)
            except Violation as violation:
                violation.written = done
                raise
            done += (effect.commit,)
        elif isinstance(effect, NotifyWait):
            call = snap.batch.call(effect.ticket.call_id) if snap is not None and snap.batch else None
            if (
                snap is None
                or snap.state != Awaiting(effect.ticket)
                or call is None
                or call.status != CallAwaiting(call.status.attempt, effect.wait)
            ):
                raise Violation("I5", f"wait {effect.ticket.ticket_id!r} begins before its Awaiting is committed")
        elif isinstance(effect, PublishResults):
            if snap is None or snap.batch != effect.batch or not effect.batch.finalized:
                raise Violation("I8", "results published before their finalized batch is committed")
        elif isinstance(effect, DeliverTerminus):
            if snap is None or snap.state != Ended(effect.cause):
                raise Violation("I4", "a terminus is delivered that is not the committed EndCause")
        elif isinstance(effect, CancelChild):
            if snap is None or not isinstance(snap.state, Ended):
                raise Violation("I15", "a child is cancelled before its parent's end is committed")
            children = tuple(
                (run, "cancelling" if run == effect.child.run_id and phase in ("running", "crashed") else phase)
                for run, phase in children
            )
        else:
            break
        queue = queue[1:]
    if queue is state.queue:
        return state, done
    kept = State(state.snap, queue, state.executed, state.fenced, state.pairing, state.crashes, state.recovering, state.history, children=children, child_crashes=state.child_crashes, running=state.running)
    return kept, done


def crashed(state: State) -> State:
    return State(state.snap, (), state.executed, state.fenced, state.pairing, state.crashes + 1, True, state.history, children=state.children, child_crashes=state.child_crashes)


def child_terminus(child: Delegation, phase: str) -> JsonValue:
    """The terminus of a modelled child Run in ``phase`` ``ended:<cause>``."""
    kind = EndCauseKind(phase.split(":", 1)[1])
    error = TypedError("ChildFailed", "failed") if kind is EndCauseKind.FAILED else None
    final = cfg.CHILD_FINAL if kind is EndCauseKind.COMPLETED else None
    return terminus(child.thread_id, child.run_id, EndCause(kind, error), final)


def check_termini(commit: ThreadCommit, children: tuple[tuple[str, str], ...]) -> None:
    """I15: a concurrent delegation completes only with its child's committed terminus."""
    if commit.batch is None:
        return
    phases = dict(children)
    for call in commit.batch.calls:
        if call.delegation is None or not call.delegation.concurrent or not isinstance(call.status, CallCompleted):
            continue
        phase = phases.get(call.delegation.run_id, "absent")
        if not phase.startswith("ended:") or call.status.result.value != child_terminus(call.delegation, phase):
            raise Violation("I15", f"call {call.call_id!r} completes with a value that is not its child's terminus "
                            f"(child {phase})", commit)
