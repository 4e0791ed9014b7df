"""What a recovered wait tells its host: the request the gate gave with its hold,
committed with the wait, in both modes, after a crash and recovery.

The host dies right after the commit that leaves the Run Awaiting lands, before it heard
back (so before it told anyone about the wait). A new host picks the Run up from the
store alone: a pull-mode ``Runtime`` notifies its observer of the wait
(``Observer.notify``, from ``recover``'s ``NotifyWait``), a push-mode driver hands out
``WaitFor``; each must carry the committed request, under the committed ticket. On the
memory store, SQLite and PostgreSQL.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from postgres_support import postgres_url
from push_host import SHELLS, ApprovalGate, Reply, World, make_shell, play
from runkernel import CallRequest
from runkernel.adapters.drive.actions import RunCall, WaitFor
from runkernel.adapters.drive.ports import (
    Hold,
    InferenceRequest,
    ModelReply,
    NullObserver,
    Returned,
    StatusReply,
    ToolRegistry,
)
from runkernel.adapters.drive.runtime import Runtime
from runkernel.adapters.drive.events import Position
from runkernel.adapters.stores.contract import Store
from runkernel.kernel.policies import ToolPolicy
from runkernel.kernel.protocol import OperationStatus
from runkernel.kernel.state import Awaiting, CallAwaiting, Message, ResumeTicket, RunSnapshot, Wait
from runkernel.kernel.values import EndCauseKind, Role, WaitKind
from runkernel.testing import Boundary, CountingIds, CrashAt, CrashingStore, ScriptedGate, SimulatedCrash
from store_interleavings import STORES, open_stores

__all__ = ["postgres_url"]

#: what the gate asks whoever approves (pull mode); push mode's gate asks {"tool": "pay"}
REQUEST = {"prompt": "pay 5 EUR to the supplier?", "amount": 5}


def _committed_wait(state: RunSnapshot) -> tuple[ResumeTicket, Wait]:
    assert isinstance(state.state, Awaiting) and state.open_batch is not None
    call = state.open_batch.call(state.state.ticket.call_id)
    assert call is not None and isinstance(call.status, CallAwaiting)
    return state.state.ticket, call.status.wait


# --- pull mode -----------------------------------------------------------------------


class _Model:
    def infer(self, request: InferenceRequest) -> ModelReply:
        if request.step == 1:
            return ModelReply("paying", (CallRequest("pay", {"amount": 5}),))
        return ModelReply("paid", (), EndCauseKind.COMPLETED)


class _Pay:
    policy = ToolPolicy()

    def __init__(self) -> None:
        self.starts = 0

    def run(self, invocation: RunCall) -> Returned:
        self.starts += 1
        return Returned("paid")

    def status(self, operation_id: str, lease_epoch: int | None) -> StatusReply:
        return StatusReply(OperationStatus.NOT_FOUND)


class _Notified(NullObserver):
    """Keeps every wait the runtime told its host of."""

    def __init__(self) -> None:
        self.waits: list[tuple[str, ResumeTicket, Wait]] = []

    def notify(self, run_id: str, ticket: ResumeTicket, wait: Wait) -> None:
        self.waits.append((run_id, ticket, wait))


def _runtime(store: Store | CrashingStore, observer: _Notified, tool: _Pay, ids: str) -> Runtime:
    gate = ScriptedGate({"pay": Hold(WaitKind.APPROVAL, REQUEST)})
    return Runtime(store, _Model(), ToolRegistry({"pay": tool}), gate=gate, observer=observer, ids=CountingIds(ids))


@pytest.mark.parametrize("store_kind", STORES)
def test_a_runtime_that_recovers_a_wait_notifies_its_host_of_the_committed_request(
    store_kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    store, _ = open_stores(store_kind, tmp_path, request)
    crash = CrashAt(Boundary.AFTER_WRITE, Position.CALL_WAIT)
    first, first_tool = _Notified(), _Pay()
    with pytest.raises(SimulatedCrash):
        _runtime(CrashingStore(store, crash), first, first_tool, "first").start("t1", "r1", (Message(Role.USER, "go"),))
    assert crash.fired == 1 and first.waits == [], "the host died before it told anyone of the wait"
    stored = store.run("r1")
    assert stored is not None
    ticket, committed = _committed_wait(stored)
    assert committed.request == REQUEST, "the request is committed with the wait"
    # a new host recovers the Run from the store alone
    second, second_tool = _Notified(), _Pay()
    outcome = _runtime(store, second, second_tool, "second").drive("r1")
    assert isinstance(outcome.snapshot.state, Awaiting)
    ((run_id, told_ticket, told),) = second.waits
    assert (run_id, told_ticket) == ("r1", ticket)
    assert told.request == REQUEST, f"the recovered wait told its host {told.request!r}, not the committed request"
    assert told == committed and _committed_wait(outcome.snapshot)[1].request == REQUEST
    assert first_tool.starts == second_tool.starts == 0, "an approval wait starts nothing"
    print(f"recovered wait, pull [{store_kind}]: notifications before the crash 0, after recovery 1: {told.request}")


# --- push mode -----------------------------------------------------------------------


@pytest.mark.parametrize("store_kind", STORES)
@pytest.mark.parametrize("kind", SHELLS)
def test_a_driver_that_recovers_a_wait_hands_out_the_committed_request(
    kind: str, store_kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    store, _ = open_stores(store_kind, tmp_path, request)
    asked = ApprovalGate().answers["pay"]
    assert isinstance(asked, Hold) and asked.request == {"tool": "pay"}
    world = World({1: Reply("pay?", (("pay", {"amount": 5}),)), 2: Reply("done", end=EndCauseKind.COMPLETED)})
    crash = CrashAt(Boundary.AFTER_WRITE, Position.CALL_WAIT)
    dying = make_shell(kind, CrashingStore(store, crash), ids=CountingIds("first"))
    handed: list[WaitFor] = []
    with pytest.raises(SimulatedCrash):
        waiting = play(dying, dying.start(["go"], thread_id="t1", run_id="r1"), world)
        assert isinstance(waiting, WaitFor)
        handed.append(waiting)
    assert crash.fired == 1 and handed == [], "the host died before it was handed the wait"
    stored = store.run("r1")
    assert stored is not None
    ticket, committed = _committed_wait(stored)
    assert committed.request == asked.request
    again = make_shell(kind, store, ids=CountingIds("second")).pick_up("r1")
    assert isinstance(again, WaitFor)
    assert again.request == asked.request, f"the recovered WaitFor shows {again.request!r}, not the committed request"
    assert again.ticket == ticket and again.wait == committed
    assert world.starts == {}, "an approval wait starts nothing"
    print(f"recovered wait, push [{kind}/{store_kind}]: WaitFor before the crash 0, after recovery 1: {again.request}")
