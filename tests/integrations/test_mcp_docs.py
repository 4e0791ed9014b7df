"""docs/mcp.md does what it says: its server file is saved, its Pydantic AI and OpenAI
Agents SDK scripts (the SDK's in process, then served) run in an empty directory (the
SDK's start the server over stdio) and print what the page shows, and every Thread's
trace is legal."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("mcp.server.mcpserver", reason="the mcp extra is not installed (pip install -e '.[mcp]')")
pytest.importorskip("pydantic_ai.mcp", reason="Pydantic AI's MCP client is not installed (pip install -e '.[pydantic-ai,mcp]')")
pytest.importorskip("pydantic_ai", reason="the pydantic-ai extra is not installed (pip install -e '.[pydantic-ai]')")
pytest.importorskip("agents", reason="the openai-agents extra is not installed (pip install -e '.[openai-agents]')")

from docs_blocks import DOCS, blocks, run_by  # noqa: E402
from runkernel import check_trace, open_store  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
PAGE = "mcp.md"


def test_the_mcp_page_runs_as_printed(tmp_path: Path) -> None:
    ran = run_by(PAGE, "test_mcp_docs.py")
    assert [(b.language, b.title) for b in ran] == [("python", "inventory_server.py")] + [("python", None)] * 3
    shown = [b.code for b in blocks(DOCS / PAGE) if b.language == "text"]
    server, pydantic_ai, openai_agents, served = ran
    (tmp_path / "inventory_server.py").write_text(server.code)
    env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{tmp_path}"}
    for script, printed in zip([pydantic_ai, openai_agents, served], shown, strict=True):
        done = subprocess.run([sys.executable, "-c", script.code], cwd=tmp_path, env=env, capture_output=True, text=True,
                              timeout=120)
        print(done.stdout)
        assert done.returncode == 0, done.stderr
        assert done.stdout == printed
    store = open_store(f"sqlite:///{tmp_path / 'shop.db'}")
    for thread in ["order-1", "order-2", "order-3"]:
        finding = check_trace(store.commits(thread))
        print(f"{thread}: {finding.commits} commits, verdict {finding.verdict.name}")
        assert finding.verdict.name == "LEGAL", finding
