"""The Run the OpenTelemetry tests drive (``test_otel.py``), and a process that drives
it until a ``CrashingStore`` kills it at a commit boundary, exporting each span to a
file as it ends (``python tests/otel_app.py DB PHASE SPANS``)."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult

from runkernel import EndCauseKind, Returned, RunCall, Runtime, StatusReply, ToolPolicy, ToolRegistry
from runkernel.adapters.drive.ports import ToolReply
from runkernel.adapters.stores.sqlite import SqliteStore
from runkernel.integrations.otel import OpenTelemetry
from runkernel.kernel.state import Message
from runkernel.kernel.values import Role
from runkernel.testing import Boundary, CrashAt, CrashingStore, Position, ScriptedModel, StepScript

APP = "otel"
RUN, THREAD = "r1", "t1"
#: each phase's process dies at the first call start it commits (the first tool call's
#: for the start, the second's for the pick-up), after the commit landed
DEATH = Position.CALL_START


class EchoTool:
    """A replay tool that returns its arguments."""

    policy = ToolPolicy.replay()

    def run(self, invocation: RunCall) -> ToolReply:
        return Returned({"echo": invocation.arguments})

    def status(self, operation_id: str, lease_epoch: int | None) -> StatusReply:
        raise AssertionError("not a reconnect tool")


def model() -> ScriptedModel:
    """Two tool steps, then the end."""
    steps = [StepScript("use the tool", (("echo", {"i": i}),)) for i in range(2)]
    return ScriptedModel({RUN: [*steps, StepScript("done", end=EndCauseKind.COMPLETED)]})


def tools() -> ToolRegistry:
    return ToolRegistry({"echo": EchoTool()})


def span_record(span: ReadableSpan, process: str) -> dict[str, object]:
    """What a test reads of a span: its ids, parent, name, attributes and process."""
    context = span.get_span_context()
    assert context is not None
    return {
        "trace_id": format(context.trace_id, "032x"),
        "span_id": format(context.span_id, "016x"),
        "parent_id": None if span.parent is None else format(span.parent.span_id, "016x"),
        "name": span.name,
        "attributes": dict(span.attributes or {}),
        "process": process,
    }


class FileExporter(SpanExporter):
    """Appends each span to a file as one JSON line, at once (a killed process loses
    only the spans it had not ended)."""

    def __init__(self, path: Path, process: str) -> None:
        self.path, self.process = path, process

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        with self.path.open("a") as out:
            for span in spans:
                out.write(json.dumps(span_record(span, self.process)) + "\n")
        return SpanExportResult.SUCCESS


def die(boundary: Boundary, position: Position) -> BaseException:
    """The process is killed at this commit boundary: nothing after it runs."""
    sys.stdout.flush()
    os._exit(137)


def main(db: str, phase: str, spans: str) -> None:
    provider = TracerProvider(resource=Resource.create({"service.instance.id": phase}))
    provider.add_span_processor(SimpleSpanProcessor(FileExporter(Path(spans), phase)))
    telemetry = OpenTelemetry(tracer_provider=provider)
    store = CrashingStore(SqliteStore(db), CrashAt(Boundary.AFTER_WRITE, DEATH), failure=die)
    runtime = Runtime(store, model(), tools(), app=APP, telemetry=telemetry)
    if phase == "start":
        runtime.start(THREAD, RUN, (Message(Role.USER, "echo twice"),))
    else:
        runtime.drive(RUN)
    raise AssertionError(f"phase {phase} was to be killed at {DEATH.value}")


if __name__ == "__main__":
    main(*sys.argv[1:])
