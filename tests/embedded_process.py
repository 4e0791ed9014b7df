"""One application process of the embedded-worker restart test:
``python embedded_process.py STORE_URL DIRECTORY MODE``.

It runs an embedded worker (``Worker(...).start()``, 4 slots) over the Runs of the app
``embedded``, as an application would at launch. In MODE ``hang`` its tool says it
started (a file per Run in DIRECTORY) and never returns: the test SIGKILLs the process
with Runs in flight. In MODE ``finish`` the tool returns at once; once every Run ended
the process calls ``stop()`` (what its shutdown hook would) and writes its report.
"""

from __future__ import annotations

import json
import sys
import threading
import time
from pathlib import Path

import attrs

from runkernel.adapters.drive.actions import CallRequest, RunCall
from runkernel.adapters.drive.ports import InferenceRequest, ModelReply, Returned, StatusReply, ToolRegistry, ToolReply
from runkernel.adapters.stores.registry import open_store
from runkernel.adapters.worker.apps import RuntimeApp
from runkernel.adapters.worker.loop import Worker
from runkernel.kernel.policies import ToolPolicy
from runkernel.kernel.values import EndCauseKind

LEASE = 1.0
POLL = 0.1
SLOTS = 4


class OneCall:
    def infer(self, request: InferenceRequest) -> ModelReply:
        if request.step == 1:
            return ModelReply("working", (CallRequest("work", {}),))
        return ModelReply("done", end=EndCauseKind.COMPLETED)


class Work:
    policy = ToolPolicy.replay()

    def __init__(self, directory: Path, hang: bool) -> None:
        self.directory, self.hang = directory, hang

    def run(self, call: RunCall) -> ToolReply:
        (self.directory / f"started-{call.run_id}-{call.lease_epoch}").touch()
        if self.hang:
            threading.Event().wait()  # until the test kills the process
        return Returned({"ok": True})

    def status(self, operation_id: str, lease_epoch: int | None) -> StatusReply:
        raise AssertionError("a replay tool is never asked its status")


def main(url: str, directory: str, mode: str) -> int:
    where = Path(directory)
    store = open_store(url, create=False)
    app = RuntimeApp("embedded", OneCall(), ToolRegistry({"work": Work(where, hang=mode == "hang")}))
    worker = Worker(store, app, worker_id=f"app-{mode}", concurrency=SLOTS, lease_duration=LEASE, poll_interval=POLL)
    began = time.monotonic()
    worker.start()
    if mode == "hang":
        threading.Event().wait()
    while any(s.state != "ended" for s in store.list_runs()):
        time.sleep(POLL)
    report = worker.stop()
    took = time.monotonic() - began
    (where / "report.json").write_text(json.dumps({**attrs.asdict(report), "seconds": took}))
    store.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:4]))
