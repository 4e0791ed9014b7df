"""runkernel as the benchmarks see it: every call into runkernel goes through this module.

The storage layout, the runtime and the codec are being changed on other branches; the
benchmarks touch only stable entry points (the ``Runtime`` with its ports, the two
stores, ``decide``/``validate_commit``/``recover``, the codec's encode/decode, the
``check-trace`` entry function, ``simulate``), so a renamed call is fixed here, once.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from runkernel.adapters.drive.actions import CallRequest, RunCall
from runkernel.adapters.stores.export import export_lines
from runkernel.adapters.stores.memory import MemoryStore
from runkernel.adapters.drive.ports import (
    InferenceRequest,
    ModelReply,
    Returned,
    StatusReply,
    ToolRegistry,
    ToolReply,
)
from runkernel.adapters.drive.runtime import Runtime
from runkernel.adapters.drive.telemetry import Telemetry
from runkernel.adapters.stores.serial import commit_from_text, commit_text
from runkernel.adapters.stores.sqlite import SqliteStore
from runkernel.adapters.stores.contract import Store
from runkernel.kernel.codec import commit_to_json
from runkernel.kernel.decide import decide
from runkernel.kernel.policies import Policies, ToolPolicy
from runkernel.kernel.protocol import (
    Activate,
    Allow,
    Decision,
    GateVerdict,
    InferenceResult,
    Input,
    ProposedCall,
    ToolFinished,
    ToolOutput,
)
from runkernel.kernel.recover import recover
from runkernel.kernel.rules import Rejection
from runkernel.kernel.state import Ended, Message, RunSnapshot, ThreadCommit, ThreadHead
from runkernel.kernel.validate import NO_TICKETS_SEEN
from runkernel.kernel.validate_edge import judge_commit
from runkernel.kernel.values import EndCauseKind, Role
from runkernel.specs.checker import Verdict, check_file
from runkernel.specs.machines import ToolCallMachine
from runkernel.testing import Builder

TOOL_NAME = "lookup"
PROMPT = "look the answer up, one step at a time"


def tool_result(step: int) -> str:
    """What the scripted tool returns at ``step`` (the LangGraph peer returns the same)."""
    return f"result {step}"


def tool_arguments(step: int) -> dict[str, int]:
    """The arguments the scripted model asks for at ``step`` (the same for the peer)."""
    return {"n": step}


FINAL_TEXT = "done"


# --- stores ---------------------------------------------------------------------------


def sqlite_store(path: Path, synchronous: str) -> Store:
    """runkernel's SQLite store at ``path`` with the given ``synchronous`` pragma."""
    return SqliteStore(path, synchronous=synchronous)


def memory_store() -> Store:
    """runkernel's in-memory store."""
    return MemoryStore()


def thread_commit_count(store: Store, thread_id: str) -> int:
    """How many ThreadCommits the Thread holds (its head version)."""
    head = store.thread_head(thread_id)
    return 0 if head is None else head.version


# --- the agent loop ---------------------------------------------------------------------


class _ScriptedModel:
    """Asks for one tool call per step for ``steps`` steps, then answers and ends.

    It counts its own inferences, so its cost does not depend on the history it is shown.
    """

    def __init__(self, steps: int) -> None:
        self.steps = steps
        self.made = 0

    def infer(self, request: InferenceRequest) -> ModelReply:
        step = self.made
        self.made += 1
        if step < self.steps:
            return ModelReply("", (CallRequest(TOOL_NAME, tool_arguments(step)),))
        return ModelReply(FINAL_TEXT, end=EndCauseKind.COMPLETED)


class _LookupTool:
    """A tool that answers at once; a replay policy (it is pure)."""

    policy = ToolPolicy()

    def run(self, invocation: RunCall) -> ToolReply:
        arguments = invocation.arguments
        step = arguments.get("n", 0) if isinstance(arguments, dict) else 0
        return Returned(tool_result(step if isinstance(step, int) else 0))

    def status(self, operation_id: str, lease_epoch: int | None) -> StatusReply:
        raise NotImplementedError("the lookup tool is not under the reconnect policy")


def run_agent(store: Store, thread_id: str, steps: int, *, telemetry: Telemetry | None = None) -> int:
    """Drive one Run of ``steps`` tool steps plus a final answer; return its ThreadCommits."""
    runtime = Runtime(store, _ScriptedModel(steps), ToolRegistry({TOOL_NAME: _LookupTool()}), telemetry=telemetry)
    before = thread_commit_count(store, thread_id)
    runtime.start(thread_id, f"{thread_id}-run", (Message(Role.USER, PROMPT),))
    return thread_commit_count(store, thread_id) - before


# --- commits made by the kernel alone -----------------------------------------------------


def _follow(state: RunSnapshot | None, event: Input, out: list[ThreadCommit]) -> RunSnapshot:
    # not runkernel.testing.Builder: an endless history (100k commits and more) streamed
    # without a self-check or history keys, so preparing a bench costs the store's time
    # only (a Builder keeps every commit and the Run's history as values)
    verdict = decide(state, event, Policies())
    if isinstance(verdict, Rejection):
        raise AssertionError(f"decide refused a scripted event: {verdict}")
    commit = verdict.commit
    if commit is not None:
        out.append(commit)
    return verdict.state


def history_commits(thread_id: str, *, tool_steps: bool) -> Iterator[ThreadCommit]:
    """An endless Run's commits, made by ``decide`` alone: text steps or tool steps.

    A tool step is an inference asking for one call, the gate's Allow and the tool's
    output (three commits); a text step is one inference commit that does not end.
    """
    out: list[ThreadCommit] = []
    run_id = f"{thread_id}-run"
    state = _follow(None, Activate(thread_id, run_id, 0, (Message(Role.USER, PROMPT),)), out)
    step = 0
    while True:
        if tool_steps:
            call_id = f"c{step}"
            state = _follow(
                state,
                InferenceResult(
                    "", (ProposedCall(call_id, TOOL_NAME, tool_arguments(step), f"op{step}"),), f"b{step}"
                ),
                out,
            )
            state = _follow(state, GateVerdict(call_id, Allow()), out)
            state = _follow(state, ToolFinished(call_id, 1, ToolOutput(tool_result(step))), out)
        else:
            state = _follow(state, InferenceResult(f"step {step}"), out)
        step += 1
        yield from out
        out.clear()


def append(store: Store, commit: ThreadCommit) -> None:
    """One store commit (the store validates it)."""
    store.append(commit)


def run_id_of(thread_id: str) -> str:
    """The run id ``history_commits`` and ``run_agent`` use for a Thread."""
    return f"{thread_id}-run"


def latest_and_recover(store: Store, run_id: str) -> Decision:
    """Read a Run's latest committed state and plan its recovery, as a fresh worker does."""
    state = store.run(run_id)
    if state is None:
        raise AssertionError(f"no run {run_id}")
    return recover(state, Policies()).decision


# --- kernel --------------------------------------------------------------------------


def one_call_events() -> tuple[RunSnapshot, list[Input]]:
    """An Active Run and the events that take one tool call through gate, execute, result."""
    state = Builder("t").start("r", (PROMPT,)).snapshot
    events: list[Input] = [
        InferenceResult("", (ProposedCall("c", TOOL_NAME, tool_arguments(0), "op"),), "b"),
        GateVerdict("c", Allow()),
        ToolFinished("c", 1, ToolOutput(tool_result(0))),
    ]
    return state, events


def decide_events(state: RunSnapshot, events: list[Input]) -> None:
    """``decide`` alone over ``events``."""
    policies = Policies()
    for event in events:
        verdict = decide(state, event, policies)
        assert not isinstance(verdict, Rejection)
        state = verdict.state


def decide_and_validate_events(state: RunSnapshot, events: list[Input]) -> None:
    """``decide`` plus the store's judgement of each commit it emits, as the store runs it
    (``judge_commit``: by the edge ``decide`` named, checked to be that edge)."""
    policies = Policies()
    head = ThreadHead(state.thread_id, state.version, state.run_id)
    for event in events:
        verdict = decide(state, event, policies)
        assert not isinstance(verdict, Rejection)
        commit = verdict.commit
        if commit is not None:
            judged = judge_commit(head, state, commit, ticket_seen=NO_TICKETS_SEEN)
            assert not isinstance(judged, Rejection)
            head = judged.head
        state = verdict.state


def spec_machine_edges() -> tuple[Callable[[], Any], tuple[str, ...]]:
    """python-statemachine's ToolCall machine and the events of the same three edges."""
    return ToolCallMachine, ("first_attempt_committed", "tool_output_committed", "every_call_terminal")


# --- codec -------------------------------------------------------------------------


def encode_commit(commit: ThreadCommit) -> str:
    """A commit as its trace/store line."""
    return commit_text(commit)


def decode_commit(line: str) -> ThreadCommit:
    """A trace/store line back to a typed commit (validated shape)."""
    return commit_from_text(line)


def commit_as_dict(commit: ThreadCommit) -> dict[str, Any]:
    """The plain dict a bare JSON library is handed for the same commit."""
    return dict(commit_to_json(commit))


def sample_commits(steps: int) -> list[ThreadCommit]:
    """A real Run's commits: the agent loop on the memory store."""
    store = memory_store()
    run_agent(store, "codec", steps)
    return list(store.commits("codec"))


# --- check-trace, simulate ----------------------------------------------------------------


def simulate(store: Store, runs: int, seed: int) -> int:
    """``runkernel simulate``'s work on ``store``; returns the commits it made."""
    from runkernel.testing.simulation.simulate import simulate as run_simulation

    report = run_simulation(store, runs, seed)
    if report.violations:
        raise AssertionError(f"simulate found violations: {report.violations[:3]}")
    return report.commits


def export_trace(store: Store, out: Path) -> int:
    """Every Thread of ``store`` exported into one trace file; returns its lines."""
    count = 0
    with out.open("w", encoding="utf-8") as stream:
        for thread_id in store.thread_ids():
            for line in export_lines(store, thread_id, redact=False):
                stream.write(line + "\n")
                count += 1
    return count


def check_trace(path: Path) -> bool:
    """``runkernel check-trace`` on one file: True when it is legal."""
    return check_file(path).verdict is Verdict.LEGAL


# --- the console ------------------------------------------------------------


def activate_runs(store: Store, count: int, *, apps: int) -> None:
    """Commit ``count`` Runs' activations, each in a Thread of its own, spread over
    ``apps`` apps (``app-0`` ...)."""
    from runkernel.kernel.state import Message
    from runkernel.kernel.values import Role

    for n in range(count):
        decision = decide(None, Activate(f"t-{n}", f"run-{n}", 0, (Message(Role.USER, "hi"),), f"app-{n % apps}"))
        assert decision.commit is not None  # type: ignore[union-attr]
        store.append(decision.commit)  # type: ignore[union-attr]


def count_selects(store: Store) -> list[str]:
    """The SELECT statements a SQLite store runs from now on, collected as they run."""
    statements: list[str] = []

    def seen(statement: str) -> None:
        if statement.lstrip().upper().startswith("SELECT"):
            statements.append(statement)

    assert isinstance(store, SqliteStore)
    store._db.set_trace_callback(seen)
    return statements


def console_runs_page(store: Store, state: str, app: str) -> int:
    """One page of the console's Runs list; returns how many Runs it shows."""
    from runkernel.ui.views import RunFilter, runs_page

    return len(runs_page(store, RunFilter(state, app)).runs)


# --- the worker group ---------------------------------------------------


class _TwoCallModel:
    """Step 1 asks for two ``lookup`` calls at once; step 2 answers and ends the Run.
    ``before_first`` runs before each step-1 answer (the bench's start barrier)."""

    def __init__(self, before_first: Callable[[], None]) -> None:
        self.before_first = before_first

    def infer(self, request: InferenceRequest) -> ModelReply:
        if request.step <= 1:
            self.before_first()
            calls = (CallRequest(TOOL_NAME, tool_arguments(0)), CallRequest(TOOL_NAME, tool_arguments(1)))
            return ModelReply("", calls)
        return ModelReply(FINAL_TEXT, end=EndCauseKind.COMPLETED)


def two_call_app(name: str, before_first: Callable[[], None]) -> Any:
    """The worker group's ``RuntimeApp``: a Run is two tool calls, then an answer."""
    from runkernel.adapters.worker.apps import RuntimeApp

    tools = ToolRegistry({TOOL_NAME: _LookupTool()}, max_steps=4)
    return RuntimeApp(name=name, model=_TwoCallModel(before_first), tools=tools)


class _SleepingModel:
    """A model that waits ``sleep`` seconds per call, as a remote model does: step 1 asks
    for one ``lookup`` call, step 2 answers and ends the Run. ``before_first`` runs before
    each step-1 answer (the bench's start barrier). It keeps no state: slots share it."""

    def __init__(self, sleep: float, before_first: Callable[[], None]) -> None:
        self.sleep = sleep
        self.before_first = before_first

    def infer(self, request: InferenceRequest) -> ModelReply:
        if request.step <= 1:
            self.before_first()
            time.sleep(self.sleep)
            return ModelReply("", (CallRequest(TOOL_NAME, tool_arguments(0)),))
        time.sleep(self.sleep)
        return ModelReply(FINAL_TEXT, end=EndCauseKind.COMPLETED)


class _SleepingTool(_LookupTool):
    """The ``lookup`` tool, waiting ``sleep`` seconds before it answers (a slow API)."""

    def __init__(self, sleep: float) -> None:
        self.sleep = sleep

    def run(self, invocation: RunCall) -> ToolReply:
        time.sleep(self.sleep)
        return super().run(invocation)


def latency_app(name: str, sleep: float, before_first: Callable[[], None]) -> Any:
    """The latency group's ``RuntimeApp``: a Run is two model calls and one tool call,
    each waiting ``sleep`` seconds (3 × ``sleep`` of latency per Run)."""
    from runkernel.adapters.worker.apps import RuntimeApp

    tools = ToolRegistry({TOOL_NAME: _SleepingTool(sleep)}, max_steps=4)
    return RuntimeApp(name=name, model=_SleepingModel(sleep, before_first), tools=tools)


def postgres_store(url: str) -> Store:
    """runkernel's PostgreSQL store at ``url`` (a ``schema`` query parameter), made there
    first if it is not."""
    from runkernel.adapters.stores.postgres import PostgresStore
    from runkernel.adapters.stores.postgres.schema import init_postgres

    init_postgres(url)
    return PostgresStore(url)


def start_runs(store: Store, prefix: str, count: int, app: str) -> list[str]:
    """Activate ``count`` Runs of ``app``, each in a Thread of its own, asked ``PROMPT``."""
    run_ids = []
    for n in range(count):
        decision = decide(None, Activate(f"{prefix}-t{n}", f"{prefix}-r{n}", 0, (Message(Role.USER, PROMPT),), app))
        assert not isinstance(decision, Rejection) and decision.commit is not None
        store.append(decision.commit)
        run_ids.append(f"{prefix}-r{n}")
    return run_ids


def runs_running(store: Store, app: str, cap: int) -> int:
    """How many Runs of ``app`` are still Running (counted up to ``cap``)."""
    return store.count_runs(state="running", app=app, cap=cap)


def runs_completed(store: Store, run_ids: list[str]) -> int:
    """How many of ``run_ids`` ended completed."""
    done = 0
    for run_id in run_ids:
        snapshot = store.run(run_id)
        if snapshot is not None and isinstance(snapshot.state, Ended) and snapshot.state.cause.kind is EndCauseKind.COMPLETED:
            done += 1
    return done


# --- the latency group ---------------------------------------------------


def worker_slots() -> int | None:
    """How many Runs a ``Worker`` keeps in flight by default (its ``concurrency``), or
    None when this runkernel's worker has no slots (it drives one Run at a time)."""
    import inspect

    from runkernel import Worker

    option = inspect.signature(Worker).parameters.get("concurrency")
    return option.default if option is not None and isinstance(option.default, int) else None


async def drive_sleeping_run(store: Store, sleep: float) -> str:
    """An asyncio host's Run through ``AsyncDriver``: two model calls and one tool call,
    each awaiting ``sleep`` seconds (``latency_app``'s Run, pushed instead of pulled);
    returns the Run's id."""
    import asyncio

    from runkernel.adapters.drive.actions import Done, Infer
    from runkernel.adapters.drive.driver import AsyncDriver

    driver = AsyncDriver(store, {TOOL_NAME: "replay"})
    action = await driver.start([PROMPT])
    while not isinstance(action, Done):
        await asyncio.sleep(sleep)
        if isinstance(action, Infer) and action.step <= 1:
            action = await driver.inferred("", [CallRequest(TOOL_NAME, tool_arguments(0))])
        elif isinstance(action, Infer):
            action = await driver.inferred(FINAL_TEXT, end=EndCauseKind.COMPLETED)
        elif isinstance(action, RunCall):
            action = await driver.call_returned(action.call_id, tool_result(0))
        else:
            raise AssertionError(f"the sleeping Run was handed {type(action).__name__}")
    return action.run_id
