"""One host-facing vocabulary: push mode and pull mode say the same thing with the same
names. The pull-mode tool runs the very ``RunCall`` a push-mode host is handed, a model
asks for the same ``CallRequest`` s, and one gate serves both drivers."""

from __future__ import annotations

import pytest

from runkernel import (
    Approve,
    Deny,
    CallRequest,
    Done,
    Driver,
    EndCauseKind,
    Hold,
    Infer,
    InferenceRequest,
    ModelReply,
    OperationStatus,
    Permit,
    Returned,
    RunCall,
    Runtime,
    StatusReply,
    ToolPolicy,
    ToolRegistry,
    WaitFor,
    WaitKind,
    current_invocation,
    open_store,
)
from runkernel.errors import HostProtocolError, RuntimeProtocolError
from runkernel.kernel import Awaiting, Ended, Message, ProvideInput, Role, ToolCall

#: The model's one batch, with the ids a host may fix (the operation id included).
CALLS = (
    CallRequest("search", {"q": "runkernel"}, call_id="c-search", operation_id="op-search"),
    CallRequest("pay", {"amount": 20}, call_id="c-pay", operation_id="op-pay"),
)


class AskBeforePaying:
    """One gate for both drivers."""

    def check(self, run_id: str, call: ToolCall) -> Hold | Permit:
        return Hold(WaitKind.APPROVAL, {"prompt": "pay?"}) if call.tool == "pay" else Permit()


class Model:
    def infer(self, request: InferenceRequest) -> ModelReply:
        if request.step == 1:
            return ModelReply("searching, then paying", CALLS)
        return ModelReply("done", end=EndCauseKind.COMPLETED)


class Search:
    policy = ToolPolicy.replay()

    def __init__(self) -> None:
        self.calls: list[RunCall] = []
        self.current: list[RunCall] = []

    def run(self, call: RunCall) -> Returned:
        self.calls.append(call)
        self.current.append(current_invocation())
        return Returned({"hits": 3})

    def status(self, operation_id: str, lease_epoch: int | None) -> StatusReply:
        return StatusReply(OperationStatus.UNKNOWN)


class Pay(Search):
    policy = ToolPolicy.indeterminate()


def test_a_pull_mode_tool_runs_the_run_call_a_push_mode_host_is_handed() -> None:
    driver = Driver(open_store("memory:"), {"search": "replay", "pay": "indeterminate"}, gate=AskBeforePaying())
    action = driver.start(["go"], thread_id="t1", run_id="r1")
    assert isinstance(action, Infer)
    handed = driver.inferred("searching, then paying", CALLS)
    assert isinstance(handed, RunCall)
    waiting = driver.call_returned(handed.call_id, {"hits": 3})
    assert isinstance(waiting, WaitFor) and waiting.call.tool == "pay"

    search, pay = Search(), Pay()
    store = open_store("memory:")
    runtime = Runtime(store, Model(), ToolRegistry({"search": search, "pay": pay}), gate=AskBeforePaying())
    outcome = runtime.start("t1", "r1", (Message(Role.USER, "go"),))

    print(f"push handed out: {handed}")
    assert search.calls == [handed], "the same RunCall, field for field (the model's operation id included)"
    assert search.current == search.calls, "current_invocation() is the RunCall the tool was given"
    assert isinstance(outcome.snapshot.state, Awaiting), "the one gate held pay in both modes"
    assert pay.calls == [] and not isinstance(driver.action, Done)


def _awaiting_pay() -> tuple[Runtime, Search, Pay]:
    search, pay = Search(), Pay()
    runtime = Runtime(open_store("memory:"), Model(), ToolRegistry({"search": search, "pay": pay}), gate=AskBeforePaying())
    outcome = runtime.start("t1", "r1", (Message(Role.USER, "go"),))
    assert isinstance(outcome.snapshot.state, Awaiting)
    return runtime, search, pay


def test_answering_a_wait_in_process_is_one_call_in_both_drivers() -> None:
    driver = Driver(open_store("memory:"), {"search": "replay", "pay": "indeterminate"}, gate=AskBeforePaying())
    driver.start(["go"], thread_id="t1", run_id="r1")
    handed = driver.inferred("searching, then paying", CALLS)
    assert isinstance(handed, RunCall)
    paying = driver.call_returned(handed.call_id, {"hits": 3})
    assert isinstance(paying, WaitFor)
    assert isinstance(driver.resume(Approve()), RunCall)

    runtime, search, pay = _awaiting_pay()
    outcome = runtime.resume("r1", Approve())
    assert [c.tool for c in pay.calls] == ["pay"], "the approved call ran, once"
    assert isinstance(outcome.snapshot.state, Ended) and outcome.snapshot.state.cause.kind is EndCauseKind.COMPLETED


def test_a_resume_the_wait_does_not_take_commits_nothing() -> None:
    runtime, _, pay = _awaiting_pay()
    version = runtime.store.run("r1").version  # type: ignore[union-attr]
    with pytest.raises(RuntimeProtocolError):
        runtime.resume("r1", ProvideInput("yes"))  # an approval takes approve or deny
    assert runtime.store.run("r1").version == version and pay.calls == []  # type: ignore[union-attr]


def test_a_resume_of_a_run_that_waits_for_nothing_is_refused() -> None:
    runtime, _, pay = _awaiting_pay()
    runtime.resume("r1", Deny("no"))
    ended = runtime.store.run("r1")
    assert ended is not None and isinstance(ended.state, Ended) and pay.calls == []
    with pytest.raises(HostProtocolError):
        runtime.resume("r1", Approve())
    assert runtime.store.run("r1") == ended, "nothing committed"
