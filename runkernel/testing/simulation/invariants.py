"""Check a finished Trial against the invariants I1-I14 from what the store and the
world say, never from what the runtime believed."""

from __future__ import annotations

import collections

from runkernel.adapters.drive.runtime import Acknowledged, CommandSettled, Recovered
from runkernel.adapters.stores.contract import Store
from runkernel.kernel.policies import RecoveryMode
from runkernel.kernel.recover import recover
from runkernel.kernel.state import (
    RESUMED_EVENT,
    CallExecuting,
    Ended,
    ThreadCommit,
)
from runkernel.kernel.values import Role
from runkernel.testing.simulation.contents import check_contents
from runkernel.testing.simulation.engine import Trial
from runkernel.testing.simulation.history import Outline, outline, recovery_differences
from runkernel.specs.checker import Verdict, check_commits


def thread_logs(store: Store, trial: Trial) -> dict[str, list[ThreadCommit]]:
    """The committed log of every Thread the trial touched."""
    return {t: list(store.commits(t)) for t in trial.thread_ids}


def check_run(
    store: Store,
    trial: Trial,
    baseline: Outline | None = None,
    logs: dict[str, list[ThreadCommit]] | None = None,
) -> list[str]:
    """Every violation found, each naming its invariant. Empty means all hold.

    With the ``baseline`` outline of the scenario's crash-free run, the history must
    differ from it only by recovery edges (I12). ``logs`` are the trial's Thread logs
    when the caller already read them.
    """
    problems = list(trial.problems)
    if logs is None:
        logs = thread_logs(store, trial)
    if baseline is not None:
        crashed = outline(logs[trial.thread_ids[0]], trial.run_ids[0])
        problems += recovery_differences(baseline, crashed, _recovered_positions(trial))
    for thread_id, log in logs.items():
        finding = check_commits(log)
        if finding.verdict is not Verdict.LEGAL:
            problems.append(f"I1-I8/I13 {thread_id} commit {finding.line}: {finding.rule}: {finding.message}")
        problems += _results_paired(thread_id, log)
    if len(logs) > 1:
        # parents and children together: each child activated once, results = termini (I15)
        together = check_commits(commit for log in logs.values() for commit in log)
        if together.verdict is not Verdict.LEGAL:
            problems.append(f"I15 {trial.thread_ids[0]} with its children, commit {together.line}: {together.rule}: {together.message}")
    problems += _acknowledged_kept(trial, logs)
    problems += _executions(trial)
    problems += _recovery_checks(trial)
    problems += _commands(store, trial, logs)
    problems += check_contents(trial.world, logs)
    for run_id in trial.run_ids:
        snapshot = store.run(run_id)
        if snapshot is None or not isinstance(snapshot.state, Ended):
            problems.append(f"run {run_id} is not Ended at the end of its scenario")
        if store.load_checkpoint(run_id) is not None:
            problems.append(f"I10 run {run_id}: a stream checkpoint outlived the run")
    return problems


def _recovered_positions(trial: Trial) -> frozenset[tuple[int, int]]:
    """(step, index) of each call of the first Run that a recovery found Executing."""
    found = set()
    for event, _ in trial.events:
        if isinstance(event, Recovered) and event.snapshot.run_id == trial.run_ids[0]:
            batch = event.snapshot.open_batch
            if batch is None:
                continue
            for index, call in enumerate(batch.calls):
                if isinstance(call.status, CallExecuting):
                    found.add((batch.step, index))
    return frozenset(found)


def _results_paired(thread_id: str, log: list[ThreadCommit]) -> list[str]:
    """Every tool-use block has exactly one result per call (langgraph 4289, 4397)."""
    uses: collections.Counter[str] = collections.Counter()
    results: collections.Counter[str] = collections.Counter()
    for commit in log:
        for message in commit.messages:
            if message.role is Role.ASSISTANT and message.tool_calls:
                uses.update(use.call_id for use in message.tool_calls)
            if message.role is Role.TOOL and message.call_id is not None:
                results[message.call_id] += 1
    ended = bool(log) and isinstance(log[-1].disposition, Ended)
    problems = [f"I13 {thread_id}: call {c} has {n} tool results" for c, n in results.items() if n > 1]
    if ended:
        problems += [f"I13 {thread_id}: call {c} has no tool result" for c in uses if results[c] == 0]
    return problems


def _acknowledged_kept(trial: Trial, logs: dict[str, list[ThreadCommit]]) -> list[str]:
    problems = []
    for event, _ in trial.events:
        if isinstance(event, Acknowledged):
            commit = event.commit
            log = logs.get(commit.thread_id, [])
            stored = log[commit.version - 1] if commit.version <= len(log) else None
            if stored != commit:
                problems.append(f"I12 {commit.thread_id} v{commit.version}: an acknowledged commit changed or vanished")
    return problems


def _executions(trial: Trial) -> list[str]:
    problems = []
    seen: set[tuple[str, int]] = set()
    answered: set[str] = set()
    for execution in trial.world.executions:
        if execution.resume_value is not None:
            answered.add(execution.operation_id)
        elif execution.operation_id in answered:
            problems.append(
                f"I12 {execution.operation_id} attempt {execution.attempt} ran without the "
                "operator's committed input answer"
            )
        key = (execution.operation_id, execution.attempt)
        if not execution.committed_first:
            problems.append(
                f"I5 {execution.operation_id} attempt {execution.attempt} started before Executing was committed"
            )
        if key in seen:
            problems.append(f"I6 {execution.operation_id} attempt {execution.attempt} ran twice")
        seen.add(key)
    return problems


def _recovery_checks(trial: Trial) -> list[str]:
    problems = []
    modes = {spec.name: spec.mode for spec in trial.scenario.tools}
    for event, executed_before in trial.events:
        if not isinstance(event, Recovered):
            continue
        snapshot = event.snapshot
        if recover(snapshot) != recover(snapshot):
            problems.append(f"I11 recovery of {snapshot.run_id} v{snapshot.version} is not deterministic")
        batch = snapshot.open_batch
        for call in batch.calls if batch else ():
            if not isinstance(call.status, CallExecuting) or modes.get(call.tool) is RecoveryMode.REPLAY:
                continue
            if call.operation_id in trial.world.not_found_answered:
                continue
            later = [
                e for e in trial.world.executions[executed_before:] if e.operation_id == call.operation_id
            ]
            if later:
                problems.append(
                    f"I9 {call.operation_id} ({call.tool}, {modes.get(call.tool)}) ran again after "
                    f"recovery found it Executing{{{call.status.attempt}}}"
                )
    return problems


def _commands(store: Store, trial: Trial, logs: dict[str, list[ThreadCommit]]) -> list[str]:
    problems = []
    resumed = [
        event.data.get("digest")
        for log in logs.values()
        for commit in log
        for event in commit.events
        if event.type == RESUMED_EVENT
    ]
    for digest in trial.forged_in_inbox:
        if digest in resumed:
            problems.append("I14 a forged command from the inbox was committed")
    applied = [
        event.entry.body
        for event, _ in trial.events
        if isinstance(event, CommandSettled) and event.outcome == "applied"
    ]
    digests = collections.Counter(str(d) for d in resumed)
    if any(n > 1 for n in digests.values()):
        problems.append("I14 one command was committed twice")
    if sum(1 for body in applied if isinstance(body, dict) and body.get("type") == "resume") > len(resumed):
        problems.append("I14 an inbox resume was settled 'applied' without a resumed commit")
    return problems
