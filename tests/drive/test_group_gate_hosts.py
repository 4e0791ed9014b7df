"""The gate round of a group of concurrent delegations (Step and ToolBatch;
``CONCURRENCY_RULE``) over every host: the pull-mode runtime, and the push-mode driver
through both shells, with the cases of tests/drive/test_group_gate.py: every gate answer
on the first, middle and last member. An Allow is held for the round and commits nothing;
a Block or Supply completes its member at once; a wait ends the round and its member,
resumed, runs alone; the allowed members start together in one commit. The judge finds
every Thread (parent and children together) legal."""

from __future__ import annotations

from collections import Counter

import pytest
from attrs import frozen

import test_group_gate as pull
from push_children import (
    PARENT,
    TOOLS,
    DelegatingWorld,
    DelegationStore,
    drive_child,
    finalized_batch,
    group_starts,
    judged_legal,
)
from push_host import SHELLS, Reply, World, make_shell, play_until_quiet
from runkernel import CallRequest
from runkernel.adapters.drive.actions import Action, ChildrenRunning, Done, WaitFor
from runkernel.adapters.drive.inbox import submit_resume
from runkernel.adapters.drive.ports import GateAnswer, InferenceRequest, ModelReply, ToolRegistry
from runkernel.adapters.drive.runtime import Runtime
from runkernel.kernel.policies import ToolPolicy
from runkernel.kernel.protocol import ResumeCommand
from runkernel.kernel.state import (
    Awaiting,
    CallAwaiting,
    CallCompleted,
    CallExecuting,
    CallRequested,
    Ended,
    Message,
    RunSnapshot,
    ToolCall,
)
from runkernel.kernel.values import EndCauseKind, ResultKind, Role
from runkernel.testing import (
    Boundary,
    CountingIds,
    CrashAt,
    CrashAtEncounters,
    CrashPlan,
    NeverCrash,
    Position,
    SimulatedCrash,
)
from test_concurrent_delegations import _Tool

MEMBERS = pull.MEMBERS
ORDINARY = "o4"
#: the pull tests' model: three delegations, then one ordinary call
SCRIPT = {
    1: Reply(
        "",
        tuple(("research", {"topic": m}) for m in MEMBERS) + (("reconnect", {"q": 1}),),
        call_ids=MEMBERS + (ORDINARY,),
    ),
    2: Reply("summary", end=EndCauseKind.COMPLETED),
}


class _Gate(pull._Gate):
    """The pull tests' gate (``answer`` for one member, Permit for the rest), asked for
    this host's parent Run."""

    def check(self, run_id: str, call: ToolCall) -> GateAnswer:
        return super().check(pull.PARENT if run_id == PARENT else run_id, call)


def _gate(held: str, kind: str) -> _Gate:
    return _Gate(held, pull.OUTRIGHT[kind] if kind in pull.OUTRIGHT else pull.HOLDS[kind][0])


@frozen
class Quiet:
    """Where the host stood when the parent stopped asking it for work."""

    action: str  # "wait", "children" or "done"
    calls: tuple[str, ...]  # the waiting member, or the calls whose children run
    statuses: tuple[type, ...]  # of the parent's batch, in call order
    threads: int
    children: tuple[str, ...] = ()  # the running children's Run ids


@frozen
class Trial:
    store: DelegationStore
    gate: _Gate
    quiet: tuple[Quiet, ...]
    crashes: int
    #: the parent Thread's and its children's Threads when the host died
    threads_at_crash: tuple[int, ...]
    #: the tool of every executor the host started, and the host's ordinary tool
    ran: tuple[str, ...]
    ordinary: str
    world: World | None = None


#: the pull-mode Runtime, and the push-mode driver through both shells
HOSTS = ("pull", *SHELLS)


def host(kind: str, held: str, answer: str, plan: CrashPlan | None = None) -> Trial:
    """The group's gate round played by the host ``kind`` (see ``pull_host`` and ``push_host``)."""
    return pull_host(held, answer, plan) if kind == "pull" else push_host(kind, held, answer, plan)


class _PullModel:
    """The pull tests' model (three delegations, then one ordinary call), for this
    host's parent Run."""

    def infer(self, request: InferenceRequest) -> ModelReply:
        if request.run_id == PARENT:
            if request.step == 1:
                calls = tuple(CallRequest("research", {"topic": m}, m) for m in MEMBERS)
                return ModelReply("", calls + (CallRequest("fetch", {"q": 1}, ORDINARY),))
            return ModelReply("summary", end=EndCauseKind.COMPLETED)
        return ModelReply(f"answer {request.messages[0].content}", end=EndCauseKind.COMPLETED)


def pull_host(held: str, answer: str, plan: CrashPlan | None = None) -> Trial:
    """Start the parent with the pull-mode runtime; resume a wait through the inbox with
    the pull tests' payload, drive every running child, until the parent ends; after a
    crash start again from the store alone (a fresh runtime for every drive)."""
    store = DelegationStore(plan or NeverCrash())
    gate = _gate(held, answer)
    research, fetch = _Tool(ToolPolicy(terminal_only_delegation=True)), _Tool(ToolPolicy())
    tools = ToolRegistry({"research": research, "fetch": fetch})
    quiet: list[Quiet] = []
    crashes = 0
    at_crash: list[int] = []

    def runtime() -> Runtime:
        return Runtime(store, _PullModel(), tools, gate=gate, self_check=True)

    while True:
        try:
            if store.run(PARENT) is None:
                runtime().start("t1", PARENT, (Message(Role.USER, "go"),))
            else:
                runtime().drive(PARENT)  # first: it activates children a crash left unactivated
            for _ in range(8):
                state = store.run(PARENT)
                assert state is not None
                stop = _pull_quiet(store, state)
                quiet.append(stop)
                if stop.action == "done":
                    ran = ("research",) * research.runs + ("fetch",) * fetch.runs
                    return Trial(store, gate, tuple(quiet), crashes, tuple(at_crash), ran, "fetch")
                if stop.action == "wait":
                    assert isinstance(state.state, Awaiting)
                    payload = pull.HOLDS[answer][1]
                    assert payload is not None, f"a wait the runtime should have resumed: {state.state}"
                    ticket = state.state.ticket
                    assert isinstance(submit_resume(store, ResumeCommand(PARENT, ticket.ticket_id, ticket.wait, payload)), int)
                else:
                    for child in stop.children:
                        runtime().drive(child)
                runtime().drive(PARENT)
            raise AssertionError(f"the parent did not end: {quiet}")
        except SimulatedCrash:
            crashes += 1
            at_crash.append(len(store.thread_ids()))
            assert crashes == 1, "a crash nobody planned"


def _pull_quiet(store: DelegationStore, state: RunSnapshot) -> Quiet:
    """Where the runtime left the parent: waiting, ended, or quiet while children run."""
    statuses = _statuses(state)
    threads = len(store.thread_ids())
    if isinstance(state.state, Awaiting):
        return Quiet("wait", (state.state.ticket.call_id,), statuses, threads)
    if isinstance(state.state, Ended):
        assert state.state.cause.kind is EndCauseKind.COMPLETED, state.state
        return Quiet("done", (), statuses, threads)
    batch = state.batch
    assert batch is not None
    running = [c for c in batch.calls if c.delegation is not None and isinstance(c.status, CallExecuting)]
    assert running, f"the runtime stopped with nothing to wait for: {state}"
    return Quiet(
        "children", tuple(c.call_id for c in running), statuses, threads,
        tuple(c.delegation.run_id for c in running if c.delegation is not None),
    )


def push_host(kind: str, held: str, answer: str, plan: CrashPlan | None = None) -> Trial:
    """Start the parent; resume a wait with the pull tests' payload, drive every running
    child, until the parent ends; after a crash start again from the store alone."""
    store = DelegationStore(plan or NeverCrash())
    world = DelegatingWorld(SCRIPT, crash=plan, store=store)
    gate = _gate(held, answer)
    quiet: list[Quiet] = []
    crashes = 0
    at_crash: list[int] = []
    while True:
        driver = make_shell(kind, store, gate=gate, ids=CountingIds(f"g{crashes}"), tools=TOOLS)
        try:
            action: Action
            if store.run(PARENT) is None:
                action = driver.start(["go"], thread_id="t1", run_id=PARENT)
            else:
                action = driver.pick_up(PARENT)
            for _ in range(8):
                action = play_until_quiet(driver, action, world)
                quiet.append(_quiet(store, action))
                match action:
                    case Done():
                        ran = tuple(world.tool_of.values())
                        return Trial(store, gate, tuple(quiet), crashes, tuple(at_crash), ran, "reconnect", world)
                    case WaitFor():
                        payload = pull.HOLDS[answer][1]
                        assert payload is not None, f"a wait the driver should have resumed: {action}"
                        action = driver.resume(payload)
                    case ChildrenRunning():
                        for child in action.children:
                            drive_child(kind, store, world, child.run_id)
                        action = driver.next_action()
            raise AssertionError(f"the parent did not end: {quiet}")
        except SimulatedCrash:
            crashes += 1
            at_crash.append(len(store.thread_ids()))
            assert crashes == 1, "a crash nobody planned"


def _quiet(store: DelegationStore, action: Action) -> Quiet:
    state = store.run(PARENT)
    assert state is not None
    statuses = _statuses(state)
    threads = len(store.thread_ids())
    match action:
        case WaitFor():
            return Quiet("wait", (action.call.call_id,), statuses, threads)
        case ChildrenRunning():
            return Quiet("children", tuple(c.call_id for c in action.children), statuses, threads)
        case Done():
            assert action.cause.kind is EndCauseKind.COMPLETED, action
            return Quiet("done", (), statuses, threads)
    raise AssertionError(f"not a quiet action: {action}")


def _statuses(state: RunSnapshot) -> tuple[type, ...]:
    batch = state.batch
    return () if batch is None else tuple(type(c.status) for c in batch.calls)


def expected_stops(held: str, kind: str) -> list[tuple[str, tuple[str, ...]]]:
    """What the host is handed, in order, as the runtime's tests find it."""
    others = tuple(m for m in MEMBERS if m != held)
    rounds: dict[str, list[tuple[str, tuple[str, ...]]]] = {
        "allow": [("children", MEMBERS)],
        "block": [("children", others)],
        "supply": [("children", others)],
        # a resumed member runs alone; the others' round comes once it has ended
        "approve": [("wait", (held,)), ("children", (held,)), ("children", others)],
        "input": [("wait", (held,)), ("children", (held,)), ("children", others)],
        "scheduled": [("children", (held,)), ("children", others)],  # the due timer fires at once
        # a resume that completes the member at once: the next round starts the others
        "deny": [("wait", (held,)), ("children", others)],
        "external": [("wait", (held,)), ("children", others)],
    }
    return rounds[kind] + [("done", ())]


@pytest.mark.parametrize("hosting", HOSTS)
@pytest.mark.parametrize("held", MEMBERS)
@pytest.mark.parametrize("kind", pull.KINDS)
def test_every_gate_answer_on_every_member_position(hosting: str, held: str, kind: str) -> None:
    trial = host(hosting, held, kind)
    store, others = trial.store, [m for m in MEMBERS if m != held]
    assert [(q.action, q.calls) for q in trial.quiet] == expected_stops(held, kind)
    waits = [q for q in trial.quiet if q.action == "wait"]
    for wait in waits:
        # the round ended at the held member: it waits like an ordinary call, nothing started
        assert wait.statuses == tuple(CallAwaiting if m == held else CallRequested for m in MEMBERS) + (CallRequested,)
        assert wait.threads == 1  # no child activated before the group starts
    for resumed in [q for q in trial.quiet if q.action == "children" and q.calls == (held,)]:
        # resumed to Executing: the member runs alone, its siblings still Requested
        assert resumed.statuses == tuple(CallExecuting if m == held else CallRequested for m in MEMBERS) + (
            CallRequested,
        )
    finalized = finalized_batch(store)
    results = {c.call_id: c.status for c in finalized.calls}
    assert all(isinstance(s, CallCompleted) for s in results.values())
    held_status = results[held]
    assert isinstance(held_status, CallCompleted)
    expected_kind = {
        "block": ResultKind.BLOCKED, "supply": ResultKind.SUPPLIED, "deny": ResultKind.DENIED,
        "external": ResultKind.EXTERNAL,
    }.get(kind, ResultKind.OUTPUT)
    assert held_status.result.kind is expected_kind
    # the allowed members started together, in one commit (a resumed member by its resume)
    starts = group_starts(store, "t1")
    assert starts == [list(MEMBERS) if kind == "allow" else others]
    # the gate is asked once per member and round: the allows a wait dropped are asked again
    again = MEMBERS[: MEMBERS.index(held)] if kind in pull.HOLDS else ()
    assert trial.gate.asked == Counter({m: 2 if m in again else 1 for m in MEMBERS + (ORDINARY,)})
    # a delegation's executor is its child's activation: the host ran only the ordinary call
    assert trial.ran == (trial.ordinary,)
    assert [m.call_id for m in store.messages("t1") if m.role is Role.TOOL] == list(MEMBERS) + [ORDINARY]
    children = 3 if kind in ("allow", "approve", "input", "scheduled") else 2
    assert len(store.activations) == len(set(store.activations)) == children
    assert judged_legal(store) == ""
    print(f"{hosting} host: {kind}@{held}: stops {[(q.action, q.calls) for q in trial.quiet]}, "
          f"gate asked {dict(trial.gate.asked)}, group starts {starts}")


@pytest.mark.parametrize("hosting", HOSTS)
@pytest.mark.parametrize(
    "held, position", [("d1", Position.CALL_RESULT), ("d2", Position.CALL_RESULT), ("d3", Position.CALL_START)]
)
def test_a_crash_after_a_block_in_the_round_asks_the_gate_again_from_the_first_member(
    hosting: str, held: str, position: Position
) -> None:
    # an Allow is not committed: after a crash the gate is asked again for every member
    # still Requested, and the group still starts in one commit (the last member's block
    # is committed with the start of the allowed ones: nothing is asked again)
    plan = CrashAt(Boundary.AFTER_WRITE, position)
    trial = host(hosting, held, "block", plan)
    assert plan.fired and trial.crashes == 1
    assert trial.threads_at_crash == (1,)  # no child activated before the host died
    others = [m for m in MEMBERS if m != held]
    assert group_starts(trial.store, "t1") == [others]
    again = MEMBERS[: MEMBERS.index(held)] if position is Position.CALL_RESULT else ()
    assert {m: trial.gate.asked[m] for m in MEMBERS} == {m: 2 if m in again else 1 for m in MEMBERS}
    assert len(trial.store.activations) == len(set(trial.store.activations)) == 2
    assert judged_legal(trial.store) == ""
    print(f"{hosting} host: crash after block@{held} ({position.value}): gate asked {dict(trial.gate.asked)}")


def _outcome(trial: Trial) -> list[tuple[str | None, object]]:
    """The parent's results by call, without the children's ids (they derive from
    operation ids, which a crash before the batch commit mints again)."""
    finalized = finalized_batch(trial.store)
    return [
        (c.call_id, c.status.result.kind if isinstance(c.status, CallCompleted) else type(c.status))
        for c in finalized.calls
    ]


@pytest.mark.parametrize("shell", SHELLS)
@pytest.mark.parametrize("kind", ["allow", "block", "approve", "scheduled"])
def test_a_crash_at_every_boundary_of_a_gate_round_is_picked_up(shell: str, kind: str) -> None:
    baseline = host(shell, "d2", kind)
    plan = CrashAtEncounters(())
    host(shell, "d2", kind, plan)
    total = plan.seen
    fired: set[Position] = set()
    for target in range(total):
        crashing = CrashAtEncounters((target,))
        trial = host(shell, "d2", kind, crashing)
        assert trial.crashes == 1, f"boundary {target} of {total} was never reached"
        fired.update(position for _, position in crashing.fired)
        assert judged_legal(trial.store) == "", f"crash at boundary {target}"
        assert _outcome(trial) == _outcome(baseline), f"crash at boundary {target}"
        assert len(trial.store.activations) == len(set(trial.store.activations)) == len(baseline.store.activations)
        assert trial.world is not None and trial.world.repeated_starts() == {}, f"crash at boundary {target}"
        # every start of the group is one commit, a crash or not
        assert group_starts(trial.store, "t1") == group_starts(baseline.store, "t1")
    assert {Position.ACTIVATION, Position.CALL_START, Position.CALL_RESULT, Position.END} <= fired
    print(f"push [{shell}] {kind}@d2: {total} boundaries, {total} crashes, 0 problems, "
          f"positions {sorted(p.value for p in fired)}")
