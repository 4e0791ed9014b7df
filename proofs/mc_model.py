"""The transition relation: the runtime carrying out the kernel's effects, one at a time.

A state's queue is what the current Decision still has to do, exactly as
``runkernel.adapters.drive.runtime`` carries it out: a Commit may crash before its write or
after the write but before the ack; an Execute runs the tool (the world records the
(operation_id, attempt)), and the runtime may crash before the terminal commit; an
effect that asks the world something (inference, gate, tool, status) branches on every
answer within the bound. A crash discards the queue; the fresh runtime recovers with
``recover(committed snapshot)``. Observer effects (hooks, notifications, publication,
terminus) are checked and consumed without branching. The executors and status queries
of a concurrent group run on while the runtime goes on (``State.running``); the world
answers them in any order once the runtime waits.

Why this module is long: it is the one transition relation, a function per effect kind
the runtime carries out (commit, inference, gate, executor, status query, a child's
moves, a group's answers, recovery) beside the dispatch in ``expand``; they share the
checks of what is committed (``_current``) and the answers a tool may give.
"""

from __future__ import annotations

import dataclasses
from itertools import product

from runkernel.kernel.history import RunHistory
from runkernel.kernel.policies import Policies, RecoveryMode
from runkernel.kernel.delegation import executing_delegations, gate_target, running_group
from runkernel.kernel.protocol import (
    Activate,
    ChildEnded,
    ChildTerminus,
    EndRequest,
    StartChild,
    Allow,
    Block,
    Execute,
    GateVerdict,
    InferenceResult,
    Input,
    OperationStatus,
    ProposedCall,
    QueryStatus,
    RequestInference,
    RequireWait,
    ResumeCommand,
    RunGate,
    StatusReport,
    Supply,
    ToolDelegated,
    ToolFailure,
    ToolFinished,
    ToolOutcome,
    ToolOutcomeLost,
    ToolOutput,
    ToolScheduled,
)
from runkernel.kernel.rules import Rejection
from runkernel.kernel.state import (
    Awaiting,
    CallExecuting,
    CallRequested,
    Message,
    RunSnapshot,
    Running,
    ToolCall,
)
from runkernel.kernel.values import EndCauseKind, Role, WaitKind
from runkernel.testing import Boundary, Position, position_of

import mc_config as cfg
import mc_operator as op
from mc_kernel import (
    CRASH,
    INTERRUPT,
    OPERATOR,
    SYSTEM,
    WORLD,
    Context,
    Pending,
    State,
    Transition,
    Violation,
)
from mc_runtime import adopt, child_terminus, crashed, drain, self_check_implied, written

# --- commits and the world's answers ----------------------------------------------


def _commit_transitions(ctx: Context, state: State, item: Pending) -> list[Transition]:
    position = position_of(state.snap, item.commit).value
    try:
        after = written(state, item)
    except Violation as violation:
        violation.label = f"commit {position}"
        raise
    rest = State(
        after.snap, state.queue[1:], after.executed, after.fenced, after.pairing, after.crashes, history=after.history,
        children=state.children, child_crashes=state.child_crashes,
    )
    target, more = drain(ctx, rest)
    out = [Transition(f"commit {position}", target, SYSTEM, (item.commit,) + more)]
    if state.crashes < ctx.profile.max_crashes:
        before = f"{Boundary.BEFORE_WRITE.value}@{position}"
        out.append(Transition(f"crash {before}", crashed(state), CRASH, crash=before))
        late = f"{Boundary.AFTER_WRITE.value}@{position}"
        out.append(Transition(f"crash {late}", crashed(after), CRASH, (item.commit,), crash=late))
    return out


# --- effects that ask the world ---------------------------------------------------


def _current(state: State, call_id: str, what: str) -> tuple[RunSnapshot, ToolCall]:
    """The committed snapshot and its call in progress, which must be ``call_id``."""
    snap = state.snap
    if snap is None or not isinstance(snap.state, Running):
        raise Violation("I5", f"{what} while the committed run is not Running")
    batch = snap.open_batch
    call = batch.first_open_call() if batch is not None else None
    member = next((c for c in running_group(batch, _COMMITTED) if c.call_id == call_id), None) if batch else None
    if member is not None:
        return snap, member  # a member of the running group of concurrent calls
    if call is None or call.call_id != call_id:
        raise Violation("I8", f"{what} for call {call_id!r}, but the call in progress is {call.call_id if call else None!r}")
    return snap, call



#: Groups as the judge sees them: from the committed policies alone.
_COMMITTED = Policies()


def _ticket(ctx: Context, history: RunHistory, call_id: str) -> str | None:
    """A fresh ticket id for a wait of ``call_id``, or None when its waits are used up.

    Ids come from committed facts only (the call and how many of its tickets were
    committed), so paths that reach the same committed state merge.
    """
    prefix = f"t-{call_id}-"
    count = sum(1 for t in history.tickets if t.startswith(prefix))
    return f"{prefix}{count + 1}" if count < ctx.profile.waits_per_call else None


def _answer(ctx: Context, state: State, event: Input, label: str, actor: str = WORLD) -> Transition:
    try:
        decision = ctx.decide(state.snap, event, state.history)
        if ctx.profile.kernel_self_check or not self_check_implied(state.snap, decision):
            _self_check(ctx, state, event)
        if isinstance(decision, Rejection) and isinstance(event, ResumeCommand):
            raise Violation("I14", f"the kernel refused a matching resume: {decision}")
        try:
            target, commits = adopt(ctx, state, decision, label)
        except Violation:
            # the search used to run decide with its self-check: a commit it refuses is
            # reported as the kernel's error, as before
            _self_check(ctx, state, event)
            raise
        return Transition(label, target, actor, commits)
    except Violation as violation:
        violation.label = violation.label or label
        raise


def _self_check(ctx: Context, state: State, event: Input) -> None:
    """``decide`` with its self-check on (raises ``kernel error`` where it fails)."""
    ctx.kernel.run_decide(state.snap, event, ctx.policies, state.history, self_check=True)


def _interrupt(ctx: Context, state: State) -> list[Transition]:
    if not ctx.profile.operator_cancel_running:
        return []
    request = op.end_request(EndCauseKind.CANCELLED)
    snap = state.snap
    if snap is not None and snap.open_batch is not None:
        # the runtime reads the termini its running children already committed
        phases = dict(state.children)
        termini = tuple(
            ChildTerminus(c.call_id, child_terminus(c.delegation, phases[c.delegation.run_id]))
            for c in executing_delegations(snap.open_batch)
            if c.delegation is not None and phases.get(c.delegation.run_id, "").startswith("ended:")
        )
        request = EndRequest(request.cause, termini)
    return [_answer(ctx, state, request, "operator cancel", INTERRUPT)]


# --- concurrent delegations' children -------------------------------------------------


def _set_child(state: State, run_id: str, phase: str) -> State:
    children = tuple(sorted({**dict(state.children), run_id: phase}.items()))
    return dataclasses.replace(state, children=children)


def _start_child(ctx: Context, state: State, effect: StartChild) -> list[Transition]:
    """The executor of a concurrent delegation: activate its child once (I5, I15), or
    reconnect: an ended child's terminus completes the call, a running one is left."""
    snap = state.snap
    batch = snap.open_batch if snap is not None else None
    call = batch.call(effect.call_id) if batch is not None else None
    if call is None or call.status != CallExecuting(effect.attempt) or call.delegation != effect.child:
        raise Violation("I5", f"child of call {effect.call_id!r} started without its committed Executing and identity")
    rest = dataclasses.replace(state, queue=state.queue[1:])
    phase = dict(state.children).get(effect.child.run_id)
    if phase is None:
        activated = _set_child(rest, effect.child.run_id, "running")
        out = [Transition("activate child", drain(ctx, activated)[0], SYSTEM)]
        if state.crashes < ctx.profile.max_crashes:
            out.append(Transition("crash before child activation", crashed(state), CRASH, crash="before_write@child_activation"))
            out.append(Transition("crash after child activation", crashed(_set_child(state, effect.child.run_id, "running")),
                                  CRASH, crash="after_write_before_ack@child_activation"))
        return out
    if phase.startswith("ended:"):
        ended = ChildEnded(effect.call_id, effect.attempt, child_terminus(effect.child, phase))
        return [_answer(ctx, rest, ended, "child terminus", SYSTEM)]
    return [Transition("child still running", drain(ctx, rest)[0], SYSTEM)]


def _children_move(ctx: Context, state: State) -> list[Transition]:
    """The world's moves of child Runs: end (completed or failed), crash once and
    recover, end cancelled once a cancel is in their inbox."""
    out = []
    for run_id, phase in state.children:
        if phase == "running":
            out.append(Transition(f"child {run_id} completes", _set_child(state, run_id, "ended:completed"), WORLD))
            out.append(Transition(f"child {run_id} fails", _set_child(state, run_id, "ended:failed"), WORLD))
            if state.child_crashes < ctx.profile.max_child_crashes:
                crashed_child = dataclasses.replace(_set_child(state, run_id, "crashed"), child_crashes=state.child_crashes + 1)
                out.append(Transition(f"child {run_id} crashes", crashed_child, CRASH, crash="child crash"))
        elif phase == "crashed":
            out.append(Transition(f"child {run_id} recovers", _set_child(state, run_id, "running"), WORLD))
        elif phase == "cancelling":
            out.append(Transition(f"child {run_id} ends cancelled", _set_child(state, run_id, "ended:cancelled"), WORLD))
    return out


def _infer(ctx: Context, state: State, effect: RequestInference) -> list[Transition]:
    snap = state.snap
    if snap is None or not isinstance(snap.state, Running):
        raise Violation("I8", "inference requested while the committed run is not Running")
    if snap.open_batch is not None:
        raise Violation("I8", f"inference requested while batch {snap.open_batch.batch_id!r} is open")
    step = snap.step + 1
    if effect.step != step or effect.run_id != snap.run_id:
        raise Violation("I8", f"inference requested for step {effect.step}, the next step is {step}")
    replies: list[tuple[str, InferenceResult]] = [
        ("infer text", InferenceResult(cfg.TEXT_REPLY)),
        ("infer text end", InferenceResult(cfg.TEXT_REPLY, end=EndCauseKind.COMPLETED)),
    ]
    used = set(state.history.closed_batches) | ({snap.batch.batch_id} if snap.batch else set())
    profile = ctx.profile
    if profile.delegations and len(used) < profile.tool_steps:
        for ordinary in cfg.TOOLS:  # two concurrent delegations and one ordinary call
            mix = (cfg.TOOL_DELEGATE, cfg.TOOL_DELEGATE, ordinary)
            calls = tuple(
                ProposedCall(f"c{step}.{i}", tool, cfg.ARGUMENTS, f"op{step}.{i}") for i, tool in enumerate(mix, 1)
            )
            replies.append((f"infer tools {','.join(mix)}", InferenceResult(cfg.TOOL_USE_TEXT, calls, f"b{step}")))
    elif profile.groups and len(used) < profile.tool_steps:
        calls = tuple(
            ProposedCall(f"c{step}.{i}", tool, cfg.ARGUMENTS, f"op{step}.{i}") for i, tool in enumerate(cfg.GROUP_TOOLS, 1)
        )
        replies.append((f"infer tools {','.join(cfg.GROUP_TOOLS)}", InferenceResult(cfg.TOOL_USE_TEXT, calls, f"b{step}")))
    elif len(used) < profile.tool_steps and (step == 1 or not profile.tool_step_first_only):
        for count in range(1, profile.max_calls + 1):
            for tools in product(cfg.TOOLS, repeat=count):
                calls = tuple(
                    ProposedCall(f"c{step}.{i}", tool, cfg.ARGUMENTS, f"op{step}.{i}")
                    for i, tool in enumerate(tools, 1)
                )
                reply = InferenceResult(cfg.TOOL_USE_TEXT, calls, f"b{step}")
                replies.append((f"infer tools {','.join(tools)}", reply))
    return [_answer(ctx, state, reply, label) for label, reply in replies] + _interrupt(ctx, state)


def _gate(ctx: Context, state: State, effect: RunGate) -> list[Transition]:
    snap = state.snap
    if snap is None or not isinstance(snap.state, Running) or snap.open_batch is None:
        raise Violation("I5", f"gate for call {effect.call.call_id!r} while the committed run is not Running")
    # the first open call, or the next member of a group's gate round (I8)
    call = gate_target(snap.open_batch, ctx.policies, effect.allowed)
    if call != effect.call or call is None or not isinstance(call.status, CallRequested):
        raise Violation("I8", f"gate for call {effect.call.call_id!r}, which is not the committed Requested call due")
    held = effect.allowed
    verdicts: list[tuple[str, GateVerdict]] = [
        ("gate allow", GateVerdict(call.call_id, Allow(), held)),
        ("gate block", GateVerdict(call.call_id, Block(cfg.BLOCK_REASON), held)),
        ("gate supply", GateVerdict(call.call_id, Supply(cfg.SUPPLIED), held)),
    ]
    ticket = _ticket(ctx, state.history, call.call_id)
    if ticket is not None:
        for kind in ctx.profile.gate_waits:
            due = cfg.DUE_AT if kind is WaitKind.SCHEDULED else None
            wait = RequireWait(kind, ticket, due_at=due)
            verdicts.append((f"gate wait {kind.value}", GateVerdict(call.call_id, wait, held)))
        if ctx.profile.approval_deadline and WaitKind.APPROVAL in ctx.profile.gate_waits:
            expiring = RequireWait(WaitKind.APPROVAL, ticket, expires_at=cfg.EXPIRES_AT)
            verdicts.append(("gate wait approval expiring", GateVerdict(call.call_id, expiring, held)))
    return [_answer(ctx, state, v, label) for label, v in verdicts] + _interrupt(ctx, state)


def _execute(ctx: Context, state: State, effect: Execute) -> list[Transition]:
    snap, call = _current(state, effect.call_id, f"executor attempt {effect.attempt}")
    if call.status != CallExecuting(effect.attempt):
        raise Violation(
            "I5",
            f"executor attempt {effect.attempt} of call {call.call_id!r} starts while its committed "
            f"status is {type(call.status).__name__}(attempt={call.status.attempt})",
        )
    if (call.tool, call.arguments, call.operation_id) != (effect.tool, effect.arguments, effect.operation_id):
        raise Violation("I5", f"executor of call {call.call_id!r} started with another identity")
    run = (effect.operation_id, effect.attempt)
    if run in state.executed:
        raise Violation("I6", f"operation {run[0]!r} attempt {run[1]} executes a second time")
    if effect.operation_id in state.fenced:
        raise Violation("I9", f"call {call.call_id!r} executes again after recovery found it Executing "
                        f"under policy {ctx.policies.for_tool(call.tool).recovery.mode.value}")
    ran = dataclasses.replace(state, executed=state.executed | {run})
    if _concurrent(call):
        # a group member's executor runs on while the runtime goes on: its answer comes later
        started = dataclasses.replace(
            ran, queue=state.queue[1:], running=tuple(sorted(state.running + (("X", call.call_id, effect.attempt),)))
        )
        out = [Transition(f"start {call.call_id}", drain(ctx, started)[0], SYSTEM)]
        if state.crashes < ctx.profile.max_crashes:
            point = f"{Boundary.AFTER_EFFECT.value}@group_member_start"  # between two starts, or after the last
            out.append(Transition(f"crash after start {call.call_id}", crashed(ran), CRASH, crash=point))
        return out
    return _tool_answers(ctx, state, ran, call, effect.attempt)


def _concurrent(call: ToolCall) -> bool:
    return call.policy is not None and call.policy.concurrent


def _tool_answers(ctx: Context, state: State, ran: State, call: ToolCall, attempt: int) -> list[Transition]:
    """Every outcome of ``call``'s executor attempt ``attempt`` (``ran``: the world ran it)."""
    effect_attempt = attempt
    outcomes: list[tuple[str, ToolOutcome]] = [
        ("tool output", ToolOutput(cfg.OUTPUT)),
        ("tool error", ToolFailure(cfg.TOOL_ERROR)),
    ]
    if effect_attempt < ctx.policies.for_tool(call.tool).retry.max_attempts:
        outcomes.append(("tool error retryable", ToolFailure(cfg.TOOL_ERROR, retryable=True)))
    outcomes.append(("tool lost", ToolOutcomeLost()))
    ticket = _ticket(ctx, state.history, call.call_id)
    if ctx.profile.tool_waits and ticket is not None and not _concurrent(call):
        if call.delegation is not None and not call.delegation.concurrent:  # a sequential delegation
            outcomes.append(("tool delegates", ToolDelegated(ticket)))
        outcomes.append(("tool schedules", ToolScheduled(ticket, cfg.DUE_AT)))
    out = [
        _answer(ctx, ran, ToolFinished(call.call_id, effect_attempt, outcome), label)
        for label, outcome in outcomes
    ]
    if state.crashes < ctx.profile.max_crashes and not _concurrent(call):
        point = f"{Boundary.AFTER_EFFECT.value}@{Position.CALL_RESULT.value}"
        out.append(Transition(f"crash {point}", crashed(ran), CRASH, crash=point))
    return out


def _query(ctx: Context, state: State, effect: QueryStatus) -> list[Transition]:
    snap, call = _current(state, effect.call_id, "status query")
    if call.status != CallExecuting(effect.attempt) or call.operation_id != effect.operation_id:
        raise Violation("I5", f"status query for call {call.call_id!r} attempt {effect.attempt}, not its committed attempt")
    if _concurrent(call):
        asked = dataclasses.replace(
            state, queue=state.queue[1:], running=tuple(sorted(state.running + (("Q", call.call_id, effect.attempt),)))
        )
        return [Transition(f"ask {call.call_id}", drain(ctx, asked)[0], SYSTEM)]
    return _status_answers(ctx, state, call, effect.attempt)


def _status_answers(ctx: Context, state: State, call: ToolCall, attempt: int) -> list[Transition]:
    """Every answer to a status query of ``call``'s attempt ``attempt``."""
    effect = QueryStatus(call.call_id, call.tool, call.operation_id, attempt)
    answers: list[tuple[str, StatusReport]] = [
        ("status done", StatusReport(call.call_id, effect.attempt, OperationStatus.DONE, cfg.STATUS_DONE)),
        ("status failed", StatusReport(call.call_id, effect.attempt, OperationStatus.FAILED, cfg.STATUS_FAILED)),
        ("status running", StatusReport(call.call_id, effect.attempt, OperationStatus.RUNNING)),
        ("status not_found", StatusReport(call.call_id, effect.attempt, OperationStatus.NOT_FOUND)),
        ("status unknown", StatusReport(call.call_id, effect.attempt, OperationStatus.UNKNOWN)),
    ]
    out = []
    for label, report in answers:
        source = state
        if report.status is OperationStatus.NOT_FOUND:
            # it provably never started: the executor may start again (I9's exception)
            source = dataclasses.replace(state, fenced=state.fenced - {call.operation_id})
        out.append(_answer(ctx, source, report, label))
    return out


def _group_answers(ctx: Context, state: State) -> list[Transition]:
    """The runtime waits on its running group: the world answers any one executor or
    status query first; the operator may cancel meanwhile."""
    snap = state.snap
    assert snap is not None
    if len(state.running) > 1:
        ctx.counters["states with several group calls running"] = ctx.counters.get("states with several group calls running", 0) + 1
    out: list[Transition] = []
    for entry in state.running:
        kind, call_id, attempt = entry
        rest = dataclasses.replace(state, running=tuple(r for r in state.running if r != entry))
        _, call = _current(rest, call_id, f"answer of {call_id!r}")
        if call.status != CallExecuting(attempt):
            raise Violation("W5", f"an answer for call {call_id!r} attempt {attempt}, which is not Executing it")
        if kind == "X":
            out += _tool_answers(ctx, rest, rest, call, attempt)
        else:
            out += _status_answers(ctx, rest, call, attempt)
    return out + _interrupt(ctx, state)


# --- quiet points --------------------------------------------------------------------


def _recover(ctx: Context, state: State) -> list[Transition]:
    snap = state.snap
    assert snap is not None
    first = ctx.kernel.run_recover(snap, ctx.policies)
    again = ctx.kernel.run_recover(snap, ctx.policies)
    if first != again:
        i11 = Violation("I11", "recover gave two different decisions for the same committed state")
        i11.label = "recover"
        raise i11
    fenced = state.fenced
    batch = snap.open_batch
    if isinstance(snap.state, Running) and batch is not None:
        # the call in progress, and every other member of a running group of concurrent calls
        in_progress = batch.first_open_call()
        for call in batch.calls:
            if not isinstance(call.status, CallExecuting) or not (call is in_progress or _concurrent(call)):
                continue
            if ctx.policies.for_tool(call.tool).recovery.mode is not RecoveryMode.REPLAY:
                fenced = fenced | {call.operation_id}
    source = dataclasses.replace(state, fenced=fenced)
    try:
        target, commits = adopt(ctx, source, first.decision, "recovery")
        out = [Transition("recover", target, SYSTEM, commits)]
    except Violation as violation:
        violation.label = "recover"
        raise
    if isinstance(snap.state, Running):
        out += _interrupt(ctx, state)
    return out


def expand(ctx: Context, state: State) -> list[Transition]:
    """Every successor of ``state``; raises Violation when an invariant fails on the way."""
    if state.queue:
        item = state.queue[0]
        try:
            if isinstance(item, Pending):
                return _commit_transitions(ctx, state, item)
            if isinstance(item, RequestInference):
                return _infer(ctx, state, item)
            if isinstance(item, RunGate):
                return _gate(ctx, state, item)
            if isinstance(item, Execute):
                return _execute(ctx, state, item)
            if isinstance(item, QueryStatus):
                return _query(ctx, state, item)
            if isinstance(item, StartChild):
                return _start_child(ctx, state, item)
            raise Violation("protocol", f"unexpected queued effect {type(item).__name__}")
        except Violation as violation:
            violation.label = violation.label or f"runtime carries out {type(item).__name__}"
            raise
    snap = state.snap
    if snap is None:
        activate = Activate(cfg.THREAD_ID, cfg.RUN_ID, 0, (Message(Role.USER, cfg.USER_TEXT),))
        return [_answer(ctx, state, activate, "activate", SYSTEM)]
    if ctx.profile.forged_commands:
        op.check_refusals(ctx, snap, state.history)
    children = _children_move(ctx, state) if state.children else []
    if state.running and not state.recovering:
        return _group_answers(ctx, state) + children
    if state.recovering or isinstance(snap.state, Running):
        return _recover(ctx, state) + children
    if isinstance(snap.state, Awaiting):
        return [_answer(ctx, state, cmd, label, OPERATOR) for label, cmd in op.operator_commands(snap)] + children
    return children  # Ended and nothing in flight: final once no child moves
