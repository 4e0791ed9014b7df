"""Fixed per-tool policies and host choices that ``decide`` and ``recover`` apply."""

from __future__ import annotations

import enum
import types
from collections.abc import Mapping
from typing import cast

import attrs
from attrs import frozen

from runkernel.errors import BadToolPolicy


class RecoveryMode(enum.Enum):
    """What recovery does with a call it finds Executing (the ToolRecoveryPolicy)."""

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
    """Everything the kernel needs to know about one tool. Build one in one call:
    ``ToolPolicy.replay(max_attempts=3)``, ``ToolPolicy.reconnect()`` or
    ``ToolPolicy.indeterminate()`` (the default, ``ToolPolicy()``); wherever a mapping of
    tool name to policy is taken, the strings ``"replay"``, ``"reconnect"`` and
    ``"indeterminate"`` stand for those calls with their defaults. A delegation is
    declared with the constructor (``ToolPolicy(terminal_only_delegation=True)``).

    ``concurrent=True`` (on each of the three) declares the tool safe to run beside
    its neighbours: consecutive calls of concurrent tools in one batch form a group
    whose calls run together, each recovered by its own policy. A concurrent tool never
    delegates nor waits once started: declaring it a delegation too raises ``ValueError``,
    and a scheduled wait it asks for while Executing is refused."""

    recovery: ToolRecoveryPolicy = ToolRecoveryPolicy(RecoveryMode.INDETERMINATE)
    retry: RetryPolicy = RetryPolicy()
    #: a terminal-only delegation: each call hands its work to a child Run in a Thread
    #: of its own, runs concurrently with the rest of its group, and its result is the
    #: child's terminus (Step and ToolBatch)
    terminal_only_delegation: bool = attrs.field(default=False)
    #: a sequential delegation: the tool hands its work to a child Run that talks back,
    #: through an Awaiting(delegation) wait; the child's identity is derived and fixed by
    #: the call's first Executing commit, so a tool of this kind is declared up front
    sequential_delegation: bool = False
    #: a member of a concurrent group: consecutive calls of concurrent tools run
    #: together (Step and ToolBatch, "Concurrent ordinary calls"); never a delegation
    concurrent: bool = attrs.field(default=False)

    @terminal_only_delegation.validator
    def _one_kind(self, _attribute: object, value: bool) -> None:
        if value and self.sequential_delegation:
            raise ValueError("a tool is a terminal-only or a sequential delegation, not both")

    @concurrent.validator
    def _never_delegates(self, _attribute: object, value: bool) -> None:
        if value and (self.terminal_only_delegation or self.sequential_delegation):
            raise ValueError(
                "a concurrent tool never delegates (nor moves Executing -> Awaiting): declare it "
                "concurrent or a delegation, not both"
            )

    @classmethod
    def replay(cls, max_attempts: int = 3, *, retries: int = 0, concurrent: bool = False) -> ToolPolicy:
        """A tool that may run again: after a crash mid-call it runs again with the same
        operation id (attempt n+1 committed first), up to ``max_attempts`` attempts, then
        the call is ``Indeterminate(attempts_exhausted)``. For reads, or writes through an
        idempotency key the downstream honours. ``retries``: how many attempts after the
        first a tool error reported retryable may use (on the same attempt counter).
        ``concurrent``: the tool runs beside the other concurrent calls of its batch."""
        return cls(ToolRecoveryPolicy(RecoveryMode.REPLAY, max_attempts), _retry(retries), concurrent=concurrent)

    @classmethod
    def reconnect(cls, *, retries: int = 0, concurrent: bool = False) -> ToolPolicy:
        """A tool whose work can be looked up by operation id: after a crash mid-call it
        is never started again blindly; its ``status(operation_id, lease_epoch)`` is asked,
        and only a provable ``not_found`` runs the next attempt. ``retries`` and
        ``concurrent`` as for ``replay``."""
        return cls(ToolRecoveryPolicy(RecoveryMode.RECONNECT), _retry(retries), concurrent=concurrent)

    @classmethod
    def indeterminate(cls, *, retries: int = 0, concurrent: bool = False) -> ToolPolicy:
        """A tool that must never run twice (the default): after a crash mid-call the call
        becomes ``Indeterminate(outcome_unknown)``, to reconcile by operation id.
        ``retries`` and ``concurrent`` as for ``replay``."""
        return cls(ToolRecoveryPolicy(RecoveryMode.INDETERMINATE), _retry(retries), concurrent=concurrent)


class GroupKind(enum.Enum):
    """The two kinds of group a batch may hold (they never share one)."""

    #: terminal-only child delegations
    DELEGATIONS = "delegations"
    #: ordinary calls whose committed policy says ``concurrent``
    CONCURRENT = "concurrent"


def policy_group(policy: ToolPolicy | None) -> GroupKind | None:
    """The kind of group a call under ``policy`` belongs to (None: it runs alone)."""
    if policy is None:
        return None
    if policy.terminal_only_delegation:
        return GroupKind.DELEGATIONS
    if policy.concurrent:
        return GroupKind.CONCURRENT
    return None


def _retry(retries: int) -> RetryPolicy:
    if retries < 0:
        raise ValueError(f"retries must be >= 0, got {retries}")
    return RetryPolicy(retries + 1)


#: The strings a mapping of tool name to policy takes, and the policy each stands for.
POLICY_NAMES: Mapping[str, ToolPolicy] = types.MappingProxyType(
    {
        "replay": ToolPolicy.replay(),
        "reconnect": ToolPolicy.reconnect(),
        "indeterminate": ToolPolicy.indeterminate(),
    }
)


def tool_policy(tool: str, policy: ToolPolicy | str) -> ToolPolicy:
    """``policy`` as a ``ToolPolicy``: one of ``POLICY_NAMES`` stands for its policy;
    anything else that is not a ``ToolPolicy`` raises ``BadToolPolicy`` naming ``tool``."""
    if isinstance(policy, ToolPolicy):
        return policy
    named = POLICY_NAMES.get(policy) if isinstance(policy, str) else None
    if named is None:
        raise BadToolPolicy(tool, policy)
    return named


def tool_policies(tools: Mapping[str, ToolPolicy | str]) -> Mapping[str, ToolPolicy]:
    """Every tool's policy as a ``ToolPolicy`` (see ``tool_policy``). A mapping that holds
    only ``ToolPolicy`` values is returned as it is."""
    if all(isinstance(policy, ToolPolicy) for policy in tools.values()):
        return cast(Mapping[str, ToolPolicy], tools)
    return {name: tool_policy(name, policy) for name, policy in tools.items()}


class IndeterminateChoice(enum.Enum):
    """The host's choice for an Indeterminate call: publish it (default) or end the Run."""

    PUBLISH = "publish"
    END_RUN = "end_run"


#: The safe default for a tool nobody described: never re-run it after a crash.
SAFE_DEFAULT = ToolPolicy()


@frozen
class Policies:
    """Host policies. Tools not listed get ``default`` (indeterminate recovery). ``tools``
    also takes the strings ``"replay"``, ``"reconnect"``, ``"indeterminate"``."""

    tools: Mapping[str, ToolPolicy] = attrs.field(factory=dict, hash=False, converter=tool_policies)
    default: ToolPolicy = SAFE_DEFAULT
    max_steps: int | None = None
    on_indeterminate: IndeterminateChoice = IndeterminateChoice.PUBLISH

    def for_tool(self, tool: str) -> ToolPolicy:
        return self.tools.get(tool, self.default)
