"""One worker process of the fencing test: ``python fencing_worker.py STORE ID LEASE [SLOTS]``.

It drives the fencing app's Runs (holding at the points the test planned:
``held_points``) until SIGTERM, which it handles once ``ID.ready`` exists beside STORE,
or until the drive in which it was held at a point and let go is over: a stalled worker
has done what the test watches (its late start) and takes no new work. With SLOTS (one
by default) Runs in flight, it shuts down as soon as a point let it go: the late start
is already under way, and every other drive finishes its commit in flight.
"""

from __future__ import annotations

import signal
import sys
import threading
import time
from pathlib import Path

import held_points
from fencing_app import app
from runkernel.adapters.stores.sqlite import SqliteStore
from runkernel.adapters.worker.loop import Worker


class StallOnceWorker(Worker):
    def drive(self, run_id: str) -> None:
        super().drive(run_id)
        if held_points.let_go:
            self.shutdown()


def _shut_down_once_let_go(worker: Worker) -> None:
    while not held_points.let_go:
        time.sleep(held_points.POLL)
    worker.shutdown()


def main(store_path: str, worker_id: str, lease: str, slots: str = "1") -> int:
    store = SqliteStore(store_path, create=False)
    worker = StallOnceWorker(
        store,
        held_points.held_app(app),
        worker_id=worker_id,
        lease_duration=float(lease),
        poll_interval=0.05,
        concurrency=int(slots),
    )
    if worker.concurrency > 1:  # its slots drive with serial workers of their own
        threading.Thread(target=_shut_down_once_let_go, args=(worker,), daemon=True).start()
    signal.signal(signal.SIGTERM, lambda _signum, _frame: worker.shutdown())
    (Path(store_path).parent / f"{worker_id}.ready").touch()
    worker.run()
    store.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:5]))
