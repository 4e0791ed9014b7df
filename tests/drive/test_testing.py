"""The helpers of ``runkernel.testing`` tested themselves: a helper that lies makes every
test built on it lie (h11 has a ``test_helpers.py`` for the same reason).

Each claim a helper makes is checked against the store, the kernel or the clock it
stands in for: a crash "after the write" left the commit durable, a crash "after the
effect" let the tool run and committed nothing of it, the builder's commits are what
``decide`` makes and the judge accepts, the scripted ports answer what their script
says, the fixed ids and clock are fixed.
"""

from __future__ import annotations

import ast
import datetime
import inspect
import subprocess
import sys
import textwrap
from pathlib import Path

import attrs
import pytest

import runkernel.testing as testing
from runkernel import (
    AsyncDriver,
    Driver,
    EndCauseKind,
    Failed,
    Hold,
    InferenceRequest,
    OperationStatus,
    Permit,
    Returned,
    RunCall,
    Runtime,
    StatusReply,
    ToolRegistry,
    WaitKind,
    Worker,
)
from runkernel.adapters.stores.memory import MemoryStore
from runkernel.adapters.drive.ports import Lost, ToolReply, utc_now
from runkernel.adapters.drive.events import Acknowledged, RuntimeEvent
from runkernel.adapters.stores.sqlite import SqliteStore
from runkernel.adapters.stores.contract import Store, StoreUnavailable
from runkernel.kernel import (
    Activate,
    Allow,
    Approve,
    Awaiting,
    CallExecuting,
    CallRequested,
    Ended,
    GateVerdict,
    IndeterminateChoice,
    InferenceResult,
    JsonValue,
    Message,
    Policies,
    ProposedCall,
    RecoveryMode,
    Rejection,
    RequireWait,
    ResumeCommand,
    Role,
    Rule,
    Running,
    ThreadCommit,
    ToolCall,
    ToolFinished,
    ToolOutput,
    ToolPolicy,
    decide,
    recover,
)
from runkernel.specs.checker import Verdict, check_commits
from runkernel.testing import (
    FAIL,
    LOST,
    OK,
    RETRY,
    TRUTH,
    Boundary,
    Builder,
    CountingIds,
    CrashAt,
    CrashAtEncounters,
    CrashingStore,
    ManualClock,
    NeverCrash,
    Position,
    ScriptedGate,
    ScriptedModel,
    ScriptedTool,
    SimulatedCrash,
    StepScript,
    World,
    crashing_tools,
    text_run,
    tool_run,
)

ROOT = Path(__file__).resolve().parent.parent.parent
TASK = (Message(Role.USER, "go"),)
ONE_CALL = (StepScript("calling", (("job", {"n": 1}),)), StepScript("done", end=EndCauseKind.COMPLETED))


def _runtime(store: Store, tools: ToolRegistry, steps: tuple[StepScript, ...] = ONE_CALL) -> Runtime:
    return Runtime(store, ScriptedModel({"r1": steps}), tools, ids=CountingIds("t"), self_check=True)


def _job(world: World, mode: RecoveryMode = RecoveryMode.INDETERMINATE) -> ToolRegistry:
    return ToolRegistry({"job": ScriptedTool("job", world, mode=mode)})


# --- the crashing store -----------------------------------------------------------------


def test_a_crash_before_the_write_leaves_nothing_and_one_after_it_leaves_the_commit_durable() -> None:
    for boundary, durable in ((Boundary.BEFORE_WRITE, 1), (Boundary.AFTER_WRITE, 2)):
        store = MemoryStore()
        plan = CrashAt(boundary, Position.BATCH_OPEN)
        with pytest.raises(SimulatedCrash) as died:
            _runtime(CrashingStore(store, plan), _job(World.new(store))).start("th", "r1", TASK)
        assert (died.value.boundary, died.value.position) == (boundary, Position.BATCH_OPEN)
        commits = list(store.commits("th"))
        assert len(commits) == durable, f"{boundary.value}: {len(commits)} commits durable"
        assert plan.fired == 1
        print(f"{boundary.value} at batch_open: {len(commits)} commit(s) durable")


def test_a_crashing_store_names_each_commit_point_as_the_runtime_does() -> None:
    store = MemoryStore()
    seen: list[Position] = []

    class Watch:
        def crash_here(self, boundary: Boundary, position: Position) -> bool:
            if boundary is Boundary.BEFORE_WRITE:
                seen.append(position)
            return False

    acknowledged: list[Position] = []

    def note(event: RuntimeEvent) -> None:
        if isinstance(event, Acknowledged):
            acknowledged.append(event.position)

    runtime = Runtime(CrashingStore(store, Watch()), ScriptedModel({"r1": ONE_CALL}), _job(World.new(store)), on_event=note)
    runtime.start("th", "r1", TASK)
    assert seen == acknowledged, "the wrapper names a commit as the runtime's Acknowledged does"
    assert seen[:4] == [Position.ACTIVATION, Position.BATCH_OPEN, Position.CALL_START, Position.FINALIZE]
    assert seen[-1] is Position.END
    print(f"commit points: {[p.value for p in seen]}")


def test_a_crashing_store_passes_everything_else_through_and_fails_writes_when_told(tmp_path: Path) -> None:
    inner = SqliteStore(tmp_path / "s.db")
    store = CrashingStore(inner)
    commits = text_run("th", "r1", 2)
    store.append(commits[0])
    assert store.run("r1") == inner.run("r1") and store.path == inner.path
    store.fail_writes = True
    with pytest.raises(StoreUnavailable):
        store.append(commits[1])
    assert inner.thread_head("th") is not None and inner.thread_head("th").version == 1  # type: ignore[union-attr]
    store.fail_writes = False
    store.append(commits[1])
    assert [c.version for c in inner.commits("th")] == [1, 2]
    inner.close()


def test_a_crashing_store_fails_checkpoint_writes_when_told() -> None:
    inner = MemoryStore()
    store = CrashingStore(inner)
    store.fail_checkpoints = True
    outcome = _runtime(store, _job(World.new(inner))).start("th", "r1", TASK)
    assert isinstance(outcome.snapshot.state, Ended)  # a lost checkpoint loses nothing else
    store.fail_checkpoints = False


def test_a_crashing_store_raises_what_its_failure_makes() -> None:
    def unavailable(boundary: Boundary, position: Position) -> Exception:
        return StoreUnavailable(f"down at {position.value}")

    store = CrashingStore(MemoryStore(), CrashAt(Boundary.BEFORE_WRITE, Position.ACTIVATION), unavailable)
    with pytest.raises(StoreUnavailable, match="down at activation"):
        store.append(text_run("th", "r1", 1)[0])


# --- the plans --------------------------------------------------------------------------


def test_crash_at_skips_then_fires_the_times_it_is_told_and_only_at_its_point() -> None:
    plan = CrashAt(Boundary.AFTER_WRITE, Position.CALL_START, skip=1, times=2)
    asked = [
        (Boundary.BEFORE_WRITE, Position.CALL_START),
        (Boundary.AFTER_WRITE, Position.CALL_RESULT),
        (Boundary.AFTER_WRITE, Position.CALL_START),  # skipped
        (Boundary.AFTER_WRITE, Position.CALL_START),  # fires
        (Boundary.AFTER_WRITE, Position.CALL_START),  # fires
        (Boundary.AFTER_WRITE, Position.CALL_START),  # spent
    ]
    assert [plan.crash_here(b, p) for b, p in asked] == [False, False, False, True, True, False]
    assert plan.fired == 2


def test_crash_at_encounters_counts_every_boundary_and_fires_at_the_listed_ones() -> None:
    plan = CrashAtEncounters((1, 3))
    kinds = [Boundary.BEFORE_WRITE, Boundary.AFTER_WRITE, Boundary.AFTER_EFFECT, Boundary.BEFORE_WRITE]
    assert [plan.crash_here(k, Position.END) for k in kinds] == [False, True, False, True]
    assert plan.seen == 4 and plan.fired == [(Boundary.AFTER_WRITE, Position.END), (Boundary.BEFORE_WRITE, Position.END)]
    assert not any(NeverCrash().crash_here(k, Position.END) for k in kinds)


def test_a_sweep_counts_the_boundaries_of_a_crash_free_run_and_reaches_each() -> None:
    def run(plan: CrashAtEncounters) -> tuple[MemoryStore, World]:
        store = MemoryStore()
        world = World.new(store)
        tools = crashing_tools(_job(world, RecoveryMode.REPLAY), plan)
        try:
            _runtime(CrashingStore(store, plan), tools).start("th", "r1", TASK)
        except SimulatedCrash:
            fresh = _runtime(store, _job(world, RecoveryMode.REPLAY))  # knows nothing but the store
            fresh.drive("r1") if store.run("r1") is not None else fresh.start("th", "r1", TASK)
        return store, world

    count = CrashAtEncounters()
    run(count)
    kinds = set()
    for index in range(count.seen):
        plan = CrashAtEncounters((index,))
        store, _ = run(plan)
        assert len(plan.fired) == 1
        kinds.add(plan.fired[0][0])
        final = store.run("r1")
        assert final is not None and isinstance(final.state, Ended)
        assert check_commits(store.commits("th")).verdict is Verdict.LEGAL
    assert kinds == set(Boundary)
    print(f"boundaries of a one-call run: {count.seen}, each crashed once and recovered")


# --- crashing tools -----------------------------------------------------------------------


class _Raises:
    policy = ToolPolicy()

    def __init__(self) -> None:
        self.runs = 0

    def run(self, invocation: RunCall) -> ToolReply:
        self.runs += 1
        raise RuntimeError("socket closed")

    def status(self, operation_id: str, lease_epoch: int | None) -> StatusReply:
        return StatusReply(OperationStatus.UNKNOWN)


def test_a_crash_after_the_effect_lets_the_tool_run_and_commits_nothing_of_its_outcome() -> None:
    store = MemoryStore()
    world = World.new(store)
    plan = CrashAt(Boundary.AFTER_EFFECT, Position.CALL_RESULT)
    with pytest.raises(SimulatedCrash):
        _runtime(store, crashing_tools(_job(world), plan)).start("th", "r1", TASK)
    assert [(e.tool, e.attempt, e.committed_first) for e in world.executions] == [("job", 1, True)]
    state = store.run("r1")
    assert state is not None and state.open_batch is not None
    assert state.open_batch.calls[0].status == CallExecuting(1), "the outcome was never committed"
    # a tool that raised dies the same way: the death is no tool outcome
    raising = _Raises()
    after_effect = CrashAt(Boundary.AFTER_EFFECT, Position.CALL_RESULT)
    with pytest.raises(SimulatedCrash):
        _runtime(MemoryStore(), crashing_tools(ToolRegistry({"job": raising}), after_effect)).start("th", "r1", TASK)
    assert raising.runs == 1 and after_effect.fired == 1


def test_crashing_tools_keep_the_registrys_policies() -> None:
    world = World.new(MemoryStore())
    registry = ToolRegistry(
        {"job": ScriptedTool("job", world, mode=RecoveryMode.RECONNECT, retry_attempts=2)},
        max_steps=7,
        on_indeterminate=IndeterminateChoice.END_RUN,
    )
    assert crashing_tools(registry, NeverCrash()).policies == registry.policies


def test_a_simulated_crash_passes_every_except_exception() -> None:
    try:
        try:
            raise SimulatedCrash(Boundary.AFTER_EFFECT, Position.CALL_RESULT)
        except Exception:  # noqa: BLE001 - the point: a host's broad handler
            pytest.fail("a simulated death was caught as an error")
    except SimulatedCrash as crash:
        assert str(crash) == "crash after_tool_effect at call_result"


# --- scripted ports -----------------------------------------------------------------------


class _Sink:
    def __init__(self) -> None:
        self.deltas: list[JsonValue] = []
        self.checkpoints: list[JsonValue] = []

    def delta(self, data: JsonValue) -> None:
        self.deltas.append(data)

    def checkpoint(self, partial: JsonValue) -> None:
        self.checkpoints.append(partial)


def _request(run_id: str, step: int, sink: _Sink) -> InferenceRequest:
    return InferenceRequest("th", run_id, step, (), None, sink)


def test_the_scripted_model_answers_each_step_from_its_script_and_ends_past_it() -> None:
    world = World.new(MemoryStore())
    model = ScriptedModel({"r1": ONE_CALL}, world)
    sink = _Sink()
    first = model.infer(_request("r1", 1, sink))
    assert (first.content, [(c.tool, c.arguments, c.call_id) for c in first.calls], first.end) == (
        "calling", [("job", {"n": 1}, "r1-s1-c0")], None
    )
    second = model.infer(_request("r1", 2, sink))
    assert (second.content, second.calls, second.end) == ("done", (), EndCauseKind.COMPLETED)
    past = model.infer(_request("r1", 3, sink))
    assert past.end is EndCauseKind.COMPLETED
    unknown = model.infer(_request("nobody", 1, sink))
    assert unknown.end is EndCauseKind.COMPLETED
    assert model.inferences == 4 and world.replies[("r1", 1)] == [first]
    assert len(sink.deltas) == 8 and all(testing.CHECKPOINT_MARK in str(c) for c in sink.checkpoints)


def _invocation(attempt: int, operation_id: str = "op-1") -> RunCall:
    return RunCall("r1", "c1", "job", {"n": 1}, operation_id, attempt)


def test_a_scripted_tool_behaves_per_attempt_and_repeats_its_last_behaviour() -> None:
    world = World.new(MemoryStore())
    tool = ScriptedTool("job", world, mode=RecoveryMode.REPLAY, replies=(RETRY, FAIL, LOST, OK))
    replies = [tool.run(_invocation(n)) for n in range(1, 6)]
    assert [type(r) for r in replies] == [Failed, Failed, Lost, Returned, Returned]
    assert isinstance(replies[0], Failed) and replies[0].retryable
    assert isinstance(replies[1], Failed) and not replies[1].retryable
    assert [e.attempt for e in world.executions] == [1, 2, 3, 4, 5]
    assert not any(e.committed_first for e in world.executions), "nothing was committed for these starts"
    assert tool.policy.recovery.mode is RecoveryMode.REPLAY


def test_a_scripted_tools_status_tells_what_ran_then_follows_its_script() -> None:
    world = World.new(MemoryStore())
    tool = ScriptedTool("job", world, mode=RecoveryMode.RECONNECT, status_script=(TRUTH, "running", TRUTH))
    assert tool.status("op-1").status is OperationStatus.NOT_FOUND  # nothing ran
    assert "op-1" in world.not_found_answered
    ran = tool.run(_invocation(1))
    assert isinstance(ran, Returned)
    assert tool.status("op-1").status is OperationStatus.RUNNING
    done = tool.status("op-1")
    assert (done.status, done.value) == (OperationStatus.DONE, ran.value)


def test_the_scripted_gate_answers_by_tool_and_permits_the_others() -> None:
    hold = Hold(WaitKind.APPROVAL, {"why": "money"})
    gate = ScriptedGate({"pay": hold})
    assert gate.check("r1", ToolCall("c1", "pay", {}, "op", CallRequested())) == hold
    assert gate.check("r1", ToolCall("c2", "read", {}, "op2", CallRequested())) == Permit()


# --- fixed ids and clock ------------------------------------------------------------------


def test_counting_ids_are_the_same_for_the_same_prefix_and_seed_and_tickets_are_long() -> None:
    a, b = CountingIds("x", seed=3), CountingIds("x", seed=3)
    assert [a.new_id("call") for _ in range(3)] == ["call-x-1", "call-x-2", "call-x-3"]
    assert [a.ticket_id() for _ in range(3)] == [b.ticket_id() for _ in range(3)]
    ticket = CountingIds("x").ticket_id()
    assert ticket.startswith("tk_") and len(ticket) == 3 + 48 and ticket != CountingIds("x", seed=1).ticket_id()
    forged = [a.forged_ticket_id() for _ in range(20)]
    fresh = CountingIds("x", seed=3)
    assert set(forged).isdisjoint(fresh.ticket_id() for _ in range(40))


def test_the_manual_clock_moves_only_when_told_in_both_of_its_forms() -> None:
    clock = ManualClock()
    assert clock.iso() == "2026-06-01T00:00:00.000000Z" == testing.fixed.START
    assert clock() == clock() == datetime.datetime(2026, 6, 1, tzinfo=datetime.timezone.utc).timestamp()
    clock.advance(90.000001)
    assert clock.iso() == "2026-06-01T00:01:30.000001Z"
    clock.set("2030-01-01T00:00:00Z")
    assert clock.iso() == "2030-01-01T00:00:00.000000Z"
    assert len(clock.iso()) == len(utc_now()), "the same fixed width as the wall clock"
    assert ManualClock(1000.0)() == 1000.0
    with pytest.raises(ValueError, match="time zone"):
        clock.set("2030-01-01T00:00:00")


def test_a_deadline_expires_when_the_manual_clock_passes_it() -> None:
    clock = ManualClock()
    store = MemoryStore()
    world = World.new(store)
    later = "2026-06-01T00:05:00.000000Z"
    gate = ScriptedGate({"job": Hold(WaitKind.APPROVAL, expires_at=later)})

    def runtime() -> Runtime:
        return Runtime(store, ScriptedModel({"r1": ONE_CALL}), _job(world), gate=gate, clock=clock.iso)

    assert isinstance(runtime().start("th", "r1", TASK).snapshot.state, Awaiting)
    clock.advance(299)
    assert isinstance(runtime().drive("r1").snapshot.state, Awaiting)
    clock.advance(2)
    assert isinstance(runtime().drive("r1").snapshot.state, Ended)  # expired: a deny, then done
    assert world.executions == []


# --- the builder --------------------------------------------------------------------------


def test_the_builder_makes_the_commits_decide_makes_and_the_judge_accepts() -> None:
    call = ProposedCall("c1", "job", {"n": 1}, "op-1")
    inputs = (
        InferenceResult("calling", (call,), "b1"),
        GateVerdict("c1", Allow()),
        ToolFinished("c1", 1, ToolOutput("done")),
        InferenceResult("bye", end=EndCauseKind.COMPLETED),
    )
    built = Builder("th").start("r1").feed(*inputs)
    made: list[ThreadCommit] = []
    state = None
    for event in (Activate("th", "r1", 0, TASK), *inputs):
        verdict = decide(state, event, Policies())
        assert not isinstance(verdict, Rejection)
        if verdict.commit is not None:
            made.append(verdict.commit)
        state = verdict.state
    assert list(built.commits) == made and built.state == state
    assert built.version == len(made) and built.head is not None and built.head.active_run_id is None
    assert check_commits(built.commits).verdict is Verdict.LEGAL
    assert check_commits(tool_run("th", "r1")).verdict is Verdict.LEGAL


def test_the_builder_continues_a_thread_and_branches_as_a_value() -> None:
    first = Builder("th").start("r1").feed(InferenceResult("one", end=EndCauseKind.COMPLETED))
    second = first.start("r2", ("again",))
    assert second.commits[2].expected_version == 2 and second.snapshot.run_id == "r2"
    assert len(first.commits) == 2, "starting a second Run did not change the first builder"
    a = second.feed(InferenceResult("a"))
    b = second.feed(InferenceResult("b", end=EndCauseKind.COMPLETED))
    assert isinstance(a.snapshot.state, Running) and isinstance(b.snapshot.state, Ended)
    assert check_commits(b.commits).verdict is Verdict.LEGAL


def test_the_builder_keeps_the_runs_history_so_decide_sees_used_tickets() -> None:
    calls = (ProposedCall("c1", "pay", {}, "op1"), ProposedCall("c2", "pay", {}, "op2"))
    built = Builder("th").start("r1").feed(
        InferenceResult("x", calls, "b1"),
        GateVerdict("c1", RequireWait(WaitKind.APPROVAL, "tk-1")),
        ResumeCommand("r1", "tk-1", WaitKind.APPROVAL, Approve()),
        ToolFinished("c1", 1, ToolOutput("ok")),
    )
    assert "tk-1" in built.history.tickets
    again = GateVerdict("c2", RequireWait(WaitKind.APPROVAL, "tk-1"))
    assert built.refused(again).rule is Rule.TICKET_REUSED
    with pytest.raises(AssertionError, match="ticket-never-reused"):
        built.feed(again)  # decide is given the history the builder kept


def test_the_builder_crashes_as_recover_says_and_refuses_what_decide_refuses() -> None:
    call = ProposedCall("c1", "job", {}, "op-1")
    running = Builder("th").start("r1").feed(InferenceResult("x", (call,), "b1"), GateVerdict("c1", Allow()))
    recovered = running.crash()
    assert recovered.commits[-1] == recover(running.snapshot, Policies()).decision.commit
    assert recovered.refused(GateVerdict("c1", Allow())).rule is not None
    with pytest.raises(AssertionError, match="refused"):
        running.feed(GateVerdict("nope", Allow()))


def test_the_builder_takes_a_hand_made_commit_only_if_the_judge_accepts_it() -> None:
    opened = Builder("th").start("r1").feed(InferenceResult("x", (ProposedCall("c1", "job", {}, "op-1"),), "b1"))
    run = opened.snapshot
    assert run.batch is not None
    call = run.batch.calls[0]
    started = run.batch.replace_call(attrs.evolve(call, status=CallExecuting(1)))
    moved = opened.commit(ThreadCommit("th", "r1", run.version, run.step, Running(), started))
    assert moved.snapshot.batch is not None and moved.snapshot.batch.calls[0].status == CallExecuting(1)
    assert moved.commits[-1].batch == started and len(opened.commits) == 2
    skipped = run.batch.replace_call(attrs.evolve(call, status=CallExecuting(2)))  # attempt 1 never ran
    with pytest.raises(AssertionError, match="hand-made commit refused"):
        opened.commit(ThreadCommit("th", "r1", run.version, run.step, Running(), skipped))


def test_the_builder_proposes_one_requested_call_per_tool_in_order() -> None:
    proposed = Builder("th").start("r1").propose("pay", "fetch")
    expected = InferenceResult(
        "using tools", (ProposedCall("c1", "pay", {"i": 1}, "op1"), ProposedCall("c2", "fetch", {"i": 2}, "op2")), "b1"
    )
    assert proposed == Builder("th").start("r1").feed(expected)
    batch = proposed.snapshot.batch
    assert batch is not None and batch.batch_id == "b1"
    assert [(c.call_id, c.tool, c.arguments, c.operation_id, c.status) for c in batch.calls] == [
        ("c1", "pay", {"i": 1}, "op1", CallRequested()),
        ("c2", "fetch", {"i": 2}, "op2", CallRequested()),
    ]
    counted = Builder("th").start("r1").propose("pay", first=0, text="go", batch_id="b7").snapshot.batch
    assert counted is not None and counted.batch_id == "b7" and [c.call_id for c in counted.calls] == ["c0"]
    assert check_commits(proposed.commits).verdict is Verdict.LEGAL


# --- the documented example, the old paths, and who may import runkernel.testing ---------


def test_the_module_docstring_example_runs_as_written() -> None:
    doc = testing.__doc__
    assert doc is not None
    block = doc.split("::\n\n", 1)[1].split("\n\nThe same", 1)[0]
    namespace: dict[str, object] = {}
    exec(compile(textwrap.dedent(block), "runkernel.testing docstring", "exec"), namespace)  # noqa: S102
    world = namespace["world"]
    assert isinstance(world, World) and len(world.executions) == 1


#: The only library modules that may import runkernel.testing: the CLI's simulate and
#: crashtest commands (lazily).
ALLOWED_IMPORTERS = {"runkernel/cli/simulate.py", "runkernel/cli/crashtest.py"}


def test_no_library_module_imports_runkernel_testing_but_the_simulate_and_crashtest_commands_lazily() -> None:
    found: dict[str, list[str]] = {}
    for path in sorted((ROOT / "runkernel").rglob("*.py")):
        relative = path.relative_to(ROOT).as_posix()
        if relative.startswith("runkernel/testing/"):
            continue
        tree = ast.parse(path.read_text())
        top_level = {id(node) for node in tree.body}
        for node in ast.walk(tree):
            if not isinstance(node, (ast.Import, ast.ImportFrom)):
                continue
            names = [node.module or ""] if isinstance(node, ast.ImportFrom) else [a.name for a in node.names]
            if any(n == "runkernel.testing" or n.startswith("runkernel.testing.") for n in names):
                where = "top level" if id(node) in top_level else "inside a function or block"
                found.setdefault(relative, []).append(f"line {node.lineno} ({where})")
    assert set(found) <= ALLOWED_IMPORTERS, found
    for relative, places in found.items():
        assert all("inside" in p for p in places), f"{relative} imports runkernel.testing at import time: {places}"
    probe = "import runkernel, runkernel.cli.entry, sys; print(sorted(m for m in sys.modules if m.startswith('runkernel.testing')))"
    loaded = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout.strip()
    assert loaded == "[]", f"importing runkernel and its CLI loaded {loaded}"
    print(f"library modules importing runkernel.testing: {found}")


@pytest.mark.parametrize("host", [Runtime, Driver, AsyncDriver, Worker, MemoryStore, SqliteStore])
def test_production_constructors_take_no_test_switch(host: type) -> None:
    parameters = set(inspect.signature(host).parameters)
    assert not parameters & {"crash", "plan", "fail_writes", "fail_checkpoints"}, parameters
    if host is MemoryStore:
        store = MemoryStore()
        assert not hasattr(store, "fail_writes") and not hasattr(store, "fail_checkpoints")


def test_every_public_name_of_runkernel_testing_is_documented() -> None:
    undocumented = []
    for name in testing.__all__:
        value = getattr(testing, name)
        if inspect.isclass(value) or inspect.isfunction(value):
            if not (value.__doc__ or "").strip():
                undocumented.append(name)
            for member, attribute in vars(value).items() if inspect.isclass(value) else ():
                if not member.startswith("_") and inspect.isfunction(attribute) and not (attribute.__doc__ or "").strip():
                    undocumented.append(f"{name}.{member}")
    assert undocumented == [], f"public names of runkernel.testing without a docstring: {undocumented}"
    print(f"runkernel.testing: {len(testing.__all__)} public names, each documented")


def test_a_tool_body_called_directly_sees_its_call_through_the_tool_context() -> None:
    from runkernel import current_invocation

    call = RunCall("r1", "c1", "job", {"n": 1}, "op-7", 2, lease_epoch=5)
    with testing.invocation_scope(call):
        seen = current_invocation()
    assert seen is call and (seen.operation_id, seen.lease_epoch) == ("op-7", 5)
