"""The push driver's framework helpers, on their own: answers given ahead by call id
(applied ticket by ticket in call order, after inbox commands), ``Answer`` as the
payload of whatever wait its ticket is, ``ask_status`` polling a reconnect tool, the
committed ``call``/``unreconciled`` reads, the ``commits`` count, and an
``AsyncPushApp`` hosted by the worker with an ``AsyncDriver``."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping

import pytest

from push_host import POLICIES, ApprovalGate, AsyncApprovalGate
from runkernel import Worker
from runkernel.adapters.drive.actions import Answer
from runkernel.adapters.worker.apps import AsyncPushApp
from runkernel.adapters.drive.driver import AsyncDriver, Driver
from runkernel.adapters.drive.actions import Action, CallRequest, CheckStatus, Done, DriverError, Infer, RunCall, WaitFor
from runkernel.adapters.drive.inbox import submit_resume
from runkernel.adapters.stores.memory import MemoryStore
from runkernel.adapters.drive.ports import GateAnswer, Hold, StatusReply
from runkernel.kernel.policies import ToolPolicy
from runkernel.kernel.protocol import Activate, Approve, Deny, ExternalResult, OperationStatus, ProvideInput, ResumeCommand
from runkernel.kernel.state import Awaiting, CallCompleted, Ended, Message, ToolCall
from runkernel.kernel.values import EndCauseKind, ResultKind, Role, WaitKind
from runkernel.specs.checker import Verdict, check_commits
from runkernel.testing import CountingIds, step

PAYS = [CallRequest("pay", {"n": n}, call_id=f"p{n}") for n in (1, 2, 3)]


def legal(store: MemoryStore) -> None:
    finding = check_commits(store.commits("t1"))
    assert finding.verdict is Verdict.LEGAL, finding


def kinds_of_waits(store: MemoryStore) -> list[str]:
    """The call each commit left the Run Awaiting on, in commit order."""
    return [c.disposition.ticket.call_id for c in store.commits("t1") if isinstance(c.disposition, Awaiting)]


def test_answers_given_ahead_are_applied_ticket_by_ticket_in_call_order() -> None:
    store = MemoryStore()
    driver = Driver(store, POLICIES, gate=ApprovalGate(), ids=CountingIds("id"))
    driver.start(["go"], thread_id="t1", run_id="r1")
    action = driver.inferred("paying", PAYS)
    assert isinstance(action, WaitFor) and action.call.call_id == "p1"
    driver.answer_ahead({"p3": Deny("no"), "p2": Approve()})  # out of order: the Run's order decides
    action = driver.resume(Approve())
    ran = []
    while isinstance(action, RunCall):
        ran.append(action.call_id)
        action = driver.call_returned(action.call_id, "paid")
    assert ran == ["p1", "p2"], "p2's answer was applied when its ticket came up, without a WaitFor"
    assert isinstance(action, Infer) and driver.answers_ahead == {}
    assert kinds_of_waits(store) == ["p1", "p2", "p3"], "one ticket at a time"
    p3 = driver.call("p3")
    assert p3 is not None and isinstance(p3.status, CallCompleted) and p3.status.result.kind is ResultKind.DENIED
    legal(store)


def test_an_answer_ahead_waits_behind_an_inbox_command_and_a_wrong_payload_is_refused() -> None:
    store = MemoryStore()
    driver = Driver(store, POLICIES, gate=ApprovalGate(), ids=CountingIds("id"))
    driver.start(["go"], thread_id="t1", run_id="r1")
    wait = driver.inferred("paying", PAYS[:1])
    assert isinstance(wait, WaitFor)
    queued = submit_resume(store, ResumeCommand("r1", wait.ticket.ticket_id, WaitKind.APPROVAL, Deny("inbox")))
    assert isinstance(queued, int)
    fresh = Driver(store, POLICIES, gate=ApprovalGate(), ids=CountingIds("b"))
    fresh.answer_ahead({"p1": Approve()})
    action = fresh.pick_up("r1")
    assert isinstance(action, Infer), "the inbox denial went first; p1 is no longer waiting"
    assert fresh.answers_ahead == {"p1": Approve()}, "an answer no wait took stays, for the host to see"
    legal(store)


@pytest.mark.parametrize(
    ("kind", "payload"), [(WaitKind.INPUT, ProvideInput("blue")), (WaitKind.EXTERNAL, ExternalResult("blue"))]
)
def test_an_answer_becomes_the_payload_of_the_wait_its_ticket_is(kind: WaitKind, payload: object) -> None:
    class Holds:
        def check(self, run_id: str, call: ToolCall) -> GateAnswer:
            return Hold(kind, {"q": "colour?"})

    async def scenario() -> tuple[Action, WaitFor]:
        driver = AsyncDriver(MemoryStore(), POLICIES, gate=Holds(), ids=CountingIds("id"))
        await driver.start(["go"], thread_id="t1", run_id="r1")
        wait = await driver.inferred("asking", [CallRequest("indeterminate", {}, call_id="q1")])
        assert isinstance(wait, WaitFor)
        driver.answer_ahead({"q1": Answer("blue")})
        return await driver.next_action(), wait

    action, wait = asyncio.run(scenario())
    assert Answer("blue").payload(wait) == payload
    if kind is WaitKind.INPUT:
        assert isinstance(action, RunCall) and action.resume_value == "blue", "the input goes to the tool"
    else:
        assert isinstance(action, Infer), "an external answer is the call's result"


def _reconnect_call_in_flight(store: MemoryStore) -> str:
    driver = Driver(store, POLICIES, ids=CountingIds("id"))
    driver.start(["go"], thread_id="t1", run_id="r1")
    action = driver.inferred("charging", [CallRequest("reconnect", {}, call_id="c1")])
    assert isinstance(action, RunCall)
    return action.operation_id  # the host dies here: the call stays Executing


def test_ask_status_asks_again_while_running_and_stops_at_its_limit() -> None:
    store = MemoryStore()
    operation = _reconnect_call_in_flight(store)
    replies = [StatusReply(OperationStatus.RUNNING)] * 2 + [StatusReply(OperationStatus.DONE, "charged")]
    asked: list[str] = []

    def status(operation_id: str, lease_epoch: int | None) -> StatusReply:
        asked.append(operation_id)
        return replies[len(asked) - 1]

    driver = Driver(store, POLICIES, ids=CountingIds("b"))
    assert isinstance(driver.pick_up("r1"), CheckStatus)
    with pytest.raises(DriverError, match="CheckStatus"):
        Driver(store, POLICIES).ask_status(status)  # nothing stands yet
    still = driver.ask_status(status, interval=0.0, asks=1)
    assert isinstance(still, CheckStatus) and asked == [operation]
    action = driver.ask_status(status, interval=0.0)
    print("status asked:", len(asked))
    assert isinstance(action, Infer) and asked == [operation] * 3
    call = driver.call("c1")
    assert call is not None and isinstance(call.status, CallCompleted) and call.status.result.value == "charged"
    legal(store)


def test_async_ask_status_takes_a_coroutine_and_unreconciled_names_the_lost_operation() -> None:
    store = MemoryStore()
    operation = _reconnect_call_in_flight(store)

    async def status(operation_id: str, lease_epoch: int | None) -> StatusReply:
        return StatusReply(OperationStatus.NOT_FOUND)

    async def scenario() -> tuple[Action, tuple[str, ...], int]:
        driver = AsyncDriver(store, POLICIES, ids=CountingIds("b"))
        await driver.pick_up("r1")
        before = driver.unreconciled
        action = await driver.ask_status(status)
        return action, before, driver.commits

    action, before, commits = asyncio.run(scenario())
    assert before == ()
    assert isinstance(action, RunCall) and action.attempt == 2, "not found: a reconnect call starts again"
    assert commits == 1, "the status answer's commit (Executing{2})"
    legal(store)


def test_unreconciled_lists_indeterminate_calls() -> None:
    store = MemoryStore()
    driver = Driver(store, POLICIES, ids=CountingIds("id"))
    driver.start(["go"], thread_id="t1", run_id="r1")
    action = driver.inferred("noting", [CallRequest("indeterminate", {}, call_id="n1")])
    assert isinstance(action, RunCall)
    fresh = Driver(store, POLICIES, ids=CountingIds("b"))
    assert isinstance(fresh.pick_up("r1"), Infer)
    assert fresh.unreconciled == (action.operation_id,) and fresh.call("nope") is None
    assert fresh.commits == 1 and driver.commits == 3


class AsyncHost:
    """An asyncio push app: it picks the Run up itself, after setting its gate."""

    name = "async-host"
    tools: Mapping[str, ToolPolicy] = POLICIES
    max_steps = 7

    def __init__(self) -> None:
        self.epochs: list[int | None] = []
        self.limits: list[int | None] = []

    async def drive(self, driver: AsyncDriver, run_id: str) -> None:
        driver.gate = AsyncApprovalGate()
        self.limits.append(driver.settings.policies.max_steps)
        action = await driver.pick_up(run_id)
        while not isinstance(action, (WaitFor, Done)):
            if isinstance(action, Infer):
                calls = [CallRequest("replay", {}), CallRequest("pay", {})] if action.step == 1 else []
                action = await driver.inferred("ok", calls, end=None if calls else EndCauseKind.COMPLETED)
            elif isinstance(action, RunCall):
                self.epochs.append(action.lease_epoch)
                action = await driver.call_returned(action.call_id, "done")
            else:
                raise AssertionError(f"unexpected {action!r}")


def test_a_worker_hosts_an_async_push_app_with_an_async_driver_under_its_lease() -> None:
    store = MemoryStore()
    activation = step(None, Activate("t1", "r1", 0, (Message(Role.USER, "go"),), "async-host"))
    assert activation.commit is not None
    store.append(activation.commit)
    host = AsyncHost()
    assert isinstance(host, AsyncPushApp)
    report = Worker(store, host, worker_id="w1").run_once()
    state = store.run("r1")
    assert state is not None and isinstance(state.state, Awaiting), "the app's gate held pay"
    assert report.commits == len(list(store.commits("t1"))) - 1
    submit_resume(store, ResumeCommand("r1", state.state.ticket.ticket_id, WaitKind.APPROVAL, Approve()))
    Worker(store, host, worker_id="w2").run_once()
    state = store.run("r1")
    assert state is not None and isinstance(state.state, Ended)
    print("epochs:", host.epochs)
    assert host.epochs == [1, 2] and host.limits == [7, 7]
    assert store.current_lease("r1") is None
    legal(store)


class SyncHost:
    """A blocking push app whose gate and step limit the worker gives its ``Driver``."""

    name = "sync-host"
    tools: Mapping[str, ToolPolicy] = POLICIES
    gate = ApprovalGate()
    max_steps = 3

    def serve(self, driver: Driver, action: Action) -> None:
        assert driver.settings.policies.max_steps == 3
        while isinstance(action, Infer):
            action = driver.inferred("paying", [CallRequest("pay", {})])


def test_a_worker_builds_a_push_apps_driver_with_the_apps_gate() -> None:
    store = MemoryStore()
    activation = step(None, Activate("t1", "r1", 0, (Message(Role.USER, "go"),), "sync-host"))
    assert activation.commit is not None
    store.append(activation.commit)
    report = Worker(store, SyncHost(), worker_id="w1").run_once()
    state = store.run("r1")
    assert state is not None and isinstance(state.state, Awaiting), "the app's gate held pay"
    assert report.commits == len(list(store.commits("t1"))) - 1 and report.failures == 0
    legal(store)
