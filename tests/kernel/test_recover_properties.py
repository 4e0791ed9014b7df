"""Property tests of ``recover``, driven by the random host in ``kernel_driver.py`` (drawn
through ``strategies.py``): it is deterministic, settles an open batch before asking for
inference, and follows each tool's recovery policy for a call found Executing.

Run with the ``ci`` profile by default; ``HYPOTHESIS_PROFILE=deep`` explores more.
"""

from __future__ import annotations

import copy

from hypothesis import given

from driver_history import History
from runkernel.kernel.policies import Policies, RecoveryMode
from runkernel.kernel.protocol import (
    CancelChild,
    Commit,
    DeliverTerminus,
    Execute,
    QueryStatus,
    RequestInference,
)
from runkernel.kernel.recover import RecoveryRow, recover
from runkernel.kernel.state import (
    CallExecuting,
    CallIndeterminate,
    CallRequested,
    Ended,
    Running,
    RunSnapshot,
    is_terminal,
)
from runkernel.kernel.values import IndeterminateReason
from spec_assertions import assert_spec_edges, assert_spec_state
from strategies import histories, policies


# --- recovery ------------------------------------------------------------------------------


def check_recovery(state: RunSnapshot, policies: Policies) -> None:
    first = recover(state, policies)
    assert recover(copy.deepcopy(state), policies) == first, "recover is not deterministic"
    assert recover(state, policies) == first
    decision = first.decision
    assert_spec_state(decision.state)
    effects = decision.effects
    commits = [e.commit for e in effects if isinstance(e, Commit)]
    if isinstance(state.state, Ended):
        assert first.row is RecoveryRow.ENDED
        *cancels, last = effects
        assert last == DeliverTerminus(state.state.cause, redelivery=True)
        # the cancels its end owed to children that may still run, sent again
        assert all(isinstance(e, CancelChild) for e in cancels)
        return
    for effect in effects:
        if isinstance(effect, RequestInference):
            # the open batch is settled (finalized) before the model is asked again
            assert decision.state.open_batch is None, "inference requested with an open batch"
            assert isinstance(decision.state.state, Running)
    if commits:
        commit = commits[0]
        assert_spec_edges(state, commit)
        old, new = state.batch, commit.batch
        if old is not None and new is not None and old.batch_id == new.batch_id:
            for before, after in zip(old.calls, new.calls):
                if isinstance(before.status, CallExecuting):
                    assert not isinstance(after.status, CallRequested), "Executing turned Requested"
                if is_terminal(before.status):
                    assert after.status == before.status, "recovery changed a terminal call"
    open_batch = state.open_batch
    current = open_batch.first_open_call() if open_batch else None
    if current is not None and isinstance(current.status, CallExecuting):
        # the row for a call found Executing{n}: the tool's fixed policy
        attempt = current.status.attempt
        # the policy committed with the batch decides, not the recovering worker's (I11)
        policy = current.policy_or(policies.for_tool(current.tool)).recovery
        after_call = None
        if commits and commits[0].batch is not None:
            after_call = commits[0].batch.call(current.call_id)
        if policy.mode is RecoveryMode.REPLAY and attempt < policy.max_attempts:
            assert after_call is not None and after_call.status == CallExecuting(attempt + 1)
            assert any(isinstance(e, Execute) and e.attempt == attempt + 1 for e in effects)
        elif policy.mode is RecoveryMode.RECONNECT:
            assert not commits
            assert QueryStatus(current.call_id, current.tool, current.operation_id, attempt) in effects
        else:
            reason = (
                IndeterminateReason.ATTEMPTS_EXHAUSTED
                if policy.mode is RecoveryMode.REPLAY
                else IndeterminateReason.OUTCOME_UNKNOWN
            )
            assert after_call is not None
            assert after_call.status == CallIndeterminate(attempt, reason)
            assert not any(isinstance(e, Execute) for e in effects)
    committed = {c.call_id: c.policy_or(policies.for_tool(c.tool)) for c in state.batch.calls} if state.batch else {}
    for effect in effects:
        if isinstance(effect, Execute):
            # I5 and I9: a restart starts an executor only to replay, after committing it
            assert committed[effect.call_id].recovery.mode is RecoveryMode.REPLAY
            started = decision.state.batch.call(effect.call_id) if decision.state.batch else None
            assert started is not None and started.status == CallExecuting(effect.attempt)
            assert commits, "an executor started without a commit"
        if isinstance(effect, QueryStatus):
            assert committed[effect.call_id].recovery.mode is RecoveryMode.RECONNECT
            assert not commits, "asking a reconnect tool for its status commits nothing"


@given(histories(), policies())
def test_recover_is_deterministic_and_settles_batches_first(history: History, other: Policies) -> None:
    seen: set[int] = set()  # snapshots hold JSON values: not hashable, deduplicated by identity
    for step in history.steps:
        for state in (step.before, step.decision.state if step.decision else None):
            if state is None or id(state) in seen:
                continue
            seen.add(id(state))
            check_recovery(state, step.policies)
            check_recovery(state, other)
