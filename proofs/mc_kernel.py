"""The model checker's view of the pure kernel, and the types its transitions share.

``Kernel`` looks ``decide``, ``recover`` and ``validate_commit`` up on their modules at
call time, so a test can plant a bug with ``monkeypatch.setattr`` (or pass its own
functions) and the checker explores the broken kernel.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol, TypeAlias

import importlib
from runkernel.kernel.history import NO_HISTORY, History, RunHistory
from runkernel.kernel.policies import Policies
from runkernel.kernel.protocol import Decision, Effect, Input
from runkernel.kernel.recover import RecoveryDecision
from runkernel.kernel.rules import Rejection
from runkernel.kernel.state import Ended, RunSnapshot, ThreadCommit, ThreadHead
from runkernel.kernel.validate import Accepted, TicketSeen

from mc_config import Profile
from mc_encode import Key, enc_commit, enc_effect, enc_history, enc_snapshot

# ``runkernel.kernel`` re-exports the functions under the modules' own names, so
# ``import runkernel.kernel.decide as m`` would bind the function: go by sys.modules.
decide_module = importlib.import_module("runkernel.kernel.decide")
recover_module = importlib.import_module("runkernel.kernel.recover")
validate_module = importlib.import_module("runkernel.kernel.validate")


class DecideFn(Protocol):
    """``decide``'s signature, self-check switch included."""

    def __call__(
        self, state: RunSnapshot | None, event: Input, policies: Policies, history: History, *, self_check: bool
    ) -> Decision | Rejection: ...


RecoverFn: TypeAlias = Callable[[RunSnapshot, Policies], RecoveryDecision]


class ValidateFn(Protocol):
    """``validate_commit``'s signature, the required ``ticket_seen`` included."""

    def __call__(
        self,
        head: ThreadHead | None,
        run: RunSnapshot | None,
        commit: ThreadCommit,
        history: History,
        *,
        ticket_seen: TicketSeen,
    ) -> Accepted | Rejection: ...


@dataclass(frozen=True)
class Kernel:
    """The functions under test; ``None`` means the module's current attribute."""

    decide: DecideFn | None = None
    recover: RecoverFn | None = None
    validate_commit: ValidateFn | None = None

    def run_decide(
        self, state: RunSnapshot | None, event: Input, policies: Policies, history: History
    ) -> Decision | Rejection:
        fn = self.decide or decide_module.decide
        try:
            # the self-check on: decide judges its own commits too (adopt judges them again)
            return fn(state, event, policies, history, self_check=True)
        except Exception as error:  # KernelBug included: the runtime would die here
            raise Violation("kernel error", f"decide raised on {type(event).__name__}: {error!r}") from error

    def run_recover(self, state: RunSnapshot, policies: Policies) -> RecoveryDecision:
        fn = self.recover or recover_module.recover
        try:
            return fn(state, policies)
        except Exception as error:
            raise Violation("kernel error", f"recover raised: {error!r}") from error

    def run_validate(
        self,
        head: ThreadHead | None,
        run: RunSnapshot | None,
        commit: ThreadCommit,
        history: History,
        ticket_seen: TicketSeen,
    ) -> Accepted | Rejection:
        fn: ValidateFn = self.validate_commit or validate_module.validate_commit
        return fn(head, run, commit, history, ticket_seen=ticket_seen)


@dataclass(frozen=True)
class Context:
    profile: Profile
    policies: Policies
    kernel: Kernel
    refusals_checked: set[Key] = field(default_factory=set)
    """Snapshots whose refused commands were already checked (they depend on nothing else)."""
    counters: dict[str, int] = field(default_factory=dict)


class Violation(Exception):
    """An invariant failed while expanding a state."""

    def __init__(self, invariant: str, message: str, commit: ThreadCommit | None = None) -> None:
        super().__init__(f"{invariant}: {message}")
        self.invariant = invariant
        self.message = message
        self.commit = commit
        self.label: str | None = None
        self.written: tuple[ThreadCommit, ...] = ()
        """Commits the failing transition wrote before it failed."""


@dataclass(frozen=True, slots=True)
class Pending:
    """A queued Commit effect with the snapshot and history ``validate_commit`` says it
    produces."""

    commit: ThreadCommit
    after: RunSnapshot
    history: RunHistory


QueueItem: TypeAlias = Pending | Effect
Commits: TypeAlias = tuple[ThreadCommit, ...]


@dataclass(frozen=True, slots=True)
class State:
    """The committed snapshot, what the runtime still has to carry out, and the world.

    ``executed`` holds the (operation_id, attempt) pairs the world ran that can still
    matter (see ``prune``); ``fenced`` the operations recovery found Executing under a
    policy other than replay; ``pairing`` the tool-use calls of the committed log with
    how many tool results each has; ``recovering`` marks a fresh runtime after a crash;
    ``history`` the committed history facts of the Run (used tickets, closed batches,
    applied resumes), which the store keeps beside the snapshot.
    """

    snap: RunSnapshot | None
    queue: tuple[QueueItem, ...] = ()
    executed: frozenset[tuple[str, int]] = frozenset()
    fenced: frozenset[str] = frozenset()
    pairing: tuple[tuple[str, int], ...] = ()
    crashes: int = 0
    recovering: bool = False
    history: RunHistory = NO_HISTORY
    children: tuple[tuple[str, str], ...] = ()
    """Child Runs of concurrent delegations by Run id: ``running``, ``crashed``,
    ``cancelling`` (a cancel is in its inbox) or ``ended:<cause>``."""
    child_crashes: int = 0

    def key(self) -> Key:
        version = self.snap.version if self.snap is not None else 0
        queue = tuple(
            ("C", enc_commit(item.commit, version)) if isinstance(item, Pending) else enc_effect(item)
            for item in self.queue
        )
        return (
            enc_snapshot(self.snap),
            queue,
            self.executed,
            self.fenced,
            self.pairing,
            self.crashes,
            self.recovering,
            enc_history(self.history),
            self.children,
            self.child_crashes,
        )

    @property
    def final(self) -> bool:
        """The Run is Ended and nothing is in flight."""
        return (
            self.snap is not None
            and isinstance(self.snap.state, Ended)
            and not self.queue
            and not self.recovering
        )


#: Who makes a choice. ``interrupt`` (an operator cancel while Running) and ``crash``
#: never count as progress for the dead-end check.
SYSTEM, WORLD, OPERATOR, INTERRUPT, CRASH = "system", "world", "operator", "interrupt", "crash"


@dataclass(frozen=True, slots=True)
class Transition:
    label: str
    target: State
    actor: str
    commits: Commits = ()
    """The commits this transition wrote, in order (for the counterexample's trace)."""
    crash: str | None = None
    """``boundary@position`` of a crash transition."""
