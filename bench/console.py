"""The console's Runs page: one page, filtered by state and app, over a
store of 10 Runs and one of 100,000 (1,000 with ``--quick``). A page is a fixed number
of queries, each an index range with a LIMIT, so its time must not follow the store.

The large store holds 20 activated Runs and copies of their summary rows under new ids
(the page reads only the ``runs`` table, so a copy costs it what a real Run would)."""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

from bench import subject
from bench.framework import Prepared, Sample, Sizes

PAGES_PER_SAMPLE = 20


def _build(path: Path, runs: int) -> None:
    store = subject.sqlite_store(path, "NORMAL")
    try:
        subject.activate_runs(store, min(runs, 20), apps=4)
    finally:
        store.close()
    db = sqlite3.connect(path, isolation_level=None)
    try:
        db.execute("BEGIN")
        db.execute(
            "WITH RECURSIVE n(i) AS (SELECT 20 UNION ALL SELECT i + 1 FROM n WHERE i + 1 < ?) "
            "INSERT INTO runs (run_id, thread_id, snapshot, app, state, step, version) "
            "SELECT 'run-' || i, 't-' || i, (SELECT snapshot FROM runs LIMIT 1), 'app-' || (i % 4), "
            "CASE i % 3 WHEN 0 THEN 'running' WHEN 1 THEN 'awaiting' ELSE 'ended' END, 1, 1 FROM n",
            (runs,),
        )
        db.execute("COMMIT")
    finally:
        db.close()


def runs_page(sizes: Sizes, scratch: Path) -> Prepared:
    """Sides ``10 Runs`` and ``100,000 Runs``: seconds per page, and queries per page."""
    large = 1_000 if sizes.quick else 100_000
    paths = {}
    for runs in (10, large):
        paths[runs] = scratch / f"console-{runs}.db"
        _build(paths[runs], runs)

    def measure(runs: int) -> Sample:
        store = subject.sqlite_store(paths[runs], "NORMAL")
        try:
            statements = subject.count_selects(store)
            started = time.perf_counter()
            for _ in range(PAGES_PER_SAMPLE):
                subject.console_runs_page(store, "awaiting", "app-1")
            seconds = time.perf_counter() - started
        finally:
            store.close()
        return Sample(seconds, PAGES_PER_SAMPLE, {"queries": float(len(statements))})

    return Prepared({"10 Runs": lambda: measure(10), "large": lambda: measure(large)})
