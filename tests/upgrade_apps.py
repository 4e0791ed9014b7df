"""Old and new versions of one app, ``shop``, for ``runkernel upgrade-check`` (loaded as
``upgrade_apps:ATTR``), and the live Runs the old one leaves in a store: Awaiting an
approval, Executing a call started and never answered, a parent in a delegation group
with its child running, sleeping on a timer; plus an Ended Run and a Run of another app,
which the check never lists.

The new versions: a renamed tool (``search`` is ``web_search``), a removed tool (``pay``
is gone), a changed policy (``fetch`` is replay, not reconnect), a renamed prompt (only
the prompt differs), and one without a gate.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from attrs import evolve, frozen

from runkernel.adapters.drive.actions import Action, CallRequest, ChildrenRunning, Infer, RunCall, WaitFor
from runkernel.adapters.drive.driver import Driver
from runkernel.adapters.drive.ports import GatePort, Hold, Tool, ToolRegistry
from runkernel.adapters.stores.contract import Store
from runkernel.adapters.worker.apps import RuntimeApp
from runkernel.kernel.policies import ToolPolicy
from runkernel.kernel.decide import decide
from runkernel.kernel.protocol import Activate
from runkernel.kernel.rules import Rejection
from runkernel.kernel.state import Message, Staged
from runkernel.kernel.values import EndCauseKind, JsonValue, Role, WaitKind
from runkernel.testing import ScriptedGate

APP = "shop"
DUE = "2031-01-01T00:00:00Z"

OLD_TOOLS: Mapping[str, ToolPolicy] = {
    "search": ToolPolicy.replay(),
    "pay": ToolPolicy.indeterminate(),
    "fetch": ToolPolicy.reconnect(),
    "research": ToolPolicy(terminal_only_delegation=True),
    "remind": ToolPolicy.replay(),
}


def old_gate() -> GatePort:
    """Holds ``pay`` for approval and ``remind`` until ``DUE``."""
    return ScriptedGate({"pay": Hold(WaitKind.APPROVAL, {"ask": "pay?"}), "remind": Hold(WaitKind.SCHEDULED, due_at=DUE)})


@frozen
class ShopApp:
    """A push app: a prompt, its tools with their policies, and a gate."""

    name: str
    tools: Mapping[str, ToolPolicy]
    prompt: str
    gate: GatePort | None

    def serve(self, driver: Driver, action: Action) -> None:
        """Never driven by these tests: the check reads committed state only."""
        raise AssertionError("upgrade-check must not drive a Run")


app = ShopApp(APP, OLD_TOOLS, "You are a shop assistant.", old_gate())
renamed_prompt = evolve(app, prompt="You are a friendly shop assistant; answer briefly.")
renamed_tool = evolve(app, tools={("web_search" if k == "search" else k): v for k, v in OLD_TOOLS.items()})
removed_tool = evolve(app, tools={k: v for k, v in OLD_TOOLS.items() if k != "pay"})
changed_policy = evolve(app, tools={**OLD_TOOLS, "fetch": ToolPolicy.replay(max_attempts=5)})
no_gate = evolve(app, gate=None)
other = evolve(app, name="other")


class _ListsToolsWhileItRuns(ShopApp):
    """An app with tools an MCP server lists while it runs, and no declared version."""

    dynamic_tools = True


dynamic = _ListsToolsWhileItRuns(APP, OLD_TOOLS, "", None)


def _driver(store: Store, name: str = APP) -> Driver:
    return Driver(store, OLD_TOOLS, gate=old_gate(), app=name)


def _call(tool: str, arguments: JsonValue, call_id: str) -> CallRequest:
    """A call with a fixed operation id, so a child's run id is known beforehand."""
    return CallRequest(tool, arguments, call_id, f"op-{call_id}")


def _first_calls(store: Store, run_id: str, *calls: CallRequest, staged: Staged | None = None) -> Action:
    driver = _driver(store)
    action = driver.start(["hello"], thread_id=f"t-{run_id}", run_id=run_id)
    assert isinstance(action, Infer)
    return driver.inferred("working", calls, staged=staged)


def leave_live_runs(store: Store) -> dict[str, str]:
    """The old app's live Runs in ``store``, by what each is doing (run ids)."""
    waiting = _first_calls(store, "r-awaiting", _call("pay", {"cents": 500}, "c-pay"))
    assert isinstance(waiting, WaitFor) and waiting.wait.kind is WaitKind.APPROVAL
    started = _first_calls(store, "r-executing", _call("fetch", {"order": 7}, "c-fetch"))
    assert isinstance(started, RunCall)  # Executing{1} committed; never answered
    quiet = _first_calls(store, "r-parent", _call("research", "find a supplier", "c-research"))
    assert isinstance(quiet, ChildrenRunning)
    sleeping = _first_calls(store, "r-timer", _call("remind", {"about": "invoice"}, "c-remind"))
    assert isinstance(sleeping, WaitFor) and sleeping.wait.due_at == DUE
    searching = _first_calls(store, "r-search", _call("search", {"q": "shoes"}, "c-search"))
    assert isinstance(searching, RunCall)
    ended = _driver(store)
    ended.start(["bye"], thread_id="t-r-ended", run_id="r-ended")
    ended.inferred("done", end=EndCauseKind.COMPLETED)
    elsewhere = _driver(store, "other")
    elsewhere.start(["hi"], thread_id="t-r-other", run_id="r-other")
    elsewhere.inferred("working", [_call("pay", {"cents": 1}, "c-other")])
    return {
        "awaiting": "r-awaiting",
        "executing": "r-executing",
        "parent": "r-parent",
        "child": quiet.children[0].run_id,
        "timer": "r-timer",
        "search": "r-search",
    }


def leave_versioned_runs(store: Store, versions: Sequence[str]) -> list[str]:
    """A Run of the app per version, activated with that ``app_version`` and left
    Awaiting the approval of ``pay`` (run ids ``r-v-VERSION``)."""
    run_ids = []
    for version in versions:
        run_id = f"r-v-{version}"
        activation = decide(None, Activate(f"t-{run_id}", run_id, 0, (Message(Role.USER, "hello"),), APP, app_version=version))
        assert not isinstance(activation, Rejection) and activation.commit is not None
        store.append(activation.commit)
        driver = _driver(store)
        assert isinstance(driver.pick_up(run_id), Infer)
        waiting = driver.inferred("working", [_call("pay", {"cents": 5}, "c-pay")])
        assert isinstance(waiting, WaitFor)
        run_ids.append(run_id)
    return run_ids




def demo_retrying() -> RuntimeApp:
    """The walk-through's app (``examples.demo_app``) with one change: a failed payment
    may be retried once (another tool table, so another version)."""
    from examples.demo_app import Lookup, Pay, Reserve
    from examples.demo_app import app as demo

    tools: dict[str, Tool] = {"lookup": Lookup(), "reserve": Reserve(), "pay": Pay(ToolPolicy.indeterminate(retries=1))}
    return evolve(demo, tools=ToolRegistry(tools, max_steps=10))
