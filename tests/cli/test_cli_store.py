"""The store subcommands as a user runs them: exit codes, stdout, one-line errors."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from runkernel.adapters.stores.export import redacted_ticket
from runkernel.adapters.drive.inbox import submit_end
from runkernel.adapters.stores.memory import MemoryStore
from runkernel.adapters.stores.serial import commit_text
from runkernel.adapters.stores.sqlite import SqliteStore
from runkernel.cli.entry import main
from runkernel.kernel.protocol import EndRequest
from runkernel.kernel.state import Awaiting, EndCause
from runkernel.kernel.values import EndCauseKind
from runkernel.testing import awaiting_run, tool_run
from runkernel.testing.simulation.engine import ScenarioRun
from runkernel.testing.simulation.scenarios import catalogue


def url(path: Path) -> str:
    return f"sqlite:///{path}"


@pytest.fixture
def waiting_store(tmp_path: Path) -> Path:
    path = tmp_path / "w.db"
    store = SqliteStore(path)
    commits, _ = awaiting_run("t1", "r1", "ticket-approval-0001")
    for commit in commits:
        store.append(commit)
    store.close()
    return path


def test_simulate_exports_traces_that_check_trace_accepts(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db, out = tmp_path / "sim.db", tmp_path / "traces"
    code = main(["simulate", "--runs", "64", "--store", url(db), "--export", str(out), "--no-progress"])
    printed = capsys.readouterr().out
    assert code == 0, printed
    assert "violations                  0" in printed and "verdict: PASS" in printed
    files = sorted(out.glob("*.jsonl"))
    assert len(files) >= 64
    assert main(["check-trace", "--quiet", *map(str, files)]) == 0


def test_simulate_refuses_a_store_that_holds_threads_unless_reset(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "sim.db"
    assert main(["simulate", "--runs", "4", "--store", url(db), "--no-progress"]) == 0
    capsys.readouterr()
    assert main(["simulate", "--runs", "4", "--store", url(db), "--no-progress"]) == 2
    error = capsys.readouterr().err
    assert "already holds" in error and "--reset" in error
    assert main(["simulate", "--runs", "4", "--store", url(db), "--reset", "--no-progress"]) == 0


def test_simulate_uses_a_scratch_store_of_its_own_by_default(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The quick start cannot hurt: simulate writes nothing to the directory, and the
    Runs in the default Run store stay, with ``--reset`` too."""
    monkeypatch.chdir(tmp_path)
    assert main(["start", "--thread", "important", "--app", "shop", "my real customer order"]) == 0
    kept = (tmp_path / "runkernel.sqlite").read_bytes()
    assert main(["simulate", "--runs", "4", "--no-progress"]) == 0
    assert main(["simulate", "--reset", "--runs", "4", "--no-progress"]) == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["runkernel.sqlite"]
    assert (tmp_path / "runkernel.sqlite").read_bytes() == kept
    capsys.readouterr()
    assert main(["runs", "--thread", "important"]) == 0
    assert "important" in capsys.readouterr().out


def test_simulate_reset_refuses_runs_it_did_not_create(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    store = f"sqlite:///{tmp_path / 'runs.db'}"
    assert main(["start", "--store", store, "--thread", "important", "--app", "shop", "order"]) == 0
    capsys.readouterr()
    assert main(["simulate", "--store", store, "--reset", "--runs", "2", "--no-progress"]) == 2
    assert "holds 1 thread that simulate did not create" in capsys.readouterr().err
    assert main(["runs", "--store", store, "--thread", "important"]) == 0
    assert "important" in capsys.readouterr().out
    # a store simulate filled is emptied by --reset, as before
    mine = f"sqlite:///{tmp_path / 'sim.db'}"
    assert main(["simulate", "--store", mine, "--runs", "2", "--no-progress"]) == 0
    assert main(["simulate", "--store", mine, "--runs", "2", "--no-progress"]) == 2
    assert main(["simulate", "--store", mine, "--reset", "--runs", "2", "--no-progress"]) == 0


def test_inspect_answers_the_four_questions(waiting_store: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["inspect", "--store", url(waiting_store), "r1"]) == 0
    text = capsys.readouterr().out
    assert "Awaiting" in text
    assert "ticket ticket-approval-0001  wait=approval  call=r1-c1  accepts: approve | deny" in text
    assert "r1-c1  pay  Awaiting  attempt=0  operation=r1-op1" in text
    assert "user: task" in text
    assert main(["inspect", "--store", url(waiting_store), "r1", "--format", "json"]) == 0
    view = json.loads(capsys.readouterr().out)
    assert view["run_state"]["state"] == "awaiting"
    assert view["recovery_row"] == "call_awaiting"


def test_inspect_lists_indeterminate_calls_for_reconciliation(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "i.db"
    store = SqliteStore(db)
    scenario = next(s for s in catalogue() if s.name == "outcome_lost_published")
    trial = ScenarioRun(store, scenario, 1, ()).play()
    store.close()
    run_id = trial.run_ids[0]
    assert main(["inspect", "--store", url(db), run_id]) == 0
    text = capsys.readouterr().out
    assert "Indeterminate calls (reconcile downstream by operation id):" in text
    operation = text.split("operation=")[-1].split()[0]
    assert main(["reconcile", "--store", url(db), operation, "--outcome", "applied", "--note", "ledger"]) == 0
    assert "committed facts are unchanged" in capsys.readouterr().out
    assert main(["reconcile", "--store", url(db), operation, "--outcome", "not_applied"]) == 0
    assert main(["inspect", "--store", url(db), run_id]) == 0
    # every record, in the order recorded, with its note: contradictory ones can be told apart
    assert "1. applied (ledger), 2. not_applied" in capsys.readouterr().out.split("Indeterminate calls")[1]
    assert main(["reconcile", "--store", url(db), "op-nobody", "--outcome", "applied"]) == 1
    assert "no Indeterminate call" in capsys.readouterr().err


def test_resume_refuses_a_forged_ticket_and_queues_a_matching_one(
    waiting_store: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["resume", "--store", url(waiting_store), "r1", "--ticket", "forged", "--approve"]) == 1
    assert "refused: ticket-mismatch" in capsys.readouterr().err
    assert main(["resume", "--store", url(waiting_store), "r1", "--ticket", "ticket-approval-0001", "--input", "x"]) == 1
    assert "refused: wait-kind-mismatch" in capsys.readouterr().err
    assert main(["resume", "--store", url(waiting_store), "r9", "--ticket", "ticket-approval-0001", "--approve"]) == 1
    assert "refused: wrong-run" in capsys.readouterr().err
    assert main(["resume", "--store", url(waiting_store), "r1", "--ticket", "ticket-approval-0001", "--approve"]) == 0
    assert "queued command" in capsys.readouterr().out
    store = SqliteStore(waiting_store)
    assert len(store.pending_commands("r1")) == 1
    snapshot = store.run("r1")
    assert snapshot is not None and isinstance(snapshot.state, Awaiting)  # nothing committed
    store.close()


def test_cancel_queues_and_refuses_an_ended_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "c.db"
    store = SqliteStore(db)
    for commit in tool_run("t1", "r1"):
        store.append(commit)
    commits, _ = awaiting_run("t2", "r2", "ticket-x-0001")
    for commit in commits:
        store.append(commit)
    store.close()
    assert main(["cancel", "--store", url(db), "r1"]) == 1
    assert "refused: run-ended" in capsys.readouterr().err
    assert main(["cancel", "--store", url(db), "r2"]) == 0
    assert "queued cancel" in capsys.readouterr().out


def test_export_prints_the_trace_and_redacts_tickets_consistently(
    waiting_store: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["export", "--store", url(waiting_store), "t1"]) == 0
    plain = capsys.readouterr().out
    assert "ticket-approval-0001" in plain
    assert main(["export", "--store", url(waiting_store), "t1", "--redact"]) == 0
    redacted = capsys.readouterr().out
    assert "ticket-approval-0001" not in redacted
    assert redacted.count(redacted_ticket("ticket-approval-0001")) == 2
    trace = tmp_path / "redacted.jsonl"
    trace.write_text(redacted)
    assert main(["check-trace", str(trace)]) == 0


def test_export_matches_the_stored_lines(waiting_store: Path, capsys: pytest.CaptureFixture[str]) -> None:
    store = SqliteStore(waiting_store)
    expected = "".join(commit_text(c) + "\n" for c in store.commits("t1"))
    store.close()
    assert main(["export", "--store", url(waiting_store), "t1"]) == 0
    assert capsys.readouterr().out == expected


@pytest.mark.parametrize(
    "argv, message",
    [
        (["inspect", "--store", "mysql://x", "r1"], "unknown store URL"),
        (["inspect", "--store", "postgresql://127.0.0.1:1/test", "r1"], "postgresql://127.0.0.1:1/test"),
        (["export", "--store", "memory:", "nope"], "memory: holds nothing"),
        (["inspect", "--store", "memory:", "nope"], "memory: holds nothing"),
        (["cancel", "--store", "memory:", "nope"], "memory: holds nothing"),
        (["reconcile", "--store", "memory:", "op", "--outcome", "applied"], "memory: holds nothing"),
        (["fork", "--store", "memory:", "nope", "--at", "1"], "memory: holds nothing"),
        (["runs", "--store", "memory:"], "memory: holds nothing"),
    ],
)
def test_errors_are_one_line_on_stderr(argv: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(argv)
    captured = capsys.readouterr()
    assert code in (1, 2)
    assert message in captured.err
    assert len(captured.err.strip().splitlines()) == 1
    assert captured.out == ""


def test_a_corrupt_store_file_is_a_clear_error_not_a_traceback(tmp_path: Path) -> None:
    junk = tmp_path / "junk.db"
    junk.write_bytes(b"\x00garbage" * 512)
    result = subprocess.run(
        [sys.executable, "-m", "runkernel.cli", "inspect", "--store", url(junk), "r1"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 2
    assert "not a runkernel SQLite store" in result.stderr
    assert "Traceback" not in result.stderr


def test_help_lists_every_command() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "runkernel.cli", "--help"], capture_output=True, text=True, check=False
    )
    assert result.returncode == 0
    for command in ("simulate", "check-trace", "spec", "inspect", "export", "resume", "cancel", "reconcile"):
        assert command in result.stdout


def test_a_cancel_in_the_inbox_is_applied_by_the_runtime(tmp_path: Path) -> None:
    store = MemoryStore()
    commits, _ = awaiting_run("t1", "r1", "ticket-c-0001")
    for commit in commits:
        store.append(commit)
    assert isinstance(submit_end(store, "r1", EndRequest(EndCause(EndCauseKind.CANCELLED))), int)
    from runkernel.adapters.drive.ports import ToolRegistry
    from runkernel.adapters.drive.runtime import Runtime
    from runkernel.testing import ScriptedModel

    final = Runtime(store, ScriptedModel({}), ToolRegistry({})).drive("r1").snapshot
    assert final.state.__class__.__name__ == "Ended"
    assert store.pending_commands("r1") == []


def test_check_trace_reports_a_file_name_that_is_not_utf8(tmp_path: Path) -> None:
    legal = Path(__file__).parent.parent / "data" / "traces" / "legal" / "call-edge.jsonl"
    odd = tmp_path / "odd\udcffname.jsonl"
    odd.write_bytes(legal.read_bytes())
    env = {**os.environ, "PYTHONIOENCODING": "utf-8"}
    result = subprocess.run(
        [sys.executable, "-m", "runkernel.cli", "check-trace", str(odd)],
        capture_output=True,
        text=True,
        check=False,
        env=env,
    )
    assert result.returncode == 0, result.stderr
    assert "odd\\xffname.jsonl: legal" in result.stdout


def test_read_commands_do_not_create_a_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)
    for argv in (["inspect", "r1"], ["export", "t1"], ["cancel", "r1"], ["resume", "r1", "--ticket", "t", "--approve"]):
        assert main(argv) == 2
        assert "no store at" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []


def test_deny_takes_its_reason_as_an_option(waiting_store: Path, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["resume", "--store", url(waiting_store), "r1", "--ticket", "ticket-approval-0001", "--deny", "--reason", "too much"]
    assert main(argv) == 0
    store = SqliteStore(waiting_store)
    [entry] = store.pending_commands("r1")
    assert entry.body["command"]["payload"] == {"type": "deny", "reason": "too much"}
    store.close()


def test_a_non_finite_result_is_refused_in_one_line(waiting_store: Path, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["resume", "--store", url(waiting_store), "r1", "--ticket", "ticket-approval-0001", "--external", '{"a": NaN}']
    assert main(argv) == 2
    assert "NaN is not" in capsys.readouterr().err


def test_a_locked_or_damaged_store_is_one_line_not_a_traceback(waiting_store: Path) -> None:
    import sqlite3

    db = sqlite3.connect(waiting_store)
    db.execute("UPDATE runs SET snapshot = '{\"broken\": true}'")
    db.commit()
    db.close()
    result = subprocess.run(
        [sys.executable, "-m", "runkernel.cli", "inspect", "--store", url(waiting_store), "r1"],
        capture_output=True, text=True, check=False,
    )
    assert result.returncode == 1
    assert "is damaged" in result.stderr and "Traceback" not in result.stderr


def test_an_argument_that_is_not_utf8_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["inspect", "--store", "memory:", "r\udcff"]) == 2
    assert "not valid UTF-8" in capsys.readouterr().err
