"""The first example of docs/pydantic-ai.md (approvals and recovery) runs exactly as
printed, in a fresh interpreter and an empty directory."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("pydantic_ai", reason="the pydantic-ai extra is not installed (pip install -e '.[pydantic-ai]')")

from docs_blocks import run_by  # noqa: E402
from runkernel import check_trace, open_store  # noqa: E402

def example() -> str:
    found = run_by("pydantic-ai.md", "test_pydantic_ai_readme.py")
    assert len(found) == 1 and found[0].language == "python" and found[0].title is None
    return found[0].code


def test_the_pydantic_ai_example_runs_as_printed(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-c", example()], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    print(done.stdout)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "approve? [('send_email', {'to': 'me'})]",
        "Done: results are in your inbox.",
    ]
    assert (tmp_path / "agent.db").exists(), "the Run lives in the SQLite file the example names"
    store = open_store(f"sqlite:///{tmp_path / 'agent.db'}")
    finding = check_trace(store.commits("inbox-1"))
    print(f"inbox-1: {finding.commits} commits, {finding.verdict.name}")
    assert finding.verdict.name == "LEGAL", finding
