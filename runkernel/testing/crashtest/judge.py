"""Judge one crashed play of a scenario against its crash-free play: every Thread legal
for the same judge as ``check-trace`` (I1-I15; a parent and its children also together,
for I15), no acknowledged commit lost or changed, each Run's history different only by
recovery edges (I12), the values the crash-free play reproduced returned again, and
what the world saw: executor starts beyond those of the same operation in the crash-free
play (*extra* starts).

Operations are matched by their place (``places``: the Run, step, call index, tool,
arguments), not by id: a recovery that re-asks the model mints new ids for the same calls.
"""

from __future__ import annotations

import collections

from attrs import frozen

from runkernel.adapters.drive.events import Acknowledged, ModelFailed, Recovered, ToolRaised
from runkernel.adapters.stores.contract import Store
from runkernel.kernel.policies import RecoveryMode, ToolPolicy
from runkernel.kernel.state import CallExecuting, Ended, ThreadCommit
from runkernel.specs.checker import Verdict, check_commits
from runkernel.testing.crashtest.places import Place, first_difference, logs_of, places, result_values
from runkernel.testing.crashtest.watch import Played
from runkernel.testing.simulation.history import outline, recovery_differences
from runkernel.testing.simulation.invariants import _results_paired


@frozen
class Violation:
    """One failed check: the ``rule`` broken (an invariant such as ``I12``, or
    ``extra-start``, ``result-value``, ``tool-raised``, ``host-raised``, ``stuck``),
    where, and what."""

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


Logs = dict[str, list[ThreadCommit]]


def starts_by_place(played: Played, logs: Logs) -> collections.Counter[Place]:
    """How many times each call's executor started."""
    where = places(logs)
    return collections.Counter(where[s.operation_id] for s in played.starts if s.operation_id in where)


def raised_places(played: Played, logs: Logs) -> set[Place]:
    """The calls whose tool raised."""
    where = places(logs)
    return {where[e.call_id] for e in played.events if isinstance(e, ToolRaised) and e.call_id in where}


class Judge:
    """Judges crashed plays of one scenario against its crash-free play (``logs``: its
    Runs' commits by Run key; ``reproduced``: the result values both crash-free plays
    returned alike, by place)."""

    def __init__(
        self,
        scenario: str,
        baseline: Played,
        logs: Logs,
        policies: dict[str, ToolPolicy],
        at_most_once: set[str],
        reproduced: dict[Place, str] | None = None,
    ) -> None:
        self.scenario = scenario
        self.outlines = {key: outline(log, baseline.runs[key][1]) for key, log in logs.items()}
        self.starts = starts_by_place(baseline, logs)
        self.raised = raised_places(baseline, logs)
        self.policies = policies
        self.at_most_once = at_most_once
        self.reproduced = reproduced or {}

    def judge(self, played: Played, store: Store, boundary: str) -> tuple[list[Violation], list[ExtraStart]]:
        """Every violation of one crashed play, and its extra starts."""
        logs = logs_of(store, played)
        found: list[Violation] = []

        def violation(rule: str, message: str, tool: str | None = None) -> None:
            found.append(Violation(self.scenario, boundary, rule, message, tool))

        for error in played.errors:
            violation("host-raised", error)
        for key, (thread_id, _run_id) in played.runs.items():
            whole = list(store.commits(thread_id))
            finding = check_commits(whole)
            if finding.verdict is not Verdict.LEGAL:
                violation(finding.rule, f"{_run(key)}commit {finding.line}: {finding.message} (the judge of check-trace)")
            for problem in _results_paired(thread_id, whole):
                violation("I13", _run(key) + problem)
        if len(logs) > 1:  # parents and children together: each child activated once, results = termini
            together = check_commits(commit for log in logs.values() for commit in log)
            if together.verdict is not Verdict.LEGAL:
                violation(together.rule, f"the Runs with their children, commit {together.line}: {together.message} (I15)")
        by_thread = {thread_id: logs[key] for key, (thread_id, _) in played.runs.items()}
        for event in played.events:
            if isinstance(event, Acknowledged):
                commit = event.commit
                log = by_thread.get(commit.thread_id, [])
                kept = next((c for c in log if c.version == commit.version), None)
                if kept != commit:
                    violation("I12", f"acknowledged commit v{commit.version} of {commit.thread_id} changed or vanished")
            elif isinstance(event, ModelFailed):
                violation("model-raised", f"step {event.step}: {event.error.type}: {event.error.message}")
        for key, log in logs.items():
            if key in self.outlines:
                crashed = outline(log, played.runs[key][1])
                for problem in recovery_differences(self.outlines[key], crashed, _recovered(played, key)):
                    violation("I12", _run(key) + problem.removeprefix("I12 "))
        for key, (_thread_id, run_id) in played.runs.items():
            final = store.run(run_id)
            if final is None or not isinstance(final.state, Ended):
                violation("stuck", f"{_run(key)}the Run did not end")
            if store.load_checkpoint(run_id) is not None:
                violation("I10", f"{_run(key)}a stream checkpoint outlived the Run")
        found += self._values(played, logs, boundary)
        found += self._starts(played, logs, boundary)
        extras = self._extras(played, logs, boundary)
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

    def _values(self, played: Played, logs: Logs, boundary: str) -> list[Violation]:
        """A value both crash-free plays returned that this play's call at the same place
        returned otherwise (before its Run's history first differs: from there on the
        Run continues from other facts)."""
        found = []
        diverged = {
            key: first_difference(self.outlines[key], outline(log, played.runs[key][1]))
            for key, log in logs.items()
            if key in self.outlines
        }
        for place, value in sorted(result_values(logs, played.runs).items()):
            key, step, index, tool, arguments = place
            expected = self.reproduced.get(place)
            if expected is None or expected == value or key not in diverged or (step, index) >= diverged[key]:
                continue
            found.append(Violation(
                self.scenario, boundary, "result-value",
                f"{_run(key)}step {step} call {index} ({tool} {arguments}) returned {value} where both "
                f"crash-free plays returned {expected}",
                tool,
            ))
        return found

    def _starts(self, played: Played, logs: Logs, boundary: str) -> list[Violation]:
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
        where = places(logs)
        for event in played.events:
            if isinstance(event, ToolRaised) and where.get(event.call_id) not in self.raised:
                place = where.get(event.call_id)
                tool = place[3] if place is not None else "?"
                found.append(Violation(
                    self.scenario, boundary, "tool-raised",
                    f"{_run(place[0]) if place else ''}{tool} attempt {event.attempt} raised {event.error.type}: "
                    f"{event.error.message} (it did not without the crash)",
                    tool,
                ))
        return found

    def _extras(self, played: Played, logs: Logs, boundary: str) -> list[ExtraStart]:
        counts = starts_by_place(played, logs)
        where = places(logs)
        operation = {where[s.operation_id]: s.operation_id for s in played.starts if s.operation_id in where}
        extras = []
        for place, count in sorted(counts.items()):
            extra = count - self.starts.get(place, 0)
            if place not in self.starts or extra <= 0:
                continue
            tool = place[3]
            policy = self.policies.get(tool)
            failure = tool in self.at_most_once or policy is None or policy.recovery.mode is not RecoveryMode.REPLAY
            extras.append(ExtraStart(self.scenario, boundary, tool, operation.get(place, "?"), extra, failure))
        return extras


def _mode(policy: ToolPolicy | None) -> str:
    return policy.recovery.mode.value if policy is not None else "no policy"


def _run(key: str) -> str:
    """How a message names a child Run (nothing for the scenario's own)."""
    return f"child {key}: " if key else ""


def _recovered(played: Played, key: str) -> frozenset[tuple[int, int]]:
    """(step, index) of each call of Run ``key`` a recovery found Executing."""
    run_id = played.runs[key][1]
    found = set()
    for event in played.events:
        if isinstance(event, Recovered) and event.snapshot.run_id == run_id:
            batch = event.snapshot.open_batch
            for index, call in enumerate(batch.calls if batch is not None else ()):
                if isinstance(call.status, CallExecuting):
                    found.add((batch.step, index))  # type: ignore[union-attr]
    return frozenset(found)


__all__ = ["ExtraStart", "Judge", "Logs", "Violation", "raised_places", "starts_by_place"]
