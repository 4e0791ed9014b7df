"""The model checker's `groups` bound (issue 34): a group of three concurrent ordinary
calls, one per recovery policy, answered in any order, one crash anywhere (between any
two starts and any two ends), an operator cancel while the group runs."""

from __future__ import annotations

import sys
from pathlib import Path

PROOFS = Path(__file__).resolve().parent.parent.parent / "proofs"
if str(PROOFS) not in sys.path:
    sys.path.append(str(PROOFS))  # the checker's modules are top-level scripts' siblings

import figures as proof_figures  # noqa: E402
import mc_config  # noqa: E402
import model_check  # noqa: E402

GROUPS = mc_config.PROFILES["groups"]


def test_the_groups_bound_is_exhausted() -> None:
    result = model_check.check(GROUPS)
    print(f"groups bound: {result.states} states, {result.transitions} transitions, {result.final_states} final")
    assert result.verdict == "ok", result.counterexample
    assert result.states < GROUPS.max_states  # exhausted within its own cap
    assert result.final_states > 0
    # the world answered a member while its siblings still ran, and a crash fell between starts
    assert result.counters["states with several group calls running"] > 0
    assert result.crash_points["after_tool_effect@group_member_start"] > 0
    assert result.crash_points["before_write@call_retry"] > 0  # a member retried while its siblings ran
    # the figures the README quotes for this bound are this search's
    _, written = proof_figures.parse(proof_figures.RESULTS.read_text(encoding="utf-8"))
    assert (written["groups.states"], written["groups.transitions"], written["groups.depth"]) == (
        f"{result.states:,}", f"{result.transitions:,}", f"{result.max_depth:,}"
    ), "proofs/RESULTS.md is stale: run python proofs/figures.py --run"


def test_the_groups_bound_declares_one_concurrent_tool_per_policy() -> None:
    policies = GROUPS.policies()
    modes = {policies.for_tool(tool).recovery.mode for tool in mc_config.GROUP_TOOLS}
    assert len(modes) == 3
    assert all(policies.for_tool(tool).concurrent for tool in mc_config.GROUP_TOOLS)
