"""The default version of an app's code: a digest of its tool table (Versions, under
Workers and leases). Two apps whose tools have the same names and the same policies
have the same digest; renaming, adding or removing a tool, or changing its policy,
changes it. Prompts, models and the tools' own code are not in it: an app whose change
matters elsewhere declares its ``version`` itself."""

from __future__ import annotations

from collections.abc import Mapping

from runkernel.errors import BadToolPolicy
from runkernel.kernel.canonical import jcs_digest
from runkernel.kernel.codec import policy_to_json
from runkernel.kernel.policies import ToolPolicy, tool_policy
from runkernel.kernel.values import JsonValue

#: How many hex digits of the tool table's sha256 a default version keeps.
DIGEST_LENGTH = 16


def tool_table_version(tools: Mapping[str, ToolPolicy | str]) -> str:
    """The default version of an app with ``tools`` (each tool's policy, a ``ToolPolicy``
    or its name): ``tools-`` and the first ``DIGEST_LENGTH`` hex digits of the sha256 of
    the RFC 8785 form of ``{name: committed policy}``."""
    table: dict[str, JsonValue] = {name: _committed(name, policy) for name, policy in tools.items()}
    return "tools-" + jcs_digest(table)[:DIGEST_LENGTH]


def _committed(name: str, policy: ToolPolicy | str) -> JsonValue:
    """The policy as a call commits it; one that is no policy at all is digested as
    written (its drive refuses it, naming the tool: ``BadToolPolicy``)."""
    try:
        return policy_to_json(tool_policy(name, policy))
    except BadToolPolicy:
        return {"not a policy": repr(policy)}


__all__ = ["DIGEST_LENGTH", "tool_table_version"]
