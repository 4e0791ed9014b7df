"""What one drawn session of the random kernel driver (``kernel_driver.py``) produced:
each Step (the committed state it acted on, the action, what came back) and the History
of every commit, Thread by Thread; Crash, the one action that is not a kernel input; and
the Ids counter that keeps ids unique across a history.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import TypeAlias

from runkernel.kernel.history import NO_HISTORY, RunHistory, commit_keys
from runkernel.kernel.policies import Policies
from runkernel.kernel.protocol import Decision, Input
from runkernel.kernel.recover import RecoveryDecision
from runkernel.kernel.rules import Rejection
from runkernel.kernel.state import RunSnapshot, ThreadCommit


@dataclass(frozen=True)
class Crash:
    """Not a kernel input: the host dies and restarts with ``recover(state, policies)``."""


Action: TypeAlias = Input | Crash
Outcome: TypeAlias = Decision | Rejection | RecoveryDecision


@dataclass(frozen=True)
class Step:
    """One thing the driver did: the committed state it acted on and what came back."""

    before: RunSnapshot | None
    action: Action
    outcome: Outcome
    policies: Policies
    #: the Run's history facts when it acted (used tickets, closed batches, resumes)
    history: RunHistory = NO_HISTORY

    @property
    def decision(self) -> Decision | None:
        """The Decision of ``decide`` or ``recover``; None for a rejection."""
        if isinstance(self.outcome, RecoveryDecision):
            return self.outcome.decision
        if isinstance(self.outcome, Decision):
            return self.outcome
        return None

    @property
    def history_after(self) -> RunHistory:
        """The Run's history once this step's commit (if any) is committed."""
        commit = self.commit
        return self.history if commit is None else self.history.plus(commit_keys(self.before, commit))

    @property
    def commit(self) -> ThreadCommit | None:
        decision = self.decision
        return decision.commit if decision is not None else None


@dataclass(frozen=True)
class History:
    """Everything one drawn session of the driver produced."""

    #: every commit, Threads interleaved, each Thread's commits in order
    commits: tuple[ThreadCommit, ...]
    #: each Thread's commits on their own
    threads: tuple[tuple[ThreadCommit, ...], ...]
    #: every step of every Thread (Thread by Thread)
    steps: tuple[Step, ...]

    def states(self) -> list[tuple[RunSnapshot, RunHistory]]:
        """Every committed state the driver acted on or reached, with its history."""
        out: list[tuple[RunSnapshot, RunHistory]] = []
        for step in self.steps:
            if step.before is not None:
                out.append((step.before, step.history))
            if step.decision is not None:
                out.append((step.decision.state, step.history_after))
        return out

    def snapshots(self) -> list[RunSnapshot]:
        """Every committed state the driver acted on or reached."""
        out: list[RunSnapshot] = []
        for step in self.steps:
            if step.before is not None:
                out.append(step.before)
            if step.decision is not None:
                out.append(step.decision.state)
        return out


class Ids:
    """Unique ids for one history: ``kind-N`` from a single counter."""

    def __init__(self) -> None:
        self._counter = itertools.count(1)

    def __call__(self, kind: str) -> str:
        return f"{kind}-{next(self._counter)}"
