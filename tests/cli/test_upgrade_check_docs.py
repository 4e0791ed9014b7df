"""The upgrade check's section of the deploy how-to (docs/how-to/deploy-new-code.md,
"Checking an upgrade") runs as printed, from a clean directory with the repository on
the import path, and prints what the page shows: the only difference allowed is the
call id the worker mints."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from docs_blocks import DOCS, blocks, run_by

ROOT = Path(__file__).resolve().parents[2]
PAGE = "how-to/deploy-new-code.md"
CALL_ID = re.compile(r"call_[0-9a-f]{32}")


def _shown_after(block_number: int) -> str:
    """The first ``text`` block after block ``block_number`` of the page."""
    return next(b.code for b in blocks(DOCS / PAGE) if b.number > block_number and b.language == "text")


def test_the_upgrade_check_page_runs_and_prints_what_it_shows(tmp_path: Path) -> None:
    [saved] = [b for b in blocks(DOCS / PAGE) if b.title == "demo_v2.py"]
    (tmp_path / "demo_v2.py").write_text(saved.code, encoding="utf-8")
    commands, accepting = run_by(PAGE, "test_upgrade_check_docs.py")
    lines = [line for line in commands.code.splitlines() if line.strip()]
    assert [line.split()[1] for line in lines] == ["start", "worker", "upgrade-check", "upgrade-check"]
    bin_dir = Path(sys.executable).parent
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}", "PYTHONPATH": f"{ROOT}{os.pathsep}."}
    env.pop("RUNKERNEL_DEMO_LEDGER", None)
    printed = []
    for line in lines:
        done = subprocess.run(["bash", "-c", line], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, f"{line!r} exited {done.returncode}: {done.stderr}"
        print(f"$ {line}\n{done.stdout}{done.stderr}")
        printed.append(done.stdout)
    [call_id] = set(CALL_ID.findall(printed[2]))
    shown = _shown_after(commands.number)
    assert CALL_ID.sub("CALL", printed[2] + printed[3]) == CALL_ID.sub("CALL", shown)
    assert call_id in printed[3]
    accepts = [line for line in accepting.code.splitlines() if line.strip()]
    assert [line.split()[-1] for line in accepts] == ["--accept", '$?"']
    done = subprocess.run(["bash", "-c", accepts[0]], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    print(f"$ {accepts[0]}\n{done.stdout}{done.stderr}")
    assert (done.returncode, done.stderr) == (0, "")
    assert done.stdout.startswith(printed[2]) and done.stdout[len(printed[2]):].startswith("accepted: ")
    done = subprocess.run(["bash", "-c", accepts[1]], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    print(f"$ {accepts[1]}\n{done.stdout}{done.stderr}")
    assert done.stdout == printed[3]  # the same table, then "exit 1"; nothing accepted
    assert done.stderr.startswith(
        "runkernel upgrade-check: --accept refused: 1 live run(s) of app 'demo' cannot be continued by version "
    ) and done.stderr.endswith("; nothing recorded\n")
