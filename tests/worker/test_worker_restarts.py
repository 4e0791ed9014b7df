"""Issue 36, item 5: one outage line per outage. A PostgreSQL cluster of the test's own is
restarted five times in a row under one ``runkernel worker`` of SLOTS slots, with SLOTS
Runs started after each restart (several in flight at once: the worker's peak is
asserted): each restart is one outage, begun once and ended once, before the next
restart, and every Run ends."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from own_postgres import OwnCluster
from postgres_support import with_schema
from test_worker_rides_out import BEGAN, ENDED, SLOTS, _ended, _env, _store_with_runs, _wait_until, _Worker
from worker_processes import in_flight_peak

RESTARTS = 5


@pytest.fixture(scope="module")
def cluster() -> Iterator[OwnCluster]:
    pytest.importorskip("psycopg_pool", reason="the postgres extra (psycopg, psycopg-pool) is not installed")
    own = OwnCluster()
    try:
        own.start()
        yield own
    finally:
        own.close()


def test_five_restarts_in_a_row_are_five_outages_each_reported_once(cluster: OwnCluster, tmp_path: Path) -> None:
    url = with_schema(cluster.dsn(connect_timeout=2), "restarts")
    _store_with_runs(url, SLOTS)
    worker = _Worker(url, _env(tmp_path), "w-restarts")
    seconds: list[float] = []
    try:
        _wait_until(lambda: _ended(url) == SLOTS, "the first Runs never ended", [worker])
        for restart in range(1, RESTARTS + 1):
            cluster.stop_immediately()
            _wait_until(lambda: worker.said(BEGAN) == restart, f"restart {restart}: no outage line", [worker])
            began = time.monotonic()
            cluster.start()
            _wait_until(lambda: worker.said(ENDED) == restart, f"restart {restart}: no end line", [worker])
            seconds.append(time.monotonic() - began)
            for more in range(SLOTS):
                _store_with_more(url, restart * SLOTS + more)
            _wait_until(lambda: _ended(url) == (restart + 1) * SLOTS, f"restart {restart}: the new Runs never ended",
                        [worker])
    finally:
        if not cluster.running:
            cluster.start()
        code, report = worker.stop()
    print(f"\n{RESTARTS} restarts: exit {code}; {report}")
    print("  seconds from each server start to the worker's end line: " + ", ".join(f"{s:.1f}" for s in seconds))
    for line in worker.lines:
        print(f"  {line}")
    assert code == 0
    assert in_flight_peak(report) > 1, "the worker never had several Runs in flight"
    assert worker.said(BEGAN) == RESTARTS and worker.said(ENDED) == RESTARTS
    outages = [line for line in worker.lines if line.startswith((BEGAN, ENDED))]
    assert outages == [line for pair in zip(outages[::2], outages[1::2]) for line in pair]
    assert all(a.startswith(BEGAN) and b.startswith(ENDED) for a, b in zip(outages[::2], outages[1::2]))


def _store_with_more(url: str, index: int) -> None:
    from runkernel.adapters.stores.postgres import PostgresStore
    from runkernel.kernel.decide import decide
    from runkernel.kernel.protocol import Activate
    from runkernel.kernel.rules import Rejection
    from runkernel.kernel.state import Message
    from runkernel.kernel.values import Role

    store = PostgresStore(url)
    try:
        activation = Activate(f"t-more{index}", f"r-more{index}", 0, (Message(Role.USER, "book"),), "race")
        decision = decide(None, activation)
        assert not isinstance(decision, Rejection) and decision.commit is not None
        store.append(decision.commit)
    finally:
        store.close()
