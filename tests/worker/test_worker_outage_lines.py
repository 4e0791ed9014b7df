"""Issue 36, item 5: one outage line per outage. An outage ends as soon as the store
answers a poll again, not after the whole pass of drives that follows: a store that
answers, then fails again in a later drive of that pass (a second restart) is two
outages, each begun and ended once; they were one, ended only after a clean pass (five
restarts in a row were reported as one 150-second outage, 55 s after the last)."""

from __future__ import annotations

from runkernel.adapters.drive.ports import ToolRegistry
from runkernel.adapters.stores.contract import Lease, StoreUnavailable
from runkernel.adapters.stores.memory import MemoryStore
from runkernel.adapters.worker.apps import RuntimeApp
from runkernel.adapters.worker.loop import Worker
from runkernel.adapters.worker.outage import OutageBegan, OutageEnded, OutageEvent
from test_worker import OneCall, Recording, _activate


class DownAtLeases(MemoryStore):
    """A store that is down when the lease takes numbered in ``down`` are asked (a
    restart landing at the start of those drives), and answers everything else."""

    def __init__(self, down: set[int]) -> None:
        super().__init__()
        self.down = down
        self.takes = 0

    def acquire_lease(self, run_id: str, worker_id: str, duration: float) -> Lease:
        self.takes += 1
        if self.takes in self.down:
            raise StoreUnavailable(f"server restarting (lease take {self.takes})")
        return super().acquire_lease(run_id, worker_id, duration)


def test_a_store_that_answers_a_poll_ends_its_outage_and_a_later_failure_is_a_new_one() -> None:
    store = DownAtLeases(down={2, 4})
    for run_id in ("r0", "r1", "r2"):
        _activate(store, run_id)
    heard: list[OutageEvent] = []
    worker = Worker(store, RuntimeApp("test", OneCall(), ToolRegistry({"work": Recording()})), worker_id="w1",
                    on_outage=heard.append)
    report = worker.run_once()
    kinds = [type(event).__name__ for event in heard]
    print(f"two failures a pass apart: {kinds}; {report.outages} outages")
    assert [type(e) for e in heard] == [OutageBegan, OutageEnded, OutageBegan, OutageEnded]
    assert report.outages == 2
    assert all(isinstance(store.run(r), object) for r in ("r0", "r1", "r2"))
