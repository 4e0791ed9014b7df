"""OpenTelemetry as a user meets it: nothing imported without the extra, the how-to's
section sending traces to a collector (run with the SDK's in-memory exporter in place
of OTLP), and ``runkernel worker --otel``."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

#: the how-to's and the CLI's tests need the SDK; the test without the extra runs always
needs_otel = pytest.mark.skipif(
    importlib.util.find_spec("opentelemetry") is None or importlib.util.find_spec("opentelemetry.sdk") is None,
    reason="the otel extra (opentelemetry-sdk) is not installed",
)

ROOT = Path(__file__).resolve().parent.parent.parent


# --- without the extra ---------------------------------------------------------------------

WITHOUT = textwrap.dedent(
    """
    import sys
    from runkernel import EndCauseKind, Hold, Runtime, RuntimeApp, ToolRegistry, WaitKind, Worker, open_store
    from runkernel.adapters.stores.serial import end_to_inbox
    from runkernel.kernel.protocol import EndRequest
    from runkernel.kernel.state import EndCause, Message
    from runkernel.kernel.values import Role
    from runkernel.testing import ScriptedGate, ScriptedModel, StepScript

    store = open_store("memory:")
    model = ScriptedModel({"r1": [StepScript("done", end=EndCauseKind.COMPLETED)]})
    Runtime(store, model, ToolRegistry({}), app="a").start("t1", "r1", (Message(Role.USER, "go"),))
    store.put_command("r1", end_to_inbox(EndRequest(EndCause(EndCauseKind.CANCELLED))))
    report = Worker(store, RuntimeApp("a", model, ToolRegistry({}))).run_once()
    loaded = sorted(m for m in sys.modules if m.startswith("opentelemetry") or m.endswith(".otel"))
    print("drives:", report.drives, "loaded:", loaded)
    """
)


def test_without_the_extra_nothing_is_imported() -> None:
    done = subprocess.run(
        [sys.executable, "-c", WITHOUT], capture_output=True, text=True, timeout=120, env={"PYTHONPATH": str(ROOT)}
    )
    print(done.stdout)
    assert done.returncode == 0, done.stderr
    assert "loaded: []" in done.stdout and "drives: 0" not in done.stdout


@pytest.fixture
def howto_block() -> Iterator[str]:
    section = (ROOT / "docs" / "how-to" / "opentelemetry.md").read_text()
    blocks = section.split("```python\n")[1:]
    assert len(blocks) == 1
    yield blocks[0].split("```", 1)[0]


#: Runs before the how-to's block: the OTLP exporter module, which needs a collector,
#: replaced by the SDK's in-memory exporter; after it, what was exported is printed.
OTLP_IN_MEMORY = textwrap.dedent(
    """
    import sys, types
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
    EXPORTED = InMemorySpanExporter()
    fake = types.ModuleType("opentelemetry.exporter.otlp.proto.http.trace_exporter")
    fake.OTLPSpanExporter = lambda endpoint: EXPORTED
    sys.modules[fake.__name__] = fake
    """
)
AFTER = textwrap.dedent(
    """
    spans = EXPORTED.get_finished_spans()
    print("exported", len(spans), "spans in", len({s.context.trace_id for s in spans}), "trace(s):",
          sorted({s.name for s in spans}))
    """
)


@needs_otel
def test_the_howto_sends_traces_to_a_collector(howto_block: str, tmp_path: Path) -> None:
    env = {"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"}
    start = [sys.executable, "-m", "runkernel.cli", "start", "--store", "sqlite:///demo.db", "--thread", "t1",
             "--run", "run-demo", "--app", "demo", "book me a table"]
    assert subprocess.run(start, cwd=tmp_path, env=env, capture_output=True, timeout=120).returncode == 0
    done = subprocess.run([sys.executable, "-c", OTLP_IN_MEMORY + howto_block + AFTER], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=120)
    print(done.stdout)
    assert done.returncode == 0, done.stderr
    assert "in 1 trace(s)" in done.stdout and "'runkernel.tool'" in done.stdout


CLI_WITH_GLOBAL_PROVIDER = textwrap.dedent(
    """
    import sys
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
    from runkernel.cli.entry import main

    exported = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exported))
    trace.set_tracer_provider(provider)  # what opentelemetry-instrument configures
    code = main(sys.argv[1:])
    spans = exported.get_finished_spans()
    print("exit", code, "spans", len(spans), "traces", len({s.context.trace_id for s in spans}),
          "tools", sum(s.name == "runkernel.tool" for s in spans))
    """
)


def _worker_in_a_new_demo_store(where: Path, *flags: str) -> str:
    """``runkernel start`` of the demo's Run in a store of its own, then ``runkernel worker
    --once`` with a global SDK provider; the last line the process printed."""
    where.mkdir()
    env = {"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"}
    store = ["--store", "sqlite:///demo.db"]
    start = [sys.executable, "-m", "runkernel.cli", "start", *store, "--thread", "t1", "--run", "run-demo",
             "--app", "demo", "book me a table"]
    assert subprocess.run(start, cwd=where, env=env, capture_output=True, timeout=120).returncode == 0
    worker = ["worker", *store, "--app", "examples.demo_app:app", "--once", *flags]
    done = subprocess.run([sys.executable, "-c", CLI_WITH_GLOBAL_PROVIDER, *worker], cwd=where, env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout.splitlines()[-1]


@needs_otel
def test_runkernel_worker_otel_records_through_the_configured_provider(tmp_path: Path) -> None:
    plain = _worker_in_a_new_demo_store(tmp_path / "plain")
    traced = _worker_in_a_new_demo_store(tmp_path / "traced", "--otel")
    print(f"\nwithout --otel: {plain}\nwith --otel: {traced}")
    assert plain == "exit 0 spans 0 traces 0 tools 0"
    words = traced.split()
    assert words[:2] == ["exit", "0"] and int(words[3]) > 0 and words[4:6] == ["traces", "1"] and int(words[7]) >= 2
