"""The decision of ``upgrade-check`` on committed snapshots (``judge_run``,
``judge_groups``): an open call's tool must exist, committed policies govern and their
differences are reported, a gate's wait needs a gate, staged state needs hooks, a
delegation group is blocked together, a timer and a prompt change never block."""

from __future__ import annotations

import attrs
import pytest

import upgrade_apps
from runkernel.adapters.drive.actions import CallRequest, RunCall, WaitFor
from runkernel.adapters.drive.driver import Driver
from runkernel.adapters.drive.ports import ToolRegistry
from runkernel.adapters.stores.memory import MemoryStore
from runkernel.adapters.worker.apps import RuntimeApp
from runkernel.adapters.worker.upgrade import (
    NewApp,
    Presence,
    RunFacts,
    RunVerdict,
    judge_groups,
    judge_run,
    live_runs,
    new_app_of,
    policy_text,
    upgrade_check,
)
from runkernel.kernel.policies import ToolPolicy
from runkernel.kernel.state import Staged
from runkernel.testing import ScriptedModel, ScriptedTool, World

OLD = new_app_of(upgrade_apps.app)


@pytest.fixture
def live() -> dict[str, RunFacts]:
    """The old app's live Runs, by what each is doing."""
    store = MemoryStore()
    ids = upgrade_apps.leave_live_runs(store)
    found = {facts.snapshot.run_id: facts for facts in live_runs(store, upgrade_apps.APP)}
    return {what: found[run_id] for what, run_id in ids.items()}


def _without(*tools: str) -> NewApp:
    return attrs.evolve(OLD, tools={k: v for k, v in OLD.tools.items() if k not in tools})


def test_the_old_app_continues_every_live_run_and_lists_neither_ended_runs_nor_other_apps(
    live: dict[str, RunFacts],
) -> None:
    store = MemoryStore()
    upgrade_apps.leave_live_runs(store)
    report = upgrade_check(store, upgrade_apps.app)
    assert {v.run_id for v in report.verdicts} == {f.snapshot.run_id for f in live.values()}
    assert "r-ended" not in {v.run_id for v in report.verdicts} and "r-other" not in {v.run_id for v in report.verdicts}
    assert report.can_continue_all
    assert all(v.reasons == () and v.policy_differences == () for v in report.verdicts)


@pytest.mark.parametrize(
    ("what", "tool", "status"),
    [("awaiting", "pay", "Awaiting"), ("executing", "fetch", "Executing"), ("timer", "remind", "Awaiting")],
)
def test_an_open_call_whose_tool_is_gone_blocks_naming_the_call_and_the_tool(
    live: dict[str, RunFacts], what: str, tool: str, status: str
) -> None:
    verdict = judge_run(live[what], _without(tool))
    assert not verdict.can_continue
    [reason] = verdict.reasons
    call = live[what].snapshot.open_batch.calls[0].call_id  # type: ignore[union-attr]
    assert reason == f"call {call} ({status}) needs tool {tool!r}, which the new app does not have"
    assert judge_run(live[what], OLD).can_continue


def test_a_tool_gone_without_an_open_call_blocks_nothing(live: dict[str, RunFacts]) -> None:
    assert all(judge_run(facts, _without("search")).can_continue for what, facts in live.items() if what != "search")
    # a Run without an open batch (the child, before its first inference) needs no tool
    assert judge_run(live["child"], attrs.evolve(OLD, tools={})).can_continue


def test_a_changed_policy_is_reported_and_never_blocks(live: dict[str, RunFacts]) -> None:
    declared = ToolPolicy.replay(max_attempts=5)
    new = attrs.evolve(OLD, tools={**OLD.tools, "fetch": declared})
    verdict = judge_run(live["executing"], new)
    assert verdict.can_continue
    [difference] = verdict.policy_differences
    assert (difference.tool, difference.committed, difference.declared) == ("fetch", ToolPolicy.reconnect(), declared)
    assert str(difference) == (
        "call c-fetch (fetch) keeps its committed reconnect; the new code declares replay(max_attempts=5)"
    )
    assert difference.to_json()["governs"] == "committed"
    assert judge_run(live["awaiting"], new).policy_differences == ()  # only the calls of that tool


def test_policy_text_names_every_part_of_a_policy() -> None:
    assert policy_text(ToolPolicy.indeterminate(retries=2, concurrent=True)) == "indeterminate, 2 retries, concurrent"
    assert policy_text(ToolPolicy(terminal_only_delegation=True)) == "indeterminate, terminal-only delegation"
    assert policy_text(ToolPolicy.reconnect(retries=1)) == "reconnect, 1 retry"


def test_a_wait_the_gate_placed_needs_a_gate_and_a_timer_does_not(live: dict[str, RunFacts]) -> None:
    gateless = attrs.evolve(OLD, gate=Presence.NO)
    verdict = judge_run(live["awaiting"], gateless)
    assert not verdict.can_continue
    assert verdict.reasons == (
        "it awaits approval for call c-pay (pay), a wait its gate placed, and the new app has no gate: "
        "the calls after it would run unasked",
    )
    sleeping = judge_run(live["timer"], gateless)
    assert sleeping.can_continue
    assert sleeping.notes == (f"it sleeps until {upgrade_apps.DUE} (call c-remind, remind then runs)",)
    in_drive = judge_run(live["awaiting"], attrs.evolve(OLD, gate=Presence.IN_ITS_DRIVE))
    assert in_drive.can_continue and "sets its gate in its own drive" in in_drive.notes[0]


def test_staged_state_needs_hooks() -> None:
    store = MemoryStore()
    driver = upgrade_apps._driver(store)
    driver.start(["hi"], thread_id="t-staged", run_id="r-staged")
    driver.inferred("thinking", [CallRequest("search", {"q": "x"}, "c1")], staged=Staged({"memory": 1}))
    [facts] = live_runs(store, upgrade_apps.APP)
    assert facts.snapshot.staged == {"memory": 1}
    hookless = judge_run(facts, attrs.evolve(OLD, hooks=Presence.NO))
    assert hookless.reasons == ("it has staged hook state, and the new app has no hooks to read it",)
    assert judge_run(facts, attrs.evolve(OLD, hooks=Presence.YES)).can_continue
    assert judge_run(facts, OLD).can_continue  # a push app reads it in its own code: a note
    assert "not checked" in judge_run(facts, OLD).notes[0]


def test_new_app_of_reads_a_runtime_apps_ports_and_a_push_apps_gate() -> None:
    world = World.new(MemoryStore())
    registry = ToolRegistry({"search": ScriptedTool("search", world)})
    bare = new_app_of(RuntimeApp("shop", ScriptedModel({}), registry))
    assert (bare.gate, bare.hooks, set(bare.tools)) == (Presence.NO, Presence.NO, {"search"})
    assert new_app_of(upgrade_apps.app).gate is Presence.YES
    assert new_app_of(upgrade_apps.no_gate).gate is Presence.NO
    assert new_app_of(upgrade_apps.app).tools["fetch"] == ToolPolicy.reconnect()


def test_a_delegation_group_is_blocked_together(live: dict[str, RunFacts]) -> None:
    parent, child = live["parent"], live["child"]
    new = _without("research")
    verdicts = judge_groups([judge_run(parent, new), judge_run(child, new), judge_run(live["awaiting"], new)])
    by_id = {v.run_id: v for v in verdicts}
    assert not by_id["r-parent"].can_continue
    assert by_id["r-parent"].reasons[0].startswith("call c-research (Executing) needs tool 'research'")
    blocked_child = by_id[child.snapshot.run_id]
    assert not blocked_child.can_continue
    assert blocked_child.reasons == ("it is in a delegation group with blocked run(s) r-parent",)
    assert by_id["r-awaiting"].can_continue  # not in the group
    # and the other way: a blocked child blocks its parent
    new_child = judge_run(child, OLD)
    blocked = RunVerdict(new_child.run_id, new_child.thread_id, "running", None, False, ("x",), group=new_child.group)
    joined = {v.run_id: v for v in judge_groups([judge_run(parent, OLD), blocked])}
    assert joined["r-parent"].reasons == (f"it is in a delegation group with blocked run(s) {child.snapshot.run_id}",)


def test_a_group_that_can_continue_says_who_is_in_it(live: dict[str, RunFacts]) -> None:
    parent = judge_run(live["parent"], OLD)
    child = judge_run(live["child"], OLD)
    assert parent.group == (child.run_id,) and child.group == ("r-parent",)
    assert parent.notes == (f"a parent waiting for 1 child run(s): {child.run_id}",)
    assert child.notes == ("a child of run r-parent (call c-research)",)
    assert all(v.can_continue for v in judge_groups([parent, child]))


class _AsyncShop:
    """An asyncio push app: it sets its driver's gate inside its own drive."""

    name = "shop"
    tools = {"pay": "indeterminate"}

    async def drive(self, driver: object, run_id: str) -> None:
        raise AssertionError("never driven")


def test_an_async_app_without_a_gate_attribute_sets_its_gate_in_its_drive(live: dict[str, RunFacts]) -> None:
    new = new_app_of(_AsyncShop())
    assert (new.gate, new.hooks, dict(new.tools)) == (Presence.IN_ITS_DRIVE, Presence.IN_ITS_DRIVE, {"pay": ToolPolicy()})
    verdict = judge_run(live["awaiting"], new)
    assert verdict.can_continue and verdict.notes == (
        "it awaits approval for call c-pay (pay); the new app sets its gate in its own drive (not checked)",
    )


def test_a_sequential_delegations_child_is_in_its_group() -> None:
    store = MemoryStore()
    tools = {**upgrade_apps.OLD_TOOLS, "ask": ToolPolicy(sequential_delegation=True)}
    driver = Driver(store, tools, app=upgrade_apps.APP)
    driver.start(["hi"], thread_id="t-seq", run_id="r-seq")
    started = driver.inferred("asking", [CallRequest("ask", {"q": "?"}, "c-ask", "op-ask")])
    assert isinstance(started, RunCall) and started.delegation is not None
    assert isinstance(driver.call_delegated("c-ask"), WaitFor)
    [facts] = live_runs(store, upgrade_apps.APP)
    verdict = judge_run(facts, attrs.evolve(OLD, tools=tools))
    child = started.delegation.run_id
    assert verdict.can_continue and verdict.group == (child,)
    assert f"it awaits child run {child} (call c-ask, ask)" in verdict.notes
    blocked_child = RunVerdict(child, "t-child", "running", None, False, ("x",), group=("r-seq",))
    [parent, _] = judge_groups([verdict, blocked_child])
    assert parent.reasons == (f"it is in a delegation group with blocked run(s) {child}",)


def test_a_tool_missing_from_an_app_that_lists_tools_while_it_runs_is_a_note(live: dict[str, RunFacts]) -> None:
    listing = attrs.evolve(_without("fetch"), dynamic_tools=True)
    verdict = judge_run(live["executing"], listing)
    assert verdict.can_continue and verdict.notes == (
        "call c-fetch (Executing) needs tool 'fetch', which is not in the new app's tool table; its MCP servers "
        "may list it while it runs (not checked)",
    )
    assert new_app_of(upgrade_apps.dynamic).dynamic_tools and not OLD.dynamic_tools


def test_live_runs_reads_page_after_page_each_run_once(monkeypatch: pytest.MonkeyPatch) -> None:
    from runkernel.adapters.worker import upgrade

    store = MemoryStore()
    ids = upgrade_apps.leave_live_runs(store)
    everything = [f.snapshot.run_id for f in live_runs(store, upgrade_apps.APP)]
    monkeypatch.setattr(upgrade, "_PAGE", 2)  # 7 Runs of the app (one Ended): four pages
    paged = [f.snapshot.run_id for f in live_runs(store, upgrade_apps.APP)]
    assert paged == everything and sorted(paged) == sorted(ids.values())
