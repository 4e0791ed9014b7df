"""The ``upgrade-check --accept`` write (``Store.accept_versions``) under crashes: a process
killed with SIGKILL before, inside and after the write, and on PostgreSQL a connection
cut before the server sees the write, in the middle of its message, and after the server
committed it (its reply lost), leaves the store holding either none of the versions
accepted or all of them, never some; and the store still opens and lists its Runs.

Each test prints its figures: per kill point or cut, what the store held afterwards.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import urllib.parse
from collections import Counter
from pathlib import Path

import pytest

import upgrade_apps
from pg_proxy import Cut, CuttingProxy
from postgres_support import postgres_url
from runkernel.adapters.stores.registry import open_store
from runkernel.adapters.worker.apps import version_of
from runkernel.adapters.worker.upgrade import accept_upgrade, upgrade_check

__all__ = ["postgres_url"]

ROOT = Path(__file__).resolve().parents[2]
#: versions the live Runs recorded: the one write records all of them at once
VERSIONS = tuple(f"v{n:02d}" for n in range(1, 13))
NEW = version_of(upgrade_apps.app)
ALL = frozenset({NEW, *VERSIONS})
NOTHING = frozenset({NEW})
#: SQLite kill points sampled inside the write, evenly spread over the steps it takes
SAMPLES = 12


def _fill(url: str) -> None:
    store = open_store(url, create=True)
    try:
        upgrade_apps.leave_versioned_runs(store, VERSIONS)
    finally:
        store.close()


def _held(url: str) -> frozenset[str]:
    """What the store holds for the new version, read by a fresh process's store; the
    store must still open and list its Runs."""
    store = open_store(url)
    try:
        assert len(store.list_runs(app=upgrade_apps.APP)) == len(VERSIONS)
        return store.compatible_versions(upgrade_apps.APP, NEW)
    finally:
        store.close()


def _accept_killed(url: str, kill_at: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "tests")])}
    return subprocess.run(
        [sys.executable, str(ROOT / "tests" / "accept_kill.py"), url, "upgrade_apps:app", kill_at],
        env=env, capture_output=True, text=True, timeout=120,
    )


def _outcome(held: frozenset[str]) -> str:
    assert held in (NOTHING, ALL), f"a crash left part of the write: {sorted(held)}"
    return "all" if held == ALL else "nothing"


def _points(url: str) -> int:
    done = _accept_killed(url, "count")
    assert done.returncode == 0, done.stderr
    return int(done.stderr.strip().splitlines()[-1].removeprefix("points "))


def test_sqlite_a_kill_before_inside_or_after_the_accept_write_leaves_nothing_or_all(tmp_path: Path) -> None:
    template = tmp_path / "template.db"
    _fill(f"sqlite:///{template}")
    counted = tmp_path / "counted.db"
    shutil.copy(template, counted)
    points = _points(f"sqlite:///{counted}")
    assert _held(f"sqlite:///{counted}") == ALL  # the write, uninterrupted, records all of it
    assert points > SAMPLES, f"the write took only {points} engine steps"
    kill_points = sorted({1, points, *(1 + (points - 1) * i // SAMPLES for i in range(SAMPLES))})
    figures: Counter[str] = Counter()
    rows = []
    for kill_at in [*map(str, kill_points), "after"]:
        db = tmp_path / f"kill-{kill_at}.db"
        shutil.copy(template, db)
        done = _accept_killed(f"sqlite:///{db}", kill_at)
        assert done.returncode == -signal.SIGKILL, (kill_at, done.returncode, done.stderr)
        outcome = _outcome(_held(f"sqlite:///{db}"))
        figures[outcome] += 1
        rows.append(f"  kill at {kill_at:>5} of {points} steps: {outcome}")
    print(f"SQLite, {len(VERSIONS)} versions accepted in one write, {points} engine steps:")
    print("\n".join(rows))
    print(f"  {dict(figures)}")
    assert rows[0].endswith("nothing") and rows[-1].endswith("all")  # the kills landed on both sides


def _through(proxy: CuttingProxy, url: str) -> str:
    parts = urllib.parse.urlsplit(url)
    user = f"{parts.username}@" if parts.username else ""
    query = parts.query + ("&" if parts.query else "") + "sslmode=disable"
    return urllib.parse.urlunsplit(parts._replace(netloc=f"{user}127.0.0.1:{proxy.port}", query=query))


def test_postgres_a_kill_before_or_after_the_accept_write_leaves_nothing_or_all(postgres_url: str) -> None:
    from runkernel.adapters.stores.postgres.schema import drop_store, init_postgres

    rows = []
    for kill_at in ("1", "after"):
        url = postgres_url if kill_at == "1" else postgres_url.replace("schema=", "schema=after_")
        if url != postgres_url:
            init_postgres(url)
        try:
            _fill(url)
            done = _accept_killed(url, kill_at)
            assert done.returncode == -signal.SIGKILL, (kill_at, done.returncode, done.stderr)
            rows.append((kill_at, _outcome(_held(url))))
        finally:
            if url != postgres_url:
                drop_store(url)
    print("PostgreSQL, SIGKILL at the accept write:", ", ".join(f"kill at {k}: {o}" for k, o in rows))
    assert rows == [("1", "nothing"), ("after", "all")]


@pytest.mark.parametrize("cut", [Cut.BEFORE_SERVER, Cut.MID_MESSAGE, Cut.AFTER_COMMIT], ids=lambda c: c.value)
def test_postgres_a_connection_cut_at_the_accept_write_leaves_nothing_or_all(postgres_url: str, cut: Cut) -> None:
    from runkernel.adapters.stores.postgres import PostgresStore

    _fill(postgres_url)
    parts = urllib.parse.urlsplit(postgres_url)
    proxy = CuttingProxy(parts.hostname or "127.0.0.1", parts.port or 5432, {1: cut}, b"INSERT INTO compatible_versions")
    store = PostgresStore(_through(proxy, postgres_url))
    error: BaseException | None = None
    try:
        report = upgrade_check(store, upgrade_apps.app)
        assert report.checked_versions == set(VERSIONS)
        try:
            accept_upgrade(store, report)
        except Exception as failed:  # a store failure the cut caused: one outcome among others
            error = failed
    finally:
        store.close()
        proxy.close()
    assert proxy.cut_done == [(1, cut)]
    outcome = _outcome(_held(postgres_url))
    print(f"PostgreSQL, connection cut {cut.value} at the accept write: {outcome} stored"
          f" ({'the store raised ' + type(error).__name__ if error else 'the store retried and returned'})")
