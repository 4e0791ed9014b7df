"""Workers ride out their database (Workers and leases, W6).

- A PostgreSQL cluster of the test's own is stopped with ``-m immediate`` under 4
  ``runkernel worker`` processes driving 100 Runs, while one of them holds a tool's
  result not yet committed (a planned point: the restart lands mid-drive at any load).
  It stays stopped until every worker has printed its outage line (read from their
  stderr), then starts again: every Run ends, none lost or written twice, no reconnect
  or indeterminate operation started twice, no worker exits, each worker printed one
  line when the outage began and one when it ended, and nothing else (no pool warnings).
- A worker started while its server is down waits, with one line, and drives once the
  server is up.
- A SQLite lock held longer than the busy timeout is one outage, ridden out.

Every precondition is reached by construction: a held point, a worker's own line, a
lock held until the worker said it met it. The waits in between are looks at a
condition, bounded by a hang guard far above the expected time.
"""

from __future__ import annotations

import os
import queue
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

from held_points import POLL, HeldPoints
from own_postgres import OwnCluster
from postgres_support import with_schema
from runkernel.cli.entry import main
from runkernel.kernel.decide import decide
from runkernel.kernel.protocol import Activate
from runkernel.kernel.rules import Rejection
from runkernel.kernel.state import Ended, Message
from runkernel.kernel.values import Role
from worker_processes import in_flight_peak, report_figure

ROOT = Path(__file__).resolve().parent.parent.parent
WORKERS = 4
RUNS = 100
#: slots per worker: Runs in flight in each worker while the server restarts
SLOTS = 4
HANG_GUARD = 300.0  # seconds: only so that a broken test fails instead of hanging CI
BEGAN = "runkernel worker: store unavailable: "
ENDED = "runkernel worker: store answers again after "


@pytest.fixture(scope="module")
def cluster() -> Iterator[OwnCluster]:
    pytest.importorskip("psycopg_pool", reason="the postgres extra (psycopg, psycopg-pool) is not installed")
    own = OwnCluster()
    try:
        own.start()
        yield own
    finally:
        own.close()


def _store_with_runs(url: str, runs: int) -> None:
    from runkernel.adapters.stores.postgres import PostgresStore
    from runkernel.adapters.stores.postgres.schema import init_postgres

    init_postgres(url)
    store = PostgresStore(url)
    try:
        for index in range(runs):
            activation = Activate(f"t{index}", f"r{index}", 0, (Message(Role.USER, "book"),), "race")
            decision = decide(None, activation)
            assert not isinstance(decision, Rejection) and decision.commit is not None
            store.append(decision.commit)
    finally:
        store.close()


class _Worker:
    """A ``runkernel worker`` process, its stderr read line by line as it comes."""

    def __init__(self, url: str, env: dict[str, str], name: str, *, lease: float = 2.0) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "runkernel.cli", "worker", "--store", url, "--app", "ride_out_app:app",
             "--lease", str(lease), "--poll", "0.1", "--worker-id", name, "--concurrency", str(SLOTS)],
            cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )
        self.lines: list[str] = []
        self.arrived: queue.Queue[str] = queue.Queue()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.process.stderr is not None
        for line in self.process.stderr:
            self.lines.append(line.rstrip("\n"))
            self.arrived.put(line)

    def said(self, prefix: str) -> int:
        return sum(1 for line in list(self.lines) if line.startswith(prefix))

    def stop(self) -> tuple[int, str]:
        """SIGTERM; the exit code and the report line."""
        self.process.send_signal(signal.SIGTERM)
        out, _ = self.process.communicate(timeout=120)
        self._reader.join(timeout=10)
        report = next((line for line in out.splitlines() if line.startswith("worker ")), "")
        return self.process.returncode, report


def _wait_until(condition: object, what: str, workers: Sequence[_Worker] = ()) -> None:
    """Look at ``condition`` until it holds; a worker of ``workers`` that exits fails at once."""
    began = time.monotonic()
    assert callable(condition)
    while not condition():
        exited = [w.process.returncode for w in workers if w.process.poll() is not None]
        assert not exited, f"{what}: a worker exited ({exited}): {[line for w in workers for line in w.lines][-3:]}"
        assert time.monotonic() - began < HANG_GUARD, f"hang guard: {what}"
        time.sleep(POLL)  # the next look at the condition, not a guess at a duration


def _env(tmp_path: Path, points: HeldPoints | None = None) -> dict[str, str]:
    env = dict(os.environ, RUNKERNEL_DEMO_LEDGER=str(tmp_path / "ledger.db"), RUNKERNEL_DEMO_TOOL_SECONDS="0.005",
               PYTHONPATH=f"{ROOT}{os.pathsep}{ROOT / 'tests'}")
    if points is not None:
        env.update(points.env())
    return env


def _ended(url: str) -> int:
    from runkernel.adapters.stores.postgres import PostgresStore

    store = PostgresStore(url)
    try:
        return sum(1 for s in store.list_runs() if s.state == "ended")
    finally:
        store.close()


def test_four_workers_ride_out_a_database_restart(
    cluster: OwnCluster, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from runkernel.adapters.stores.postgres import PostgresStore

    url = with_schema(cluster.dsn(connect_timeout=3), "ride_restart")
    _store_with_runs(url, RUNS)
    # the 30th lookup holds after its work, its result not committed, until let go
    points = HeldPoints(tmp_path / "points", ["lookup:after:30"])
    env = _env(tmp_path, points)
    began = time.monotonic()
    workers = [_Worker(url, env, f"w{n}") for n in range(WORKERS)]
    try:
        _wait_until(lambda: points.missing() == [] or bool(points.arrivals()), "no worker reached lookup:after:30")
        held = list(points.directory.glob("*.at"))
        assert held, "the planned point was not reached"
        ended_before = _ended(url)
        cluster.stop_immediately()
        stopped_at = time.monotonic()
        (points.directory / "lookup:after:30.go").touch()  # its commit now meets the stopped server
        _wait_until(lambda: all(w.said(BEGAN) for w in workers), "a worker never printed its outage line", workers)
        stopped_for = time.monotonic() - stopped_at
        exited_in_outage = [w.process.poll() for w in workers if w.process.poll() is not None]
        cluster.start()
        _wait_until(lambda: _ended(url) == RUNS, "not every Run ended after the restart", workers)
        _wait_until(lambda: all(w.said(ENDED) for w in workers), "a worker never printed its outage's end")
        took = time.monotonic() - began
        exited = [w.process.poll() for w in workers if w.process.poll() is not None]
    finally:
        if not cluster.running:
            cluster.start()  # for the next test, whatever happened here
        results = [w.stop() if w.process.poll() is None else (w.process.returncode, "") for w in workers]
    store = PostgresStore(url)
    try:
        snapshots = [store.run(f"r{index}") for index in range(RUNS)]
        lost = [f"r{i}" for i, s in enumerate(snapshots) if s is None or not isinstance(s.state, Ended)]
        traces = tmp_path / "traces"
        traces.mkdir()
        duplicated = 0
        for index in range(RUNS):
            numbers = [c.version for c in store.commits(f"t{index}")]
            duplicated += len(numbers) - len(set(numbers)) + len(set(range(1, len(numbers) + 1)) - set(numbers))
            (traces / f"t{index}.jsonl").write_text("".join(line + "\n" for line in store.commit_lines(f"t{index}")))
    finally:
        store.close()
    legal = main(["check-trace", "--quiet", *sorted(str(p) for p in traces.iterdir())])
    capsys.readouterr()
    ledger = sqlite3.connect(env["RUNKERNEL_DEMO_LEDGER"])
    twice = ledger.execute(
        "SELECT count(*) FROM (SELECT operation_id FROM starts WHERE refused = 0 AND tool IN ('reserve', 'pay') "
        "GROUP BY tool, operation_id HAVING count(*) > 1)"
    ).fetchone()[0]
    ledger.close()
    lines = [line for w in workers for line in w.lines]
    foreign = [line for line in lines if not line.startswith("runkernel worker: ")]
    began_lines = [w.said(BEGAN) for w in workers]
    ended_lines = [w.said(ENDED) for w in workers]
    codes = [code for code, _ in results]
    outages = [report_figure(report, "outages ridden out") for _, report in results]
    failures = sum(report_figure(report, "failures") for _, report in results)
    peaks = [in_flight_peak(report) for _, report in results]
    print(
        f"\nride-out: {WORKERS} workers, {RUNS} Runs, the server stopped (-m immediate) {stopped_for:.2f} s with "
        f"{ended_before} Runs ended; every worker's outage line seen; {RUNS - len(lost)} Runs ended, "
        f"{len(lost)} lost, {duplicated} versions duplicated or missing, {twice} reconnect/indeterminate "
        f"operations started twice, check-trace exit {legal}; worker exits during the run {len(exited)}, exit "
        f"codes at SIGTERM {codes}; outage lines began {began_lines}, ended {ended_lines}, outages reported "
        f"{outages}, failed drives {failures}, other stderr lines {len(foreign)}; in-flight peaks {peaks} ({SLOTS} "
        f"slots a worker); {took:.1f} s"
    )
    for line in lines:
        print(f"  {line}")
    assert not exited_in_outage and not exited, "a worker exited"
    assert codes == [0] * WORKERS
    assert lost == [] and duplicated == 0 and twice == 0 and legal == 0
    assert began_lines == [1] * WORKERS and ended_lines == [1] * WORKERS, "one line each when it began and ended"
    assert outages == [1] * WORKERS
    assert foreign == [], "only the worker's own lines on stderr (no pool warnings)"
    assert max(peaks) > 1, "no worker had several Runs in flight"


def test_a_worker_started_while_the_server_is_down_waits_for_it(
    cluster: OwnCluster, tmp_path: Path
) -> None:
    url = with_schema(cluster.dsn(connect_timeout=2), "ride_down_at_start")
    _store_with_runs(url, 10)
    cluster.stop_immediately()
    worker: _Worker | None = None
    try:
        worker = _Worker(url, _env(tmp_path), "w-early")
        _wait_until(lambda: worker is not None and worker.said(BEGAN) == 1, "the worker never said the store is down",
                    [worker])
        alive_while_down = worker.process.poll() is None
        cluster.start()
        _wait_until(lambda: _ended(url) == 10, "the Runs never ended once the server was up")
        _wait_until(lambda: worker is not None and worker.said(ENDED) == 1, "the worker never said the store is back")
    finally:
        if not cluster.running:
            cluster.start()
        code, report = worker.stop() if worker is not None else (-1, "")
    assert worker is not None
    print(f"\ndown at start: alive while down {alive_while_down}, exit {code}; {report}; {SLOTS} slots")
    for line in worker.lines:
        print(f"  {line}")
    assert alive_while_down and code == 0
    assert report_figure(report, "outages ridden out") == 1 and report_figure(report, "failures") == 0
    assert in_flight_peak(report) > 1, "the worker never had several Runs in flight"
    assert [line for line in worker.lines if not line.startswith("runkernel worker: ")] == []
