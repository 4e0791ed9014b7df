"""Judge one crashed play of a scenario against its crash-free play: the Thread legal for
the same judge as ``check-trace`` (I1-I15), no acknowledged commit lost or changed, the
history different only by recovery edges (I12), and what the world saw: executor starts
beyond those of the same operation in the crash-free play (*extra* starts).

Operations are matched by their place in the Run (step, call index, tool, arguments),
not by id: a recovery that re-asks the model mints new ids for the same calls.
"""

from __future__ import annotations

import collections
import json

from attrs import frozen

from runkernel.adapters.drive.events import Acknowledged, ModelFailed, Recovered, ToolRaised
from runkernel.adapters.stores.contract import Store
from runkernel.kernel.policies import RecoveryMode, ToolPolicy
from runkernel.kernel.state import CallExecuting, Ended, ThreadCommit
from runkernel.specs.checker import Verdict, check_commits
from runkernel.testing.crashtest.hosts import Played
from runkernel.testing.simulation.history import outline, recovery_differences
from runkernel.testing.simulation.invariants import _results_paired

#: Where a call sits in its Run: (step, index in the batch, tool, arguments as JSON).
Place = tuple[int, int, str, str]


@frozen
class Violation:
    """One failed check: the ``rule`` broken (an invariant such as ``I12``, or
    ``extra-start``, ``tool-raised``, ``host-raised``, ``stuck``), where, and what."""

    scenario: str
    boundary: str
    rule: str
    message: str
    tool: str | None = None


@frozen
class ExtraStart:
    """Executor starts of one operation beyond the crash-free play's."""

    scenario: str
    boundary: str
    tool: str
    operation_id: str
    extra: int
    failure: bool


def places(log: list[ThreadCommit], run_id: str) -> dict[str, Place]:
    """Each operation id and call id of the Run, with the place of its call."""
    found: dict[str, Place] = {}
    for commit in log:
        if commit.run_id != run_id or commit.batch is None:
            continue
        for index, call in enumerate(commit.batch.calls):
            place = (commit.batch.step, index, call.tool, json.dumps(call.arguments, sort_keys=True))
            found[call.operation_id] = place
            found[call.call_id] = place
    return found


def starts_by_place(played: Played, log: list[ThreadCommit]) -> collections.Counter[Place]:
    """How many times each call's executor started."""
    where = places(log, played.run_id)
    return collections.Counter(where[s.operation_id] for s in played.starts if s.operation_id in where)


def raised_places(played: Played, log: list[ThreadCommit]) -> set[Place]:
    """The calls whose tool raised."""
    where = places(log, played.run_id)
    return {where[e.call_id] for e in played.events if isinstance(e, ToolRaised) and e.call_id in where}


class Judge:
    """Judges crashed plays of one scenario against its crash-free play."""

    def __init__(
        self,
        scenario: str,
        baseline: Played,
        baseline_log: list[ThreadCommit],
        policies: dict[str, ToolPolicy],
        at_most_once: set[str],
    ) -> None:
        self.scenario = scenario
        self.outline = outline(baseline_log, baseline.run_id)
        self.starts = starts_by_place(baseline, baseline_log)
        self.raised = raised_places(baseline, baseline_log)
        self.policies = policies
        self.at_most_once = at_most_once

    def judge(self, played: Played, store: Store, boundary: str) -> tuple[list[Violation], list[ExtraStart]]:
        """Every violation of one crashed play, and its extra starts."""
        log = list(store.commits(played.thread_id))
        found: list[Violation] = []

        def violation(rule: str, message: str, tool: str | None = None) -> None:
            found.append(Violation(self.scenario, boundary, rule, message, tool))

        for error in played.errors:
            violation("host-raised", error)
        finding = check_commits(log)
        if finding.verdict is not Verdict.LEGAL:
            violation(finding.rule, f"commit {finding.line}: {finding.message} (the judge of check-trace)")
        for problem in _results_paired(played.thread_id, log):
            violation("I13", problem)
        for event in played.events:
            if isinstance(event, Acknowledged):
                commit = event.commit
                kept = log[commit.version - 1] if commit.version <= len(log) else None
                if kept != commit:
                    violation("I12", f"acknowledged commit v{commit.version} changed or vanished")
            elif isinstance(event, ModelFailed):
                violation("model-raised", f"step {event.step}: {event.error.type}: {event.error.message}")
        for problem in recovery_differences(self.outline, outline(log, played.run_id), _recovered(played)):
            violation("I12", problem.removeprefix("I12 "))
        final = store.run(played.run_id)
        if final is None or not isinstance(final.state, Ended):
            violation("stuck", "the Run did not end")
        if store.load_checkpoint(played.run_id) is not None:
            violation("I10", "a stream checkpoint outlived the Run")
        found += self._starts(played, log, boundary)
        extras = self._extras(played, log, boundary)
        for extra in extras:
            if extra.failure:
                policy = self.policies.get(extra.tool)
                why = "it is flagged at-most-once" if extra.tool in self.at_most_once else "it is not declared replay"
                violation(
                    "extra-start",
                    f"{extra.tool} ({_mode(policy)}) started {extra.extra} more time(s) for operation "
                    f"{extra.operation_id} than without the crash, and {why}",
                    extra.tool,
                )
        return found, extras

    def _starts(self, played: Played, log: list[ThreadCommit], boundary: str) -> list[Violation]:
        found = []
        seen: set[tuple[str, int]] = set()
        for start in played.starts:
            if not start.committed_first:
                found.append(Violation(
                    self.scenario, boundary, "I5",
                    f"{start.tool} {start.operation_id} attempt {start.attempt} started before Executing was committed",
                    start.tool,
                ))
            if (start.operation_id, start.attempt) in seen:
                found.append(Violation(
                    self.scenario, boundary, "I6",
                    f"{start.tool} {start.operation_id} attempt {start.attempt} started twice", start.tool,
                ))
            seen.add((start.operation_id, start.attempt))
        where = places(log, played.run_id)
        for event in played.events:
            if isinstance(event, ToolRaised) and where.get(event.call_id) not in self.raised:
                tool = where[event.call_id][2] if event.call_id in where else "?"
                found.append(Violation(
                    self.scenario, boundary, "tool-raised",
                    f"{tool} attempt {event.attempt} raised {event.error.type}: {event.error.message} "
                    "(it did not without the crash)",
                    tool,
                ))
        return found

    def _extras(self, played: Played, log: list[ThreadCommit], boundary: str) -> list[ExtraStart]:
        counts = starts_by_place(played, log)
        where = places(log, played.run_id)
        operation = {where[s.operation_id]: s.operation_id for s in played.starts if s.operation_id in where}
        extras = []
        for place, count in sorted(counts.items()):
            extra = count - self.starts.get(place, 0)
            if place not in self.starts or extra <= 0:
                continue
            tool = place[2]
            policy = self.policies.get(tool)
            failure = tool in self.at_most_once or policy is None or policy.recovery.mode is not RecoveryMode.REPLAY
            extras.append(ExtraStart(self.scenario, boundary, tool, operation.get(place, "?"), extra, failure))
        return extras


def _mode(policy: ToolPolicy | None) -> str:
    return policy.recovery.mode.value if policy is not None else "no policy"


def _recovered(played: Played) -> frozenset[tuple[int, int]]:
    """(step, index) of each call a recovery found Executing."""
    found = set()
    for event in played.events:
        if isinstance(event, Recovered) and event.snapshot.run_id == played.run_id:
            batch = event.snapshot.open_batch
            for index, call in enumerate(batch.calls if batch is not None else ()):
                if isinstance(call.status, CallExecuting):
                    found.add((batch.step, index))  # type: ignore[union-attr]
    return frozenset(found)


__all__ = ["ExtraStart", "Judge", "Place", "Violation", "places", "starts_by_place"]
