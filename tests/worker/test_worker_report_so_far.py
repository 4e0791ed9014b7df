"""A worker's figures while it runs (Workers and leases: what an operator sees): with
slots, ``report`` gets the slots' counts and the in-flight peak only when ``run()``
returns; ``report_so_far()`` has them at any moment, and its last figures are the
report's. Counts, never durations."""

from __future__ import annotations

import threading

import attrs

from runkernel.adapters.stores.memory import MemoryStore
from runkernel.adapters.worker.loop import Worker
from test_slots import HANG, Gathering, _activate, _app, _ended


def test_the_figures_of_the_drives_in_flight_are_there_before_run_returns() -> None:
    store, release = MemoryStore(), threading.Event()
    tool = Gathering(release=release)
    for n in range(3):
        _activate(store, f"r{n}")
    worker = Worker(store, _app(tool), worker_id="w1", concurrency=3, poll_interval=0.05)
    thread = threading.Thread(target=worker.run)
    thread.start()
    try:
        for _ in range(int(HANG / 0.01)):
            if tool.running == 3:
                break
            threading.Event().wait(0.01)  # the next look, not a wait for anything in particular
        assert tool.running == 3, f"only {tool.running} of 3 slots reached their tool"
        during, kept = worker.report_so_far(), attrs.evolve(worker.report)
    finally:
        release.set()
        for _ in range(int(HANG / 0.01)):
            if all(_ended(store, f"r{n}") for n in range(3)):
                break
            threading.Event().wait(0.01)
        worker.shutdown()
        thread.join(HANG)
    assert not thread.is_alive()
    last = worker.report_so_far()
    print(f"while 3 drives waited on their tools: {during}; the report then: {kept}; at the end: {worker.report}")
    assert during.drives == 3 and during.in_flight_peak == 3 and during.commits >= 3  # each Run's call, committed before its tool
    assert kept.drives == 0 and kept.in_flight_peak == 0, "the report already had the slots' counts"
    assert worker.report.drives == 3 and worker.report.commits > during.commits
    assert last == worker.report, "the figures after run() returned are not the report's (a slot counted twice?)"


def test_a_serial_workers_figures_are_its_report() -> None:
    store = MemoryStore()
    _activate(store, "r0")
    worker = Worker(store, _app(Gathering()), worker_id="w1", concurrency=1)
    worker.run_once()
    assert worker.report_so_far() == worker.report and worker.report.drives == 1
