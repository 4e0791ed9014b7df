"""Deliberately broken contracts: the harness must fail on each of them.

``tests/proofs/test_crosshair_harness.py`` runs ``proofs/crosshair_check.py`` on this file and
checks that every planted problem is reported, so a harness that passes anything
(CrossHair's own exit code 0, say) cannot go unnoticed. ``planted_fixed_exhausted`` is
the control: the same contract without the bug, which must pass.
"""

from __future__ import annotations

import attrs
from crosshair.util import PathTimeout

from contract_builders import decode_snapshot
from decision_properties import failed_properties
from runkernel.kernel.policies import Policies, RecoveryMode, ToolPolicy, ToolRecoveryPolicy
from runkernel.kernel.protocol import Commit, Decision
from runkernel.kernel.recover import recover
from runkernel.kernel.state import CallExecuting, CallRequested


def planted_exhausted(attempt: int, max_attempts: int) -> bool:
    """Replay recovery gives up once attempt n reaches the policy's maximum.
    PLANTED BUG: ``>`` instead of ``>=`` (off by one).

    pre: 1 <= attempt <= 4
    pre: 1 <= max_attempts <= 3
    post: __return__ == (attempt >= max_attempts)
    """
    return attempt > max_attempts


def planted_fixed_exhausted(attempt: int, max_attempts: int) -> bool:
    """The control: planted_exhausted without the bug. Must be confirmed.

    pre: 1 <= attempt <= 4
    pre: 1 <= max_attempts <= 3
    post: __return__ == (attempt >= max_attempts)
    """
    return attempt >= max_attempts


def planted_recover_regresses(two: bool, s0: int, a0: int, v0: int, s1: int, a1: int, v1: int) -> tuple[str, ...]:
    """The real recover and the real decision properties of
    proofs/decision_properties.py, with a PLANTED BUG after recover: a call found
    Executing{2} is committed back to Requested. CrossHair has to reach that one status
    through the decoders.

    post: __return__ == ()
    """
    snapshot = decode_snapshot(two, s0, a0, v0, s1, a1, v1)
    policy = ToolPolicy(ToolRecoveryPolicy(RecoveryMode.REPLAY, 5))
    decision = recover(snapshot, Policies(tools={"tool0": policy, "tool1": policy})).decision
    return failed_properties(snapshot, _regress(decision))


def _regress(decision: Decision) -> Decision:
    effects = []
    for effect in decision.effects:
        batch = effect.commit.batch if isinstance(effect, Commit) else None
        if isinstance(effect, Commit) and batch is not None:
            for call in batch.calls:
                if call.status == CallExecuting(3):  # the replay of attempt 2
                    batch = batch.replace_call(attrs.evolve(call, status=CallRequested()))
            effect = Commit(attrs.evolve(effect.commit, batch=batch))
        effects.append(effect)
    return Decision(decision.state, tuple(effects))


def planted_unsat(n: int) -> int:
    """PLANTED: contradictory bounds; no input meets the precondition, so nothing is
    checked (CrossHair's `check` still exits 0).

    pre: 0 <= n <= 2
    pre: n > 5
    post: __return__ == n
    """
    return n


def planted_never_finishes(n: int) -> int:
    """PLANTED: no path ever reaches the postcondition, because every path runs out of
    its per-path time (a slow or endless kernel call would do the same). It raises
    CrossHair's own PathTimeout so the test is quick and deterministic. CrossHair
    reports "Not confirmed." and `crosshair check` exits 0, though nothing was checked.

    post: __return__ == 0
    """
    if n >= 0:
        raise PathTimeout
    raise PathTimeout


def planted_bad_syntax(n: int) -> int:
    """PLANTED: a postcondition that is not a Python expression; CrossHair reports a
    syntax error instead of checking anything.

    post: __return__ ==
    """
    return n
