"""Fixed per-tool policies and host choices that ``decide`` and ``recover`` apply."""

from __future__ import annotations

import enum
from collections.abc import Mapping

import attrs
from attrs import frozen


class RecoveryMode(enum.Enum):
    """What recovery does with a call it finds Executing (the seed's ToolRecoveryPolicy)."""

    REPLAY = "replay"
    RECONNECT = "reconnect"
    INDETERMINATE = "indeterminate"


def _at_least_one(_instance: object, attribute: attrs.Attribute[int], value: int) -> None:
    if value < 1:
        raise ValueError(f"{attribute.name} must be >= 1, got {value}")


@frozen
class ToolRecoveryPolicy:
    """A tool's fixed recovery policy.

    ``max_attempts`` bounds the attempt counter under replay: a call found Executing{n}
    with n >= max_attempts becomes Indeterminate(attempts_exhausted).
    """

    mode: RecoveryMode
    max_attempts: int = attrs.field(default=3, validator=_at_least_one)


@frozen
class RetryPolicy:
    """How many attempts a retryable tool error may use before it is Completed{error}."""

    max_attempts: int = attrs.field(default=1, validator=_at_least_one)


@frozen
class ToolPolicy:
    """Everything the kernel needs to know about one tool."""

    recovery: ToolRecoveryPolicy = ToolRecoveryPolicy(RecoveryMode.INDETERMINATE)
    retry: RetryPolicy = RetryPolicy()
    #: a terminal-only delegation: each call hands its work to a child Run in a Thread
    #: of its own, runs concurrently with the rest of its group, and its result is the
    #: child's terminus (DESIGN.md, Step and ToolBatch)
    terminal_only_delegation: bool = attrs.field(default=False)
    #: a sequential delegation: the tool hands its work to a child Run that talks back,
    #: through an Awaiting(delegation) wait; the child's identity is derived and fixed by
    #: the call's first Executing commit, so a tool of this kind is declared up front
    sequential_delegation: bool = False

    @terminal_only_delegation.validator
    def _one_kind(self, _attribute: object, value: bool) -> None:
        if value and self.sequential_delegation:
            raise ValueError("a tool is a terminal-only or a sequential delegation, not both")


class IndeterminateChoice(enum.Enum):
    """The host's choice for an Indeterminate call: publish it (default) or end the Run."""

    PUBLISH = "publish"
    END_RUN = "end_run"


#: The safe default for a tool nobody described: never re-run it after a crash.
SAFE_DEFAULT = ToolPolicy()


@frozen
class Policies:
    """Host policies. Tools not listed get ``default`` (indeterminate recovery)."""

    tools: Mapping[str, ToolPolicy] = attrs.field(factory=dict, hash=False)
    default: ToolPolicy = SAFE_DEFAULT
    max_steps: int | None = None
    on_indeterminate: IndeterminateChoice = IndeterminateChoice.PUBLISH

    def for_tool(self, tool: str) -> ToolPolicy:
        return self.tools.get(tool, self.default)
