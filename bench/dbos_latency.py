"""A DBOS process of the latency group: ``python -m bench.dbos_latency URL APP SLEEP
SETUP SLOTS`` or ``... WORK ID``. The unit is a workflow of three steps, each waiting
``SLEEP`` seconds (a model call, a tool call, a model call: the runkernel side's Run),
enqueued by the group on the queue ``latency``.

``SETUP`` launches DBOS once (its migrations make the system tables) and registers the
queue with ``worker_concurrency=SLOTS`` (runkernel's slots) polled every
``POLLING_SECONDS``; ``WORK`` launches DBOS as executor ``ID`` and works the queue until
SIGTERM; its first workflow waits for the group's go (``bench.unit_probe``).
"""

from __future__ import annotations

import importlib
import signal
import sys
import threading
import time
from typing import Any

from bench import subject, unit_probe

QUEUE = "latency"
WORKFLOW = "bench_three_sleeps"
POLLING_SECONDS = 0.05
"""How often the process looks for queued units (DBOS's default is 1 s); the runkernel
worker polls as often (``--poll``)."""


def _launch(url: str, app: str, sleep: float, executor: str) -> Any:
    unit_probe.arm()
    dbos = importlib.import_module("dbos")  # the bench extra: typed Any where it is missing

    def plain_model(step: int) -> dict[str, Any]:
        time.sleep(sleep)
        return {"step": step, "calls": [subject.tool_arguments(0)] if step == 1 else []}

    def plain_tool(n: int) -> dict[str, Any]:
        time.sleep(sleep)
        return {"result": subject.tool_result(n)}

    model = dbos.DBOS.step()(plain_model)
    tool = dbos.DBOS.step()(plain_tool)

    def three_sleeps(prompt: str) -> str:
        unit_probe.barrier()
        model(1)
        tool(0)
        model(2)
        return subject.FINAL_TEXT

    dbos.DBOS.workflow(name=WORKFLOW)(three_sleeps)
    config: Any = {"name": app, "system_database_url": url, "executor_id": executor, "log_level": "WARNING"}
    dbos.DBOS(config=config)
    dbos.DBOS.launch()
    return dbos.DBOS


def main(argv: list[str]) -> int:
    url, app, sleep, mode = argv[0], argv[1], float(argv[2]), argv[3]
    if mode == "SETUP":
        runtime = _launch(url, app, sleep, "bench-setup")
        runtime.register_queue(QUEUE, worker_concurrency=int(argv[4]), polling_interval_sec=POLLING_SECONDS)
        runtime.destroy()
        return 0
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda signum, frame: stop.set())
    runtime = _launch(url, app, sleep, argv[4])
    while not stop.wait(0.2):
        pass
    runtime.destroy()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
