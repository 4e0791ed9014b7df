"""Concurrent delegations under killed ``runkernel worker`` processes (SQLite, and
PostgreSQL when ``RUNKERNEL_TEST_POSTGRES_DSN`` is set): 3 workers drive parents whose
tool is a terminal-only delegation while they are SIGKILLed (and restarted), every kill
falling while a child runs: the worker killed is the one at a planned start of the
children's tool (``held_points``), held there until the kill. Afterwards every parent
and child is Ended, the parents' and children's exported traces pass ``check-trace``
together (I15: each child activated once, each result its child's terminus), no version
is lost or written twice, and the parents were leased only about once per child's end,
not once per poll: a quiet parent is not driven while its children run. With one slot
a worker and with 4 (a kill then cuts every drive in flight in it, parents' too)."""

from __future__ import annotations

import itertools
import os
import sqlite3
import subprocess
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from held_points import HeldPoints, KillsAndStalls, Process
from postgres_support import fresh_url
from runkernel.adapters.stores.contract import Store
from runkernel.cli.entry import main
from runkernel.kernel.state import Ended
from worker_processes import in_flight_peak, leases_held, report_figure, spawn_worker, stop_workers

ROOT = Path(__file__).resolve().parent.parent.parent
WORKERS = 3
PARENTS = 8
DELEGATIONS = 2  # each parent's batch: two delegations, then an ordinary call
LEASE = 1.0  # seconds
POLL = 0.05  # seconds: a parent driven once per poll would be leased many times
#: the starts of the children's tool (each child makes one; 16 children) whose worker
#: is killed, before the tool's work or after it
KILLS = ("slow:before:2", "slow:after:4", "slow:before:7", "slow:after:9", "slow:before:12", "slow:after:14")
HANG_GUARD = 300.0  # seconds: only so that a broken test fails instead of hanging CI


@pytest.fixture(params=["sqlite", "postgresql"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'wake.db'}"
        return
    from runkernel.adapters.stores.postgres.schema import drop_store, init_postgres

    url = fresh_url("wakekill")
    init_postgres(url)
    try:
        yield url
    finally:
        drop_store(url)


def _open(url: str) -> Store:
    if url.startswith("sqlite:///"):
        from runkernel.adapters.stores.sqlite import SqliteStore

        return SqliteStore(url[len("sqlite:///"):])
    from runkernel.adapters.stores.postgres import PostgresStore

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

    from runkernel.adapters.stores.postgres.schema import split_url

    conninfo, schema = split_url(url)
    with psycopg.connect(conninfo, autocommit=True) as conn:
        conn.execute(sql.SQL("SET search_path TO {}").format(sql.Identifier(schema)))
        return {str(r): int(str(e)) for r, e in conn.execute(query).fetchall()}


def _worker(url: str, env: dict[str, str], n: int, generation: int, slots: int) -> subprocess.Popen[str]:
    return spawn_worker(
        url, "held_points:delegating_app", env, f"w{n}-g{generation}", lease=LEASE, poll=POLL, concurrency=slots
    )


_PARENT_IDS = {f"parent-{index}" for index in range(PARENTS)}


@pytest.mark.parametrize("slots", [1, 4], ids=["1-slot", "4-slots"])
def test_killed_workers_finish_every_parent_with_its_childrens_termini(
    store_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], slots: int
) -> None:
    url = store_url
    points = HeldPoints(tmp_path / "points", KILLS)
    env = dict(os.environ, RUNKERNEL_DELEG_TOOL_SECONDS="0.4", PYTHONPATH=f"{ROOT}{os.pathsep}{ROOT / 'tests'}",
               **points.env())
    for index in range(PARENTS):
        argv = ["start", "--store", url, "--thread", f"t{index}", "--run", f"parent-{index}", "--app", "deleg", "go"]
        assert main(argv) == 0
    capsys.readouterr()
    generations = itertools.count()
    workers: list[Process] = [_worker(url, env, n, next(generations), slots) for n in range(WORKERS)]
    store = _open(url)
    reports: list[str] = []
    kills_while_children_run = 0

    def no_stalls(_process: Process) -> int:
        raise AssertionError("this test plans no stalls")

    chaos = KillsAndStalls(
        points, KILLS, store, workers, lambda n: _worker(url, env, n, next(generations), slots), no_stalls,
        in_flight=lambda process: leases_held(store, process),
    )
    try:
        began = time.monotonic()
        while not chaos.done or Counter(s.state for s in store.list_runs())["ended"] < PARENTS * (1 + DELEGATIONS):
            assert time.monotonic() - began < HANG_GUARD, f"hang guard: points never reached {points.missing()}"
            # each worker killed held in a child's tool, mid-drive: the child runs
            kills_while_children_run += sum(a.run_id not in _PARENT_IDS for a in chaos.act())
            time.sleep(0.05)  # the next look, not a wait for anything in particular
    finally:
        reports += stop_workers(workers)
    kills = chaos.kills
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
    peak = max((in_flight_peak(r) for r in reports), default=0)
    with capsys.disabled():
        print(
            f"\nquiet parents under killed workers ({url.split(':')[0]}): workers {WORKERS} x {slots} slots "
            f"(in-flight peak {peak}, Runs in flight at each kill {chaos.in_flight_at_kills}), runs {len(summaries)} ({PARENTS} parents), kills {kills} "
            f"({kills_while_children_run} while children ran; points passed, their worker already killed "
            f"{len(chaos.passed)}), "
            f"drives (workers that exited) {drives}, parent leases {parent_leases} "
            f"(wake-ups {PARENTS * (1 + DELEGATIONS)}, at most {PARENTS * (1 + DELEGATIONS) * WORKERS}), ended {len(summaries) - len(unfinished)}, "
            f"lost {versions_missing + len(unfinished)}, duplicated {duplicated_versions + len(twice)}"
        )
    assert kills + len(chaos.passed) == len(KILLS) and kills >= 1, "the Runs ended before every kill"
    assert slots > 1 or not chaos.passed
    assert slots == 1 or max([peak, *chaos.in_flight_at_kills]) > 1, "no worker had several Runs in flight"
    assert kills_while_children_run == kills + len(chaos.passed)
    assert unfinished == [] and len(summaries) == PARENTS * (1 + DELEGATIONS)
    assert all(p is not None and isinstance(p.state, Ended) for p in parents)
    assert legal == 0, verdict.err
    assert sorted(activations) == sorted(s.run_id for s in summaries if s.run_id not in _PARENT_IDS)
    assert twice == [] and versions_missing == 0 and duplicated_versions == 0
    # a parent is leased to start and once per child's end, plus once by each other
    # worker that listed it as work just before that lease made it quiet again (a
    # worker lists before it leases; the kills only hit children's workers): never
    # once per poll while its children run
    assert parent_leases <= PARENTS * (1 + DELEGATIONS) * WORKERS
