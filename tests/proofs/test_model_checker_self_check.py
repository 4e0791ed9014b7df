"""The search skips ``decide``'s self-check where the model's own judging of the answer
implies it (``mc_runtime.self_check_implied``): the same graph as the reference search
that runs it on every answer, and a kernel that emits an illegal commit is still
reported as the kernel's error, on the same shortest path."""

from __future__ import annotations

import dataclasses
import importlib
import sys
from pathlib import Path

import attrs
import pytest

PROOFS = Path(__file__).resolve().parent.parent.parent / "proofs"
if str(PROOFS) not in sys.path:
    sys.path.append(str(PROOFS))  # the checker's modules are top-level scripts' siblings

import mc_config  # noqa: E402
import model_check  # noqa: E402
from mc_runtime import self_check_implied  # noqa: E402
from runkernel.kernel.decide import decide as ORIGINAL_DECIDE  # noqa: E402
from runkernel.kernel.history import History  # noqa: E402
from runkernel.kernel.planning import check_decision  # noqa: E402
from runkernel.kernel.policies import Policies  # noqa: E402
from runkernel.kernel.protocol import Activate, Block, Commit, Decision, GateVerdict, Input  # noqa: E402
from runkernel.kernel.rules import Rejection  # noqa: E402
from runkernel.kernel.state import EndCause, Ended, Message, RunSnapshot  # noqa: E402
from runkernel.kernel.values import EndCauseKind, Role  # noqa: E402

decide_module = importlib.import_module("runkernel.kernel.decide")
TINY = mc_config.PROFILES["tiny"]


def _shape(result: model_check.Result) -> tuple[object, ...]:
    return (
        result.verdict,
        result.states,
        result.transitions,
        result.max_depth,
        result.final_states,
        result.crash_points,
        [(lv.depth, lv.frontier, lv.states, lv.transitions) for lv in result.levels],
    )


@pytest.mark.parametrize("memo", [False, True])
def test_skipping_the_implied_self_check_explores_the_same_graph(memo: bool) -> None:
    reference = model_check.check(model_check.plain(TINY))
    fast = model_check.check(dataclasses.replace(TINY, memo_kernel=memo, kernel_self_check=False))
    assert reference.verdict == "ok"
    assert _shape(fast) == _shape(reference)


def _block_on_a_later_step(
    state: RunSnapshot | None, event: Input, policies: Policies, history: History, *, self_check: bool = False
) -> Decision | Rejection:
    """Planted bug: a blocked call's commit claims a step two ahead (validate_commit refuses it)."""
    outcome = ORIGINAL_DECIDE(state, event, policies, history)
    if isinstance(event, GateVerdict) and isinstance(event.verdict, Block) and isinstance(outcome, Decision):
        effects = tuple(
            Commit(attrs.evolve(e.commit, step=e.commit.step + 2)) if isinstance(e, Commit) else e
            for e in outcome.effects
        )
        outcome = Decision(outcome.state, effects)
    if self_check and state is not None and isinstance(outcome, Decision):
        return check_decision(state, history, outcome)
    return outcome


def test_an_illegal_commit_is_the_kernels_error_with_or_without_the_skip(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(decide_module, "decide", _block_on_a_later_step)
    reference = model_check.check(model_check.plain(TINY))
    fast = model_check.check(dataclasses.replace(TINY, kernel_self_check=False))
    assert reference.counterexample is not None and fast.counterexample is not None
    assert fast.verdict == reference.verdict == "violation"
    assert fast.counterexample.invariant == reference.counterexample.invariant == "kernel error"
    assert fast.counterexample.choices == reference.counterexample.choices
    assert fast.counterexample.choices[-1] == "gate block"


def test_the_self_check_is_not_implied_after_an_ended_snapshot() -> None:
    """There the kernel's head (its Run still active) and the store's (no active Run) differ."""
    activated = ORIGINAL_DECIDE(None, Activate("t", "r", 0, (Message(Role.USER, "hi"),)), Policies())
    assert isinstance(activated, Decision)
    commit = next(e for e in activated.effects if isinstance(e, Commit))
    running = activated.state
    ended = attrs.evolve(running, state=Ended(EndCause(EndCauseKind.CANCELLED)))
    ending = Commit(attrs.evolve(commit.commit, disposition=ended.state))
    assert self_check_implied(None, activated)
    assert self_check_implied(running, Decision(running, (commit,)))
    assert self_check_implied(ended, Decision(ended, ()))
    assert not self_check_implied(ended, Decision(ended, (commit,)))
    assert not self_check_implied(running, Decision(running, (ending, commit)))
