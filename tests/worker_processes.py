"""``runkernel worker`` processes for the kill tests: started with a lease and a poll,
and the counts read back from the report line each prints when it exits."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import IO, Any

ROOT = Path(__file__).resolve().parent.parent


def spawn_worker(
    url: str, app: str, env: dict[str, str], worker_id: str, *, lease: float, poll: float, concurrency: int = 1
) -> subprocess.Popen[str]:
    """A long-running worker of ``app`` over ``url`` with ``concurrency`` slots (one by
    default: a point planned per process holds its only drive), its report on stdout; its stderr
    goes to a scratch file that ``stop_workers`` shows if the worker hangs, with every
    thread's stack (``PYTHONFAULTHANDLER``: a SIGABRT dumps them)."""
    stderr = tempfile.TemporaryFile(mode="w+")
    worker = subprocess.Popen(
        [sys.executable, "-m", "runkernel.cli", "worker", "--store", url, "--app", app,
         "--lease", str(lease), "--poll", str(poll), "--worker-id", worker_id, "--concurrency", str(concurrency)],
        cwd=ROOT, env={**env, "PYTHONFAULTHANDLER": "1"}, stdout=subprocess.PIPE, stderr=stderr, text=True,
    )
    _STDERR[worker.pid] = stderr
    return worker


#: each spawned worker's stderr file, by pid (Popen keeps no handle on a file it was given)
_STDERR: dict[int, IO[str]] = {}


def stop_workers(workers: Sequence[subprocess.Popen[Any]], *, timeout: float = 60) -> list[str]:
    """SIGTERM every worker, then collect each one's report lines. A worker that has
    not exited ``timeout`` seconds after its SIGTERM fails the test with its stderr,
    which ends with the stack of each of its threads."""
    for worker in workers:
        worker.send_signal(signal.SIGTERM)
    reports: list[str] = []
    for worker in workers:
        try:
            out, _ = worker.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.kill(worker.pid, signal.SIGABRT)
            worker.communicate(timeout=timeout)
            raise AssertionError(f"worker pid {worker.pid} still ran {timeout} s after SIGTERM:\n{_stderr(worker)}") from None
        assert isinstance(out, str)
        reports += [line for line in out.splitlines() if line.startswith("worker ")]
    return reports


def _stderr(worker: subprocess.Popen[Any]) -> str:
    stderr = _STDERR.get(worker.pid)
    if stderr is None:
        return "(no stderr)"
    stderr.seek(0)
    return stderr.read()[-20_000:]


def in_flight_peak(report: str) -> int:
    """The most Runs a worker had in flight at once, from its report line (``..., at most
    4 in flight, ...``)."""
    for part in report.strip().split(", "):
        words = part.split()
        if words[:2] == ["at", "most"] and words[3:] == ["in", "flight"]:
            return int(words[2])
    return 0


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


def leases_held(store: Any, worker: subprocess.Popen[Any]) -> int:
    """The Runs the worker process ``worker`` (started with ``--worker-id``) holds a valid
    lease on now, by the store's clock: its Runs in flight, counted from outside (a killed
    worker reports nothing)."""
    args = [str(arg) for arg in worker.args]  # type: ignore[union-attr]
    worker_id = args[args.index("--worker-id") + 1]
    statuses = store.lease_statuses([s.run_id for s in store.list_runs()])
    return sum(
        1 for s in statuses.values()
        if s.lease is not None and s.lease.worker_id == worker_id and not s.released and s.lease.expires_at > s.now
    )
