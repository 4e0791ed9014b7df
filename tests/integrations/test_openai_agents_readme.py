"""The example of docs/openai-agents.md runs exactly as printed, in a fresh interpreter
and an empty directory, offline."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("agents", reason="the openai-agents extra is not installed (pip install -e '.[openai-agents]')")

from docs_blocks import run_by  # noqa: E402
from runkernel import check_trace, open_store  # noqa: E402

def example() -> str:
    found = run_by("openai-agents.md", "test_openai_agents_readme.py")
    assert len(found) == 1 and found[0].language == "python" and found[0].title is None
    return found[0].code


def test_the_openai_agents_example_runs_as_printed(tmp_path: Path) -> None:
    env = {**os.environ, "OPENAI_API_KEY": ""}  # nothing may reach a real provider
    done = subprocess.run([sys.executable, "-c", example()], cwd=tmp_path, capture_output=True, text=True, timeout=120, env=env)
    print(done.stdout)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "approve? [('send_email', '{\"to\":\"me\"}')]",
        "Done: results are in your inbox.",
    ]
    store = open_store(f"sqlite:///{tmp_path / 'agent.db'}")
    finding = check_trace(store.commits("inbox-1"))
    print(f"inbox-1: {finding.commits} commits, {finding.verdict.name}")
    assert finding.verdict.name == "LEGAL", finding
