"""The bounded model checker (``proofs/model_check.py``) at a small bound, and against
planted kernel bugs it must report with a counterexample."""

from __future__ import annotations

import importlib
import json
import subprocess
import sys
from pathlib import Path

import attrs
import pytest

PROOFS = Path(__file__).resolve().parent.parent.parent / "proofs"
if str(PROOFS) not in sys.path:
    sys.path.append(str(PROOFS))  # the checker's modules are top-level scripts' siblings

import figures as proof_figures  # noqa: E402
import mc_config  # noqa: E402
import model_check  # noqa: E402
from runkernel.kernel.codec import commit_from_json  # noqa: E402
from runkernel.kernel.decide import execute_effect, settle  # noqa: E402
from runkernel.kernel.policies import Policies, RecoveryMode  # noqa: E402
from runkernel.kernel.protocol import ChildEnded, Decision  # noqa: E402
from runkernel.kernel.recover import RecoveryDecision, RecoveryRow  # noqa: E402
from runkernel.kernel.recover import recover as ORIGINAL_RECOVER  # noqa: E402
from runkernel.kernel.state import CallExecuting, RunSnapshot, ToolCall  # noqa: E402
from runkernel.specs.checker import Verdict, check_commits  # noqa: E402

# ``runkernel.kernel`` re-exports ``recover`` under the module's name: patch the module
recover_module = importlib.import_module("runkernel.kernel.recover")

#: One call, one crash, approval as the only gate wait: a few seconds at most.
SMALL = mc_config.PROFILES["tiny"]


def _executing_call(state: RunSnapshot) -> ToolCall | None:
    """The call in progress if it is Executing (what recovery's CALL_EXECUTING row sees)."""
    batch = state.open_batch
    call = batch.first_open_call() if batch is not None else None
    return call if call is not None and isinstance(call.status, CallExecuting) else None


def _replay_without_commit(state: RunSnapshot, policies: Policies = Policies()) -> RecoveryDecision:
    """Planted bug: recovery replays a call without first committing Executing{n+1}."""
    call = _executing_call(state)
    if call is not None and policies.for_tool(call.tool).recovery.mode is RecoveryMode.REPLAY:
        replay = execute_effect(call, call.status.attempt + 1)
        return RecoveryDecision(RecoveryRow.CALL_EXECUTING, Decision(state, (replay,)))
    return ORIGINAL_RECOVER(state, policies)


def test_small_bound_holds() -> None:
    result = model_check.check(SMALL)
    assert result.verdict == "ok", result.counterexample
    assert result.exit_code == 0
    assert result.states > 500
    assert result.transitions >= result.states - 1
    assert result.final_states > 0
    assert result.max_depth > 10
    assert any(point.startswith("before_write@") for point in result.crash_points)
    assert any(point.startswith("after_write_before_ack@") for point in result.crash_points)
    assert "after_tool_effect@call_result" in result.crash_points


def test_cap_is_not_a_proof() -> None:
    result = model_check.check(SMALL, max_states=50)
    assert result.verdict == "capped"
    assert result.exit_code == 2


def _assert_reported(result: model_check.Result, invariant: str) -> model_check.Counterexample:
    assert result.verdict == "violation"
    assert result.exit_code == 1
    cx = result.counterexample
    assert cx is not None
    assert cx.invariant == invariant, cx
    assert cx.trace and cx.choices
    assert all(line["trace"] == "runkernel/2" for line in cx.trace)
    # the committed log is a trace: the kernel's own checker accepts every line of it
    commits = [commit_from_json(line) for line in cx.trace]
    assert check_commits(commits).verdict is Verdict.LEGAL
    return cx


def test_replay_without_committing_executing_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    """Planted bug: recovery replays a call without first committing Executing{n+1} (I5)."""
    monkeypatch.setattr(recover_module, "recover", _replay_without_commit)
    cx = _assert_reported(model_check.check(SMALL), "I5")
    assert any(choice.startswith("crash ") for choice in cx.choices)


def test_reexecuting_an_indeterminate_call_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    """Planted bug: recovery replays a call whose tool's policy is indeterminate (I9)."""

    def broken(state: RunSnapshot, policies: Policies = Policies()) -> RecoveryDecision:
        call = _executing_call(state)
        batch = state.open_batch
        if call is not None and batch is not None:
            if policies.for_tool(call.tool).recovery.mode is RecoveryMode.INDETERMINATE:
                attempt = call.status.attempt + 1
                again = batch.replace_call(attrs.evolve(call, status=CallExecuting(attempt)))
                decision = settle(state, again, policies, follow_up=(execute_effect(call, attempt),))
                return RecoveryDecision(RecoveryRow.CALL_EXECUTING, decision)
        return ORIGINAL_RECOVER(state, policies)

    monkeypatch.setattr(recover_module, "recover", broken)
    cx = _assert_reported(model_check.check(SMALL), "I9")
    assert any("indeterminate" in choice for choice in cx.choices)


def test_cli_reports_and_writes_the_counterexample(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(recover_module, "recover", _replay_without_commit)
    out = tmp_path / "cx.jsonl"
    assert model_check.main(["--profile", "tiny", "--counterexample", str(out)]) == 1
    printed = capsys.readouterr().out
    assert "verdict: VIOLATION of I5" in printed
    assert "shortest counterexample" in printed and "states explored:" in printed
    lines = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert [line["version"] for line in lines] == list(range(1, len(lines) + 1))


def test_cli_says_a_capped_run_is_no_proof(capsys: pytest.CaptureFixture[str]) -> None:
    assert model_check.main(["--profile", "tiny", "--max-states", "50"]) == 2
    assert "NOT a proof" in capsys.readouterr().out


def test_cli_runs_as_a_script() -> None:
    done = subprocess.run(
        [sys.executable, str(PROOFS / "model_check.py"), "--profile", "tiny"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "verdict: OK" in done.stdout


def test_profiles_are_consistent() -> None:
    ci = mc_config.PROFILES["ci"]
    assert (ci.max_calls, ci.max_steps, ci.tool_steps, ci.max_crashes) == (2, 2, 1, 1)
    deep = mc_config.PROFILES["deep"]
    assert (deep.max_calls, deep.max_steps, deep.max_crashes) == (3, 2, 2)


#: The second CI bound: two concurrent delegations and one ordinary call.
DELEGATIONS = mc_config.PROFILES["delegations"]


def test_the_concurrent_delegation_bound_is_exhausted() -> None:
    result = model_check.check(DELEGATIONS)
    print(f"delegations bound: {result.states} states, {result.transitions} transitions, {result.final_states} final")
    assert result.verdict == "ok", result.counterexample
    assert result.states < DELEGATIONS.max_states  # exhausted within its own cap
    assert result.final_states > 0
    assert "child crash" in result.crash_points
    assert any("child_activation" in point for point in result.crash_points)
    # the figures the README quotes for this bound are this search's
    _, written = proof_figures.parse(proof_figures.RESULTS.read_text(encoding="utf-8"))
    assert (written["delegations.states"], written["delegations.transitions"], written["delegations.depth"]) == (
        f"{result.states:,}", f"{result.transitions:,}", f"{result.max_depth:,}"
    ), "proofs/RESULTS.md is stale: run python proofs/figures.py --run"


def test_a_delegation_result_that_is_not_its_childs_terminus_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    """Planted bug: the kernel completes a concurrent delegation with another value (I15)."""
    decide_module = importlib.import_module("runkernel.kernel.decide")
    original = decide_module._child_ended

    def broken(state: RunSnapshot, event: ChildEnded, policies: Policies) -> object:
        return original(state, attrs.evolve(event, terminus={"forged": True}), policies)

    monkeypatch.setattr(decide_module, "_child_ended", broken)
    _assert_reported(model_check.check(DELEGATIONS), "I15")
