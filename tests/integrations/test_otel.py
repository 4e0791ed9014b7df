"""OpenTelemetry traces and metrics (``runkernel.integrations.otel``, the ``otel`` extra),
read with the SDK's in-memory exporters: the spans and metrics of a drive, one trace per
Run across processes killed at commit boundaries, the trace context kept beside the
activation (no extra transaction, nothing in the commit log), and nothing imported or
stored without the extra."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("opentelemetry.sdk", reason="the otel extra (opentelemetry-sdk) is not installed")

from opentelemetry.sdk.metrics import MeterProvider  # noqa: E402
from opentelemetry.sdk.metrics.export import InMemoryMetricReader  # noqa: E402
from opentelemetry.sdk.resources import Resource  # noqa: E402
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider  # noqa: E402
from opentelemetry.sdk.trace.export import SimpleSpanProcessor  # noqa: E402
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter  # noqa: E402

import otel_app  # noqa: E402
from runkernel import (  # noqa: E402
    Approve,
    CallRequest,
    Done,
    Driver,
    EndCauseKind,
    Hold,
    Infer,
    RunCall,
    RunCalls,
    Runtime,
    RuntimeApp,
    ToolPolicy,
    ToolRegistry,
    WaitKind,
    Worker,
)
from runkernel.adapters.stores.serial import end_to_inbox, resume_to_inbox  # noqa: E402
from runkernel.kernel.protocol import EndRequest, ProvideInput, ResumeCommand  # noqa: E402
from runkernel.adapters.drive.ports import Lost, StatusReply, ToolReply  # noqa: E402
from runkernel.adapters.stores.memory import MemoryStore  # noqa: E402
from runkernel.adapters.stores.sqlite import SqliteStore  # noqa: E402
from runkernel.errors import CommitConflict, RuntimeProtocolError  # noqa: E402
from runkernel.integrations.otel import OpenTelemetry  # noqa: E402
from runkernel.kernel.rules import Rejection, Rule  # noqa: E402
from runkernel.kernel.state import Awaiting, EndCause, Ended, Message  # noqa: E402
from runkernel.kernel.values import Role  # noqa: E402
from runkernel.testing import (  # noqa: E402
    Boundary,
    CountingIds,
    CrashAt,
    CrashingStore,
    Position,
    ScriptedGate,
    ScriptedModel,
    SimulatedCrash,
    StepScript,
)

ROOT = Path(__file__).resolve().parent.parent.parent
GO = (Message(Role.USER, "echo twice"),)


class Recorded:
    """An ``OpenTelemetry`` over the SDK's in-memory span exporter and metric reader."""

    def __init__(self, process: str = "test") -> None:
        self.spans = InMemorySpanExporter()
        self.metrics = InMemoryMetricReader()
        provider = TracerProvider(resource=Resource.create({"service.instance.id": process}))
        provider.add_span_processor(SimpleSpanProcessor(self.spans))
        self.telemetry = OpenTelemetry(tracer_provider=provider, meter_provider=MeterProvider([self.metrics]))
        self.process = process

    def named(self, name: str) -> list[ReadableSpan]:
        return [s for s in self.spans.get_finished_spans() if s.name == name]

    def records(self) -> list[dict[str, object]]:
        return [otel_app.span_record(s, self.process) for s in self.spans.get_finished_spans()]

    def metric(self, name: str) -> dict[tuple[tuple[str, Any], ...], Any]:
        """Each data point of metric ``name`` by its attributes: a sum's value, a
        histogram's count."""
        found: dict[tuple[tuple[str, Any], ...], Any] = {}
        data = self.metrics.get_metrics_data()
        for resource in data.resource_metrics if data is not None else ():
            for scope in resource.scope_metrics:
                for metric in scope.metrics:
                    if metric.name != name:
                        continue
                    for point in metric.data.data_points:
                        key = tuple(sorted((point.attributes or {}).items()))
                        found[key] = getattr(point, "value", None) if hasattr(point, "value") else point.count
        return found

    def total(self, name: str) -> int:
        return sum(self.metric(name).values())


def _attributes(span: ReadableSpan) -> dict[str, Any]:
    return dict(span.attributes or {})


# --- one trace per Run across processes and crashes ----------------------------------------


def test_a_run_killed_twice_and_finished_by_a_third_process_reads_as_one_trace(tmp_path: Path) -> None:
    db, spans = tmp_path / "otel.db", tmp_path / "spans.jsonl"
    for phase in ("start", "pickup"):  # each killed right after its call start commit landed
        done = subprocess.run(
            [sys.executable, str(ROOT / "tests" / "otel_app.py"), str(db), phase, str(spans)],
            capture_output=True, text=True, timeout=120, env={"PYTHONPATH": f"{ROOT}:{ROOT / 'tests'}"},
        )
        assert done.returncode == 137, done.stderr
    recorded = Recorded("worker")
    store = SqliteStore(db)
    app = RuntimeApp(otel_app.APP, otel_app.model(), otel_app.tools())
    report = Worker(store, app, telemetry=recorded.telemetry).run_once()
    snapshot = store.run(otel_app.RUN)
    assert snapshot is not None and isinstance(snapshot.state, Ended)
    killed = [json.loads(line) for line in spans.read_text().splitlines()]
    every = killed + recorded.records()
    traces = {str(s["trace_id"]) for s in every}
    by_process = {p: sum(1 for s in every if s["process"] == p) for p in ("start", "pickup", "worker")}
    print(f"\nspans by process {by_process}; trace ids {sorted(traces)}; worker drives={report.drives} "
          f"commits={report.commits}; stored context {store.trace_context(otel_app.RUN)}")
    assert len(traces) == 1
    assert all(count > 0 for count in by_process.values())
    roots = [s for s in every if s["parent_id"] is None]
    assert [(r["name"], r["process"]) for r in roots] == [("runkernel.run", "start")]
    drives = [s for s in every if s["name"] == "runkernel.drive"]
    # a killed process never ends its drive; the pick-ups are children of the Run's root
    assert [(d["process"], d["parent_id"]) for d in drives] == [("worker", roots[0]["span_id"])]
    stored = store.trace_context(otel_app.RUN)
    assert stored is not None and stored.split("-")[1:3] == [roots[0]["trace_id"], roots[0]["span_id"]]
    recoveries = recorded.metric("runkernel.recoveries")
    assert sum(recoveries.values()) >= 1 and all(k[0][0] == "runkernel.recovery.row" for k in recoveries)
    tool = [s for s in recorded.named("runkernel.tool")]
    assert tool and all(_attributes(s)["runkernel.lease_epoch"] == 1 for s in tool)
    store.close()


# --- spans and metrics of one drive ------------------------------------------------------


class _Echo:
    policy = ToolPolicy.replay()

    def run(self, call: RunCall) -> ToolReply:
        return otel_app.EchoTool().run(call)

    def status(self, operation_id: str, lease_epoch: int | None) -> StatusReply:
        raise AssertionError("not a reconnect tool")


class _Vanishes:
    """An indeterminate tool whose outcome is lost."""

    policy = ToolPolicy.indeterminate()

    def run(self, call: RunCall) -> ToolReply:
        return Lost()

    def status(self, operation_id: str, lease_epoch: int | None) -> StatusReply:
        raise AssertionError("not a reconnect tool")


def _model(*calls: str) -> ScriptedModel:
    steps = [StepScript(f"call {tool}", ((tool, {"n": i}),)) for i, tool in enumerate(calls)]
    return ScriptedModel({"r1": steps})


def test_a_drive_has_spans_for_its_inferences_tool_attempts_commits_and_recoveries() -> None:
    recorded, store = Recorded(), MemoryStore()
    tools = ToolRegistry({"echo": _Echo(), "vanish": _Vanishes()})
    runtime = Runtime(store, _model("echo", "vanish"), tools, ids=CountingIds("x"), telemetry=recorded.telemetry)
    outcome = runtime.start("t1", "r1", GO)
    assert isinstance(outcome.snapshot.state, Ended)
    commits = list(store.commits("t1"))
    names = [s.name for s in recorded.spans.get_finished_spans()]
    print(f"\n{len(commits)} commits; spans: " + ", ".join(f"{n}={names.count(n)}" for n in sorted(set(names))))
    assert names.count("runkernel.commit") == len(commits)
    assert names.count("runkernel.inference") == 3 and names.count("runkernel.drive") == 1
    tools_run = {_attributes(s)["runkernel.tool"]: _attributes(s) for s in recorded.named("runkernel.tool")}
    echo = tools_run["echo"]
    assert echo["runkernel.run_id"] == "r1" and echo["runkernel.thread_id"] == "t1"
    assert echo["runkernel.attempt"] == 1 and echo["runkernel.policy"] == "replay"
    assert echo["runkernel.call_id"] and echo["runkernel.operation_id"]
    assert echo["runkernel.outcome"] == "ToolOutput" and tools_run["vanish"]["runkernel.policy"] == "indeterminate"
    versions = [_attributes(s)["runkernel.commit.version"] for s in recorded.named("runkernel.commit")]
    assert versions == [c.version for c in commits]
    assert all(_attributes(s)["runkernel.commit.bytes"] > 0 for s in recorded.named("runkernel.commit"))
    assert not any(_attributes(s)["runkernel.commit.conflict"] for s in recorded.named("runkernel.commit"))
    assert recorded.total("runkernel.commits") == len(commits)
    assert sum(recorded.metric("runkernel.commit.duration").values()) == len(commits)
    assert recorded.total("runkernel.calls.indeterminate") == 1
    drive = recorded.named("runkernel.drive")[0]
    assert all(s.parent is not None and s.parent.span_id == drive.context.span_id
               for s in recorded.spans.get_finished_spans() if s.name not in ("runkernel.drive", "runkernel.run"))


def test_a_conflict_is_a_commit_span_a_metric_and_a_failed_drive() -> None:
    recorded, store = Recorded(), MemoryStore()
    gate = ScriptedGate({"echo": Hold(WaitKind.APPROVAL)})
    Runtime(store, _model("echo"), ToolRegistry({"echo": _Echo()}), app="a", gate=gate).start("t1", "r1", GO)
    store.put_command("r1", end_to_inbox(EndRequest(EndCause(EndCauseKind.CANCELLED))))
    rejection = Rejection(Rule.VERSION, "another writer won")
    # the worker's first write loses to another writer
    losing = CrashingStore(store, _AnyCommit(), failure=lambda boundary, position: CommitConflict(rejection))
    app = RuntimeApp("a", _model("echo"), ToolRegistry({"echo": _Echo()}), gate=gate)
    worker = Worker(losing, app, telemetry=recorded.telemetry)
    report = worker.run_once()
    print(f"\nconflicts={report.conflicts} failed drives={recorded.metric('runkernel.drives.failed')}")
    assert report.conflicts == 1
    assert recorded.total("runkernel.commit.conflicts") == 1
    assert recorded.metric("runkernel.drives.failed") == {(("runkernel.reason", "conflict"),): 1}
    lost = [s for s in recorded.named("runkernel.commit") if _attributes(s)["runkernel.commit.conflict"]]
    assert len(lost) == 1
    assert recorded.named("runkernel.drive")[0].status.status_code.name == "ERROR"


class _AnyCommit:
    """A crash plan that fires before the first write it is asked about."""

    def __init__(self) -> None:
        self.left = 1

    def crash_here(self, boundary: Boundary, position: Position) -> bool:
        fire = boundary is Boundary.BEFORE_WRITE and self.left > 0
        self.left -= fire
        return fire


def test_resumes_applied_and_refused_are_spans() -> None:
    recorded, store = Recorded(), MemoryStore()
    gate = ScriptedGate({"echo": Hold(WaitKind.APPROVAL)})
    runtime = Runtime(store, _model("echo"), ToolRegistry({"echo": _Echo()}), gate=gate, telemetry=recorded.telemetry)
    runtime.start("t1", "r1", GO)
    with pytest.raises(RuntimeProtocolError):
        runtime.resume("r1", ProvideInput("x"))  # an approval takes Approve or Deny
    outcome = runtime.resume("r1", Approve())
    assert isinstance(outcome.snapshot.state, Ended)
    resumes = [(_attributes(s)["runkernel.outcome"], _attributes(s)["runkernel.resume"])
               for s in recorded.named("runkernel.resume")]
    print(f"\nresumes: {resumes}")
    assert resumes == [("refused", "ProvideInput"), ("applied", "Approve")]


# --- the trace context beside the activation -------------------------------------------


def _durable(store: SqliteStore, telemetry: OpenTelemetry | None) -> tuple[int, int, list[str]]:
    committed: list[str] = []
    store._db.set_trace_callback(lambda sql: committed.append(sql) if sql == "COMMIT" else None)
    try:
        runtime = Runtime(store, _model("echo"), ToolRegistry({"echo": _Echo()}), ids=CountingIds("x"),
                          telemetry=telemetry)
        runtime.start("t1", "r1", GO)
    finally:
        store._db.set_trace_callback(None)
    lines = [row[0] for row in store._db.execute("SELECT line FROM commits ORDER BY version")]
    return len(lines), len(committed), lines


def test_the_trace_context_rides_in_the_activation_transaction_outside_the_commit_log(tmp_path: Path) -> None:
    plain = SqliteStore(tmp_path / "plain.db")
    traced = SqliteStore(tmp_path / "traced.db")
    recorded = Recorded()
    without, with_ = _durable(plain, None), _durable(traced, recorded.telemetry)
    print(f"\nwithout telemetry: {without[0]} commits, {without[1]} transactions; "
          f"with: {with_[0]} commits, {with_[1]} transactions; context {traced.trace_context('r1')}")
    assert without[:2] == with_[:2] and without[0] == without[1]
    assert without[2] == with_[2], "the commit log is the same, byte for byte"
    assert plain.trace_context("r1") is None
    root = recorded.named("runkernel.run")[0].context
    assert str(traced.trace_context("r1")).startswith(f"00-{root.trace_id:032x}-{root.span_id:016x}-")


def test_a_lease_take_over_is_counted_and_marked_on_the_drive() -> None:
    recorded, store = Recorded(), MemoryStore()
    app = RuntimeApp("a", otel_app.model(), otel_app.tools())
    dying = CrashingStore(store, CrashAt(Boundary.AFTER_WRITE, Position.CALL_START), failure=SimulatedCrash)
    with pytest.raises(SimulatedCrash):  # started, killed after its first call start
        Runtime(dying, otel_app.model(), otel_app.tools(), app="a").start("t1", otel_app.RUN, GO)
    # worker one commits the call's retry under its lease, then dies; worker two takes over
    first = Worker(CrashingStore(store, CrashAt(Boundary.AFTER_WRITE, Position.CALL_RETRY)), app, worker_id="one")
    with pytest.raises(SimulatedCrash):
        first.run_once()
    report = Worker(store, app, worker_id="two", telemetry=recorded.telemetry).run_once()
    events = [e.name for s in recorded.named("runkernel.drive") for e in s.events]
    print(f"\ntake-overs: report {report.takeovers}, metric {recorded.total('runkernel.lease.takeovers')}; "
          f"drive events {events}")
    assert report.takeovers == 1 and recorded.total("runkernel.lease.takeovers") == 1
    assert events == ["runkernel.lease.taken_over"]


class _StoreWithoutTraces:
    """A store of the user's own, written before trace contexts: its ``append`` takes no
    ``trace_context`` and it has no ``trace_context()``."""

    def __init__(self) -> None:
        self.inner = MemoryStore()

    def append(self, commit: Any, settle: Any = None, *, lease: Any = None, release: bool = False) -> Any:
        return self.inner.append(commit, settle, lease=lease, release=release)

    def __getattr__(self, name: str) -> Any:
        if name == "trace_context":
            raise AttributeError(name)
        return getattr(self.inner, name)


def test_a_store_that_keeps_no_trace_context_is_never_handed_one() -> None:
    recorded = Recorded()
    store: Any = _StoreWithoutTraces()
    outcome = Runtime(store, _model("echo"), ToolRegistry({"echo": _Echo()}), telemetry=recorded.telemetry).start(
        "t1", "r1", GO
    )
    assert isinstance(outcome.snapshot.state, Ended)
    assert recorded.named("runkernel.drive") and recorded.total("runkernel.commits") == outcome.snapshot.version


def test_a_push_mode_driver_reports_through_the_same_points() -> None:
    recorded, store = Recorded(), MemoryStore()
    driver = Driver(store, {"echo": "replay"}, telemetry=recorded.telemetry)
    action = driver.start(["echo once"], thread_id="t1", run_id="r1")
    assert isinstance(action, Infer)
    action = driver.inferred("calling", [CallRequest("echo", {"n": 1})])
    assert isinstance(action, RunCall)
    action = driver.call_returned(action.call_id, {"echo": 1})
    assert isinstance(action, Infer)
    action = driver.inferred("done", end=EndCauseKind.COMPLETED)
    assert isinstance(action, Done)
    names = sorted(s.name for s in recorded.spans.get_finished_spans())
    print(f"\npush-mode spans: {names}")
    assert names.count("runkernel.inference") == 2 and names.count("runkernel.tool") == 1
    assert names.count("runkernel.commit") == recorded.total("runkernel.commits") == driver.commits
    tool = _attributes(recorded.named("runkernel.tool")[0])
    assert tool["runkernel.tool"] == "echo" and tool["runkernel.policy"] == "replay"


def test_inbox_commands_applied_and_refused_are_spans() -> None:
    recorded, store = Recorded(), MemoryStore()
    gate = ScriptedGate({"echo": Hold(WaitKind.APPROVAL)})
    runtime = Runtime(store, _model("echo"), ToolRegistry({"echo": _Echo()}), gate=gate, telemetry=recorded.telemetry)
    waiting = runtime.start("t1", "r1", GO).snapshot.state
    assert isinstance(waiting, Awaiting)
    ticket = waiting.ticket
    store.put_command("r1", resume_to_inbox(ResumeCommand("r1", "tk-forged", ticket.wait, Approve())))
    store.put_command("r1", resume_to_inbox(ResumeCommand("r1", ticket.ticket_id, ticket.wait, Approve())))
    assert isinstance(runtime.drive("r1").snapshot.state, Ended)
    commands = [(_attributes(s)["runkernel.command.kind"], _attributes(s)["runkernel.outcome"])
                for s in recorded.named("runkernel.command")]
    print(f"\ninbox commands: {commands}")
    assert commands == [("resume", "refused"), ("resume", "applied")]
    refused = _attributes(recorded.named("runkernel.command")[0])["runkernel.refusal"]
    assert "refused" in refused


def test_each_call_of_a_group_is_a_tool_span_of_its_own_until_its_answer() -> None:
    """A ``RunCalls`` answered last call first: each call's span starts when the group
    is handed out, carries its own attributes and outcome, and ends at its own answer;
    the retried call gets a second span for its second attempt."""
    recorded, store = Recorded(), MemoryStore()
    tools = {"a": ToolPolicy.replay(retries=1, concurrent=True), "b": ToolPolicy.indeterminate(concurrent=True)}
    driver = Driver(store, tools, telemetry=recorded.telemetry)
    driver.start(["both"], thread_id="t1", run_id="r1")
    action = driver.inferred("calling", [CallRequest("a", {}), CallRequest("b", {})])
    assert isinstance(action, RunCalls) and [c.tool for c in action.calls] == ["a", "b"]
    first, second = action.calls
    action = driver.call_returned(second.call_id, "b done")
    assert recorded.named("runkernel.tool") and _attributes(recorded.named("runkernel.tool")[0])["runkernel.tool"] == "b"
    action = driver.call_failed(first.call_id, "flaky", retryable=True)
    assert isinstance(action, RunCall) and action.attempt == 2
    action = driver.call_returned(action.call_id, "a done")
    assert isinstance(driver.inferred("done", end=EndCauseKind.COMPLETED), Done)
    spans = [_attributes(s) for s in recorded.named("runkernel.tool")]
    print(f"\ngroup tool spans: {[(s['runkernel.tool'], s['runkernel.attempt'], s['runkernel.outcome']) for s in spans]}")
    assert [(s["runkernel.tool"], s["runkernel.attempt"], s["runkernel.outcome"]) for s in spans] == [
        ("b", 1, "ToolOutput"), ("a", 1, "ToolFailure"), ("a", 2, "ToolOutput"),
    ]
    assert spans[1]["runkernel.policy"] == "replay" and spans[0]["runkernel.policy"] == "indeterminate"
