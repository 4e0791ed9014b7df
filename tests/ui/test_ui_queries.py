"""The Runs list's cost does not grow with the store: a fixed number of queries per
page, each with a LIMIT, each a range of an index (SQLite's EXPLAIN QUERY PLAN shows no
full scan and no sort), and the same number of SQLite VM steps for a page over 20,000
Runs as over 100,000 (a full scan anywhere would multiply them by 5). Figures printed."""

from __future__ import annotations

import itertools
import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from runkernel.adapters.stores.sqlite import SqliteStore
from runkernel.adapters.stores.sqlite.migrate import migrate_sqlite
from runkernel.adapters.stores.sqlite.schema import SCHEMA_VERSION
from runkernel.adapters.stores.sql.dialect import SQLITE
from runkernel.adapters.stores.sql.queries import count_query, listing_query
from runkernel.kernel.decide import decide
from runkernel.kernel.protocol import Activate
from runkernel.kernel.rules import Rejection
from runkernel.kernel.state import Message
from runkernel.kernel.values import Role
from runkernel.ui.views import COUNT_CAP, PAGE_SIZE, STATES, RunFilter, runs_page

FILTERS = list(itertools.product([None, "awaiting"], [None, "app-1"], [None, "t-7"], [None, "run-1500"]))


def _store(path: Path, runs: int) -> SqliteStore:
    """A store with up to 20 activated Runs, then ``runs`` summary rows in all (copies of
    theirs under new ids): the first 2,000 spread over three states, four apps and 50
    Threads, every later one Running in app ``new`` and other Threads, so a filter that
    walked the table newest first instead of an index would read every newer row. The
    listing reads only the runs table, so copies cost it what real Runs would."""
    store = SqliteStore(path, synchronous="NORMAL")
    for n in range(min(runs, 20)):
        activation = Activate(f"t-{n}", f"run-{n}", 0, (Message(Role.USER, "hi"),), f"app-{n % 4}")
        decision = decide(None, activation)
        assert not isinstance(decision, Rejection) and decision.commit is not None
        store.append(decision.commit)
    db = store._db
    db.execute("BEGIN")
    db.execute(
        "WITH RECURSIVE n(i) AS (SELECT 20 UNION ALL SELECT i + 1 FROM n WHERE i + 1 < ?) "
        "INSERT INTO runs (run_id, thread_id, snapshot, app, state, step, version) "
        "SELECT 'run-' || i, CASE WHEN i < 2000 THEN 't-' || (i % 50) ELSE 'u-' || (i % 50) END, "
        "(SELECT snapshot FROM runs WHERE run_id = 'run-0'), CASE WHEN i < 2000 THEN 'app-' || (i % 4) ELSE 'new' END, "
        "CASE WHEN i >= 2000 OR i % 3 = 0 THEN 'running' WHEN i % 3 = 1 THEN 'awaiting' ELSE 'ended' END, 1, 1 FROM n",
        (runs,),
    )
    db.execute("COMMIT")
    return store


def _vm_steps(db: sqlite3.Connection, query: str, params: list[object]) -> int:
    steps = [0]

    def tick() -> int:
        steps[0] += 1
        return 0

    db.set_progress_handler(tick, 1)
    try:
        db.execute(query, params).fetchall()
    finally:
        db.set_progress_handler(None, 1)
    return steps[0]


def test_every_listing_query_is_an_index_range_with_a_limit(tmp_path: Path) -> None:
    store = _store(tmp_path / "plan.db", 2_000)
    try:
        for state, app, thread, after in FILTERS:
            query, params = listing_query(SQLITE, state=state, thread_id=thread, limit=51, app=app, after=after)
            assert query.rstrip().endswith("LIMIT ?")
            plan = [row[3] for row in store._db.execute("EXPLAIN QUERY PLAN " + query, params)]
            print(f"state={state} app={app} thread={thread} after={after}: {' | '.join(plan)}")
            assert not any("TEMP B-TREE" in step for step in plan), plan
            for step in plan:
                # the one SCAN: no filter, no cursor: the table's own rowid order, newest
                # first, stopped by the LIMIT (its VM steps are bounded below)
                assert not step.startswith("SCAN") or (step == "SCAN runs" and (state, app, thread, after) == (None,) * 4), plan
            counting, counted = count_query(state=state, thread_id=thread, app=app, cap=COUNT_CAP)
            plan = [row[3] for row in store._db.execute("EXPLAIN QUERY PLAN " + counting, counted)]
            print(f"count state={state} app={app} thread={thread}: {' | '.join(plan)}")
            assert "LIMIT ?" in counting and not any("TEMP B-TREE" in step for step in plan), plan
            for step in plan:
                # the capped subquery's rows, or (no filter at all) an index walk it stops
                assert (
                    not step.startswith("SCAN")
                    or step == "SCAN capped"
                    or (step.startswith("SCAN runs USING COVERING INDEX") and (state, app, thread) == (None,) * 3)
                ), plan
    finally:
        store.close()


@pytest.fixture(scope="module")
def sized(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[int, SqliteStore]]:
    """Two stores, 20,000 and 100,000 Runs: every filter fills a whole page in both."""
    where = tmp_path_factory.mktemp("sized")
    stores = {runs: _store(where / f"{runs}.db", runs) for runs in (20_000, 100_000)}
    yield stores
    for store in stores.values():
        store.close()


@pytest.mark.parametrize(("state", "app", "thread", "after"), FILTERS)
def test_a_page_costs_the_same_over_20000_and_100000_runs(
    sized: dict[int, SqliteStore], state: str | None, app: str | None, thread: str | None, after: str | None
) -> None:
    query, params = listing_query(SQLITE, state=state, thread_id=thread, limit=PAGE_SIZE + 1, app=app, after=after)
    few, many = (_vm_steps(sized[runs]._db, query, params) for runs in (20_000, 100_000))
    print(f"state={state} app={app} thread={thread} after={after}: {few} VM steps at 20,000 Runs, {many} at 100,000")
    # a full scan would take 5 times the steps; a page reads the same index range
    assert many <= 1.2 * few, (few, many)
    if after is None:
        counting, counted = count_query(state=state, thread_id=thread, app=app, cap=COUNT_CAP)
        few, many = (_vm_steps(sized[runs]._db, counting, counted) for runs in (20_000, 100_000))
        print(f"  its capped count: {few} VM steps at 20,000 Runs, {many} at 100,000")
        assert many <= 1.2 * few, (few, many)


def test_a_runs_page_is_a_fixed_number_of_queries(tmp_path: Path) -> None:
    figures = []
    for runs in (10, 100_000):
        store = _store(tmp_path / f"{runs}.db", runs)
        statements: list[str] = []
        store._db.set_trace_callback(statements.append)
        try:
            started = time.perf_counter()
            page = runs_page(store, RunFilter("running", "new"))
            seconds = time.perf_counter() - started
        finally:
            store._db.set_trace_callback(None)
            store.close()
        selects = [s for s in statements if s.lstrip().upper().startswith("SELECT")]
        figures.append((runs, len(selects), seconds, len(page.runs), page.counts))
        # the page, its Runs' leases (none to read when it shows none), a count per state
        assert len(selects) == 1 + bool(page.runs) + len(STATES), statements
        # every read is bounded: a LIMIT, or the shown Runs' leases looked up by key
        keyed = [s for s in selects if "LIMIT" not in s]
        assert len(keyed) == bool(page.runs) and all("FROM leases WHERE run_id IN" in s for s in keyed), keyed
        assert len(page.leases) == len(page.runs)
    for runs, queries, seconds, shown, counts in figures:
        print(f"Runs page (running, app new) over {runs:,} Runs: {queries} queries, {seconds * 1000:.2f} ms, {shown} shown, counts {counts}")


def test_the_pages_leases_are_read_by_primary_key(tmp_path: Path) -> None:
    store = _store(tmp_path / "leases.db", 200)
    try:
        ids = [r.run_id for r in store.list_runs(limit=PAGE_SIZE)]
        marks = ", ".join("?" * len(ids))
        plan = store._db.execute(
            f"EXPLAIN QUERY PLAN SELECT run_id, worker_id, epoch, expires_at, released FROM leases WHERE run_id IN ({marks})",
            ids,
        ).fetchall()
    finally:
        store.close()
    details = " | ".join(str(row[-1]) for row in plan)
    print(f"the page's lease read: {details}")
    assert "SEARCH leases USING" in details and "SCAN leases" not in details, details


def test_migrate_4_to_5_adds_the_listing_indexes(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    SqliteStore(path).close()
    db = sqlite3.connect(path, isolation_level=None)
    for index in ("runs_by_state_only", "runs_by_app", "runs_by_thread"):
        db.execute(f"DROP INDEX {index}")
    db.execute("ALTER TABLE runs DROP COLUMN trace_context")  # schema 6's
    db.execute("UPDATE meta SET value = '4' WHERE key = 'version'")
    db.close()
    assert migrate_sqlite(path) == (4, SCHEMA_VERSION)
    db = sqlite3.connect(path)
    names = {row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type = 'index'")}
    db.close()
    assert {"runs_by_state_only", "runs_by_app", "runs_by_thread"} <= names
    SqliteStore(path, read_only=True).close()
