"""One application process of the recovery-at-launch test of the integrations:
``python serving_process.py FRAMEWORK STORE RECORD MODE`` (FRAMEWORK ``pydantic_ai`` or
``openai_agents``).

It is a single-process app as its docs show it: at launch it calls ``serve()`` (the
embedded worker of its one app, ``served``), and no ``runkernel worker`` runs anywhere.
In MODE ``crash`` it then starts a Run of the ``replay_crash`` script in process, whose
``search`` tool SIGKILLs the process mid-tool (``CRASH=tool:search:1``, after its
downstream record). In MODE ``restart`` it only serves: once every Run is Ended it calls
``stop()`` (what its shutdown hook would) and writes its worker report to ``report.json``
beside the record.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from pathlib import Path
from collections.abc import Callable, Coroutine
from typing import Any

import attrs

from runkernel import Worker, open_store

APP = "served"
LEASE = 2.0
POLL = 0.1
SCRIPT = "replay_crash"


def _launch(framework: str, url: str, record: str) -> tuple[Worker, Callable[[], Coroutine[Any, Any, Any]]]:
    """The app at launch: ``serve()`` called, and how it starts a Run in process."""
    if framework == "pydantic_ai":
        from pydantic_ai_app import build as build_pai

        pai, capability = build_pai(url, record, SCRIPT, app=APP, lease_duration=LEASE)
        return capability.serve(pai, poll_interval=POLL), lambda: pai.run("go", conversation_id=f"thread-{SCRIPT}")
    from openai_agents_app import build as build_oa

    oa, runner = build_oa(url, record, SCRIPT, app=APP, lease_duration=LEASE)
    return runner.serve(oa, poll_interval=POLL), lambda: runner.run(oa, "go", thread_id=f"thread-{SCRIPT}")


def main(framework: str, url: str, record: str, mode: str) -> int:
    worker, start = _launch(framework, url, record)
    began = time.monotonic()
    if mode == "crash":
        asyncio.run(start())  # the tool kills this process
        raise AssertionError("the crash point was never reached")
    store = open_store(url, create=False)
    while not store.list_runs() or any(s.state != "ended" for s in store.list_runs()):
        time.sleep(POLL)
    report = worker.stop()
    store.close()
    took = time.monotonic() - began
    (Path(record).parent / "report.json").write_text(json.dumps({**attrs.asdict(report), "seconds": took}))
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:5]))
