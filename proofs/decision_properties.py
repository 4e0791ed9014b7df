"""The properties of a kernel decision, shared by the ``decide`` and ``recover``
contracts (``contracts_decide_recover.py``) and the planted ones
(``planted_contracts.py``). Each returns whether it holds; ``failed_properties`` names
those that do not, so one exploration serves every property (see
``contract_builders.py``, "Rules the contracts keep").
"""

from __future__ import annotations

from collections.abc import Sequence

from contract_builders import head_of, history_of
from runkernel.kernel.policies import Policies, RecoveryMode
from runkernel.kernel.protocol import Commit, Decision, Execute, RequestInference
from runkernel.kernel.state import (
    CallExecuting,
    CallRequested,
    Running,
    RunSnapshot,
    ThreadCommit,
    ToolCall,
    is_terminal,
)
from runkernel.kernel.validate import NO_TICKETS_SEEN, Accepted, validate_commit


# --- properties of a decision (decide and recover) ---------------------------------------


def commits_of(effects: Sequence[object]) -> list[ThreadCommit]:
    return [effect.commit for effect in effects if isinstance(effect, Commit)]


def commits_chain_accepted(before: RunSnapshot, decision: Decision) -> bool:
    """Every commit of ``decision`` is accepted by validate_commit, one after the other,
    and leads to the decision's state (no commit: the state is unchanged). The history
    before is the one ``contract_builders.snapshot_of`` describes, and grows by each
    accepted commit's keys."""
    snapshot, history = before, history_of(before)
    for commit in commits_of(decision.effects):
        verdict = validate_commit(head_of(snapshot), snapshot, commit, history, ticket_seen=NO_TICKETS_SEEN)
        if not isinstance(verdict, Accepted):
            return False
        snapshot, history = verdict.run, history.plus(verdict.keys)
    return snapshot == decision.state


def same_batch_pairs(before: RunSnapshot, commit: ThreadCommit) -> list[tuple[ToolCall, ToolCall]]:
    """(committed call, the same call in ``commit``) for the snapshot's batch."""
    if before.batch is None or commit.batch is None:
        return []
    if commit.batch.batch_id != before.batch.batch_id:
        return []
    return list(zip(before.batch.calls, commit.batch.calls))


def terminal_calls_kept(before: RunSnapshot, decision: Decision) -> bool:
    """I7: a committed terminal status (and its result) never changes."""
    return all(
        new.status == old.status
        for commit in commits_of(decision.effects)
        for old, new in same_batch_pairs(before, commit)
        if is_terminal(old.status)
    )


def attempts_never_decrease(before: RunSnapshot, decision: Decision) -> bool:
    return all(
        new.status.attempt >= old.status.attempt
        for commit in commits_of(decision.effects)
        for old, new in same_batch_pairs(before, commit)
    )


def executing_never_requested(before: RunSnapshot, decision: Decision) -> bool:
    return not any(
        isinstance(old.status, CallExecuting) and isinstance(new.status, CallRequested)
        for commit in commits_of(decision.effects)
        for old, new in same_batch_pairs(before, commit)
    )


def inference_only_without_open_batch(before: RunSnapshot, decision: Decision) -> bool:
    """I8: at every RequestInference effect the state committed so far is Running with
    no open batch."""
    open_batch = before.open_batch
    running = isinstance(before.state, Running)
    for effect in decision.effects:
        if isinstance(effect, Commit):
            batch = effect.commit.batch
            open_batch = batch if batch is not None and batch.is_open else None
            running = isinstance(effect.commit.disposition, Running)
        if isinstance(effect, RequestInference) and (open_batch is not None or not running):
            return False
    return True


def no_restart_unless_replay(before: RunSnapshot, policies: Policies, decision: Decision) -> bool:
    """I9: recovery never starts the executor again for a call it finds Executing
    unless that tool's policy is replay."""
    if before.batch is None:
        return True
    for effect in decision.effects:
        if isinstance(effect, Execute):
            call = before.batch.call(effect.call_id)
            if call is not None and isinstance(call.status, CallExecuting):
                if policies.for_tool(call.tool).recovery.mode is not RecoveryMode.REPLAY:
                    return False
    return True


def failed_properties(before: RunSnapshot, decision: Decision) -> tuple[str, ...]:
    """The names of the decision properties that do not hold."""
    checks = (
        ("commits_accepted_by_validate_commit", commits_chain_accepted(before, decision)),
        ("attempts_never_decrease", attempts_never_decrease(before, decision)),
        ("terminal_results_never_change", terminal_calls_kept(before, decision)),
        ("executing_never_back_to_requested", executing_never_requested(before, decision)),
        ("inference_only_without_open_batch", inference_only_without_open_batch(before, decision)),
    )
    return tuple(name for name, holds in checks if not holds)
