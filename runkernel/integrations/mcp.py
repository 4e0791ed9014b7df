"""MCP tools under runkernel policies, for both integrations (Pydantic AI's ``MCPToolset``,
the OpenAI Agents SDK's MCP servers); docs/mcp.md is the guide.

An MCP server's tools are listed while the agent runs, so their policies cannot all be
given up front: each one is derived when the tool is listed, before the model's reply
that calls it is committed (the policy is committed with the call, and a recovery later
follows the committed one). ``mcp_tool_policy`` is the one derivation:

- a policy the user gave for the tool by name wins (``tools=``, the explicit mapping);
- else, on a server the user marked trusted (``trusted_mcp=``), the server's own
  annotations decide: ``readOnlyHint`` or ``idempotentHint`` true -> ``replay``;
- else ``indeterminate``: the MCP specification tells clients never to decide on the
  annotations of an untrusted server (they are hints, and a server may lie), so a call
  of such a tool that a crash interrupted is never started again.

Each call's operation id (the idempotency key: the same for every attempt of the call) and
lease epoch (the fencing token; None outside a lease) travel in the request's ``_meta``
under ``MCP_META_KEY`` (``operation_meta``), a key of runkernel's own: ``_meta`` keys with
an ``io.modelcontextprotocol/`` (or other MCP-reserved) prefix are the protocol's.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping

from runkernel import RunCall, ToolPolicy
from runkernel.kernel import JsonValue

#: The ``_meta`` key of a tool call's operation id and lease epoch: the request's ``_meta``
#: holds ``{"runkernel.dev/operation": {"operation_id": "...", "lease_epoch": 3}}``.
MCP_META_KEY = "runkernel.dev/operation"

#: The annotations (their wire names) that make a trusted server's tool ``replay``.
REPLAY_HINTS = ("readOnlyHint", "idempotentHint")


def _hint(annotations: object, name: str) -> bool:
    """Whether ``annotations`` (a wire-format mapping, or the MCP SDK's ``ToolAnnotations``
    of either generation) set hint ``name`` to true; an absent hint is false, its default."""
    if annotations is None:
        return False
    dump = getattr(annotations, "model_dump", None)
    wire = dump(by_alias=True) if callable(dump) else annotations
    return isinstance(wire, Mapping) and wire.get(name) is True


def mcp_tool_policy(
    tool: str, annotations: object, *, trusted: bool, explicit: Mapping[str, ToolPolicy] | None = None
) -> ToolPolicy:
    """The policy of MCP tool ``tool`` (the name the model calls it by): ``explicit[tool]``
    if given; else ``replay`` when the server is ``trusted`` and its ``annotations`` say
    ``readOnlyHint`` or ``idempotentHint``; else ``indeterminate``."""
    if explicit is not None and tool in explicit:
        return explicit[tool]
    if trusted and any(_hint(annotations, hint) for hint in REPLAY_HINTS):
        return ToolPolicy.replay()
    return ToolPolicy.indeterminate()


def checked_trust(trusted_mcp: Collection[str]) -> frozenset[str]:
    """The names of the MCP servers the user trusts, as a set (a lone string is refused:
    ``trusted_mcp="files"`` would trust every server named by one of its letters)."""
    if isinstance(trusted_mcp, str):
        raise TypeError(f"trusted_mcp is a collection of server names, not the string {trusted_mcp!r}")
    return frozenset(trusted_mcp)


def operation_meta(call: RunCall, meta: Mapping[str, JsonValue] | None = None) -> dict[str, JsonValue]:
    """``meta`` (a request's own ``_meta``, if any) with ``call``'s operation id and lease
    epoch under ``MCP_META_KEY``; runkernel's entry wins over one already there."""
    entry: JsonValue = {"operation_id": call.operation_id, "lease_epoch": call.lease_epoch}
    return {**(meta or {}), MCP_META_KEY: entry}


__all__ = ["MCP_META_KEY", "REPLAY_HINTS", "checked_trust", "mcp_tool_policy", "operation_meta"]
