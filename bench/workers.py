"""Worker throughput: 1, 2 and 4 ``runkernel worker`` processes
draining the same short Runs, beside 1, 2 and 4 DBOS processes draining the same short
unit, on SQLite and on PostgreSQL.

A unit: a Run whose model asks for two ``lookup`` calls at once and then answers
(``bench/worker_app.py``), or a DBOS workflow of two steps on a queue limited per
process (``bench/dbos_worker.py``). Each side's round: start ``runs_per_round`` units (activations
or enqueues, not measured), spawn the processes, wait until each holds its first unit at
the start barrier (``bench/unit_probe.py``: start-up, imports and connections are not
measured), say go, and time until the parent sees no unit left unfinished (polled every
``POLL`` s); then SIGTERM, and every unit must have completed.

What each sample counts, all over the whole life of the processes (start and stop
included) unless said:

- ``cpu``: the processes' own CPU from the go to their exit; ``server_cpu``: on
  PostgreSQL, the CPU of the server backends they opened (found by their
  ``application_name``: ``PGAPPNAME`` for runkernel's, DBOS's own for its executors'; read
  from ``/proc``), from the go to the last unit's end;
- ``transactions`` (durable: each changed a row) and ``rows`` (heap rows inserted,
  updated or deleted in logged tables): on PostgreSQL read from the WAL itself
  (``pg_walinspect``, ``bench/server_counts.py``) between an LSN before the spawn and
  one after the exit, only the records of the side's own database (the server is
  shared); on SQLite counted on every
  sqlite3 connection of the processes (``bench.counting``), which counts transactions,
  not fsyncs (runkernel's store is in WAL mode, one fsync per transaction at FULL; DBOS's
  SQLite keeps the rollback journal, several per transaction);
- ``drives`` and ``commits``: runkernel's, from each worker's report line.

Each side has a database of its own (PostgreSQL: two databases made here and dropped at
exit; SQLite: two files in the scratch directory).
"""

from __future__ import annotations

import atexit
import itertools
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
import urllib.parse
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench import dbos_worker, peers, subject, unit_probe
from bench.framework import Prepared, Sample, Sizes
from bench.profiles import Work
from bench.server_counts import APP_NAME, ServerCounts
from bench.worker_rows import projection_note, side_name

ROOT = Path(__file__).resolve().parent.parent
PROCESSES = (1, 2, 4)
POLL = 0.01
"""Seconds between the parent's looks at how many units are left."""
READY_TIMEOUT = 180.0
DRAIN_TIMEOUT = 600.0


def runs_per_round(sizes: Sizes) -> int:
    """Units each side drains per round: enough that every DBOS process can claim its
    ``WORKER_CONCURRENCY`` units (each must hold one at the barrier) with some left."""
    return max(PROCESSES) * dbos_worker.WORKER_CONCURRENCY + 4 if sizes.quick else 100


def rounds(sizes: Sizes) -> int:
    """Rounds of the group."""
    return 1 if sizes.quick else 3


# --- one drain --------------------------------------------------------------------------


Spawn = Callable[[int, dict[str, str], Path], "subprocess.Popen[str]"]


def drain(
    spawn: Spawn,
    processes: int,
    units: int,
    unfinished: Callable[[], int],
    directory: Path,
    server: ServerCounts | None,
    app: str,
) -> tuple[Sample, list[str]]:
    """Spawn ``processes``, wait for their barrier, say go, time until ``unfinished()``
    is 0, stop them; the sample and each process's standard output."""
    directory.mkdir(parents=True)
    env = dict(os.environ, BENCH_UNIT_DIR=str(directory), BENCH_APP=app, PGAPPNAME=APP_NAME)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, (str(ROOT), os.environ.get("PYTHONPATH"))))
    if server is None:
        env[unit_probe.SQLITE] = "1"
    start_lsn = server.lsn() if server is not None else ""
    started: list[subprocess.Popen[str]] = []
    try:
        for n in range(processes):
            started.append(spawn(n, env, directory / f"stderr-{n}.txt"))
        _wait_ready(started, directory)
        cpu_before = server.backend_cpu() if server is not None else {}
        began = time.perf_counter()
        for process in started:
            assert process.stdin is not None
            process.stdin.write("go\n")
            process.stdin.flush()
        while unfinished():
            time.sleep(POLL)
            _check_running(started, directory, began)
        seconds = time.perf_counter() - began
        cpu_after = server.backend_cpu() if server is not None else {}
        outputs = _stop(started, directory)
    finally:
        for process in started:
            if process.poll() is None:
                process.kill()
                process.wait()
    reports = [json.loads(path.read_text()) for path in sorted(directory.glob("report-*.json"))]
    if len(reports) != processes:
        raise AssertionError(f"{len(reports)} of {processes} processes reported; see {directory}")
    counts = {"cpu": sum(float(r["cpu"]) for r in reports), "processes": float(processes)}
    if server is not None:
        counts["server_cpu"] = sum(max(0.0, cpu - cpu_before.get(pid, 0.0)) for pid, cpu in cpu_after.items())
        counts["transactions"], counts["rows"] = map(float, server.written(start_lsn, server.lsn()))
    else:
        counts["server_cpu"] = 0.0
        counts["transactions"] = sum(float(r["transactions"]) for r in reports)
        counts["rows"] = sum(float(r["rows"]) for r in reports)
    return Sample(seconds, units, counts), outputs


def _wait_ready(started: list[subprocess.Popen[str]], directory: Path) -> None:
    deadline = time.monotonic() + READY_TIMEOUT
    while len(list(directory.glob("ready-*"))) < len(started):
        for n, process in enumerate(started):
            if process.poll() is not None:
                raise AssertionError(f"process {n} exited {process.returncode} before the go: " + _tail(directory, n))
        if time.monotonic() > deadline:
            raise AssertionError(f"processes not ready after {READY_TIMEOUT:.0f} s; see {directory}")
        time.sleep(0.02)


def _check_running(started: list[subprocess.Popen[str]], directory: Path, began: float) -> None:
    """Refuse to wait on for a drain that cannot finish: a process gone, or no end in sight."""
    for n, process in enumerate(started):
        if process.poll() is not None:
            raise AssertionError(f"process {n} exited {process.returncode} before the units were done: " + _tail(directory, n))
    if time.perf_counter() - began > DRAIN_TIMEOUT:
        raise AssertionError(f"units still unfinished after {DRAIN_TIMEOUT:.0f} s; see {directory}")


def _stop(started: list[subprocess.Popen[str]], directory: Path) -> list[str]:
    for process in started:
        process.send_signal(signal.SIGTERM)
    outputs = []
    for n, process in enumerate(started):
        out, _ = process.communicate(timeout=120)
        if process.returncode != 0:
            raise AssertionError(f"process {n} exited {process.returncode}: " + _tail(directory, n))
        outputs.append(out)
    return outputs


def _tail(directory: Path, n: int) -> str:
    path = directory / f"stderr-{n}.txt"
    return path.read_text(errors="replace")[-2000:] if path.exists() else "(no stderr)"


def _popen(command: list[str], env: dict[str, str], stderr: Path) -> subprocess.Popen[str]:
    with stderr.open("w") as errors:
        return subprocess.Popen(
            command, cwd=ROOT, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=errors, text=True
        )


def report_figure(line: str, name: str) -> int:
    """A count from a runkernel worker's report line (``..., 12 drives, 72 commits, ...``)."""
    for part in line.strip().split(", "):
        count, _, what = part.rpartition(": ")[2].partition(" ")
        if what in (name, name.removesuffix("s")) and count.isdigit():
            return int(count)
    raise AssertionError(f"no {name!r} in the worker's report line {line!r}")


# --- the sides ------------------------------------------------------------------------------


def _runkernel_side(store: Any, url: str, processes: int, units: int, scratch: Path, server: ServerCounts | None) -> Callable[[], Sample]:
    serial = itertools.count()

    def measure() -> Sample:
        app = f"rk{processes}x{next(serial)}"
        run_ids = subject.start_runs(store, app, units, app)

        def spawn(n: int, env: dict[str, str], stderr: Path) -> subprocess.Popen[str]:
            return _popen(
                [sys.executable, "-m", "runkernel.cli", "worker", "--store", url, "--app", "bench.worker_app:app",
                 "--lease", "120", "--worker-id", f"{app}-w{n}", *_slots_option()],
                env, stderr,
            )

        sample, outputs = drain(
            spawn, processes, units, lambda: subject.runs_running(store, app, units), scratch / app, server, app
        )
        completed = subject.runs_completed(store, run_ids)
        if completed != units:
            raise AssertionError(f"{completed} of {units} Runs completed")
        lines = [out.strip().splitlines()[-1] for out in outputs]
        counts = dict(sample.counts)
        counts["drives"] = float(sum(report_figure(line, "drives") for line in lines))
        counts["commits"] = float(sum(report_figure(line, "commits") for line in lines))
        return Sample(sample.seconds, sample.units, counts)

    return measure


def _slots_option() -> list[str]:
    """``--concurrency`` as DBOS's per-process limit, where the worker has slots: the
    same Runs in flight per process on both sides, and every process of a round can
    claim one unit for the start barrier (one worker with 32 slots would take them all)."""
    return [] if subject.worker_slots() is None else ["--concurrency", str(dbos_worker.WORKER_CONCURRENCY)]


class DbosQueue:
    """A DBOS side's system database: set up once by ``setup`` (a DBOS process's command
    line that launches it and registers ``queue``), enqueued into, watched."""

    def __init__(self, url: str, setup: list[str], queue: str, workflow: str) -> None:
        dbos = peers.module("dbos", "dbos")
        self.url = url
        self.queue, self.workflow = queue, workflow
        made = subprocess.run([sys.executable, *setup], cwd=ROOT, capture_output=True, text=True, timeout=300)
        if made.returncode != 0:
            raise AssertionError(f"DBOS setup failed: {made.stderr[-2000:]}")
        self.client = dbos.DBOSClient(system_database_url=url, application_name="bench")
        self.count_sql = "SELECT count(*) FROM {t} WHERE queue_name = '" + queue + "' AND status IN ('ENQUEUED', 'PENDING')"
        self.done_sql = "SELECT count(*) FROM {t} WHERE status = 'SUCCESS' AND workflow_uuid LIKE "
        self.read: Callable[[str], int]
        if url.startswith("sqlite:///"):
            reader = sqlite3.connect(f"file:{url[len('sqlite:///'):]}?mode=ro", uri=True, timeout=60, isolation_level=None)
            self.table = "workflow_status"
            self.read = lambda sql: int(reader.execute(sql).fetchone()[0])
        else:
            import psycopg

            watcher = psycopg.connect(url, autocommit=True)
            self.table = "dbos.workflow_status"
            self.read = lambda sql: int(watcher.execute(sql.encode()).fetchone()[0])  # type: ignore[index]

    def enqueue(self, prefix: str, units: int) -> None:
        for n in range(units):
            options = {"queue_name": self.queue, "workflow_name": self.workflow, "workflow_id": f"{prefix}-{n}"}
            self.client.enqueue(options, subject.PROMPT)

    def unfinished(self) -> int:
        return self.read(self.count_sql.format(t=self.table))

    def succeeded(self, prefix: str) -> int:
        return self.read(self.done_sql.format(t=self.table) + f"'{prefix}-%'")


def _dbos_side(peer: DbosQueue, processes: int, units: int, scratch: Path, server: ServerCounts | None) -> Callable[[], Sample]:
    serial = itertools.count()

    def measure() -> Sample:
        prefix = f"dbos{processes}x{next(serial)}"
        peer.enqueue(prefix, units)

        def spawn(n: int, env: dict[str, str], stderr: Path) -> subprocess.Popen[str]:
            return _popen(
                [sys.executable, "-m", "bench.dbos_worker", peer.url, "bench", "WORK", f"{prefix}-e{n}"], env, stderr
            )

        sample, _ = drain(spawn, processes, units, peer.unfinished, scratch / prefix, server, "bench")
        done = peer.succeeded(prefix)
        if done != units:
            raise AssertionError(f"{done} of {units} DBOS workflows succeeded")
        return sample

    return measure


def _prepared(
    store: Any, url: str, peer: Callable[[], DbosQueue], sizes: Sizes, scratch: Path,
    rk_server: ServerCounts | None, dbos_server: ServerCounts | None,
) -> Prepared:
    """Every side, interleaved runkernel 1, DBOS 1, runkernel 2, ...; the DBOS peer is set
    up at its first round (when dbos is missing, only its sides say so); the notes carry
    the projection, brought up to date after each 2-worker round."""
    units = runs_per_round(sizes)
    sides: dict[str, Callable[[], Sample]] = {}
    dbos: list[DbosQueue] = []
    notes = {
        "units": f"{units} per side and round, started before the processes and drained from the go;"
        f" DBOS queue: worker_concurrency={dbos_worker.WORKER_CONCURRENCY} per process, polled every"
        f" {dbos_worker.POLLING_SECONDS} s; a runkernel worker: "
        + (" ".join(_slots_option()) or "one Run at a time (no slots on this branch)"),
    }
    measured: dict[int, list[Sample]] = {1: [], 2: []}

    def lazy(processes: int) -> Callable[[], Sample]:
        made: list[Callable[[], Sample]] = []

        def measure() -> Sample:
            if not dbos:
                dbos.append(peer())  # PeerMissing here marks only the DBOS sides
            if not made:
                made.append(_dbos_side(dbos[0], processes, units, scratch, dbos_server))
            return made[0]()

        return measure

    def kept(processes: int) -> Callable[[], Sample]:
        measure = _runkernel_side(store, url, processes, units, scratch, rk_server)

        def keep() -> Sample:
            sample = measure()
            if processes in measured:
                measured[processes].append(sample)
                if measured[1] and measured[2]:
                    notes["projection"] = projection_note(measured[1], measured[2])
            return sample

        return keep

    for processes in PROCESSES:
        sides[side_name("runkernel", processes)] = kept(processes)
        sides[side_name("DBOS", processes)] = lazy(processes)
    profiles = {side_name("runkernel", n): _one_worker_work(store, units, f"rk-profile{n}") for n in PROCESSES}
    prepared = Prepared(sides, profiles=profiles)
    prepared.notes = notes
    return prepared


def _one_worker_work(store: Any, units: int, app: str) -> Work:
    """The profile of every runkernel side: one worker in the bench's own process driving
    the group's Run, one Run per call (its Runs started at the first call, under an app
    of their own, after the timed rounds). A profile is of one process: the waits of
    several processes on one another are not in it."""
    from runkernel import Worker

    worker = Worker(store, subject.two_call_app(app, lambda: None), worker_id=f"{app}-w")
    run_ids: list[str] = []

    def drive_one() -> None:
        if not run_ids:
            run_ids.extend(reversed(subject.start_runs(store, app, units, app)))
        worker.drive(run_ids.pop())

    return Work(
        drive_one,
        most=units - 1,
        of="one worker in the bench's process driving the group's Run (the processes' waits on one another are not in it)",
    )


def _dbos_peer(url: str) -> DbosQueue:
    return DbosQueue(url, ["-m", "bench.dbos_worker", url, "bench", "SETUP"], dbos_worker.QUEUE, dbos_worker.WORKFLOW)


def workers_sqlite(sizes: Sizes, scratch: Path) -> Prepared:
    """The group on SQLite: runkernel's store (WAL, synchronous=FULL) and DBOS's SQLite
    system database (its own settings), files of their own."""
    directory = scratch / "workers-sqlite"
    directory.mkdir()
    path = directory / "runkernel.db"
    store = subject.sqlite_store(path, "FULL")
    peer_url = f"sqlite:///{directory / 'dbos.sqlite'}"
    return _prepared(store, f"sqlite:///{path}", lambda: _dbos_peer(peer_url), sizes, directory, None, None)


def workers_postgres(sizes: Sizes, scratch: Path) -> Prepared:
    """The group on PostgreSQL: a database for runkernel's store and one for DBOS's
    system database, on the same server, made here and dropped at exit."""
    from bench.postgres import _server

    dsn = _server()
    rk_conninfo, dbos_conninfo = _database(dsn, "rk"), _database(dsn, "dbos")
    rk_server, dbos_server = ServerCounts(rk_conninfo), ServerCounts(dbos_conninfo)
    url = _with_query(rk_conninfo, schema="rk_bench")
    store = subject.postgres_store(url)
    directory = scratch / "workers-postgres"
    directory.mkdir()
    return _prepared(store, url, lambda: _dbos_peer(dbos_conninfo), sizes, directory, rk_server, dbos_server)


def _database(dsn: str, tag: str) -> str:
    """A new database on the server ``dsn`` names, dropped at exit; its connection URL."""
    import psycopg

    name = f"rk_bench_{tag}_{os.getpid()}"
    admin = psycopg.connect(dsn, autocommit=True)
    admin.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)".encode())
    admin.execute(f"CREATE DATABASE {name}".encode())
    admin.close()

    def drop() -> None:
        with psycopg.connect(dsn, autocommit=True) as cleanup:
            cleanup.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)".encode())

    atexit.register(drop)
    parts = urllib.parse.urlsplit(dsn)
    return urllib.parse.urlunsplit(parts._replace(path=f"/{name}"))


def _with_query(url: str, **extra: str) -> str:
    parts = urllib.parse.urlsplit(url)
    query = urllib.parse.parse_qsl(parts.query) + list(extra.items())
    return urllib.parse.urlunsplit(parts._replace(query=urllib.parse.urlencode(query)))
