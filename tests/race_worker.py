"""One worker process of the race tests: ``python race_worker.py STORE ACKS REPORT ID LEASE [SLOTS]``
(one slot unless SLOTS says more; STORE a SQLite path or a store URL).

It drives the race app's Runs (holding at the points the race planned: ``held_points``)
until SIGTERM (once REPORT.ready exists; SIGUSR1 stalls its store calls and writes
REPORT.stalled once they do, SIGUSR2 lets them go), appending each commit it saw acknowledged to
ACKS (one unbuffered write per line, so a SIGKILL loses at most the line being
written) and, after a clean stop, its counts to REPORT.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from typing import Any, cast

import attrs

from held_points import held_app
from race_app import app
from runkernel.adapters.drive.runtime import Acknowledged, RuntimeEvent
from runkernel.adapters.stores.contract import Store
from runkernel.adapters.stores.registry import open_store
from runkernel.adapters.stores.sqlite import SqliteStore
from runkernel.adapters.worker.loop import Worker


class Pausable:
    """The worker's store, whose every call waits while ``stalled`` says so: SIGUSR1
    stalls the whole worker at its next store call (never inside a transaction, where a
    stopped process would block every other worker of the store), SIGUSR2 lets it go.
    Its slots' stores, reopened, look at the same flag. The handlers only flip a list's
    item (an Event set inside a signal handler can deadlock the thread it interrupts), so
    a stalled call looks again every few milliseconds."""

    def __init__(self, store: Store, stalled: list[bool]) -> None:
        self.store, self.stalled = store, stalled

    def reopen(self) -> Store:
        return cast(Store, Pausable(self.store.reopen(), self.stalled))

    def __getattr__(self, name: str) -> Any:
        found = getattr(self.store, name)
        if not callable(found):
            return found

        def call(*args: Any, **kwargs: Any) -> Any:
            while self.stalled[0]:
                time.sleep(0.005)
            return found(*args, **kwargs)

        return call


def main(store_path: str, acks_path: str, report_path: str, worker_id: str, lease: str, slots: str = "1") -> int:
    acks = os.open(acks_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)

    def on_event(event: RuntimeEvent) -> None:
        if isinstance(event, Acknowledged):
            line = json.dumps([event.commit.thread_id, event.commit.version, worker_id]) + "\n"
            os.write(acks, line.encode())

    store = open_store(store_path, create=False) if "://" in store_path else SqliteStore(store_path, create=False)
    stalled = [False]

    def stall(_signum: int, _frame: object) -> None:
        stalled[0] = True
        open(report_path + ".stalled", "w").close()  # the test lets a held point go only then

    signal.signal(signal.SIGUSR1, stall)
    signal.signal(signal.SIGUSR2, lambda _signum, _frame: stalled.__setitem__(0, False))
    worker = Worker(
        cast(Store, Pausable(store, stalled)),
        held_app(app),
        worker_id=worker_id,
        lease_duration=float(lease),
        poll_interval=0.05,
        on_event=on_event,
        concurrency=int(slots),
    )
    signal.signal(signal.SIGTERM, lambda _signum, _frame: worker.shutdown())
    # from here a SIGTERM stops it cleanly: say so (before, it would just end the process)
    open(report_path + ".ready", "w").close()
    report = worker.run()
    with open(report_path, "w", encoding="utf-8") as out:
        json.dump(attrs.asdict(report), out)
    store.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:7]))
