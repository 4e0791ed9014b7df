"""A rolling deploy on PostgreSQL (Versions, under Workers and leases): ``runkernel
worker`` processes of the old code (``rolling_app:v1``) and of the new (``v2``: another
tool table, so another default version) run together on one store, with Runs of both
versions running, awaiting an approval and sleeping on a timer, and Runs activated before
versions existed. Each fleet drives only what it may: the old workers the old Runs, the
new the new ones, either the unversioned ones. Then the old workers stop, approvals and
timers of old Runs are left, and the operator records the new version compatible with the
old (``accept_versions``): the new workers finish them.

Every Run ends; the writer of every commit (``writer_of``) is a worker whose version may
drive the Run at that commit; no reserve or pay started twice; no version lost or
repeated. It prints its figures."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import time
from collections import Counter
from pathlib import Path

import pytest

from postgres_support import postgres_url
from rolling_app import NAME, v1, v2
from runkernel.adapters.drive.inbox import submit_resume
from runkernel.adapters.worker.apps import version_of
from runkernel.kernel.protocol import Activate, Approve, ResumeCommand
from runkernel.kernel.state import Awaiting, Ended, Message
from runkernel.kernel.values import Role, WaitKind
from runkernel.testing import step
from worker_processes import report_figure, spawn_worker, stop_workers

__all__ = ["postgres_url"]

ROOT = Path(__file__).resolve().parent.parent.parent
PER_KIND = 6  # Runs of each kind (book, approve, nap) per version
LEGACY = 4  # Runs activated before versions existed
LEASE = 2.0
HANG_GUARD = 300.0  # seconds: only so that a broken test fails instead of hanging CI
OLD, NEW = version_of(v1), version_of(v2)


def _activate(store: object, run_id: str, version: str | None) -> None:
    from runkernel.adapters.stores.postgres import PostgresStore

    assert isinstance(store, PostgresStore)
    decision = step(None, Activate(f"t-{run_id}", run_id, 0, (Message(Role.USER, "go"),), NAME, app_version=version))
    assert decision.commit is not None
    store.append(decision.commit)


def _wait(what: str, done: object, began: float) -> None:
    while not done():  # type: ignore[operator]
        assert time.monotonic() - began < HANG_GUARD, f"hang guard: {what}"
        time.sleep(0.05)  # the next look, not a wait for anything in particular


def _approve(store: object, run_ids: list[str]) -> int:
    from runkernel.adapters.stores.postgres import PostgresStore

    assert isinstance(store, PostgresStore)
    answered = 0
    for run_id in run_ids:
        snapshot = store.run(run_id)
        assert snapshot is not None and isinstance(snapshot.state, Awaiting), run_id
        submit_resume(store, ResumeCommand(run_id, snapshot.state.ticket.ticket_id, WaitKind.APPROVAL, Approve()))
        answered += 1
    return answered


def _foreign_writers(store: object, runs: list[str], fleet: str) -> list[str]:
    """The commits of ``runs`` that a worker of another fleet than ``fleet`` wrote."""
    from runkernel.adapters.stores.postgres import PostgresStore

    assert isinstance(store, PostgresStore)
    found = []
    for run_id in runs:
        for commit in list(store.commits(f"t-{run_id}"))[1:]:
            writer = store.writer_of(f"t-{run_id}", commit.version)
            if writer is None or not writer.worker_id.startswith(f"{fleet}-"):
                found.append(f"{run_id} v{commit.version} by {writer}")
    return found


def test_old_and_new_workers_each_drive_only_what_they_may(postgres_url: str, tmp_path: Path) -> None:
    from runkernel.adapters.stores.postgres import PostgresStore

    url = postgres_url
    ledger = tmp_path / "ledger.db"
    env = dict(os.environ, RUNKERNEL_DEMO_LEDGER=str(ledger), RUNKERNEL_DEMO_TOOL_SECONDS="0.02",
               PYTHONPATH=f"{ROOT}{os.pathsep}{ROOT / 'tests'}")
    os.environ["RUNKERNEL_DEMO_LEDGER"] = str(ledger)
    store = PostgresStore(url)
    kinds = ("book", "approve", "nap")
    old_runs = [f"{kind}-old-{n}" for kind in kinds for n in range(PER_KIND)]
    new_runs = [f"{kind}-new-{n}" for kind in kinds for n in range(PER_KIND)]
    legacy_runs = [f"book-legacy-{n}" for n in range(LEGACY)]
    for run_id in old_runs:
        _activate(store, run_id, OLD)
    for run_id in legacy_runs:
        _activate(store, run_id, None)
    began = time.monotonic()
    old_workers = [
        spawn_worker(url, "rolling_app:v1", env, f"old-{n}", lease=LEASE, poll=0.1, concurrency=4) for n in range(2)
    ]
    new_workers: list[subprocess.Popen[str]] = []
    reports: list[str] = []
    try:
        # the old fleet alone: its Runs reach every state (running ones end, approvals wait)
        _wait("old approvals waiting", lambda: all(
            (s := store.run(r)) is not None and isinstance(s.state, Awaiting) for r in old_runs if r.startswith("approve")
        ), began)
        # the deploy starts: new workers beside the old, and Runs of the new code
        new_workers = [
            spawn_worker(url, "rolling_app:v2", env, f"new-{n}", lease=LEASE, poll=0.1, concurrency=4) for n in range(2)
        ]
        for run_id in new_runs:
            _activate(store, run_id, NEW)
        _wait("both fleets registered", lambda: Counter(
            w.version for w in store.workers() if w.live(store.store_time())
        ) == Counter({OLD: 2, NEW: 2}), began)
        # half the old approvals are answered while both fleets run: only old workers may take them
        old_approvals = [r for r in old_runs if r.startswith("approve")]
        approved_mixed = _approve(store, old_approvals[: PER_KIND // 2])
        _wait("mixed-fleet approvals done", lambda: all(
            (s := store.run(r)) is not None and isinstance(s.state, Ended) for r in old_approvals[: PER_KIND // 2]
        ), began)
        new_approvals = [r for r in new_runs if r.startswith("approve")]
        _wait("new approvals waiting", lambda: all(
            (s := store.run(r)) is not None and isinstance(s.state, Awaiting) for r in new_approvals
        ), began)
        # with both fleets live, each drove only its own version's Runs
        assert _foreign_writers(store, old_runs, "old") == []
        assert _foreign_writers(store, new_runs, "new") == []
        # the old fleet is retired; what is left of the old code's Runs waits for the new
        reports += stop_workers(old_workers)
        old_workers = []
        assert {w.version for w in store.workers()} == {NEW}, "a stopped worker forgets itself"
        # an old web process still starts Runs of the old code (running, and on a timer)
        late = [f"{kind}-old-late-{n}" for kind in ("book", "nap") for n in range(2)]
        for run_id in late:
            _activate(store, run_id, OLD)
        old_runs += late
        approved_late = _approve(store, old_approvals[PER_KIND // 2 :]) + _approve(store, new_approvals)
        _wait("new Runs ended", lambda: all(
            (s := store.run(r)) is not None and isinstance(s.state, Ended) for r in new_runs + legacy_runs
        ), began)
        stranded = [r for r in old_runs if not isinstance(getattr(store.run(r), "state", None), Ended)]
        assert stranded, "old Runs were left for the new code (approvals answered after the old fleet stopped)"
        time.sleep(2 * 0.1 + 0.2)  # a few polls of the new fleet: still none of them driven
        assert all(not isinstance(getattr(store.run(r), "state", None), Ended) for r in stranded)
        # the operator's decision: the new code may drive the old Runs
        heads = {r: store.thread_head(f"t-{r}") for r in old_runs}
        store.accept_versions(NAME, NEW, [OLD])
        _wait("every Run ended", lambda: all(
            (s := store.run(r)) is not None and isinstance(s.state, Ended) for r in old_runs + new_runs + legacy_runs
        ), began)
    finally:
        reports += stop_workers(old_workers + new_workers)
    # who wrote each commit, and whether its version could drive the Run then
    version_of_worker = {**{f"old-{n}": OLD for n in range(2)}, **{f"new-{n}": NEW for n in range(2)}}
    incompatible: list[str] = []
    written_by: Counter[str] = Counter()
    lost = duplicated = 0
    for run_id in old_runs + new_runs + legacy_runs:
        commits = list(store.commits(f"t-{run_id}"))
        numbers = [c.version for c in commits]
        lost += len(set(range(1, len(commits) + 1)) - set(numbers))
        duplicated += len(numbers) - len(set(numbers))
        head = heads.get(run_id)
        for commit in commits[1:]:
            writer = store.writer_of(f"t-{run_id}", commit.version)
            assert writer is not None, f"{run_id} v{commit.version} written without a lease"
            worker_version = version_of_worker[writer.worker_id]
            recorded = commits[0].app_version
            accepted = run_id in heads and head is not None and commit.version > head.version
            allowed = recorded is None or worker_version == recorded or (accepted and worker_version == NEW)
            if not allowed:
                incompatible.append(f"{run_id} v{commit.version} by {writer.worker_id}")
            kind = "legacy" if recorded is None else "old" if recorded == OLD else "new"
            written_by[f"{kind} Runs by {worker_version == OLD and 'old' or 'new'} workers"] += 1
    store.close()
    db = sqlite3.connect(ledger)
    twice = db.execute(
        "SELECT tool, operation_id, count(*) FROM starts WHERE refused = 0 AND tool IN ('reserve', 'pay') "
        "GROUP BY tool, operation_id HAVING count(*) > 1"
    ).fetchall()
    starts = dict(db.execute("SELECT tool, count(*) FROM starts GROUP BY tool").fetchall())
    db.close()
    drives = sum(report_figure(r, "drives") for r in reports)
    print(
        f"\nrolling deploy on PostgreSQL: versions old {OLD} / new {NEW}, Runs {len(old_runs)} old + {len(new_runs)} new "
        f"+ {len(legacy_runs)} unversioned, workers 2 old + 2 new x 4 slots, approvals {approved_mixed} with both "
        f"fleets + {approved_late} after the old stopped, old Runs left to the new code {len(stranded)}, drives {drives}, "
        f"commits {dict(sorted(written_by.items()))}, starts {starts}, incompatible writers {len(incompatible)}, "
        f"lost {lost}, duplicated {duplicated + len(twice)}"
    )
    assert incompatible == [], incompatible[:5]
    assert lost == 0 and duplicated == 0 and twice == []
    assert written_by["old Runs by old workers"] > 0 and written_by["old Runs by new workers"] > 0
    assert written_by["new Runs by old workers"] == 0 and written_by["new Runs by new workers"] > 0
    assert starts.get("nap", 0) >= 2 * len(old_runs + new_runs) // 3, "every nap Run slept on its timer"
