"""The model checker's speedups keep its verdict: the kernel memo explores the same
graph, still catches a planted bug, and the search reports its frontier per depth and
stops as CAPPED (never OK) at a time or memory limit; bench/deep.py's report of it."""

from __future__ import annotations

import dataclasses
import importlib
import sys
from pathlib import Path

import pytest

PROOFS = Path(__file__).resolve().parent.parent.parent / "proofs"
if str(PROOFS) not in sys.path:
    sys.path.append(str(PROOFS))  # the checker's modules are top-level scripts' siblings

import mc_config  # noqa: E402
import model_check  # noqa: E402
from bench.deep import omission_probability, report  # noqa: E402
from runkernel.kernel.decide import execute_effect  # noqa: E402
from runkernel.kernel.policies import Policies, RecoveryMode  # noqa: E402
from runkernel.kernel.protocol import Decision  # noqa: E402
from runkernel.kernel.recover import RecoveryDecision, RecoveryRow  # noqa: E402
from runkernel.kernel.recover import recover as ORIGINAL_RECOVER  # noqa: E402
from runkernel.kernel.state import CallExecuting, RunSnapshot  # noqa: E402

recover_module = importlib.import_module("runkernel.kernel.recover")

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


def test_the_kernel_memo_explores_the_same_graph() -> None:
    plain = model_check.check(dataclasses.replace(TINY, memo_kernel=False))
    memo = model_check.check(dataclasses.replace(TINY, memo_kernel=True))
    assert plain.verdict == "ok"
    assert _shape(memo) == _shape(plain)
    assert memo.counters["kernel answers from the memo"] > 0
    assert "kernel answers from the memo" not in plain.counters


def _replay_without_commit(state: RunSnapshot, policies: Policies = Policies()) -> RecoveryDecision:
    """Planted bug: recovery replays a call without first committing Executing{n+1}."""
    batch = state.open_batch
    call = batch.first_open_call() if batch is not None else None
    if call is not None and isinstance(call.status, CallExecuting):
        if policies.for_tool(call.tool).recovery.mode is RecoveryMode.REPLAY:
            replay = execute_effect(call, call.status.attempt + 1)
            return RecoveryDecision(RecoveryRow.CALL_EXECUTING, Decision(state, (replay,)))
    return ORIGINAL_RECOVER(state, policies)


def test_a_planted_bug_is_caught_with_the_memo_on(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(recover_module, "recover", _replay_without_commit)
    plain = model_check.check(dataclasses.replace(TINY, memo_kernel=False))
    memo = model_check.check(dataclasses.replace(TINY, memo_kernel=True))
    assert memo.verdict == plain.verdict == "violation"
    assert memo.counterexample is not None and plain.counterexample is not None
    assert memo.counterexample.invariant == plain.counterexample.invariant == "I5"
    assert memo.counterexample.choices == plain.counterexample.choices


def test_the_levels_add_up_to_the_states() -> None:
    result = model_check.check(TINY)
    assert [lv.depth for lv in result.levels] == list(range(result.max_depth + 1))
    assert sum(lv.frontier for lv in result.levels) == result.states
    assert result.levels[-1].states == result.states
    assert result.peak_mib > 0


def test_a_time_limit_stops_the_search_as_capped() -> None:
    result = model_check.check(TINY, time_limit=0.0)
    assert result.verdict == "capped" and result.exit_code == 2
    assert "time limit" in result.stopped
    assert "NOT a proof" in model_check.summary(result, TINY)


def test_a_memory_limit_stops_the_search_as_capped() -> None:
    result = model_check.check(TINY, memory_limit=1.0)
    assert result.verdict == "capped"
    assert "memory limit" in result.stopped


def test_the_deep_report_carries_the_figures_and_the_frontier() -> None:
    result = model_check.check(dataclasses.replace(TINY, hash_compaction=True), max_states=300)
    text = report(dataclasses.asdict(result), "proofs/model_check.py --profile tiny --max-states 300")
    assert "CAPPED by the state cap (300): not exhausted, so NOT a proof" in text
    assert "| states | 300 |" in text
    assert f"| {result.max_depth} | {result.levels[-1].frontier:,} |" in text
    assert "probability a state was omitted | at most " in text
    exact = report(dataclasses.asdict(model_check.check(TINY)), "tiny")
    assert "exhausted" in exact and "exact (no hash compaction)" in exact


def test_the_omission_probability_is_the_birthday_bound() -> None:
    assert omission_probability(1) == 0.0
    assert omission_probability(2**32 + 1) == pytest.approx(0.5)
