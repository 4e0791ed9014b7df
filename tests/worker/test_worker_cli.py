"""``runkernel start``, ``runs`` and ``worker`` as commands: what they print, what they
refuse, and the worker's signals (finish the commit in flight, release, exit 0)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from held_points import Arrival, HeldPoints
from runkernel.adapters.stores.sqlite import SqliteStore
from runkernel.cli.entry import main
from runkernel.kernel.state import CallCompleted
from worker_processes import report_figure

ROOT = Path(__file__).resolve().parents[2]


def test_start_prints_the_run_id_and_runs_lists_newest_first(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    url = f"sqlite:///{tmp_path / 's.db'}"
    assert main(["start", "--store", url, "--thread", "t1", "--run", "r1", "--app", "demo", "hello"]) == 0
    assert capsys.readouterr().out == "r1\n"
    assert main(["start", "--store", url, "--thread", "t2", "--app", "demo", "first", "second"]) == 0
    minted = capsys.readouterr().out.strip()
    assert minted.startswith("run")
    assert main(["runs", "--store", url, "--format", "json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert [r["run_id"] for r in listed] == [minted, "r1"]
    assert listed[1] == {
        "run_id": "r1", "thread_id": "t1", "state": "running", "step": 0, "version": 1, "app": "demo", "waiting_for": None,
        "ticket": None, "lease": {"state": "unleased"},
        # started by name: no version recorded; no worker of demo is live to drive it
        "app_version": None, "not_driven": "no live worker of its app",
    }
    assert main(["runs", "--store", url, "--thread", "t1"]) == 0
    text = capsys.readouterr().out.splitlines()
    assert text[0].split() == [
        "RUN", "THREAD", "STATE", "STEP", "VERSION", "APP", "APP", "VERSION", "LEASE", "WAITING", "FOR", "NOT", "DRIVEN"
    ]
    assert text[1].split()[:8] == ["r1", "t1", "running", "0", "1", "demo", "-", "-"]
    assert text[1].endswith("no live worker of its app")
    assert main(["runs", "--store", url, "--state", "ended"]) == 0
    assert capsys.readouterr().out.splitlines()[1:] == []


def test_start_refuses_a_second_active_run_in_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    url = f"sqlite:///{tmp_path / 's.db'}"
    assert main(["start", "--store", url, "--thread", "t1", "--run", "r1", "--app", "a", "hello"]) == 0
    capsys.readouterr()
    assert main(["start", "--store", url, "--thread", "t1", "--run", "r2", "--app", "a", "again"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "one-active-run" in err, err


def test_worker_refuses_an_app_that_is_not_one(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    url = f"sqlite:///{tmp_path / 's.db'}"
    assert main(["worker", "--store", url, "--app", "examples.demo_app:APP_NAME", "--once"]) == 2
    assert "not a worker app" in capsys.readouterr().err


@pytest.mark.parametrize("slots", [1, 3])
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_signalled_worker_finishes_releases_its_leases_and_exits_0(
    tmp_path: Path, sig: signal.Signals, slots: int
) -> None:
    path = tmp_path / "s.db"
    for index in range(3):
        assert main(["start", "--store", f"sqlite:///{path}", "--thread", f"t{index}", "--app", "demo", "go"]) == 0
    # signalled while every Run in flight holds still after its first reserve, the reply
    # not committed yet (one Run with one slot, all three with three)
    points = HeldPoints(tmp_path / "points", [f"reserve:after:{n}" for n in range(1, slots + 1)])
    env = {
        **os.environ,
        "PYTHONPATH": f"{ROOT}{os.pathsep}{ROOT / 'tests'}",
        "RUNKERNEL_DEMO_LEDGER": str(tmp_path / "ledger.db"),
        **points.env(),
    }
    worker = subprocess.Popen(
        [sys.executable, "-m", "runkernel.cli", "worker", "--store", f"sqlite:///{path}",
         "--app", "held_points:demo_app", "--lease", "30", "--concurrency", str(slots)],
        cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    store = SqliteStore(path, create=False)
    held: list[Arrival] = []
    try:
        began = time.monotonic()
        while len(held) < slots:
            held += points.arrivals()
            assert worker.poll() is None, worker.communicate()
            assert time.monotonic() - began < 300, "hang guard: the worker never reached its reserves"
            time.sleep(0.01)
        assert all(store.current_lease(h.run_id) is not None for h in held), "held mid-drive, each holds its lease"
        worker.send_signal(sig)
        for arrival in held:
            points.release(arrival)  # its handler ran first: the signal was delivered before this
        out, err = worker.communicate(timeout=60)
    finally:
        if worker.poll() is None:
            worker.kill()
    assert worker.returncode == 0, err
    assert out.startswith("worker ") and f"at most {slots} in flight" in out, out
    # a 30 s lease: only a release lets another worker in now
    assert all(store.current_lease(s.run_id) is None for s in store.list_runs())
    for summary in store.list_runs():
        assert store.thread_head(summary.thread_id) is not None
    # each commit in flight finished: every held reserve's reply is committed; nothing new started
    for arrival in held:
        thread_id = store.thread_of(arrival.run_id)
        assert thread_id is not None
        reserves = [
            call.status for c in store.commits(thread_id) if c.batch is not None for call in c.batch.calls
            if call.tool == "reserve"
        ]
        assert isinstance(reserves[-1], CallCompleted), reserves[-1]
    held_runs = {h.run_id for h in held}
    versions = sorted(s.version for s in store.list_runs() if s.run_id not in held_runs)
    assert versions == [1] * (3 - slots), "a Run that was not in flight was driven"
    print(f"{sig.name} with {slots} slot(s), each Run in flight held after a reserve: {out.strip()}")
    store.close()


def test_inspect_shows_every_call_of_every_batch_as_json_with_its_history(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("RUNKERNEL_DEMO_LEDGER", str(tmp_path / "ledger.db"))
    url = f"sqlite:///{tmp_path / 's.db'}"
    assert main(["start", "--store", url, "--thread", "t1", "--run", "r1", "--app", "demo", "book"]) == 0
    assert main(["worker", "--store", url, "--app", "examples.demo_app:app", "--once"]) == 0
    capsys.readouterr()
    assert main(["inspect", "--store", url, "r1", "--format", "json"]) == 0
    view = json.loads(capsys.readouterr().out)
    ticket = view["ticket"]
    assert (ticket["tool"], ticket["arguments"]) == ("pay", {"amount": 20, "currency": "EUR"})
    assert main(["resume", "--store", url, "r1", "--ticket", ticket["ticket_id"], "--approve"]) == 0
    assert main(["worker", "--store", url, "--app", "examples.demo_app:app", "--once"]) == 0
    capsys.readouterr()
    assert main(["inspect", "--store", url, "r1", "--format", "json"]) == 0
    view = json.loads(capsys.readouterr().out)
    assert view["run_state"]["state"] == "ended" and view["app"] == "demo"
    calls = [c for b in view["batches"] for c in b["calls"]]
    assert [c["tool"] for c in calls] == ["lookup", "reserve", "pay"]
    pay = calls[2]
    assert [h["status"] for h in pay["history"]] == ["requested", "awaiting", "executing", "completed"]
    assert pay["history"][-1]["result"] == {"kind": "output", "value": {"paid": 20, "currency": "EUR"}}
    assert [r["payload"] for r in pay["resumes"]] == [{"type": "approve"}]
    assert view["settled_commands"][0]["outcome"] == "applied"
    assert view["writer"]["epoch"] >= 1
    assert main(["inspect", "--store", url, "r1"]) == 0
    text = capsys.readouterr().out
    assert "no open batch" in text and "no batch\n" not in text
    assert 'pay  arguments={"amount":20,"currency":"EUR"}' in text
    assert 'result={"kind":"output","value":{"paid":20,"currency":"EUR"}}' in text
    assert 'resumed with {"type":"approve"}' in text
    # pay's lines read in commit order: the resume between awaiting and executing
    pay_lines = text[text.index("pay  arguments=") :].splitlines()[1:6]
    versions = [int(line.split(":")[0].strip().lstrip("v")) for line in pay_lines]
    assert versions == sorted(versions), pay_lines
    assert [line.split(": ", 1)[1].split()[0] for line in pay_lines] == [
        "requested", "awaiting", "resumed", "executing", "completed"
    ], pay_lines


def test_report_figure_reads_singular_and_plural_counts() -> None:
    line = "worker w1: 1 drive, 3 commits, 1 take-over, 0 contended, 2 conflicts, 1 lease lost, 0 failures"
    assert [report_figure(line, n) for n in ("drives", "commits", "take-overs", "conflicts", "leases lost")] == [
        1, 3, 1, 2, 1,
    ]
