"""``runkernel simulate`` as an operator runs it: reproducible, its store failures told
apart from violations, Ctrl-C, its ``--export`` target and its store claim."""

from __future__ import annotations

import re
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from runkernel.cli import commands
from runkernel.adapters.stores.memory import MemoryStore
from runkernel.adapters.stores.sqlite import SqliteStore
from runkernel.adapters.stores.contract import Store
from runkernel.cli.entry import main
from runkernel.testing import CrashingStore
from runkernel.testing.simulation.simulate import Report, format_report, simulate


def url(path: Path) -> str:
    return f"sqlite:///{path}"


def without_timings(text: str) -> str:
    return "\n".join(line for line in text.splitlines() if not line.startswith("exported"))


def test_the_same_seed_exports_byte_identical_traces(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    reports = []
    for name in ("a", "b"):
        argv = ["simulate", "--runs", "64", "--seed", "11", "--store", url(tmp_path / f"{name}.db"),
                "--export", str(tmp_path / name), "--no-progress"]
        assert main(argv) == 0
        captured = capsys.readouterr()
        reports.append(without_timings(captured.out))
        # the time goes to stderr, so the report on stdout is the same for the same seed
        assert re.fullmatch(r"runkernel simulate: 64 Runs in \d+\.\d s \(\d+\.\d s of CPU\)\n", captured.err), captured.err
    first = {p.name: p.read_bytes() for p in (tmp_path / "a").iterdir()}
    second = {p.name: p.read_bytes() for p in (tmp_path / "b").iterdir()}
    assert len(first) >= 64
    assert first == second
    assert reports[0] == reports[1]
    tickets = [line for data in first.values() for line in data.split(b"\n") if b'"ticket_id"' in line]
    print(f"{len(first)} traces, {len(tickets)} lines with a ticket, byte-identical across two runs")
    assert tickets, "the scenarios commit tickets, so the comparison covers them"


def test_another_seed_gives_other_tickets(tmp_path: Path) -> None:
    from runkernel.testing import CountingIds

    assert CountingIds("00001", seed=1).ticket_id() != CountingIds("00001", seed=2).ticket_id()
    ticket = CountingIds("00001").ticket_id()
    assert ticket.startswith("tk_") and len(ticket) == 3 + 48  # 192 bits


def full_after_claim(path: Path) -> Any:
    """An ``open_store`` whose SQLite file fills up shortly after simulate claims it."""

    def opener(url_text: str, **_: Any) -> Store:
        store = SqliteStore(path)
        pages = store._db.execute("PRAGMA page_count").fetchone()[0]
        store._db.execute(f"PRAGMA max_page_count = {pages + 3}")
        return store

    return opener


def test_a_store_failure_stops_simulate_with_one_line_and_no_violations(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(commands, "open_store", full_after_claim(tmp_path / "full.db"))
    code = main(["simulate", "--runs", "400", "--store", url(tmp_path / "full.db"), "--no-progress"])
    captured = capsys.readouterr()
    assert code == 1
    [line] = captured.err.strip().splitlines()
    assert line.startswith("runkernel simulate: store unavailable: ") and "disk is full" in line
    assert "violations                  0" in captured.out
    assert "verdict: INCOMPLETE, the store failed after" in captured.out
    print(line)


def test_simulate_reports_a_store_failure_instead_of_retrying_it() -> None:
    store = CrashingStore(MemoryStore())
    store.fail_writes = True
    report = simulate(store, 50, seed=1)
    assert report.store_failure is not None and "writes are failing" in report.store_failure
    assert report.runs == 0 and report.violations == []
    assert not report.complete


def test_ctrl_c_in_simulate_gives_the_partial_report(tmp_path: Path) -> None:
    def interrupt_at_third(done: int, total: int, report: Report) -> None:
        if done == 3:
            raise KeyboardInterrupt

    report = simulate(MemoryStore(), 100, seed=2, progress=interrupt_at_third)
    assert report.interrupted and report.runs == 3
    assert "INCOMPLETE, interrupted after 3 runs" in format_report(report)


def _default_sigint() -> None:
    # a shell starts background jobs with SIGINT ignored, and Python then installs no
    # KeyboardInterrupt handler: give the child the default, as a terminal would
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def test_sigint_exits_130_with_the_report_on_a_line_of_its_own(tmp_path: Path) -> None:
    process = subprocess.Popen(
        [sys.executable, "-m", "runkernel.cli", "simulate", "--runs", "100000", "--store",
         url(tmp_path / "s.db")],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, preexec_fn=_default_sigint,
    )
    assert process.stderr is not None
    try:
        first = process.stderr.readline()  # the first progress line: simulate is running
        assert first.startswith("simulate: "), first
        process.send_signal(signal.SIGINT)
        out, err = process.communicate(timeout=300)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert process.returncode == 130, err
    assert "Traceback" not in err
    assert err.splitlines()[-1] == "runkernel simulate: interrupted"
    assert out.startswith("runkernel simulate report")
    assert "verdict: INCOMPLETE, interrupted after" in out


def test_export_onto_a_regular_file_is_refused_before_anything_runs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    target = tmp_path / "file"
    target.write_text("mine")
    db = tmp_path / "s.db"
    assert main(["simulate", "--runs", "4", "--store", url(db), "--export", str(target), "--no-progress"]) == 2
    assert "is not a directory" in capsys.readouterr().err
    assert target.read_text() == "mine" and not db.exists()


def test_export_into_a_non_empty_directory_needs_reset(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out"
    out.mkdir()
    (out / "old-thread.jsonl").write_text("old\n")
    db = tmp_path / "s.db"
    argv = ["simulate", "--runs", "8", "--store", url(db), "--export", str(out), "--no-progress"]
    assert main(argv) == 2
    assert "is not empty" in capsys.readouterr().err
    assert not db.exists()
    assert main([*argv, "--reset"]) == 0
    names = sorted(p.name for p in out.iterdir())
    assert "old-thread.jsonl" not in names and len(names) >= 8
    (out / "notes.txt").write_text("keep me")
    assert main([*argv, "--reset"]) == 2
    assert "not traces" in capsys.readouterr().err
    assert (out / "notes.txt").read_text() == "keep me"


def test_the_already_holds_threads_check_is_atomic(tmp_path: Path) -> None:
    path = tmp_path / "fresh.db"
    first, second = SqliteStore(path), SqliteStore(path)
    # both opened a fresh store; only one may claim it
    assert first.claim_empty("first", reset=False) is None
    refused = second.claim_empty("second", reset=False)
    assert refused is not None and "in use by first" in refused
    assert second.claim_empty("second", reset=True) is None  # --reset takes it over
    first.close()
    second.close()


def test_two_simulations_started_together_on_a_fresh_store_do_not_both_run(tmp_path: Path) -> None:
    db = tmp_path / "race.db"
    argv = [sys.executable, "-m", "runkernel.cli", "simulate", "--runs", "16", "--store", url(db), "--no-progress"]
    processes = [subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(2)]
    results = [(p.wait(timeout=300), p.communicate()) for p in processes]
    codes = sorted(code for code, _ in results)
    print(f"exit codes of two simulations started together: {codes}")
    assert codes == [0, 2]
    refused = next(err for code, (_, err) in results if code == 2)
    assert "pass --reset" in refused and "Traceback" not in refused


def test_another_seed_exports_other_tickets(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    exported = []
    for seed in ("11", "12"):
        out = tmp_path / seed
        argv = ["simulate", "--runs", "24", "--seed", seed, "--store", "memory:", "--export", str(out), "--no-progress"]
        assert main(argv) == 0
        exported.append({p.name: p.read_bytes() for p in out.iterdir()})
    capsys.readouterr()
    assert exported[0].keys() == exported[1].keys()
    assert exported[0] != exported[1]


def test_production_ids_keep_at_least_128_random_bits() -> None:
    from runkernel.adapters.drive.ports import SecretIds

    ids = SecretIds()
    batch, ticket = ids.new_id("batch"), ids.ticket_id()
    assert len(batch.removeprefix("batch_")) * 4 >= 128  # hex digits
    assert len(ticket.removeprefix("tk_")) * 6 >= 128  # url-safe base64 characters
    assert len({ids.ticket_id() for _ in range(100)}) == 100


def test_sigterm_gives_the_partial_report_and_exits_143(tmp_path: Path) -> None:
    process = subprocess.Popen(
        [sys.executable, "-m", "runkernel.cli", "simulate", "--runs", "100000", "--store", url(tmp_path / "s.db")],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    assert process.stderr is not None
    try:
        first = process.stderr.readline()
        assert first.startswith("simulate: "), first
        process.send_signal(signal.SIGTERM)
        out, err = process.communicate(timeout=300)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    print(f"simulate under SIGTERM: exit {process.returncode}, {out.splitlines()[-1:]}")
    assert process.returncode == 143, err
    assert "Traceback" not in err and err.splitlines()[-1] == "runkernel simulate: terminated"
    assert "verdict: INCOMPLETE, interrupted after" in out
