"""The worker walk-through (docs/how-to/worker.md) runs as printed, from a clean directory with the
repository on the import path (as from a fresh clone's root): the ticket id that
``inspect`` prints is the only substitution."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

from docs_blocks import run_by

ROOT = Path(__file__).resolve().parents[2]


def walkthrough_commands() -> list[str]:
    found = run_by("how-to/worker.md", "test_walkthrough.py")
    assert len(found) == 1, "docs/how-to/worker.md hands this test its one walk-through block"
    return [line for line in found[0].code.splitlines() if line.strip()]


def test_the_walkthrough_takes_a_run_to_ended_as_printed(tmp_path: Path) -> None:
    commands = walkthrough_commands()
    assert [c.split()[1] for c in commands] == [
        "start", "worker", "inspect", "resume", "worker", "runs", "export", "check-trace",
    ]
    bin_dir = Path(sys.executable).parent
    env = {
        **os.environ,
        "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}",
        "PYTHONPATH": str(ROOT),
    }
    env.pop("RUNKERNEL_DEMO_LEDGER", None)
    ticket: str | None = None
    outputs: list[str] = []
    for command in commands:
        if "TICKET" in command:
            assert ticket is not None, "inspect printed no ticket before the resume"
            command = command.replace("TICKET", ticket)
        done = subprocess.run(
            ["bash", "-c", command], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120
        )
        assert done.returncode == 0, f"{command!r} exited {done.returncode}: {done.stderr}"
        outputs.append(done.stdout)
        found = re.search(r"ticket (\S+)  wait=approval", done.stdout)
        if found:
            ticket = found.group(1)
        print(f"$ {command}\n{done.stdout.strip()}")
    assert outputs[0].strip() == "run-demo"
    assert re.search(r"^run-demo\s+t1\s+ended\s", outputs[5], re.M), outputs[5]
    assert "legal: " in outputs[7]
    lines = [json.loads(line) for line in (tmp_path / "t1.jsonl").read_text().splitlines()]
    assert lines[0]["app"] == "demo" and lines[-1]["disposition"]["state"] == "ended"
    assert lines[-1]["disposition"]["cause"]["kind"] == "completed"
    assert (tmp_path / "demo-ledger.db").exists(), "the tools kept no downstream record"
