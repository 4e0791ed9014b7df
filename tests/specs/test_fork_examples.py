"""Forks of every legal example trace (tests/data/traces/legal: delegations, groups,
resumes, staged state, several Runs per Thread), at every version of every Thread: each
fork is refused by the rule or judged legal with all the traces, its source matched, and
so is the fork's next commit (what the kernel commits next for it: recovery's, or the
first open call allowed), so a fork's carried history (a delegation's child among it)
does not trip a later line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from runkernel.kernel.codec import commit_from_json
from runkernel.kernel.decide import decide
from runkernel.kernel.fork import ForkIds, ForkPoint, ForkRefusal, fork_commit, fork_point
from runkernel.kernel.policies import Policies
from runkernel.kernel.protocol import Allow, GateVerdict
from runkernel.kernel.recover import recover
from runkernel.kernel.rules import Rejection
from runkernel.kernel.state import CallRequested, ThreadCommit
from runkernel.kernel.validate import successor
from runkernel.specs import fork_judge
from runkernel.specs.checker import Verdict, check_commits
from runkernel.specs.trace_lines import parse_line

LEGAL = Path(__file__).resolve().parent.parent / "data" / "traces" / "legal"


def _next_commit(fork: ThreadCommit) -> ThreadCommit | None:
    """What the kernel commits next for the fork, if anything without an outside answer."""
    state = successor(None, fork)
    plan = recover(state, Policies())
    if plan.decision.commit is not None:
        return plan.decision.commit
    batch = state.open_batch
    first = batch.first_open_call() if batch is not None else None
    if first is None or not isinstance(first.status, CallRequested):
        return None
    decision = decide(state, GateVerdict(first.call_id, Allow()), Policies())
    return None if isinstance(decision, Rejection) else decision.commit


def test_a_fork_of_every_legal_example_at_every_version_is_legal_with_its_next_commit() -> None:
    forks = refused = followed = 0
    for path in sorted(LEGAL.glob("*.jsonl")):
        commits = [commit_from_json(parse_line(raw)) for raw in path.read_bytes().splitlines()]
        made: list[ThreadCommit] = []
        for thread in dict.fromkeys(c.thread_id for c in commits):
            own = [c for c in commits if c.thread_id == thread]
            for commit in own:
                point = fork_point(own, commit.run_id, commit.version)
                assert isinstance(point, ForkPoint), (path.name, point)
                tag = f"{path.stem}-{thread}-{commit.version}"
                batch = point.run.open_batch
                ids = ForkIds(f"fork-{tag}", f"run-{tag}", [f"op-{tag}-{i}" for i in range(len(batch.calls) if batch else 0)], f"tk-{tag}")
                fork = fork_commit(point, ids, abandon_open_calls=True)
                if isinstance(fork, ForkRefusal):
                    refused += 1
                    continue
                made.append(fork)
                following = _next_commit(fork)
                if following is not None:
                    made.append(following)
                    followed += 1
        forks += sum(1 for c in made if c.forked_from is not None)
        finding = check_commits(commits + made)
        assert finding.verdict is Verdict.LEGAL, (path.name, finding)
    print(f"{forks} forks of the legal examples judged legal with their sources, {followed} with a next commit, {refused} refused")
    assert forks > 100 and followed > 20


def test_the_first_pass_finds_a_fork_point_wherever_its_key_falls_in_the_scanned_blocks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A file is split into lines for fork points only when a block scan sees
    ``"forked_from"``; the key is found across a block boundary too (small blocks here,
    so every offset of the key against a boundary is tried)."""
    monkeypatch.setattr(fork_judge, "_SCAN_BLOCK", 32)
    fork_line = json.dumps({"forked_from": {"thread_id": "source", "version": 3}})
    path = tmp_path / "trace.jsonl"
    for padding in range(0, 70):
        path.write_text(json.dumps({"pad": "x" * padding}) + "\n" + fork_line + "\n")
        assert fork_judge.file_fork_points([path]) == {("source", 3)}, padding
    path.write_text("\n".join(json.dumps({"pad": "x" * n}) for n in range(200)) + "\n")
    assert fork_judge.file_fork_points([path]) == set()
