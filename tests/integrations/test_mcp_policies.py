"""An MCP tool's policy (``runkernel.integrations.mcp``): the whole table of the server's
trust, its annotations and the explicit mapping; the ``_meta`` entry a call carries; and
``declare_tools``, by which a driver learns a tool's policy while the Run goes on (both
shells). Runs without the ``mcp`` extra, except where the MCP SDK's own
``ToolAnnotations`` are read."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from runkernel import AsyncDriver, CallRequest, Driver, RunCall, ToolPolicy
from runkernel.adapters.stores.memory import MemoryStore
from runkernel.errors import BadToolPolicy, UnknownTool
from runkernel.integrations.mcp import MCP_META_KEY, checked_trust, mcp_tool_policy, operation_meta

REPLAY, INDETERMINATE, RECONNECT = ToolPolicy.replay(), ToolPolicy.indeterminate(), ToolPolicy.reconnect()

#: annotations as the wire (and Pydantic AI's tool metadata) spells them
READ_ONLY = {"readOnlyHint": True}
IDEMPOTENT = {"idempotentHint": True}
BOTH = {"readOnlyHint": True, "idempotentHint": True}
DESTRUCTIVE = {"destructiveHint": True, "openWorldHint": True}
DENIED = {"readOnlyHint": False, "idempotentHint": False}
NOT_BOOLEANS = {"readOnlyHint": "true", "idempotentHint": 1}

#: (annotations, trusted, the explicit mapping, the policy): every combination's answer.
TABLE: list[tuple[Any, bool, dict[str, ToolPolicy], ToolPolicy]] = [
    # a trusted server: its hints decide
    (READ_ONLY, True, {}, REPLAY),
    (IDEMPOTENT, True, {}, REPLAY),
    (BOTH, True, {}, REPLAY),
    (DESTRUCTIVE, True, {}, INDETERMINATE),
    (DENIED, True, {}, INDETERMINATE),
    (NOT_BOOLEANS, True, {}, INDETERMINATE),
    ({}, True, {}, INDETERMINATE),
    (None, True, {}, INDETERMINATE),
    # any other server: every tool indeterminate, whatever it says
    (READ_ONLY, False, {}, INDETERMINATE),
    (IDEMPOTENT, False, {}, INDETERMINATE),
    (BOTH, False, {}, INDETERMINATE),
    (DESTRUCTIVE, False, {}, INDETERMINATE),
    (None, False, {}, INDETERMINATE),
    # the explicit mapping overrides both
    (READ_ONLY, True, {"tool": INDETERMINATE}, INDETERMINATE),
    (DESTRUCTIVE, True, {"tool": REPLAY}, REPLAY),
    (READ_ONLY, False, {"tool": RECONNECT}, RECONNECT),
    (None, False, {"tool": REPLAY}, REPLAY),
    # a mapping that names other tools changes nothing
    (READ_ONLY, True, {"other": INDETERMINATE}, REPLAY),
    (READ_ONLY, False, {"other": REPLAY}, INDETERMINATE),
]


@pytest.mark.parametrize(("annotations", "trusted", "explicit", "policy"), TABLE)
def test_the_policy_of_an_mcp_tool(annotations: Any, trusted: bool, explicit: dict[str, ToolPolicy], policy: ToolPolicy) -> None:
    assert mcp_tool_policy("tool", annotations, trusted=trusted, explicit=explicit) == policy


def test_the_mcp_sdks_own_annotations_read_as_the_wire_does() -> None:
    types = pytest.importorskip("mcp.types", reason="the mcp extra is not installed (pip install -e '.[mcp]')")
    for hints, policy in [
        ({"read_only_hint": True}, REPLAY),
        ({"idempotent_hint": True}, REPLAY),
        ({"destructive_hint": True}, INDETERMINATE),
        ({"read_only_hint": False}, INDETERMINATE),
        ({}, INDETERMINATE),
    ]:
        annotations = types.ToolAnnotations(**hints)
        assert mcp_tool_policy("tool", annotations, trusted=True) == policy, hints
        assert mcp_tool_policy("tool", annotations, trusted=False) == INDETERMINATE, hints


def test_a_call_carries_its_operation_id_and_lease_epoch_under_runkernels_own_key() -> None:
    call = RunCall("r1", "c1", "lookup", {}, "op-1", 2, lease_epoch=7)
    assert operation_meta(call) == {"runkernel.dev/operation": {"operation_id": "op-1", "lease_epoch": 7}}
    prefix = MCP_META_KEY.split("/")[0]
    assert "modelcontextprotocol" not in prefix.split(".") and "mcp" not in prefix.split("."), "MCP reserves such prefixes"
    given = {"progressToken": 3, "example.com/trace": "t", MCP_META_KEY: {"operation_id": "forged"}}
    merged = operation_meta(call, given)
    assert merged[MCP_META_KEY] == {"operation_id": "op-1", "lease_epoch": 7}, "runkernel's entry wins over one given"
    assert (merged["progressToken"], merged["example.com/trace"]) == (3, "t"), "the request's other keys are kept"
    assert given[MCP_META_KEY] == {"operation_id": "forged"}, "the given _meta is not changed"
    unleased = RunCall("r1", "c1", "lookup", {}, "op-1", 1)
    assert operation_meta(unleased)[MCP_META_KEY] == {"operation_id": "op-1", "lease_epoch": None}


def test_trusted_servers_are_a_collection_of_names_never_one_string() -> None:
    assert checked_trust(["files", "search"]) == frozenset({"files", "search"})
    with pytest.raises(TypeError, match="not the string 'files'"):
        checked_trust("files")


def test_a_driver_learns_a_tools_policy_while_the_run_goes_on() -> None:
    driver = Driver(MemoryStore(), tools={"search": "replay"})
    driver.start(["go"], thread_id="t1", run_id="r1")
    with pytest.raises(UnknownTool, match="'lookup'"):
        driver.inferred("x", [CallRequest("lookup", {"q": 1})])
    with pytest.raises(BadToolPolicy, match="tool 'lookup'"):
        driver.declare_tools({"lookup": "sometimes"})
    driver.declare_tools({"lookup": "replay"})
    action = driver.inferred("x", [CallRequest("lookup", {"q": 1}, call_id="c1")])
    assert isinstance(action, RunCall) and action.tool == "lookup"
    assert committed_policy(driver, "c1") == REPLAY, "the learned policy is committed with the call"
    driver.declare_tools({"lookup": "indeterminate"})
    assert committed_policy(driver, "c1") == REPLAY, "a committed call keeps its policy"
    assert driver.settings.policies.for_tool("lookup") == INDETERMINATE, "later batches get the new one"
    assert driver.settings.policies.for_tool("search") == REPLAY, "the other tools keep theirs"


def test_an_async_driver_learns_a_tools_policy_while_the_run_goes_on() -> None:
    async def scenario() -> ToolPolicy | None:
        driver = AsyncDriver(MemoryStore(), tools={})
        await driver.start(["go"], thread_id="t1", run_id="r1")
        driver.declare_tools({"lookup": ToolPolicy.reconnect()})
        await driver.inferred("x", [CallRequest("lookup", {}, call_id="c1")])
        return committed_policy(driver, "c1")

    assert asyncio.run(scenario()) == RECONNECT


def committed_policy(driver: Driver | AsyncDriver, call_id: str) -> ToolPolicy | None:
    call = driver.call(call_id)
    assert call is not None
    return call.policy
