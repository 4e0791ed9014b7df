"""A tool's policy in one call (``ToolPolicy.replay(max_attempts=3)``,
``ToolPolicy.reconnect()``, ``ToolPolicy.indeterminate()``), and the strings ``"replay"``,
``"reconnect"``, ``"indeterminate"`` at every entry point that takes a mapping of tool
name to policy: ``Policies``, both driver shells, push apps under a worker, and the
Pydantic AI integration (whose crash tests run their tools on the strings too:
tests/pydantic_ai_app.py). Anything else there is ``BadToolPolicy``, naming the tool.

``ToolRegistry`` and ``RuntimeApp`` take tools, not policies: each tool declares its
``policy`` attribute, a ``ToolPolicy`` (the one-call form reads best there)."""

from __future__ import annotations

from collections.abc import Mapping

import pytest

from push_host import SHELLS, Reply, World, make_shell, play
from runkernel.adapters.drive.driver import AsyncDriver, Driver
from runkernel.adapters.drive.actions import Action, CallRequest, CheckStatus, Done, Infer, RunCall, WaitFor
from runkernel.adapters.stores.memory import MemoryStore
from runkernel.adapters.stores.contract import Store
from runkernel.adapters.worker.loop import Worker
from runkernel.adapters.worker.apps import AsyncPushApp, PushApp
from runkernel.errors import BadToolPolicy, UsageError
from runkernel.kernel.codec import policy_to_json
from runkernel.kernel.policies import (
    POLICY_NAMES,
    SAFE_DEFAULT,
    Policies,
    RecoveryMode,
    RetryPolicy,
    ToolPolicy,
    ToolRecoveryPolicy,
)
from runkernel.kernel.protocol import Activate
from runkernel.kernel.state import CallIndeterminate, Message, ToolCall
from runkernel.specs.checker import Verdict, check_commits
from runkernel.kernel.values import EndCauseKind, IndeterminateReason, Role
from runkernel.testing import step

shells = pytest.mark.parametrize("kind", SHELLS)

#: Every tool of the crash scenarios, its policy given as a string.
BY_NAME: Mapping[str, ToolPolicy | str] = {name: name for name in ("replay", "reconnect", "indeterminate")}

#: What a mapping of tool name to policy refuses: near misses and other types.
NOT_POLICIES: tuple[object, ...] = ("Replay", "retry", "", " replay", RecoveryMode.REPLAY, None, 3)


# --- the one-call forms ------------------------------------------------------------------


def test_replay_in_one_call_sets_every_field() -> None:
    assert ToolPolicy.replay() == ToolPolicy(ToolRecoveryPolicy(RecoveryMode.REPLAY, max_attempts=3), RetryPolicy(1))
    policy = ToolPolicy.replay(max_attempts=5, retries=2)
    assert policy.recovery == ToolRecoveryPolicy(RecoveryMode.REPLAY, max_attempts=5)
    assert policy.retry == RetryPolicy(max_attempts=3), "retries count the attempts after the first"
    assert (policy.terminal_only_delegation, policy.sequential_delegation) == (False, False)
    assert ToolPolicy.replay(4) == ToolPolicy.replay(max_attempts=4)
    # what a trace commits: the same field names, the same numbers
    assert policy_to_json(policy) == {"recovery": "replay", "max_attempts": 5, "retries": 2}


def test_reconnect_and_indeterminate_in_one_call_set_every_field() -> None:
    assert ToolPolicy.reconnect() == ToolPolicy(ToolRecoveryPolicy(RecoveryMode.RECONNECT))
    assert ToolPolicy.reconnect(retries=1).retry == RetryPolicy(max_attempts=2)
    assert ToolPolicy.indeterminate() == ToolPolicy() == SAFE_DEFAULT, "indeterminate is the default"
    assert ToolPolicy.indeterminate(retries=3).retry == RetryPolicy(max_attempts=4)
    for policy in (ToolPolicy.reconnect(), ToolPolicy.indeterminate()):
        assert policy.recovery.max_attempts == 3 and policy.retry == RetryPolicy(1)
        assert not policy.terminal_only_delegation and not policy.sequential_delegation
    assert policy_to_json(ToolPolicy.reconnect(retries=1)) == {"recovery": "reconnect", "max_attempts": 3, "retries": 1}
    assert policy_to_json(ToolPolicy.indeterminate()) == {"recovery": "indeterminate", "max_attempts": 3, "retries": 0}


def test_the_one_call_forms_refuse_what_cannot_be_a_policy() -> None:
    with pytest.raises(ValueError, match="max_attempts must be >= 1, got 0"):
        ToolPolicy.replay(max_attempts=0)
    for make in (ToolPolicy.replay, ToolPolicy.reconnect, ToolPolicy.indeterminate):
        with pytest.raises(ValueError, match="retries must be >= 0, got -1"):
            make(retries=-1)


def test_the_old_constructor_still_builds_the_same_policies() -> None:
    assert ToolPolicy(ToolRecoveryPolicy(RecoveryMode.REPLAY)) == ToolPolicy.replay()
    assert ToolPolicy(ToolRecoveryPolicy(RecoveryMode.RECONNECT), RetryPolicy(2)) == ToolPolicy.reconnect(retries=1)
    assert ToolPolicy(ToolRecoveryPolicy(RecoveryMode.INDETERMINATE)) == ToolPolicy.indeterminate()


# --- the strings ----------------------------------------------------------------------------


def test_each_string_stands_for_its_one_call_form() -> None:
    assert dict(POLICY_NAMES) == {
        "replay": ToolPolicy.replay(),
        "reconnect": ToolPolicy.reconnect(),
        "indeterminate": ToolPolicy.indeterminate(),
    }
    policies = Policies(tools={"a": "replay", "b": "reconnect", "c": "indeterminate", "d": ToolPolicy.replay(7)})
    assert policies.for_tool("a") == ToolPolicy.replay()
    assert policies.for_tool("b") == ToolPolicy.reconnect()
    assert policies.for_tool("c") == ToolPolicy.indeterminate()
    assert policies.for_tool("d") == ToolPolicy.replay(7), "a ToolPolicy beside the strings is kept"


def test_a_mapping_of_policies_only_is_kept_as_given() -> None:
    given = {"a": ToolPolicy.replay()}
    assert Policies(tools=given).tools is given


@pytest.mark.parametrize("bad", NOT_POLICIES, ids=repr)
def test_anything_else_in_a_mapping_is_a_bad_tool_policy_naming_the_tool(bad: object) -> None:
    with pytest.raises(BadToolPolicy) as raised:
        Policies(tools={"search": bad})  # type: ignore[dict-item]
    error = raised.value
    assert (error.tool, error.value) == ("search", bad)
    assert str(error) == (
        f"tool 'search': {bad!r} is not a policy; give a ToolPolicy or one of 'replay', 'reconnect', 'indeterminate'"
    )
    assert isinstance(error, UsageError) and isinstance(error, ValueError)


# --- the push-mode driver, both shells ------------------------------------------------------


def crashed_at_first_call(kind: str, tool: str) -> tuple[MemoryStore, World, RunCall]:
    """A Run of a driver given string policies, dead while ``tool`` ran (the effect
    happened, no report)."""
    store = MemoryStore()
    world = World({1: Reply("x", ((tool, {"n": 1}),)), 2: Reply("done", end=EndCauseKind.COMPLETED)})
    driver = make_shell(kind, store, tools=BY_NAME)
    driver.start(["go"], thread_id="t1", run_id="r1")
    action = driver.inferred("x", [CallRequest(tool, {"n": 1})])
    assert isinstance(action, RunCall)
    world.run(action)
    return store, world, action


def committed_call(store: Store, *, last: bool = False) -> ToolCall:
    """The one call of the Run's batch, as first (or last) committed."""
    batches = [commit.batch for commit in store.commits("t1") if commit.batch is not None]
    assert batches, "a batch was committed"
    return batches[-1 if last else 0].calls[0]


def ended_legally(store: MemoryStore) -> None:
    state = store.run("r1")
    assert state is not None and type(state.state).__name__ == "Ended"
    assert check_commits(store.commits("t1")).verdict is Verdict.LEGAL


@shells
def test_a_replay_string_commits_replay_and_the_call_is_run_again(kind: str) -> None:
    store, world, first = crashed_at_first_call(kind, "replay")
    assert committed_call(store).policy == ToolPolicy.replay()
    fresh = make_shell(kind, store, tools=BY_NAME)
    again = fresh.pick_up("r1")
    assert isinstance(again, RunCall) and (again.attempt, again.operation_id) == (2, first.operation_id)
    assert isinstance(play(fresh, again, world), Done)
    assert world.starts == {first.operation_id: [1, 2]}
    ended_legally(store)


@shells
def test_a_reconnect_string_commits_reconnect_and_the_call_is_asked_about(kind: str) -> None:
    store, world, first = crashed_at_first_call(kind, "reconnect")
    assert committed_call(store).policy == ToolPolicy.reconnect()
    fresh = make_shell(kind, store, tools=BY_NAME)
    question = fresh.pick_up("r1")
    assert question == CheckStatus("r1", first.call_id, "reconnect", first.operation_id, 1)
    assert isinstance(play(fresh, question, world), Done)
    assert world.starts == {first.operation_id: [1]}, "asked about, never started again"
    ended_legally(store)


@shells
def test_an_indeterminate_string_commits_indeterminate_and_the_call_never_runs_again(kind: str) -> None:
    store, world, first = crashed_at_first_call(kind, "indeterminate")
    assert committed_call(store).policy == ToolPolicy.indeterminate()
    fresh = make_shell(kind, store, tools=BY_NAME)
    action = fresh.pick_up("r1")
    assert isinstance(action, Infer)
    assert committed_call(store, last=True).status == CallIndeterminate(1, IndeterminateReason.OUTCOME_UNKNOWN)
    assert isinstance(play(fresh, action, world), Done)
    assert world.starts == {first.operation_id: [1]}
    ended_legally(store)


@shells
def test_a_driver_refuses_a_bad_policy_string_naming_the_tool(kind: str) -> None:
    with pytest.raises(BadToolPolicy, match="tool 'search': 'sometimes' is not a policy"):
        make_shell(kind, MemoryStore(), tools={"search": "sometimes"})


# --- push apps under a worker ---------------------------------------------------------------


def _activate(store: MemoryStore, app: str) -> None:
    decision = step(None, Activate("t1", "r1", 0, (Message(Role.USER, "go"),), app))
    assert decision.commit is not None
    store.append(decision.commit)


class StringPolicyHost:
    """A blocking push app whose one tool's policy is a string."""

    name = "strings"

    def __init__(self, policy: str) -> None:
        self.tools: Mapping[str, ToolPolicy | str] = {"work": policy}

    def serve(self, driver: Driver, action: Action) -> None:
        while not isinstance(action, (WaitFor, Done)):
            if isinstance(action, Infer):
                calls = [CallRequest("work", {})] if action.step == 1 else []
                action = driver.inferred("ok", calls, end=None if calls else EndCauseKind.COMPLETED)
            elif isinstance(action, RunCall):
                action = driver.call_returned(action.call_id, "done")
            else:
                raise AssertionError(f"unexpected {action!r}")


class AsyncStringPolicyHost:
    """An asyncio push app whose one tool's policy is a string."""

    name = "strings"
    tools: Mapping[str, ToolPolicy | str] = {"work": "reconnect"}

    async def drive(self, driver: AsyncDriver, run_id: str) -> None:
        action = await driver.pick_up(run_id)
        while not isinstance(action, (WaitFor, Done)):
            if isinstance(action, Infer):
                calls = [CallRequest("work", {})] if action.step == 1 else []
                action = await driver.inferred("ok", calls, end=None if calls else EndCauseKind.COMPLETED)
            elif isinstance(action, RunCall):
                action = await driver.call_returned(action.call_id, "done")
            else:
                raise AssertionError(f"unexpected {action!r}")


@pytest.mark.parametrize(
    ("host", "committed"),
    [
        (StringPolicyHost("replay"), ToolPolicy.replay()),
        (StringPolicyHost("indeterminate"), ToolPolicy.indeterminate()),
        (AsyncStringPolicyHost(), ToolPolicy.reconnect()),
    ],
    ids=["push-replay", "push-indeterminate", "async-push-reconnect"],
)
def test_a_push_apps_string_policies_are_committed_under_a_worker(
    host: StringPolicyHost | AsyncStringPolicyHost, committed: ToolPolicy
) -> None:
    assert isinstance(host, (PushApp, AsyncPushApp))
    store = MemoryStore()
    _activate(store, "strings")
    report = Worker(store, host, worker_id="w1").run_once()
    assert report.failures == 0
    ended_legally(store)
    assert committed_call(store).policy == committed


def test_a_push_app_with_a_bad_policy_string_fails_its_drive_naming_the_tool() -> None:
    store = MemoryStore()
    _activate(store, "strings")
    failures: list[BaseException] = []
    host = StringPolicyHost("often")
    report = Worker(store, host, worker_id="w1", on_failure=lambda _run, error: failures.append(error)).run_once()
    print(f"drive failures: {report.failures}, errors: {[type(e).__name__ for e in failures]}")
    assert report.failures == 1 and len(failures) == 1
    assert isinstance(failures[0], BadToolPolicy) and failures[0].tool == "work"
    assert len(list(store.commits("t1"))) == 1, "nothing committed past the activation"


# --- the Pydantic AI integration ------------------------------------------------------------


def test_the_pydantic_ai_integration_takes_the_strings_and_refuses_the_rest() -> None:
    pytest.importorskip("pydantic_ai", reason="the pydantic-ai extra is not installed")
    from pydantic_ai import Agent
    from pydantic_ai.models.test import TestModel

    from runkernel.adapters.drive.ports import StatusReply
    from runkernel.integrations.pydantic_ai import RunkernelDurability
    from runkernel.kernel.protocol import OperationStatus

    def status(_operation_id: str, _lease_epoch: int | None) -> StatusReply:
        return StatusReply(OperationStatus.UNKNOWN)

    durable = RunkernelDurability(
        MemoryStore(),
        tools={"a": "replay", "b": "reconnect", "c": "indeterminate", "d": ToolPolicy.replay(2)},
        status={"b": status},
    )
    expected = {
        "a": ToolPolicy.replay(),
        "b": ToolPolicy.reconnect(),
        "c": ToolPolicy.indeterminate(),
        "d": ToolPolicy.replay(2),
    }
    assert dict(durable.tools) == expected
    assert dict(durable.worker_app(Agent(TestModel()), name="pai").tools) == expected
    with pytest.raises(ValueError, match=r"tool 'b' reconnects after a crash: give it status=\{'b': fn\}"):
        RunkernelDurability(MemoryStore(), tools={"b": "reconnect"})
    with pytest.raises(BadToolPolicy, match="tool 'a': 'replays' is not a policy"):
        RunkernelDurability(MemoryStore(), tools={"a": "replays"})
