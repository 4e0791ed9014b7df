"""docs/pydantic-ai.md runs as printed, in an empty directory with the repository on the
import path: its first python block saved as ``support_app.py``, its second run beside
it (it prints what the page says it prints), then its sh block's commands one by one
(the worker gives the CLI-started Run the deps its factory makes)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("pydantic_ai", reason="the pydantic-ai extra is not installed (pip install -e '.[pydantic-ai]')")

from runkernel import check_trace, open_store  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "pydantic-ai.md"


def blocks(kind: str) -> list[str]:
    return re.findall(rf"^```{kind}\n(.*?)^```$", PAGE.read_text(encoding="utf-8"), re.S | re.M)


def test_the_pydantic_ai_page_runs_as_printed(tmp_path: Path) -> None:
    module, script = blocks("python")
    printed = blocks("text")[0]
    (commands,) = blocks("sh")
    assert module.startswith("# support_app.py\n")
    (tmp_path / "support_app.py").write_text(module)
    bin_dir = Path(sys.executable).parent
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}",
           "PYTHONPATH": f"{ROOT}{os.pathsep}{tmp_path}"}
    done = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=120)
    print(done.stdout)
    assert done.returncode == 0, done.stderr
    assert done.stdout == printed
    for command in commands.splitlines():
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
