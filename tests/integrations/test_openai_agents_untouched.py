"""Nothing of the user's is mutated, and nothing is traced off the machine (issue 35,
item 3): ``DurableRunner`` runs a durable copy of the user's agent graph, so the same
``@function_tool`` runs under a plain ``Runner.run`` and a durable Run in one process,
before and after, and no attribute of the user's agents, model, model settings, tools or
handoff differs after a durable Run (through a handoff) and its ``worker_app``. Tracing is
off inside durable Runs per Run (``RunConfig(tracing_disabled=True)``): with the SDK's
global tracing on and a counting trace processor in place of the exporter, a plain run
hands it spans to export and a durable Run hands it none. Offline."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("agents", reason="the openai-agents extra is not installed (pip install -e '.[openai-agents]')")

from agents import Agent, ModelResponse, RunConfig, Runner, Usage, function_tool, set_trace_processors  # noqa: E402
from agents import set_tracing_disabled  # noqa: E402
from agents.models.interface import Model  # noqa: E402
from agents.testing import assistant_message, function_call  # noqa: E402
from agents.tracing import Span, Trace, TracingProcessor  # noqa: E402

from openai_agents_app import model_turns  # noqa: E402
from runkernel import check_trace, open_store  # noqa: E402
from runkernel.integrations.openai_agents import DurableRunner  # noqa: E402

#: the shared model's replies, by the number of model turns already in its input
DURABLE = [
    [assistant_message("checking", item_id="m0"), function_call("lookup", {"order": 7}, call_id="l1")],
    [function_call("transfer_to_billing", {}, call_id="h1")],
    [function_call("refund", {"order": 7}, call_id="r1")],
    [assistant_message("refunded", item_id="m3")],
]
PLAIN = [[function_call("lookup", {"order": 8}, call_id="p1")], [assistant_message("plain done", item_id="m1")]]


class Scripted(Model):
    """A stateless scripted model: it answers by the turns already in its input."""

    def __init__(self, replies: list[list[Any]]) -> None:
        self.replies = replies

    async def get_response(self, *args: Any, **kwargs: Any) -> ModelResponse:
        turns = model_turns(kwargs.get("input", args[1] if len(args) > 1 else None))
        output = list(self.replies[min(turns, len(self.replies) - 1)])
        return ModelResponse(output=output, usage=Usage(), response_id=None)

    def stream_response(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError("not streamed in this test")


LOOKED_UP: list[int] = []


@function_tool
def lookup(order: int) -> str:
    """Look an order up."""
    LOOKED_UP.append(order)
    return f"order {order} shipped"


@function_tool
def refund(order: int) -> str:
    """Refund an order."""
    return f"order {order} refunded"


def _attributes(thing: object) -> dict[str, tuple[object, tuple[object, ...] | None]]:
    """Each attribute of ``thing``, and a list attribute's entries (compared by identity)."""
    return {k: (v, tuple(v) if isinstance(v, list) else None) for k, v in vars(thing).items()}


def _differences(before: dict[str, Any], after: dict[str, Any]) -> list[str]:
    changed = sorted(set(before) ^ set(after))
    for name in set(before) & set(after):
        (was, was_items), (now, now_items) = before[name], after[name]
        if now is not was or (was_items is not None and (len(was_items) != len(now_items or ()) or any(
            a is not b for a, b in zip(was_items, now_items or ())
        ))):
            changed.append(name)
    return changed


class Counting(TracingProcessor):
    """Stands in for the exporter: counts what would be exported."""

    def __init__(self) -> None:
        self.traces = self.spans = 0

    def on_trace_start(self, trace: Trace) -> None:
        pass

    def on_trace_end(self, trace: Trace) -> None:
        self.traces += 1

    def on_span_start(self, span: Span[Any]) -> None:
        pass

    def on_span_end(self, span: Span[Any]) -> None:
        self.spans += 1

    def shutdown(self) -> None:
        pass

    def force_flush(self) -> None:
        pass


@pytest.fixture
def counting(monkeypatch: pytest.MonkeyPatch) -> Iterator[Counting]:
    """The SDK's global tracing on, its exporter replaced by a counter (nothing leaves)."""
    monkeypatch.delenv("OPENAI_AGENTS_DISABLE_TRACING", raising=False)
    counter = Counting()
    set_trace_processors([counter])
    set_tracing_disabled(False)
    yield counter
    set_tracing_disabled(True)


def _plain() -> str:
    plain = Agent(name="plain", model=Scripted(PLAIN), tools=[lookup])
    result = asyncio.run(Runner.run(plain, "go"))
    return str(result.final_output)


def test_a_shared_tool_runs_plain_and_durable_and_nothing_of_the_users_changes(
    tmp_path: Path, counting: Counting
) -> None:
    model = Scripted(DURABLE)
    billing = Agent(name="billing", model=model, tools=[refund])
    triage = Agent(name="triage", model=model, tools=[lookup], handoffs=[billing])
    users = {"triage": triage, "billing": billing, "model": model, "lookup": lookup, "refund": refund,
             "triage settings": triage.model_settings, "billing settings": billing.model_settings}
    before = {name: _attributes(thing) for name, thing in users.items()}
    LOOKED_UP.clear()
    assert _plain() == "plain done"  # before any durable Run
    plain_spans = counting.spans
    durable = DurableRunner(f"sqlite:///{tmp_path / 'a.db'}", tools={"lookup": "replay", "refund": "indeterminate"},
                            app="shop")
    result = asyncio.run(durable.run(triage, "refund order 7", thread_id="t1"))
    durable.worker_app(triage)
    durable_spans = counting.spans - plain_spans
    assert _plain() == "plain done"  # after: the shared tool is still the user's own
    after = {name: _attributes(thing) for name, thing in users.items()}
    changed = {name: _differences(before[name], after[name]) for name in users}
    store = open_store(f"sqlite:///{tmp_path / 'a.db'}")
    verdict = check_trace(store.commits("t1")).verdict.name
    store.close()
    print(f"\nlookups {LOOKED_UP}; final {result.final_output!r} by {result.last_agent.name}; trace {verdict}; "
          f"changed attributes {changed}; spans to export: plain run {plain_spans}, durable Run {durable_spans}")
    assert result.final_output == "refunded" and result.last_agent.name == "billing" and verdict == "LEGAL"
    assert result.last_agent is not billing  # the durable copy answered
    assert LOOKED_UP == [8, 7, 8]
    assert all(not names for names in changed.values()), changed
    assert plain_spans > 0, "the counter must see a plain run's spans, or it proves nothing"
    assert durable_spans == 0 and counting.traces == 2  # the two plain runs' traces only
