"""The PostgreSQL rows: ``PostgresStore.append`` against a bare psycopg
INSERT+COMMIT of the same bytes on the same server, and 8 worker processes committing to
shared Runs (commits/s and conflicts/s).

The server is ``RUNKERNEL_BENCH_POSTGRES_DSN`` (else ``RUNKERNEL_TEST_POSTGRES_DSN``);
without one both groups say so and measure nothing. Each group works in a schema of its
own, dropped when the benchmark exits."""

from __future__ import annotations

import atexit
import itertools
import json
import os
import subprocess
import sys
import time
import urllib.parse
from pathlib import Path
from typing import Any

from bench import subject
from bench.framework import Prepared, Sample, Sizes
from bench.measures import appends_to_profile
from bench.peers import PeerMissing

ROOT = Path(__file__).resolve().parent.parent
WORKERS = 8
SHARED_RUNS = 4


def _server() -> str:
    dsn = os.environ.get("RUNKERNEL_BENCH_POSTGRES_DSN") or os.environ.get("RUNKERNEL_TEST_POSTGRES_DSN")
    if not dsn:
        raise PeerMissing("PostgreSQL server not installed or not named: set RUNKERNEL_BENCH_POSTGRES_DSN")
    try:
        import psycopg  # noqa: F401
        import psycopg_pool  # noqa: F401
    except ImportError as error:
        raise PeerMissing(f"the postgres extra is not installed ({error})") from None
    return dsn


def _fresh_store(tag: str) -> str:
    """A new, initialized store in a schema of its own, dropped at exit."""
    from runkernel.adapters.stores.postgres.schema import drop_store, init_postgres

    parts = urllib.parse.urlsplit(_server())
    query = urllib.parse.parse_qsl(parts.query) + [("schema", f"rk_bench_{tag}_{os.getpid()}")]
    url = urllib.parse.urlunsplit(parts._replace(query=urllib.parse.urlencode(query)))
    drop_store(url)
    init_postgres(url)
    atexit.register(drop_store, url)
    return url


def postgres_commit(sizes: Sizes, scratch: Path) -> Prepared:
    """``PostgresStore.append`` vs a bare psycopg INSERT+COMMIT of the same line, on one
    connection to the same server, into a table keyed like the commit log."""
    import psycopg

    from runkernel.adapters.stores.postgres.schema import split_url
    from runkernel.adapters.stores.postgres import PostgresStore

    url = _fresh_store("commit")
    store = PostgresStore(url)
    conninfo, schema = split_url(url)
    raw = psycopg.connect(conninfo)
    raw.execute(f"CREATE TABLE {schema}.lines (k text NOT NULL, v bigint NOT NULL, line text NOT NULL, PRIMARY KEY (k, v))")
    raw.commit()
    insert = f"INSERT INTO {schema}.lines (k, v, line) VALUES (%s, %s, %s)".encode()
    count = sizes.commits_per_round
    rounds, serial = itertools.count(), itertools.count()
    pending: list[list[str]] = []

    def runkernel() -> Sample:
        commits = list(itertools.islice(subject.history_commits(f"pg{next(rounds)}", tool_steps=True), count))
        pending.append([subject.encode_commit(c) for c in commits])
        started = time.perf_counter()
        for commit in commits:
            subject.append(store, commit)
        return Sample(time.perf_counter() - started, count)

    def limit() -> Sample:
        lines = pending.pop() if pending else []
        started = time.perf_counter()
        for line in lines:
            raw.execute(insert, ("t", next(serial), line))
            raw.commit()
        return Sample(time.perf_counter() - started, max(len(lines), 1))

    def drives() -> Sample:
        return drive_round_trips(url, f"rt{next(rounds)}", scratch)

    return Prepared(
        {"runkernel": runkernel, "raw": limit, "round trips": drives},
        profiles={"runkernel": appends_to_profile(store, "pg-profiled", count)},
    )


DRIVES = 5
"""Runs driven for the round-trips side, one ``Worker.drive`` each."""


def drive_round_trips(url: str, prefix: str, scratch: Path) -> Sample:
    """``Worker.drive`` on the worker bench's Run (two tool calls, then an answer),
    counting the round trips to the server: libpq's own trace of every connection the
    store opens, one ``ReadyForQuery`` per statement sent (a multi-statement query is
    one). The worker's listing pass is not in it: this is one drive, the Run's own cost."""
    import psycopg

    from runkernel import Worker
    from runkernel.adapters.stores.postgres import PostgresStore

    trace = scratch / f"libpq-{prefix}.trace"
    connect = psycopg.Connection.connect
    with trace.open("ab") as out:

        def traced(cls: Any, *args: Any, **kwargs: Any) -> Any:
            conn = connect.__func__(cls, *args, **kwargs)  # type: ignore[attr-defined]
            conn.pgconn.trace(out.fileno())
            conn.pgconn.set_trace_flags(psycopg.pq.Trace.SUPPRESS_TIMESTAMPS)
            return conn

        psycopg.Connection.connect = classmethod(traced)  # type: ignore[method-assign,assignment]
        try:
            store = PostgresStore(url)
        finally:
            psycopg.Connection.connect = connect  # type: ignore[method-assign]
        try:
            run_ids = subject.start_runs(store, prefix, DRIVES, f"{prefix}-app")
            worker = Worker(store, subject.two_call_app(f"{prefix}-app", lambda: None), worker_id="w1")
            out.flush()
            before = trace.stat().st_size
            started = time.perf_counter()
            for run_id in run_ids:
                worker.drive(run_id)
            seconds = time.perf_counter() - started
            after = trace.stat().st_size
        finally:
            store.close()
    with trace.open("rb") as read:
        read.seek(before)
        sent = read.read(after - before).count(b"\tReadyForQuery\t")
    trace.unlink()
    return Sample(seconds, DRIVES, {"round trips": float(sent), "drives": float(DRIVES)})


def postgres_workers(sizes: Sizes, scratch: Path) -> Prepared:
    """8 processes append text steps to the same few Runs for a fixed time; each append
    wins or gets a typed conflict. The figure is the sum over the processes."""
    from runkernel.adapters.stores.postgres import PostgresStore
    from runkernel.testing import activate

    url = _fresh_store("workers")
    seconds = 0.5 if sizes.quick else 5.0
    rounds = itertools.count()

    def race() -> Sample:
        prefix = f"w{next(rounds)}"
        store = PostgresStore(url)
        for index in range(SHARED_RUNS):
            decision = activate(f"{prefix}-t{index}", f"{prefix}-r{index}")
            assert decision.commit is not None
            store.append(decision.commit)
        store.close()
        racers = [
            subprocess.Popen(
                [sys.executable, "-m", "bench.postgres", url, prefix, f"p{n}", str(seconds)],
                cwd=ROOT, stdout=subprocess.PIPE, text=True,
            )
            for n in range(WORKERS)
        ]
        results = [json.loads(r.communicate(timeout=seconds * 20 + 60)[0]) for r in racers]
        wins = sum(int(r["wins"]) for r in results)
        conflicts = sum(int(r["conflicts"]) for r in results)
        elapsed = max(float(r["seconds"]) for r in results)
        return Sample(elapsed, wins, {"conflicts": float(conflicts), "commits": float(wins)})

    return Prepared({"runkernel": race})


def _racer(url: str, prefix: str, me: str, seconds: float) -> dict[str, Any]:
    from runkernel.adapters.stores.postgres import PostgresStore
    from runkernel.adapters.stores.contract import CommitConflict
    from runkernel.testing import step
    from runkernel.kernel.protocol import InferenceResult

    store = PostgresStore(url)
    wins = conflicts = 0
    started = time.perf_counter()
    for seq in itertools.count():
        if time.perf_counter() - started >= seconds:
            break
        run_id = f"{prefix}-r{seq % SHARED_RUNS}"
        snapshot = store.run(run_id)
        assert snapshot is not None
        try:
            store.append(step(snapshot, InferenceResult(f"{me}-{seq}")).commit)  # type: ignore[arg-type]
        except CommitConflict:
            conflicts += 1
        else:
            wins += 1
    elapsed = time.perf_counter() - started
    store.close()
    return {"wins": wins, "conflicts": conflicts, "seconds": elapsed}


if __name__ == "__main__":
    print(json.dumps(_racer(sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4]))))
