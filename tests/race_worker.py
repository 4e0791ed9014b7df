"""One worker process of the race test: ``python race_worker.py STORE ACKS REPORT ID LEASE``.

It drives the race app's Runs (holding at the points the race planned: ``held_points``)
until SIGTERM (once REPORT.ready exists), appending each commit it saw acknowledged to
ACKS (one unbuffered write per line, so a SIGKILL loses at most the line being
written) and, after a clean stop, its counts to REPORT.
"""

from __future__ import annotations

import json
import os
import signal
import sys

import attrs

from held_points import held_app
from race_app import app
from runkernel.adapters.drive.runtime import Acknowledged, RuntimeEvent
from runkernel.adapters.stores.sqlite import SqliteStore
from runkernel.adapters.worker.loop import Worker


def main(store_path: str, acks_path: str, report_path: str, worker_id: str, lease: str) -> int:
    acks = os.open(acks_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)

    def on_event(event: RuntimeEvent) -> None:
        if isinstance(event, Acknowledged):
            line = json.dumps([event.commit.thread_id, event.commit.version, worker_id]) + "\n"
            os.write(acks, line.encode())

    store = SqliteStore(store_path, create=False)
    worker = Worker(store, held_app(app), worker_id=worker_id, lease_duration=float(lease), poll_interval=0.05, on_event=on_event)
    signal.signal(signal.SIGTERM, lambda _signum, _frame: worker.shutdown())
    # from here a SIGTERM stops it cleanly: say so (before, it would just end the process)
    open(report_path + ".ready", "w").close()
    report = worker.run()
    with open(report_path, "w", encoding="utf-8") as out:
        json.dump(attrs.asdict(report), out)
    store.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:6]))
