"""One host-facing vocabulary: push mode and pull mode say the same thing with the same
names. The pull-mode tool runs the very ``RunCall`` a push-mode host is handed, a model
asks for the same ``CallRequest`` s, and one gate serves both drivers."""

from __future__ import annotations

from runkernel import (
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
from runkernel.kernel import Awaiting, Message, Role, ToolCall

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

    def status(self, operation_id: str) -> StatusReply:
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
