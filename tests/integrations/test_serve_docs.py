"""docs/pydantic-ai.md's "Recovery at launch" does what it says: a Run of app ``support``
started and left behind (as a crash leaves it, unleased here), then ``launch.py`` as
printed, imported by a process that waits for the Run to end and exits (its ``atexit``
hook stops the embedded worker): the Run ends completed with the deps the factory made,
its trace legal, and no ``runkernel worker`` ran."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("pydantic_ai", reason="the pydantic-ai extra is not installed (pip install -e '.[pydantic-ai]')")

from docs_blocks import DOCS, blocks, run_by  # noqa: E402
from runkernel import check_trace, open_store  # noqa: E402
from runkernel.cli.entry import main  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]

WAIT = """
import time
import launch
from runkernel import open_store
store = open_store("sqlite:///support.db")
while store.list_runs()[0].state != "ended":
    time.sleep(0.05)
print(store.messages("ticket-launch")[-1].content)
"""


def test_serve_at_launch_finishes_a_run_left_behind(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (launch,) = run_by("pydantic-ai.md", "test_serve_docs.py")
    (module,) = [b for b in blocks(DOCS / "pydantic-ai.md") if b.title == "support_app.py"]
    (tmp_path / "support_app.py").write_text(module.code)
    (tmp_path / "launch.py").write_text(launch.code)
    monkeypatch.chdir(tmp_path)
    url = "sqlite:///support.db"
    assert main(["start", "--store", url, "--app", "support", "--thread", "ticket-launch", "Where is order 8?"]) == 0
    env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{tmp_path}"}
    done = subprocess.run([sys.executable, "-c", WAIT], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    print(done.stdout, done.stderr[-2000:])
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "Your order: order 7 of from the CRM has shipped."
    store = open_store(url)
    (summary,) = store.list_runs()
    finding = check_trace(store.commits("ticket-launch"))
    print(f"ticket-launch: {summary.state}, {finding.commits} commits, {finding.verdict.name}")
    assert summary.state == "ended" and summary.app == "support" and finding.verdict.name == "LEGAL"
