"""docs/pydantic-ai.md does what it says: its blocks run in order in an empty directory
(``tests/proofs/test_docs.py`` runs them too; this test checks the results): the threaded
script prints what the page shows, the worker gives the CLI-started Run the deps its
factory makes, and every Thread's trace is legal."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("pydantic_ai", reason="the pydantic-ai extra is not installed (pip install -e '.[pydantic-ai]')")

from docs_blocks import DOCS, blocks, commands  # noqa: E402
from runkernel import check_trace, open_store  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
PAGE = DOCS / "pydantic-ai.md"


def test_the_pydantic_ai_page_runs_as_printed(tmp_path: Path) -> None:
    found = [block for block in blocks(PAGE) if block.run_by is None]  # the rest: another test's
    assert [(b.language, b.title) for b in found] == [
        ("python", "support_app.py"), ("python", None), ("text", None), ("bash", None)
    ]
    module, script, printed, shell = found
    (tmp_path / "support_app.py").write_text(module.code)
    bin_dir = Path(sys.executable).parent
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}",
           "PYTHONPATH": f"{ROOT}{os.pathsep}{tmp_path}"}
    done = subprocess.run([sys.executable, "-c", script.code], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=120)
    print(done.stdout)
    assert done.returncode == 0, done.stderr
    assert done.stdout == printed.code
    for command in commands(shell):
        ran = subprocess.run(["bash", "-c", command], cwd=tmp_path, env=env, capture_output=True, text=True,
                             timeout=120)
        print(f"$ {command}\n{ran.stdout.strip()}")
        assert ran.returncode == 0, f"{command!r} exited {ran.returncode}: {ran.stderr}"
    store = open_store(f"sqlite:///{tmp_path / 'support.db'}")
    last = store.messages("ticket-9")[-1].content
    assert f"The Run's last message is then `{last}`" in PAGE.read_text(encoding="utf-8")
    for thread in ["ticket-0", "ticket-1", "ticket-2", "ticket-3", "ticket-9"]:
        finding = check_trace(store.commits(thread))
        assert finding.verdict.name == "LEGAL", finding
    print(f"5 Threads LEGAL; ticket-9 ends with {last!r}")
