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
        self,
        state: RunSnapshot | None,
        event: Input,
        policies: Policies,
        history: History,
        *,
        self_check: bool = False,
    ) -> Decision | Rejection:
        """``decide``'s answer. The model judges every commit of it as a store would
        (``mc_runtime.validate``), a check that implies the kernel's own self-check
        where their heads agree (``self_check_implied``), so the self-check runs only
        where it does not, and again to name a violation the model found (``_answer``)."""
        fn = self.decide or decide_module.decide
        try:
            return fn(state, event, policies, history, self_check=self_check)
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


#: Entries a kernel memo holds before it starts afresh (bounds its memory).
MEMO_LIMIT = 100_000


class KernelMemo:
    """Answers of the pure kernel by their arguments: a faster kernel that keeps the verdict.

    Why it is sound: ``decide`` and ``validate_commit`` are pure functions of their
    arguments (the kernel is pure: no I/O, clock, randomness or hidden state), and their
    arguments are immutable; the policies are one object for the whole search. A
    repeated call therefore returns an equal answer, and the checks the model applies
    to that answer (``adopt``, ``written``) still run on every transition. Snapshots,
    histories and commits are looked up by identity (the memo keeps each alive, so an
    id is never reused while it is remembered): the model shares them between states,
    and hashing them by content costs more than the kernel call it saves. Events are
    small and compared by content. A kernel that raises is never memoized (the search
    stops there). A memo belongs to one search (one ``Context``), so a kernel planted by
    a test is never answered from another kernel's memo. ``recover`` is not memoized:
    I11 calls it twice to see it deterministic.
    """

    def __init__(self, kernel: Kernel, limit: int = MEMO_LIMIT) -> None:
        self.kernel = kernel
        self.limit = limit
        self.decisions: dict[tuple[object, ...], tuple[object, object, Decision | Rejection]] = {}
        self.verdicts: dict[tuple[int, int, int], tuple[object, object, object, Accepted | Rejection]] = {}
        self.histories: dict[RunHistory, RunHistory] = {}
        self.hits = 0

    def decide(
        self, state: RunSnapshot | None, event: Input, policies: Policies, history: History
    ) -> Decision | Rejection:
        key = (id(state), id(history), event)
        try:
            found = self.decisions.get(key)
        except TypeError:  # an unhashable JSON value inside the event
            return self.kernel.run_decide(state, event, policies, history)
        if found is not None and found[0] is state and found[1] is history:
            self.hits += 1
            return found[2]
        answer = self.kernel.run_decide(state, event, policies, history)
        if len(self.decisions) >= self.limit:
            self.decisions.clear()
        self.decisions[key] = (state, history, answer)
        return answer

    def validate(
        self,
        head: ThreadHead | None,
        run: RunSnapshot | None,
        commit: ThreadCommit,
        history: RunHistory,
    ) -> Accepted | Rejection:
        """``head`` is derived from ``run`` by the caller, so it is not part of the key."""
        key = (id(run), id(commit), id(history))
        found = self.verdicts.get(key)
        if found is not None and found[0] is run and found[1] is commit and found[2] is history:
            self.hits += 1
            return found[3]
        verdict = self.kernel.run_validate(head, run, commit, history, history.ticket_used)
        if len(self.verdicts) >= self.limit:
            self.verdicts.clear()
        self.verdicts[key] = (run, commit, history, verdict)
        return verdict


@dataclass(frozen=True)
class Context:
    profile: Profile
    policies: Policies
    kernel: Kernel
    refusals_checked: set[Key] = field(default_factory=set)
    """Snapshots whose refused commands were already checked (they depend on nothing else)."""
    counters: dict[str, int] = field(default_factory=dict)
    memo: KernelMemo | None = None
    """The kernel's answers by argument (``Profile.memo_kernel``); None: ask the kernel."""

    def decide(self, state: RunSnapshot | None, event: Input, history: History) -> Decision | Rejection:
        if self.memo is None:
            return self.kernel.run_decide(state, event, self.policies, history)
        return self.memo.decide(state, event, self.policies, history)

    def intern(self, history: RunHistory) -> RunHistory:
        """One object per distinct history, so that the memo finds it by identity."""
        if self.memo is None:
            return history
        return self.memo.histories.setdefault(history, history)

    def validate(
        self, head: ThreadHead | None, run: RunSnapshot | None, commit: ThreadCommit, history: RunHistory
    ) -> Accepted | Rejection:
        if self.memo is None:
            return self.kernel.run_validate(head, run, commit, history, history.ticket_used)
        return self.memo.validate(head, run, commit, history)


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
    running: tuple[tuple[str, str, int], ...] = ()
    """Executors and status queries of concurrent calls the runtime started and whose
    answer is still to come, as sorted ``(kind, call_id, attempt)``, kind ``X`` (an
    executor) or ``Q`` (a status query): the world answers them in any order while the
    runtime waits, one at a time (the drive's own thread). A crash loses them."""

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
            self.running,
        )

    @property
    def final(self) -> bool:
        """The Run is Ended and nothing is in flight."""
        return (
            self.snap is not None
            and isinstance(self.snap.state, Ended)
            and not self.queue
            and not self.recovering
            and not self.running
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
