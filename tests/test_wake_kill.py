"""Concurrent delegations under killed ``runkernel worker`` processes (SQLite, and
PostgreSQL when ``RUNKERNEL_TEST_POSTGRES_DSN`` is set): 3 workers drive parents whose
tool is a terminal-only delegation while they are SIGKILLed (and restarted), some of
the kills falling while children run. Afterwards every parent and child is Ended, the
parents' and children's exported traces pass ``check-trace`` together (I15: each child
activated once, each result its child's terminus), no version is lost or written twice,
and the parents were leased only about once per child's end, not once per poll: a
quiet parent is not driven while its children run."""

from __future__ import annotations

import os
import random
import signal
import sqlite3
import subprocess
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from postgres_support import fresh_url
from runkernel.adapters.store import Store
from runkernel.cli import main
from runkernel.kernel.state import Ended
from worker_processes import report_figure, spawn_worker

ROOT = Path(__file__).resolve().parent.parent
WORKERS = 3
PARENTS = 8
DELEGATIONS = 2  # each parent's batch: two delegations, then an ordinary call
LEASE = 1.0  # seconds
POLL = 0.05  # seconds: a parent driven once per poll would be leased many times
KILLS = 6
CHAOS_SECONDS = 30.0  # at most: the kills stop at KILLS
SETTLE_SECONDS = 90.0
SEED = 12


@pytest.fixture(params=["sqlite", "postgresql"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'wake.db'}"
        return
    from runkernel.adapters.postgres_schema import drop_store, init_postgres

    url = fresh_url("wakekill")
    init_postgres(url)
    try:
        yield url
    finally:
        drop_store(url)


def _open(url: str) -> Store:
    if url.startswith("sqlite:///"):
        from runkernel.adapters.sqlite_store import SqliteStore

        return SqliteStore(url[len("sqlite:///"):])
    from runkernel.adapters.postgres_store import PostgresStore

    return PostgresStore(url)


def _lease_epochs(url: str) -> dict[str, int]:
    """Each Run's highest lease epoch: how many times a worker took its lease."""
    query = "SELECT run_id, epoch FROM leases"
    if url.startswith("sqlite:///"):
        db = sqlite3.connect(url[len("sqlite:///"):], timeout=30.0)
        try:
            return {str(r): int(e) for r, e in db.execute(query).fetchall()}
        finally:
            db.close()
    import psycopg
    from psycopg import sql

    from runkernel.adapters.postgres_schema import split_url

    conninfo, schema = split_url(url)
    with psycopg.connect(conninfo, autocommit=True) as conn:
        conn.execute(sql.SQL("SET search_path TO {}").format(sql.Identifier(schema)))
        return {str(r): int(str(e)) for r, e in conn.execute(query).fetchall()}


def _worker(url: str, env: dict[str, str], n: int, generation: int) -> subprocess.Popen[str]:
    return spawn_worker(url, "delegating_app:app", env, f"w{n}-g{generation}", lease=LEASE, poll=POLL)


def _children_running(store: Store) -> int:
    """Children activated and not ended yet."""
    return sum(1 for s in store.list_runs() if s.run_id not in _PARENT_IDS and s.state != "ended")


_PARENT_IDS = {f"parent-{index}" for index in range(PARENTS)}


def test_killed_workers_finish_every_parent_with_its_childrens_termini(
    store_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = store_url
    env = dict(os.environ, RUNKERNEL_DELEG_TOOL_SECONDS="0.4", PYTHONPATH=f"{ROOT}{os.pathsep}{ROOT / 'tests'}")
    for index in range(PARENTS):
        argv = ["start", "--store", url, "--thread", f"t{index}", "--run", f"parent-{index}", "--app", "deleg", "go"]
        assert main(argv) == 0
    capsys.readouterr()
    chance = random.Random(SEED)
    generation = 0
    workers = [_worker(url, env, n, generation) for n in range(WORKERS)]
    kills = kills_while_children_run = 0
    store = _open(url)
    reports: list[str] = []
    try:
        deadline = time.monotonic() + CHAOS_SECONDS
        while kills < KILLS and time.monotonic() < deadline:
            time.sleep(chance.uniform(0.15, 0.35))
            if _children_running(store) == 0:
                continue  # kill while children run: that is the case under test
            n = chance.randrange(WORKERS)
            workers[n].kill()
            workers[n].wait()
            kills += 1
            kills_while_children_run += 1
            generation += 1
            workers[n] = _worker(url, env, n, generation)
        deadline = time.monotonic() + SETTLE_SECONDS
        while time.monotonic() < deadline:
            if Counter(s.state for s in store.list_runs())["ended"] == PARENTS * (1 + DELEGATIONS):
                break
            time.sleep(0.2)
    finally:
        for worker in workers:
            worker.send_signal(signal.SIGTERM)
        for worker in workers:
            out, _ = worker.communicate(timeout=60)
            reports += [line for line in out.splitlines() if line.startswith("worker ")]
    summaries = store.list_runs()
    unfinished = [s.run_id for s in summaries if s.state != "ended"]
    combined = tmp_path / "parents-and-children.jsonl"
    lines: list[str] = []
    versions_missing = duplicated_versions = 0
    activations: Counter[str] = Counter()
    for thread_id in store.thread_ids():
        commits = list(store.commits(thread_id))  # a gap or repeat would be a DamagedStore
        numbers = [c.version for c in commits]
        versions_missing += len(set(range(1, len(commits) + 1)) - set(numbers))
        duplicated_versions += len(numbers) - len(set(numbers))
        activations.update(c.run_id for c in commits if c.parent is not None)
        lines += store.commit_lines(thread_id)  # type: ignore[attr-defined]
    combined.write_text("".join(line + "\n" for line in lines))
    parents = [store.run(f"parent-{index}") for index in range(PARENTS)]
    store.close()
    legal = main(["check-trace", str(combined)])
    verdict = capsys.readouterr()
    epochs = _lease_epochs(url)
    parent_leases = sum(epochs.get(p, 0) for p in _PARENT_IDS)
    drives = sum(report_figure(r, "drives") for r in reports)
    twice = [run_id for run_id, count in activations.items() if count > 1]
    with capsys.disabled():
        print(
            f"\nquiet parents under killed workers ({url.split(':')[0]}): workers {WORKERS}, "
            f"runs {len(summaries)} ({PARENTS} parents), kills {kills} ({kills_while_children_run} while children ran), "
            f"drives (workers that exited) {drives}, parent leases {parent_leases} "
            f"(at most {PARENTS * (1 + DELEGATIONS)} without kills), ended {len(summaries) - len(unfinished)}, "
            f"lost {versions_missing + len(unfinished)}, duplicated {duplicated_versions + len(twice)}"
        )
    assert kills == KILLS, "the Runs ended before every kill"
    assert unfinished == [] and len(summaries) == PARENTS * (1 + DELEGATIONS)
    assert all(p is not None and isinstance(p.state, Ended) for p in parents)
    assert legal == 0, verdict.err
    assert sorted(activations) == sorted(s.run_id for s in summaries if s.run_id not in _PARENT_IDS)
    assert twice == [] and versions_missing == 0 and duplicated_versions == 0
    # a parent is leased to start, once per child's end, and once more per kill that
    # orphaned it: never once per poll while its children run
    assert parent_leases <= PARENTS * (1 + DELEGATIONS) + 2 * kills
