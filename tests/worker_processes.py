"""``runkernel worker`` processes for the kill tests: started with a lease and a poll,
and the counts read back from the report line each prints when it exits."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def spawn_worker(
    url: str, app: str, env: dict[str, str], worker_id: str, *, lease: float, poll: float
) -> subprocess.Popen[str]:
    """A long-running worker of ``app`` over ``url``, its report on stdout."""
    return subprocess.Popen(
        [sys.executable, "-m", "runkernel.cli", "worker", "--store", url, "--app", app,
         "--lease", str(lease), "--poll", str(poll), "--worker-id", worker_id],
        cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
    )


def report_figure(report: str, plural: str) -> int:
    """A count from a worker's report line (``..., 1 drive, 3 conflicts, 0 leases lost``),
    named in the plural; the line says the singular for 1."""
    first, _, rest = plural.partition(" ")
    singular = " ".join(filter(None, (first.removesuffix("s"), rest)))
    for part in report.strip().split(", "):
        count, _, name = part.rpartition(": ")[2].partition(" ")
        if name in (plural, singular) and count.isdigit():
            return int(count)
    return 0

