"""Throughput under latency: N Runs whose model and tool wait (0.5 s each call, three
calls per Run: 1.5 s of latency), drained by ONE process, runkernel beside DBOS, on
SQLite and on PostgreSQL.

A unit: a Run of ``bench/latency_app.py`` (a model call asking for one ``lookup`` call,
the tool, a model call that answers; each sleeps) driven by one ``runkernel worker
--concurrency SLOTS`` process, SLOTS its default; or a DBOS workflow of three steps that
sleep as long (``bench/dbos_latency.py``) on a queue whose ``worker_concurrency`` is the
same SLOTS, worked by one DBOS process. Both poll for work every
``dbos_latency.POLLING_SECONDS``. Each side's round is one drain of
``bench/workers.py`` (units started before the process, timed from the go after its
first unit reached the start barrier, until the parent sees none unfinished). Every
round also drains ONE Run with runkernel alone: one Run's time on this machine (its
latency plus its commits), against which the overlap row reads N Runs' rate, Runs/s ÷
(min(N, slots) ÷ one Run's time), 1.0 being perfect overlap. N = 200 on 32 slots cannot
reach 1.0: the Runs start together and end in waves of 32, 7 waves where 200 ÷ 32 = 6.25
would be perfect, so 0.89 at most.

On a runkernel whose ``Worker`` has no ``concurrency`` yet (one Run at a time), the
worker runs without the flag, SLOTS is 1, and DBOS's queue gets 1 too; the notes say so.
Each side has a database of its own (SQLite: files in the scratch directory;
PostgreSQL: two databases made here and dropped at exit).
"""

from __future__ import annotations

import itertools
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench import dbos_latency, latency_app, subject, workers
from bench.framework import Prepared, Sample, Sizes
from bench.worker_rows import side_name

ONE = 1
"""The Runs of the one-Run side (one Run's latency)."""
LEASE = "120"


def slots() -> int:
    """runkernel's default slots (1 when its worker has none): DBOS's queue gets as many."""
    return subject.worker_slots() or 1


def _runkernel_side(store: Any, url: str, runs: int, sleep: float, scratch: Path) -> Callable[[], Sample]:
    serial = itertools.count()
    concurrency = subject.worker_slots()

    def measure() -> Sample:
        app = f"lat{runs}x{next(serial)}"
        run_ids = subject.start_runs(store, app, runs, app)

        def spawn(n: int, env: dict[str, str], stderr: Path) -> Any:
            command = [
                sys.executable, "-m", "runkernel.cli", "worker", "--store", url, "--app", "bench.latency_app:app",
                "--lease", LEASE, "--poll", str(dbos_latency.POLLING_SECONDS), "--worker-id", f"{app}-w{n}",
            ]
            if concurrency is not None:
                command += ["--concurrency", str(concurrency)]
            return workers._popen(command, dict(env, **{latency_app.SLEEP: str(sleep)}), stderr)

        sample, outputs = workers.drain(
            spawn, 1, runs, lambda: subject.runs_running(store, app, runs), scratch / app, None, app
        )
        completed = subject.runs_completed(store, run_ids)
        if completed != runs:
            raise AssertionError(f"{completed} of {runs} Runs completed")
        line = outputs[0].strip().splitlines()[-1]
        counts = dict(sample.counts)
        counts["slots"] = float(slots())
        counts["drives"] = float(workers.report_figure(line, "drives"))
        counts["commits"] = float(workers.report_figure(line, "commits"))
        return Sample(sample.seconds, sample.units, counts)

    return measure


def _dbos_side(peer: Callable[[], workers.DbosQueue], runs: int, sleep: float, scratch: Path) -> Callable[[], Sample]:
    serial = itertools.count()

    def measure() -> Sample:
        queue = peer()
        prefix = f"dbos-lat{runs}x{next(serial)}"
        queue.enqueue(prefix, runs)

        def spawn(n: int, env: dict[str, str], stderr: Path) -> Any:
            command = [sys.executable, "-m", "bench.dbos_latency", queue.url, "bench", str(sleep), "WORK", f"{prefix}-e{n}"]
            return workers._popen(command, env, stderr)

        sample, _ = workers.drain(spawn, 1, runs, queue.unfinished, scratch / prefix, None, "bench")
        done = queue.succeeded(prefix)
        if done != runs:
            raise AssertionError(f"{done} of {runs} DBOS workflows succeeded")
        return Sample(sample.seconds, sample.units, dict(sample.counts, slots=float(slots())))

    return measure


def _once(make: Callable[[], workers.DbosQueue]) -> Callable[[], workers.DbosQueue]:
    """The DBOS system database, set up at the first DBOS round (when dbos is missing,
    only the DBOS sides say so)."""
    made: list[workers.DbosQueue] = []

    def get() -> workers.DbosQueue:
        if not made:
            made.append(make())
        return made[0]

    return get


def _prepared(store: Any, url: str, dbos_url: str, sizes: Sizes, scratch: Path) -> Prepared:
    """The sides, interleaved: one Run, then for each N runkernel and DBOS."""
    sleep = sizes.latency_sleep
    setup = ["-m", "bench.dbos_latency", dbos_url, "bench", str(sleep), "SETUP", str(slots())]
    peer = _once(lambda: workers.DbosQueue(dbos_url, setup, dbos_latency.QUEUE, dbos_latency.WORKFLOW))
    sides: dict[str, Callable[[], Sample]] = {side_name("runkernel", ONE): _runkernel_side(store, url, ONE, sleep, scratch)}
    for runs in sizes.latency_runs:
        sides[side_name("runkernel", runs)] = _runkernel_side(store, url, runs, sleep, scratch)
        sides[side_name("DBOS", runs)] = _dbos_side(peer, runs, sleep, scratch)
    concurrency = subject.worker_slots()
    worker = (
        f"`runkernel worker --concurrency {concurrency}` (its default slots)"
        if concurrency is not None
        else "`runkernel worker` with no slots on this branch (one Run at a time; slots = 1)"
    )
    notes = {
        "units": f"a unit is 3 calls of {sleep:g} s (model, tool, model); one process per side: {worker},"
        f" --poll {dbos_latency.POLLING_SECONDS}; DBOS queue worker_concurrency={slots()}, polled every"
        f" {dbos_latency.POLLING_SECONDS} s; N = {', '.join(str(n) for n in sizes.latency_runs)}, and one Run alone",
    }
    return Prepared(sides, notes)


def latency_sqlite(sizes: Sizes, scratch: Path) -> Prepared:
    """The group on SQLite: runkernel's store (WAL, synchronous=FULL) and DBOS's SQLite
    system database (its own settings), files of their own."""
    directory = scratch / "latency-sqlite"
    directory.mkdir()
    path = directory / "runkernel.db"
    store = subject.sqlite_store(path, "FULL")
    return _prepared(store, f"sqlite:///{path}", f"sqlite:///{directory / 'dbos.sqlite'}", sizes, directory)


def latency_postgres(sizes: Sizes, scratch: Path) -> Prepared:
    """The group on PostgreSQL: a database for runkernel's store and one for DBOS's
    system database, on the same server, made here and dropped at exit."""
    from bench.postgres import _server

    dsn = _server()
    url = workers._with_query(workers._database(dsn, "lat_rk"), schema="rk_bench")
    store = subject.postgres_store(url)
    directory = scratch / "latency-postgres"
    directory.mkdir()
    return _prepared(store, url, workers._database(dsn, "lat_dbos"), sizes, directory)


def rounds(sizes: Sizes) -> int:
    """Rounds of each latency group."""
    return sizes.latency_rounds
