"""The Pydantic AI integration in production use: one module-level durable
agent used from 8 threads at once (SQLite and PostgreSQL); transient model errors
retried with the interpreter's capped backoff (inline, under ``durable.resume`` and
under ``runkernel worker``), the attempt cap and a non-transient error ending the Run
``failed``; deps for Runs under a worker and a resume with deps of another type
refused; the capability's ``event_stream_handler``; the ``system_prompt`` warning; what
``RunEnded`` says; the docstrings. Offline: scripted ``FunctionModel``s, and no test
waits a backoff (``sleep`` only records)."""

from __future__ import annotations

import asyncio
import threading
import warnings
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pydantic_ai", reason="the pydantic-ai extra is not installed (pip install -e '.[pydantic-ai]')")

from pydantic_ai import Agent, DeferredToolRequests, DeferredToolResults, RunContext  # noqa: E402
from pydantic_ai.capabilities import AbstractCapability  # noqa: E402
from pydantic_ai.exceptions import ModelHTTPError, ModelRateLimitError, ModelTimeoutError  # noqa: E402
from pydantic_ai.messages import (  # noqa: E402
    FunctionToolCallEvent, FunctionToolResultEvent, ModelMessage, ModelResponse, TextPart, ToolCallPart,
)
from pydantic_ai.models.function import AgentInfo, DeltaToolCall, DeltaToolCalls, FunctionModel  # noqa: E402

from postgres_support import postgres_url  # noqa: E402,F401 (the fixture)
from runkernel import EndCauseKind, Worker, check_trace, open_store  # noqa: E402
from runkernel.adapters.stores.contract import Store  # noqa: E402
from runkernel.cli.entry import main  # noqa: E402
from runkernel.integrations import pydantic_ai as integration  # noqa: E402
from runkernel.integrations.pydantic_ai import (  # noqa: E402
    DepsMismatch, IntegrationError, RunEnded, RunkernelDurability, SystemPromptNotKept, pydantic_ai_transient,
)
from runkernel.kernel import Awaiting, Ended  # noqa: E402

THREADS, RUNS_PER_THREAD = 8, 5


# --- shared pieces -------------------------------------------------------------------------


def _search_then_answer(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    """One search call, then the answer naming what it returned."""
    if len(messages) == 1:
        return ModelResponse(parts=[ToolCallPart("search", {"q": "runkernel"}, "call-search")])
    return ModelResponse(parts=[TextPart(f"answer after {len(messages)} messages")])


class Flaky:
    """A model that raises ``errors`` in turn, then answers as ``_search_then_answer``;
    it records the Run's state each time it is asked (after the first, the Run must
    still be Running: a failed attempt commits nothing)."""

    def __init__(self, errors: list[Exception], store_url: str | None = None) -> None:
        self.errors = list(errors)
        self.calls = 0
        self.store_url = store_url
        self.states_seen: list[str] = []

    def __call__(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        self.calls += 1
        if self.store_url is not None:
            store = open_store(self.store_url)
            self.states_seen += [type(s.state).__name__ for s in (store.run(r) for r in _runs(store)) if s is not None]
            store.close()
        if self.errors:
            raise self.errors.pop(0)
        return _search_then_answer(messages, info)


def _runs(store: Store) -> list[str]:
    return [r.run_id for r in store.list_runs()]


class Sleeps:
    """The capability's backoff wait: records the seconds, waits none of them."""

    def __init__(self) -> None:
        self.waited: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.waited.append(seconds)


def _http(status: int) -> ModelHTTPError:
    return ModelHTTPError(status, "scripted-model", body={"error": f"status {status}"})


def _agent(model: Any, durable: RunkernelDurability, **kwargs: Any) -> Agent[Any, Any]:
    agent: Agent[Any, Any] = Agent(FunctionModel(model), capabilities=[durable], **kwargs)
    agent.tool_plain(_search)
    return agent


def search(q: str) -> str:
    return f"3 results for {q}"


_search = search


def _ended(store: Store, run_id: str) -> Ended:
    snapshot = store.run(run_id)
    assert snapshot is not None and isinstance(snapshot.state, Ended), snapshot
    return snapshot.state


def _legal(store: Store, thread_id: str) -> int:
    finding = check_trace(store.commits(thread_id))
    assert finding.verdict.name == "LEGAL", finding
    return finding.commits


@pytest.fixture
def url(tmp_path: Path) -> Iterator[str]:
    yield f"sqlite:///{tmp_path / 'agent.db'}"


# --- any thread ----------------------------------------------------------------------------


def _many_threads(store_url: str) -> None:
    """8 threads, each running 5 Runs concurrently on its own event loop, all through
    one module-level durable agent; the threads start their Runs together (a barrier)."""
    durable = RunkernelDurability(store_url, tools={"search": "replay"})
    agent = _agent(_search_then_answer, durable)
    start = threading.Barrier(THREADS)
    outputs: dict[str, str] = {}
    errors: list[BaseException] = []

    async def runs(thread: int) -> None:
        ids = [f"t{thread}-r{n}" for n in range(RUNS_PER_THREAD)]
        results = await asyncio.gather(*(agent.run("go", conversation_id=i) for i in ids))
        outputs.update({i: r.output for i, r in zip(ids, results)})

    def thread_main(thread: int) -> None:
        try:
            start.wait()
            asyncio.run(runs(thread))
        except BaseException as error:  # reported below, with its thread
            errors.append(error)

    threads = [threading.Thread(target=thread_main, args=(n,)) for n in range(THREADS)]
    for each in threads:
        each.start()
    for each in threads:
        each.join()
    assert errors == [], errors[:3]
    store = open_store(store_url)
    commits = 0
    for conversation in outputs:
        run_id = store.thread_head(conversation)
        assert run_id is not None and run_id.active_run_id is None
        commits += _legal(store, conversation)
    snapshots = [store.run(r) for r in _runs(store)]
    completed = [s for s in snapshots if s is not None and isinstance(s.state, Ended)
                 and s.state.cause.kind is EndCauseKind.COMPLETED]
    print(f"{store_url.split(':')[0]}: {THREADS} threads x {RUNS_PER_THREAD} runs: {len(completed)} completed,"
          f" {commits} commits, every trace LEGAL")
    assert len(outputs) == len(completed) == THREADS * RUNS_PER_THREAD
    assert set(outputs.values()) == {"answer after 3 messages"}
    durable.close()
    store.close()


def test_one_durable_agent_runs_from_eight_threads_at_once_on_sqlite(url: str) -> None:
    _many_threads(url)


def test_one_durable_agent_runs_from_eight_threads_at_once_on_postgresql(postgres_url: str) -> None:  # noqa: F811
    _many_threads(postgres_url)


# --- transient model errors ----------------------------------------------------------------


def test_the_default_predicate_knows_pydantic_ais_model_errors() -> None:
    transient = [_http(503), _http(429), _http(500), ModelTimeoutError("m", "timed out"),
                 ModelRateLimitError("m", "slow down"), ConnectionResetError(), TimeoutError()]
    lasting = [_http(400), _http(401), _http(404), ValueError("bug"), RuntimeError("bug")]
    assert [pydantic_ai_transient(e) for e in transient] == [True] * len(transient)
    assert [pydantic_ai_transient(e) for e in lasting] == [False] * len(lasting)


def test_a_503_then_success_leaves_the_run_running_and_it_completes(url: str) -> None:
    model, sleeps = Flaky([_http(503), _http(503)], store_url=url), Sleeps()
    durable = RunkernelDurability(url, tools={"search": "replay"}, sleep=sleeps)
    result = asyncio.run(_agent(model, durable).run("go", conversation_id="c1"))
    store = open_store(url)
    run_id = _runs(store)[0]
    print(f"503 x2 then success: {model.calls} model calls, waited {sleeps.waited}, states seen {model.states_seen}")
    assert result.output == "answer after 3 messages"
    assert sleeps.waited == [1.0, 2.0], "the interpreter's capped exponential backoff"
    assert model.states_seen[1:3] == ["Running", "Running"], "a failed attempt leaves the Run Running"
    assert _ended(store, run_id).cause.kind is EndCauseKind.COMPLETED
    _legal(store, "c1")


def test_a_503_under_resume_is_retried_and_the_run_completes(url: str) -> None:
    calls: list[str] = []

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        calls.append("ask")
        if len(messages) == 1:
            return ModelResponse(parts=[ToolCallPart("send", {"to": "me"}, "call-send")])
        if calls.count("ask") == 2:
            raise _http(503)  # the first request after the resume
        return ModelResponse(parts=[TextPart("sent")])

    sleeps = Sleeps()
    durable = RunkernelDurability(url, tools={"send": "indeterminate"}, sleep=sleeps)
    agent: Agent[Any, Any] = Agent(FunctionModel(model), output_type=[str, DeferredToolRequests], capabilities=[durable])

    @agent.tool_plain(requires_approval=True)
    def send(to: str) -> str:
        return f"sent to {to}"

    waiting = asyncio.run(agent.run("go", conversation_id="c1"))
    assert isinstance(waiting.output, DeferredToolRequests)
    run_id = durable.active_run("c1")
    assert run_id is not None
    answers = DeferredToolResults(approvals={"call-send": True})
    result = asyncio.run(durable.resume(agent, run_id, deferred_tool_results=answers))
    print(f"resume with a 503: model calls {len(calls)}, waited {sleeps.waited}")
    assert result.output == "sent" and sleeps.waited == [1.0] and len(calls) == 3
    assert _ended(durable.open(), run_id).cause.kind is EndCauseKind.COMPLETED


def test_the_attempt_cap_reached_ends_the_run_failed_and_resume_says_so(url: str) -> None:
    model, sleeps = Flaky([_http(503)] * 10), Sleeps()
    durable = RunkernelDurability(url, tools={"search": "replay"}, sleep=sleeps, model_attempts=3)
    agent = _agent(model, durable)
    with pytest.raises(ModelHTTPError):
        asyncio.run(agent.run("go", conversation_id="c1"))
    store = open_store(url)
    run_id = _runs(store)[0]
    ended = _ended(store, run_id)
    print(f"cap 3: {model.calls} model calls, waited {sleeps.waited}, ended {ended.cause}")
    assert model.calls == 3 and sleeps.waited == [1.0, 2.0]
    assert ended.cause.kind is EndCauseKind.FAILED and ended.cause.error is not None
    assert ended.cause.error.type == "ModelHTTPError"
    with pytest.raises(RunEnded) as raised:
        asyncio.run(durable.resume(agent, run_id))
    print("resume:", raised.value)
    assert "reconcile operation ids []" not in str(raised.value)
    assert "ended failed (ModelHTTPError: status_code: 503" in str(raised.value)
    assert "start a new agent.run" in str(raised.value) and raised.value.operation_ids == ()
    _legal(store, "c1")


def test_a_non_transient_model_error_ends_the_run_failed_at_once(url: str) -> None:
    model, sleeps = Flaky([_http(400)]), Sleeps()
    durable = RunkernelDurability(url, tools={"search": "replay"}, sleep=sleeps)
    with pytest.raises(ModelHTTPError):
        asyncio.run(_agent(model, durable).run("go", conversation_id="c1"))
    store = open_store(url)
    ended = _ended(store, _runs(store)[0])
    print(f"400: {model.calls} model call, waited {sleeps.waited}, ended {ended.cause}")
    assert model.calls == 1 and sleeps.waited == []
    assert ended.cause.kind is EndCauseKind.FAILED and ended.cause.error is not None
    assert ended.cause.error.type == "ModelHTTPError" and "400" in ended.cause.error.message


def test_transient_is_configurable(url: str) -> None:
    model, sleeps = Flaky([_http(503)]), Sleeps()
    durable = RunkernelDurability(url, tools={"search": "replay"}, sleep=sleeps, transient=lambda error: False)
    with pytest.raises(ModelHTTPError):
        asyncio.run(_agent(model, durable).run("go", conversation_id="c1"))
    assert model.calls == 1 and sleeps.waited == []


# --- under runkernel worker ----------------------------------------------------------------


def _start(url: str, thread: str, run_id: str) -> None:
    assert main(["start", "--store", url, "--thread", thread, "--run", run_id, "--app", "pai", "go"]) == 0


@pytest.mark.parametrize(
    ("errors", "cause", "waited"),
    [
        ([_http(503)], EndCauseKind.COMPLETED, [1.0]),
        ([_http(503)] * 5, EndCauseKind.FAILED, [1.0, 2.0]),
        ([_http(400)], EndCauseKind.FAILED, []),
    ],
    ids=["503-then-success", "cap-reached", "non-transient"],
)
def test_model_errors_under_the_worker(url: str, errors: list[Exception], cause: EndCauseKind, waited: list[float]) -> None:
    model, sleeps = Flaky(errors), Sleeps()
    durable = RunkernelDurability(url, tools={"search": "replay"}, sleep=sleeps, model_attempts=3)
    app = durable.worker_app(_agent(model, durable), name="pai")
    _start(url, "c1", "r1")
    store = open_store(url)
    failed: list[BaseException] = []
    report = Worker(store, app, worker_id="w1", on_failure=lambda run, error: failed.append(error)).run_once()
    ended = _ended(store, "r1")
    print(f"worker, {errors[0]!s:.20}... x{len(errors)}: {report}, waited {sleeps.waited}, ended {ended.cause.kind}")
    assert ended.cause.kind is cause and sleeps.waited == waited
    assert failed == [] and report.failures == 0, "a Run the agent ended is committed: the worker goes on"
    assert store.current_lease("r1") is None
    _legal(store, "c1")


# --- deps ----------------------------------------------------------------------------------


@dataclass
class Account:
    user: str


@dataclass
class OtherAccount:
    user: str


def _deps_agent(durable: RunkernelDurability, seen: list[str]) -> Agent[Any, Any]:
    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if len(messages) == 1:
            return ModelResponse(parts=[ToolCallPart("send", {"to": "me"}, "call-send")])
        return ModelResponse(parts=[TextPart("sent")])

    agent: Agent[Any, Any] = Agent(
        FunctionModel(model), deps_type=Account, output_type=[str, DeferredToolRequests], capabilities=[durable]
    )

    @agent.tool(requires_approval=True)
    def send(ctx: RunContext[Account], to: str) -> str:
        seen.append(ctx.deps.user)
        return f"sent to {to} for {ctx.deps.user}"

    return agent


def _ticket(store: Store, run_id: str) -> str:
    snapshot = store.run(run_id)
    assert snapshot is not None and isinstance(snapshot.state, Awaiting), snapshot
    return snapshot.state.ticket.ticket_id


def test_a_worker_gives_each_run_its_deps_and_refuses_deps_of_another_type(url: str) -> None:
    seen: list[str] = []
    durable = RunkernelDurability(url, tools={"send": "indeterminate"}, app="pai")
    agent = _deps_agent(durable, seen)
    # r1: started by the agent with Account deps; r2: started from the CLI (records no type)
    waiting = asyncio.run(agent.run("go", conversation_id="c1", run_id="r1", deps=Account("ann")))
    assert isinstance(waiting.output, DeferredToolRequests)
    _start(url, "c2", "r2")
    store = open_store(url)
    made: list[str] = []
    wrong = durable.worker_app(agent, name="pai", deps=lambda run_id: OtherAccount(run_id))
    failed: list[BaseException] = []
    assert main(["resume", "--store", url, "r1", "--ticket", _ticket(store, "r1"), "--approve"]) == 0
    refused = Worker(store, wrong, worker_id="w1", on_failure=lambda run, error: failed.append(error)).run_once()
    mismatches = [e for e in failed if isinstance(e, DepsMismatch)]
    print(f"deps of another type: {refused}; {mismatches[0] if mismatches else failed}")
    assert len(mismatches) == 1 and "started with deps of type" in str(mismatches[0])
    assert f"{__name__}.Account" in str(mismatches[0]) and f"{__name__}.OtherAccount" in str(mismatches[0])
    assert seen == [], "nothing ran with the wrong deps"
    snapshot = store.run("r1")
    assert snapshot is not None and isinstance(snapshot.state, Awaiting), "the approval was not applied"

    async def account_of(run_id: str) -> Account:  # an async factory, by run id
        made.append(run_id)
        return Account(f"user-of-{run_id}")

    right = durable.worker_app(agent, name="pai", deps=account_of)
    first = Worker(store, right, worker_id="w2").run_once()  # r1 completes; r2 reaches its approval
    assert main(["resume", "--store", url, "r2", "--ticket", _ticket(store, "r2"), "--approve"]) == 0
    second = Worker(store, right, worker_id="w3").run_once()
    print(f"deps by factory: {first}, then {second}; made for {made}, the tools saw {seen}")
    assert seen == ["user-of-r1", "user-of-r2"]
    assert sorted(set(made)) == ["r1", "r2"]
    for run_id, thread in (("r1", "c1"), ("r2", "c2")):
        assert _ended(store, run_id).cause.kind is EndCauseKind.COMPLETED
        _legal(store, thread)


def test_resume_with_deps_of_another_type_is_refused_before_anything_runs(url: str) -> None:
    seen: list[str] = []
    durable = RunkernelDurability(url, tools={"send": "indeterminate"})
    agent = _deps_agent(durable, seen)
    asyncio.run(agent.run("go", conversation_id="c1", run_id="r1", deps=Account("ann")))
    version = durable.open().thread_head("c1")
    answers = DeferredToolResults(approvals={"call-send": True})
    with pytest.raises(DepsMismatch) as raised:
        asyncio.run(durable.resume(agent, "r1", deferred_tool_results=answers, deps=OtherAccount("bob")))
    print("refused:", raised.value)
    assert durable.open().thread_head("c1") == version and seen == [], "nothing committed, nothing ran"
    result = asyncio.run(durable.resume(agent, "r1", deferred_tool_results=answers, deps=Account("ann")))
    assert result.output == "sent" and seen == ["ann"]


def test_run_ended_after_a_cancel_says_so(url: str) -> None:
    durable = RunkernelDurability(url, tools={"send": "indeterminate"})
    agent = _deps_agent(durable, [])
    asyncio.run(agent.run("go", conversation_id="c1", run_id="r1", deps=Account("ann")))
    assert main(["cancel", "--store", url, "r1"]) == 0
    with pytest.raises(RunEnded) as raised:
        asyncio.run(durable.resume(agent, "r1", deps=Account("ann")))
    print("after a cancel:", raised.value)
    assert raised.value.cause is EndCauseKind.CANCELLED
    assert "ended cancelled: it was cancelled" in str(raised.value) and "never resumed" in str(raised.value)
    # the driver lists the call the cancel closed (Awaiting its approval) as one to reconcile
    assert all(op in str(raised.value) for op in raised.value.operation_ids)


# --- event stream handler, system_prompt warning, docstrings -------------------------------


def test_the_capability_event_stream_handler_hears_each_event(url: str) -> None:
    heard: list[str] = []

    async def handler(ctx: RunContext[Any], events: Any) -> None:
        async for event in events:
            heard.append(type(event).__name__)

    async def stream(messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[str | DeltaToolCalls]:
        if len(messages) == 1:  # listening makes Pydantic AI stream every request
            yield {0: DeltaToolCall("search", '{"q": "runkernel"}', tool_call_id="call-search")}
        else:
            yield "answer after 3 messages"

    durable = RunkernelDurability(url, tools={"search": "replay"}, event_stream_handler=handler)
    agent: Agent[Any, Any] = Agent(FunctionModel(stream_function=stream), capabilities=[durable])
    agent.tool_plain(_search)
    result = asyncio.run(agent.run("go", conversation_id="c1"))
    print("events heard:", heard)
    assert result.output == "answer after 3 messages"
    assert FunctionToolCallEvent.__name__ in heard and FunctionToolResultEvent.__name__ in heard
    assert heard.index(FunctionToolCallEvent.__name__) < heard.index(FunctionToolResultEvent.__name__)


def test_an_event_stream_handler_with_a_model_that_cannot_stream_is_refused_before_the_run_starts(url: str) -> None:
    async def handler(ctx: RunContext[Any], events: Any) -> None:
        async for _ in events:
            pass

    durable = RunkernelDurability(url, tools={"search": "replay"}, event_stream_handler=handler)
    agent: Agent[Any, Any] = Agent(FunctionModel(_search_then_answer), capabilities=[durable])  # no stream_function
    agent.tool_plain(_search)
    with pytest.raises(IntegrationError, match="need a model that streams: its FunctionModel has no stream_function"):
        asyncio.run(agent.run("go", conversation_id="c1"))
    store = open_store(url)
    runs = store.list_runs()
    store.close()
    print("Runs after the refusal:", runs)
    assert runs == [], "refused before anything was committed"


def test_an_agent_with_system_prompt_parts_is_warned_once_and_instructions_are_not(url: str) -> None:
    durable = RunkernelDurability(url, tools={"search": "replay"})
    with pytest.warns(SystemPromptNotKept, match="instructions="):
        agent = _agent(_search_then_answer, durable, system_prompt="You are terse.")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        asyncio.run(agent.run("go", conversation_id="c1"))  # warned once per agent, not at each run
        _agent(_search_then_answer, durable, instructions="You are terse.")


def test_the_docstrings_name_what_exists() -> None:
    doc = integration.__doc__ or ""
    assert "REPLAY" not in doc and '"replay"' in doc
    class_doc = RunkernelDurability.__doc__ or ""
    inherited = {f.name for f in fields(AbstractCapability)}
    undocumented = [f.name for f in fields(RunkernelDurability) if f.name not in inherited and f"``{f.name}" not in class_doc]
    assert undocumented == [], f"help(RunkernelDurability) does not explain {undocumented}"
    own = [name for name in ("wrap_run", "wrap_model_request", "wrap_tool_execute", "handle_deferred_tool_calls",
                             "for_run", "for_agent", "on_event", "listens_to")
           if getattr(RunkernelDurability, name).__doc__ == getattr(AbstractCapability, name).__doc__]
    assert own == [], f"inherited docstrings in help(): {own}"
