"""The worker group's own parts (``bench/workers.py``, ``bench/worker_rows.py``): what it
counts on SQLite, the worker report it reads, the unit it drives, and the projection's
arithmetic. The group itself runs in ``test_bench_quick``."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from bench import subject
from bench.counting import TransactionCounter
from bench.framework import Sample
from bench.worker_rows import projected_rate, serial_fraction
from bench.workers import report_figure
from runkernel import Worker


def test_the_counter_sums_the_rows_of_committed_transactions_only(tmp_path: Path) -> None:
    with TransactionCounter() as counter:
        db = sqlite3.dbapi2.connect(str(tmp_path / "c.db"), isolation_level=None)  # SQLAlchemy's way in
        db.execute("CREATE TABLE t (k INTEGER PRIMARY KEY, v TEXT)")
        db.execute("BEGIN")
        db.execute("INSERT INTO t VALUES (1, 'a'), (2, 'b'), (3, 'c')")
        db.execute("UPDATE t SET v = 'd' WHERE k < 3")
        db.execute("COMMIT")
        db.execute("BEGIN")
        db.execute("DELETE FROM t")
        db.execute("ROLLBACK")
        db.execute("DELETE FROM t WHERE k = 3")  # autocommit
        assert (counter.transactions, counter.rows) == (2, 6)
        db.close()


def test_a_figure_is_read_from_the_worker_report_line() -> None:
    line = "worker w1: 1 drive, 6 commits, 0 take-overs, 2 contended, 0 conflicts, 0 leases lost"
    assert report_figure(line, "drives") == 1
    assert report_figure(line, "commits") == 6
    with pytest.raises(AssertionError):
        report_figure(line, "outages")


def test_the_unit_is_two_tool_calls_then_an_answer_in_six_commits(tmp_path: Path) -> None:
    store = subject.sqlite_store(tmp_path / "rk.db", "NORMAL")
    run_ids = subject.start_runs(store, "u", 3, "unit")
    report = Worker(store, subject.two_call_app("unit", lambda: None)).run_once()
    assert subject.runs_completed(store, run_ids) == 3
    assert subject.runs_running(store, "unit", 10) == 0
    assert (report.drives, report.commits) == (3, 18)
    store.close()


def _rate(per_second: float, cpu: float) -> Sample:
    """A sample of 100 Runs at ``per_second`` with ``cpu`` seconds of CPU per Run."""
    return Sample(100 / per_second, 100, {"cpu": cpu * 100, "server_cpu": 0.0})


def test_the_projection_follows_the_measured_speedup_and_the_cpu_cap() -> None:
    one = _rate(10.0, 0.01)
    assert serial_fraction(one, _rate(20.0, 0.01)) == 0.0
    assert projected_rate(one, _rate(20.0, 0.01), 8) == pytest.approx(80.0)
    assert serial_fraction(one, _rate(10.0, 0.01)) == 1.0
    assert projected_rate(one, _rate(10.0, 0.01), 8) == pytest.approx(10.0)
    # 1.6x on 2 cores: a serial fraction of 0.25, so 8 cores give 8 / (1 + 0.25 * 7) of one
    assert projected_rate(one, _rate(16.0, 0.01), 8) == pytest.approx(10.0 * 8 / 2.75)
    # 50 ms of CPU per Run: 8 cores finish at most 160 Runs/s, whatever the speedup says
    assert projected_rate(_rate(10.0, 0.05), _rate(20.0, 0.05), 8) == pytest.approx(80.0)
    assert projected_rate(_rate(100.0, 0.05), _rate(200.0, 0.05), 8) == pytest.approx(160.0)
