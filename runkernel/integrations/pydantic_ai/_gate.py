"""runkernel's gate from Pydantic AI's declarations: which calls wait before they run
(``requires_approval=True``, a toolset's approval function, declared external tools)."""

from __future__ import annotations

from typing import Any

from pydantic_ai.tool_manager import ToolManager
from pydantic_ai.tools import RunContext

from runkernel import Hold, Permit, WaitKind
from runkernel.integrations.pydantic_ai._mapping import _approval_functions
from runkernel.kernel import ToolCall


class DeclaredGate:
    """``RunkernelDurability``'s gate (a mixin: the fields are the capability's). The
    driver asks ``check`` before each call; the answers come from the run's tool manager."""

    questions: frozenset[str]
    _tool_manager: ToolManager[Any] | None
    _ctx: RunContext[Any] | None

    def check(self, run_id: str, call: ToolCall) -> Permit | Hold:
        """runkernel's gate: Pydantic AI's declarations decide which calls wait."""
        wait = self._wait_kind(call.tool, call.arguments)
        # no request: the call's arguments are committed with it already (a copy would
        # count against the request's limits and change nothing an approver sees)
        return Permit() if wait is None else Hold(wait)

    def _wait_kind(self, tool: str, arguments: Any) -> WaitKind | None:
        """What a call of ``tool`` waits for before it runs: ``requires_approval=True`` or a
        toolset's approval function (an approval), a declared external tool (an external
        answer, or a person's input for ``questions``); None when it runs at once."""
        kind = self._kind(tool)
        if kind == "external":
            return WaitKind.INPUT if tool in self.questions else WaitKind.EXTERNAL
        if kind == "unapproved" or (kind == "function" and self._conditionally_approved(tool, arguments)):
            return WaitKind.APPROVAL
        return None

    def _conditionally_approved(self, tool: str, arguments: Any) -> bool:
        manager, ctx = self._tool_manager, self._ctx
        entry = manager.tools.get(tool) if manager is not None and manager.tools is not None else None
        if manager is None or entry is None or ctx is None or not isinstance(arguments, dict):
            return False
        return any(ask(ctx, entry.tool_def, arguments) for ask in _approval_functions(manager.toolset, entry.toolset))

    def _kind(self, tool: str) -> str | None:
        try:
            definition = self._tool_manager.get_tool_def(tool) if self._tool_manager is not None else None
        except ValueError:  # not prepared for a step yet
            return None
        return definition.kind if definition is not None else None
