"""A DBOS process of the worker group: ``python -m bench.dbos_worker URL APP SETUP|WORK
[ID]``. The unit is a workflow of two steps (each returns a small dict, like the
runkernel side's ``lookup`` calls), enqueued by the group on the queue ``bench``.

``SETUP`` launches DBOS once (its migrations make the system tables) and registers the
queue with a per-process limit, ``WORKER_CONCURRENCY`` workflows at a time, polled every
``POLLING_SECONDS``: without a limit the first process to poll takes every queued unit.
``WORK`` launches DBOS as executor ``ID`` (distinct, or a process launching later would
recover the workflows another one runs) and works the queue until SIGTERM; its first
workflow waits for the group's go (``bench.unit_probe``).
"""

from __future__ import annotations

import importlib
import signal
import sys
import threading
from typing import Any

from bench import unit_probe

QUEUE = "bench"
WORKFLOW = "bench_two_steps"
WORKER_CONCURRENCY = 4
"""Workflows one process runs at once: its threads overlap one unit's database waits
with another's work, and the queue still splits between processes."""
POLLING_SECONDS = 0.01
"""How often a process looks for queued units (DBOS's default is 1 s)."""


def _launch(url: str, app: str, executor: str) -> Any:
    unit_probe.arm()
    dbos = importlib.import_module("dbos")  # the bench extra: typed Any where it is missing

    def plain_lookup(n: int) -> dict[str, Any]:
        return {"result": n}

    lookup = dbos.DBOS.step()(plain_lookup)

    def two_steps(prompt: str) -> str:
        unit_probe.barrier()
        lookup(0)
        lookup(1)
        return "done"

    dbos.DBOS.workflow(name=WORKFLOW)(two_steps)
    config: Any = {"name": app, "system_database_url": url, "executor_id": executor, "log_level": "WARNING"}
    dbos.DBOS(config=config)
    dbos.DBOS.launch()
    return dbos.DBOS


def main(argv: list[str]) -> int:
    url, app, mode = argv[:3]
    if mode == "SETUP":
        runtime = _launch(url, app, "bench-setup")
        runtime.register_queue(QUEUE, worker_concurrency=WORKER_CONCURRENCY, polling_interval_sec=POLLING_SECONDS)
        runtime.destroy()
        return 0
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda signum, frame: stop.set())
    runtime = _launch(url, app, argv[3])
    while not stop.wait(0.2):
        pass
    runtime.destroy()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
