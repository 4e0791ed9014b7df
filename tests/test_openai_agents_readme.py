"""The README's "Durable OpenAI Agents SDK agents" example runs exactly as printed, in a
fresh interpreter and an empty directory, offline."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("agents", reason="the openai-agents extra is not installed (pip install -e '.[openai-agents]')")

from runkernel import check_trace, open_store  # noqa: E402

README = Path(__file__).resolve().parent.parent / "README.md"
MARKER = "<!-- openai-agents example:"


def example() -> str:
    section = re.search(r"^## Durable OpenAI Agents SDK agents\n\n(.*?)(?=^## |\Z)", README.read_text(), re.S | re.M)
    assert section is not None, "the README has a section 'Durable OpenAI Agents SDK agents'"
    body = section.group(1)
    assert body.startswith(MARKER)
    blocks = re.findall(r"^```python\n(.*?)^```$", body, re.S | re.M)
    assert len(blocks) == 1
    return str(blocks[0])


def test_the_readme_openai_agents_example_runs_as_printed(tmp_path: Path) -> None:
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
