"""The README's "Durable Pydantic AI agents" example runs exactly as printed, in a fresh
interpreter and an empty directory."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("pydantic_ai", reason="the pydantic-ai extra is not installed (pip install -e '.[pydantic-ai]')")

from runkernel import check_trace, open_store  # noqa: E402

README = Path(__file__).resolve().parent.parent / "README.md"
MARKER = "<!-- pydantic-ai example:"


def example() -> str:
    section = re.search(r"^## Durable Pydantic AI agents\n\n(.*?)(?=^## |\Z)", README.read_text(), re.S | re.M)
    assert section is not None, "the README has a section 'Durable Pydantic AI agents'"
    body = section.group(1)
    assert body.startswith(MARKER)
    blocks = re.findall(r"^```python\n(.*?)^```$", body, re.S | re.M)
    assert len(blocks) == 1
    return str(blocks[0])


def test_the_readme_pydantic_ai_example_runs_as_printed(tmp_path: Path) -> None:
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
