"""Apps with planted bugs for ``runkernel crashtest`` (and one clean app of each kind),
importing only public modules, as a user's app would. Each keeps a downstream record,
emptied by ``crashtest_reset()`` before every play.

- ``clean``: a replay search and an indeterminate charge behind an approval (pull mode);
- ``double_charge``: ``charge`` moves money but is declared ``replay`` by mistake;
- ``lying_status``: ``reserve`` is declared ``reconnect`` and its ``status()`` says
  ``not_found`` for a reservation it made;
- ``raises_on_rerun``: ``lookup`` (replay) raises when it is started a second time for
  the same arguments (a downstream "duplicate" error): only crashes reach that;
- ``random_model``: its model's text changes from one Run to the next;
- ``counting``: ``lookup`` (replay) returns how many times it ran for its arguments:
  a replay returns another value than the crash-free Run's;
- ``delegating``: two terminal-only delegations to child Runs, which look up and
  reserve; ``delegating_lying``: the same, with the children's ``reserve`` status lying;
- ``scheduled``: ``lookup`` asks to be run again later (a timer) on its first attempt;
- ``push_clean`` and ``async_push_clean``: the clean app as push-mode hosts;
  ``push_delegating``: the delegating app as a push-mode host.
"""

from __future__ import annotations

import collections
import itertools

from runkernel import (
    AsyncDriver,
    CallRequest,
    CheckStatus,
    Driver,
    EndCauseKind,
    Failed,
    Hold,
    Infer,
    InferenceRequest,
    ModelReply,
    OperationStatus,
    Permit,
    Returned,
    RunCall,
    RuntimeApp,
    StatusReply,
    ToolPolicy,
    ToolRegistry,
    WaitKind,
)
from runkernel.adapters.drive.actions import Action
from runkernel.adapters.drive.ports import Scheduled, Tool as ToolPort
from runkernel.kernel import ToolCall

#: Every executor start downstream saw: (tool, operation id, attempt).
LEDGER: list[tuple[str, str, int]] = []
#: The reservations the booking system holds, by operation id.
RESERVED: set[str] = set()
#: How many times each (tool, arguments) was started: the "duplicate" detector.
SEEN: collections.Counter[str] = collections.Counter()
_RUNS = itertools.count()


def crashtest_reset() -> None:
    """Empty the downstream record (called before every play)."""
    LEDGER.clear()
    RESERVED.clear()
    SEEN.clear()


class Model:
    """Step 1 searches and reserves; step 2 charges; step 3 answers."""

    def infer(self, request: InferenceRequest) -> ModelReply:
        return reply(request.step)


def reply(step: int) -> ModelReply:
    if step == 1:
        return ModelReply("looking", (CallRequest("lookup", {"q": "thai"}), CallRequest("reserve", {"seats": 2})))
    if step == 2:
        return ModelReply("charging", (CallRequest("charge", {"cents": 500}),))
    return ModelReply("booked", end=EndCauseKind.COMPLETED)


class RandomModel(Model):
    """Answers the first step differently in every Run: not deterministic."""

    def infer(self, request: InferenceRequest) -> ModelReply:
        if request.step == 1:
            return ModelReply(f"looking, take {next(_RUNS)}", (CallRequest("lookup", {"q": "thai"}),))
        return ModelReply("done", end=EndCauseKind.COMPLETED)


#: When a scheduled lookup runs again: five minutes after the fixed clock's start.
DUE_AT = "2026-06-01T00:05:00.000000Z"


class Tool:
    """A tool that records every start and returns ``{"tool": name, "ok": True}`` (with
    ``count``, also how many times it ran for these arguments; with ``schedule``, its
    first attempt asks to run again at ``DUE_AT``)."""

    def __init__(
        self,
        name: str,
        policy: ToolPolicy,
        *,
        raise_on_rerun: bool = False,
        lie: bool = False,
        count: bool = False,
        schedule: bool = False,
    ) -> None:
        self.name, self.policy = name, policy
        self.raise_on_rerun, self.lie, self.count, self.schedule = raise_on_rerun, lie, count, schedule

    def run(self, call: RunCall) -> Returned | Failed | Scheduled:
        LEDGER.append((self.name, call.operation_id, call.attempt))
        if self.schedule and call.attempt == 1:
            return Scheduled(DUE_AT)
        key = f"{self.name} {call.arguments}"
        SEEN[key] += 1
        if self.raise_on_rerun and SEEN[key] > 1:
            raise RuntimeError(f"duplicate {self.name} request")
        if self.name == "reserve":
            RESERVED.add(call.operation_id)
        if self.count:
            return Returned({"tool": self.name, "ok": True, "runs": SEEN[key]})
        return Returned({"tool": self.name, "ok": True})

    def status(self, operation_id: str, lease_epoch: int | None) -> StatusReply:
        if operation_id in RESERVED and not self.lie:
            return StatusReply(OperationStatus.DONE, {"tool": self.name, "ok": True})
        return StatusReply(OperationStatus.NOT_FOUND)


class ApproveCharges:
    """Charges wait for an operator's approval."""

    def check(self, run_id: str, call: ToolCall) -> Hold | Permit:
        return Hold(WaitKind.APPROVAL, {"prompt": "charge?"}) if call.tool == "charge" else Permit()


def _app(
    name: str,
    *,
    charge: ToolPolicy | None = None,
    lie: bool = False,
    raise_on_rerun: bool = False,
    count: bool = False,
    schedule: bool = False,
) -> RuntimeApp:
    tools = {
        "lookup": Tool("lookup", ToolPolicy.replay(), raise_on_rerun=raise_on_rerun, count=count, schedule=schedule),
        "reserve": Tool("reserve", ToolPolicy.reconnect(), lie=lie),
        "charge": Tool("charge", charge or ToolPolicy.indeterminate()),
    }
    return RuntimeApp(name=name, model=Model(), tools=ToolRegistry(tools, max_steps=10), gate=ApproveCharges())


clean = _app("clean")
double_charge = _app("double-charge", charge=ToolPolicy.replay())
lying_status = _app("lying-status", lie=True)
raises_on_rerun = _app("raises-on-rerun", raise_on_rerun=True)
random_model = RuntimeApp(name="random", model=RandomModel(), tools=clean.tools, gate=ApproveCharges())
counting = _app("counting", count=True)
scheduled = _app("scheduled", schedule=True)


class DelegatingModel:
    """The parent hands two topics to child Runs (terminal-only delegations), then
    answers; each child (its first message is its call's arguments) looks its topic up
    and reserves, then answers."""

    def infer(self, request: InferenceRequest) -> ModelReply:
        return delegating_reply(request.messages[0].content, request.step)


def delegating_reply(task: object, step: int) -> ModelReply:
    if isinstance(task, dict):  # a child: its task is the delegation's arguments
        if step == 1:
            return ModelReply("on it", (CallRequest("lookup", {"q": task["topic"]}), CallRequest("reserve", {"seats": 1})))
        return ModelReply(f"found {task['topic']}", end=EndCauseKind.COMPLETED)
    if step == 1:
        return ModelReply("asking", (CallRequest("research", {"topic": "thai"}), CallRequest("research", {"topic": "lao"})))
    return ModelReply("both found", end=EndCauseKind.COMPLETED)


class Research:
    """A terminal-only delegation: its executor is the child Run's activation."""

    policy = ToolPolicy(terminal_only_delegation=True)

    def run(self, call: RunCall) -> Returned:
        raise AssertionError("a delegation's child Run does its work")

    def status(self, operation_id: str, lease_epoch: int | None) -> StatusReply:
        return StatusReply(OperationStatus.UNKNOWN)


def _delegating(name: str, *, lie: bool = False) -> RuntimeApp:
    tools: dict[str, ToolPort] = {
        "research": Research(),
        "lookup": Tool("lookup", ToolPolicy.replay()),
        "reserve": Tool("reserve", ToolPolicy.reconnect(), lie=lie),
    }
    return RuntimeApp(name=name, model=DelegatingModel(), tools=ToolRegistry(tools, max_steps=10))


delegating = _delegating("delegating")
delegating_lying = _delegating("delegating-lying", lie=True)

POLICIES = {"lookup": "replay", "reserve": "reconnect", "charge": "indeterminate"}
_TOOLS = {name: Tool(name, ToolPolicy.replay()) for name in POLICIES}


def _carry_out(action: RunCall) -> Returned | Failed:
    reply = _TOOLS[action.tool].run(action)
    assert not isinstance(reply, Scheduled)  # the push hosts' tools never schedule
    return reply


class PushClean:
    """The clean app as a push-mode host: it calls its model and tools itself."""

    name = "push-clean"
    tools = POLICIES
    gate = ApproveCharges()

    def serve(self, driver: Driver, action: Action) -> None:
        while True:
            if isinstance(action, Infer):
                r = reply(action.step)
                action = driver.inferred(r.content, r.calls, end=r.end)
            elif isinstance(action, RunCall):
                action = driver.call_returned(action.call_id, _carry_out(action).value)  # type: ignore[union-attr]
            elif isinstance(action, CheckStatus):
                answer = _TOOLS["reserve"].status(action.operation_id, action.lease_epoch)
                action = driver.status(action.call_id, answer.status, answer.value)
            else:
                return  # WaitFor, ChildrenRunning or Done: the Run is quiet


class AsyncPushClean:
    """The clean app as an asyncio push-mode host."""

    name = "async-push-clean"
    tools = POLICIES
    gate = ApproveCharges()

    async def drive(self, driver: AsyncDriver, run_id: str) -> None:
        driver.gate = self.gate
        action = await driver.pick_up(run_id)
        while True:
            if isinstance(action, Infer):
                r = reply(action.step)
                action = await driver.inferred(r.content, r.calls, end=r.end)
            elif isinstance(action, RunCall):
                action = await driver.call_returned(action.call_id, _carry_out(action).value)  # type: ignore[union-attr]
            elif isinstance(action, CheckStatus):
                answer = _TOOLS["reserve"].status(action.operation_id, action.lease_epoch)
                action = await driver.status(action.call_id, answer.status, answer.value)
            else:
                return


class PushDelegating:
    """The delegating app as a push-mode host: the driver activates the children; the
    host serves each child Run as it serves its parent."""

    name = "push-delegating"
    tools = {"research": Research.policy, "lookup": "replay", "reserve": "reconnect"}

    def serve(self, driver: Driver, action: Action) -> None:
        while True:
            if isinstance(action, Infer):
                r = delegating_reply(action.messages[0].content, action.step)
                action = driver.inferred(r.content, r.calls, end=r.end)
            elif isinstance(action, RunCall):
                action = driver.call_returned(action.call_id, _carry_out(action).value)  # type: ignore[union-attr]
            elif isinstance(action, CheckStatus):
                answer = _TOOLS["reserve"].status(action.operation_id, action.lease_epoch)
                action = driver.status(action.call_id, answer.status, answer.value)
            else:
                return  # WaitFor, ChildrenRunning (its children are Runs of their own) or Done


push_clean = PushClean()
push_delegating = PushDelegating()
async_push_clean = AsyncPushClean()


class GroupModel:
    """Step 1 asks for a search, a reservation and a charge at once (a concurrent group
    when the tools are declared concurrent); step 2 answers."""

    def infer(self, request: InferenceRequest) -> ModelReply:
        if request.step == 1:
            calls = (
                CallRequest("lookup", {"q": "thai"}),
                CallRequest("reserve", {"seats": 2}),
                CallRequest("charge", {"cents": 500}),
            )
            return ModelReply("booking", calls)
        return ModelReply("booked", end=EndCauseKind.COMPLETED)


def _group_app(name: str, charge: ToolPolicy) -> RuntimeApp:
    tools = {
        "lookup": Tool("lookup", ToolPolicy.replay(concurrent=True)),
        "reserve": Tool("reserve", ToolPolicy.reconnect(concurrent=True)),
        "charge": Tool("charge", charge),
    }
    return RuntimeApp(name=name, model=GroupModel(), tools=ToolRegistry(tools, max_steps=10))


group_clean = _group_app("group-clean", ToolPolicy.indeterminate(concurrent=True))
group_double_charge = _group_app("group-double-charge", ToolPolicy.replay(concurrent=True))
