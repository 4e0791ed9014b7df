"""Recovery at launch (issue 35, item 1): a Pydantic AI app and an OpenAI Agents app, each
a single process that calls ``serve()`` at launch and runs no ``runkernel worker``, is
SIGKILLed inside a tool of a Run it drove in process; started again, its embedded worker
takes the Run over once the dead process's lease ran out and finishes it, on SQLite and
PostgreSQL. Counts are asserted (one take-over, the replay tool started once per epoch,
a legal trace); how long it took is printed beside the lease and the poll, never asserted.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from agent_world import ROOT
from postgres_support import postgres_url
from runkernel import EndCauseKind, open_store
from runkernel.kernel import Ended
from runkernel.specs.checker import Verdict, check_commits
from serving_process import APP, LEASE, POLL

__all__ = ["postgres_url"]

HANG_GUARD = 240.0  # seconds: only so that a broken test fails instead of hanging CI


def _process(framework: str, url: str, record: Path, mode: str, crash: str = "") -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "CRASH": crash, "PYTHONPATH": os.pathsep.join([str(ROOT / "tests"), str(ROOT)])}
    argv = [sys.executable, str(ROOT / "tests" / "serving_process.py"), framework, url, str(record), mode]
    return subprocess.run(argv, env=env, capture_output=True, text=True, timeout=HANG_GUARD)


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
@pytest.mark.parametrize("framework", ["pydantic_ai", "openai_agents"])
def test_an_app_killed_mid_tool_finishes_its_run_when_it_starts_again(
    framework: str, kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    pytest.importorskip("pydantic_ai" if framework == "pydantic_ai" else "agents")
    url = f"sqlite:///{tmp_path / 'app.db'}" if kind == "sqlite" else request.getfixturevalue("postgres_url")
    open_store(url).close()  # the schema, as a deployment creates it once
    record = tmp_path / "record.jsonl"
    crashed = _process(framework, url, record, "crash", crash="tool:search:1")
    assert crashed.returncode == -9, crashed.stderr
    store = open_store(url)
    (summary,) = store.list_runs()
    held = store.current_lease(summary.run_id)
    assert summary.state == "running" and held is not None, "killed holding its lease"
    # the lease is the in-process drive's own: the embedded worker registered beside it
    # never took a Run that was being driven in process
    embedded = {w.worker_id for w in store.workers() if w.app == APP}
    assert len(embedded) == 1 and held.worker_id not in embedded, (held, embedded)
    restarted = _process(framework, url, record, "restart")
    assert restarted.returncode == 0, restarted.stderr
    report = json.loads((tmp_path / "report.json").read_text())
    snapshot = store.run(summary.run_id)
    starts = [json.loads(line) for line in record.read_text().splitlines()]
    legal = check_commits(list(store.commits(summary.thread_id))).verdict is Verdict.LEGAL
    final = [m.content for m in store.messages(summary.thread_id)][-1]
    store.close()
    print(
        f"\nserve() recovery ({framework}, {kind}): killed in tool search, restarted process: "
        f"{report['drives']} drives, {report['takeovers']} take-overs, {report['failures']} failures, "
        f"Run ended after {report['seconds']:.1f} s from launch (lease {LEASE} s, poll {POLL} s); "
        f"search starts (attempt, epoch): {[(s['attempt'], s['lease_epoch']) for s in starts]}; legal trace: {legal}"
    )
    assert snapshot is not None and isinstance(snapshot.state, Ended)
    assert snapshot.state.cause.kind is EndCauseKind.COMPLETED and final == "found" and legal and summary.app == APP
    assert report["takeovers"] == 1 and report["failures"] == 0
    # the replay tool ran once under the dead process's lease and once under the take-over
    assert [(s["attempt"], s["lease_epoch"]) for s in starts] == [(1, 1), (2, 2)]
    assert len({s["operation_id"] for s in starts}) == 1 and all(s["durable"] for s in starts)
