"""What an approver and an operator see:
the hold's request committed with its wait and shown by inspect, export, runs and the
push driver's WaitFor, also after a crash; each Run's lease by the store's clock in
inspect and runs; resume --call; a command identical to a queued one is not queued
again."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from push_host import SHELLS, Reply, World, make_shell, play
from runkernel.adapters.drive.actions import WaitFor
from runkernel.adapters.stores.inspect_view import inspect_json, inspect_text
from runkernel.adapters.stores.memory import MemoryStore
from runkernel.adapters.stores.sqlite import SqliteStore
from runkernel.cli.entry import main
from runkernel.kernel.codec import commit_from_json, commit_to_json
from runkernel.kernel.protocol import GateVerdict, InferenceResult, ProposedCall, RequireWait
from runkernel.kernel.rules import Rejection, Rule
from runkernel.kernel.state import CallAwaiting
from runkernel.kernel.values import REQUEST_MAX_BYTES, REQUEST_MAX_DEPTH, EndCauseKind, JsonValue, WaitKind
from runkernel.specs.checker import Verdict, check_lines
from runkernel.testing import Builder, awaiting_run

PROMPT = {"prompt": "send email to customer@example.com?"}


def url(path: Path) -> str:
    return f"sqlite:///{path}"


def cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def _store_with(path: Path, request: JsonValue = None, *, run_id: str = "r1") -> Path:
    store = SqliteStore(path)
    commits, _ = awaiting_run("t1", run_id, "ticket-approval-0001", request=request)
    for commit in commits:
        store.append(commit)
    store.close()
    return path


# --- the hold's request --------------------------------------------------------------


def test_a_holds_request_is_committed_and_shown_by_inspect_export_and_runs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = url(_store_with(tmp_path / "s.db", PROMPT))
    code, out, _ = cli(capsys, "inspect", "--store", db, "r1")
    assert code == 0
    assert 'request: {"prompt":"send email to customer@example.com?"}' in out
    code, out, _ = cli(capsys, "inspect", "--store", db, "r1", "--format", "json")
    assert json.loads(out)["ticket"]["request"] == PROMPT
    code, out, _ = cli(capsys, "export", "--store", db, "t1")
    waits = [c["wait"] for line in out.splitlines() for c in (json.loads(line)["batch"] or {}).get("calls", []) if "wait" in c]
    assert waits and waits[-1]["request"] == PROMPT
    (tmp_path / "t1.jsonl").write_text(out)
    assert cli(capsys, "check-trace", str(tmp_path / "t1.jsonl"))[0] == 0
    code, out, _ = cli(capsys, "runs", "--store", db, "--format", "json")
    [listed] = json.loads(out)
    assert listed["ticket"] == {
        "ticket_id": "ticket-approval-0001",
        "wait": "approval",
        "call_id": "r1-c1",
        "tool": "pay",
        "request": PROMPT,
    }
    code, out, _ = cli(capsys, "runs", "--store", db)
    assert "approval ticket ticket-approval-0001 call r1-c1" in out


def test_a_wait_without_request_exports_as_before(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    commits, _ = awaiting_run("t1", "r1", "ticket-approval-0001")
    lines = [commit_to_json(c) for c in commits]
    assert all('"request"' not in json.dumps(line) for line in lines), "absent, not null: old traces unchanged"
    assert [commit_to_json(commit_from_json(line)) for line in lines] == lines
    db = url(_store_with(tmp_path / "s.db"))
    code, out, _ = cli(capsys, "export", "--store", db, "t1")
    assert code == 0 and '"request"' not in out
    assert cli(capsys, "inspect", "--store", db, "r1")[1].count("request:") == 0


@pytest.mark.parametrize("value", ["ask", [1, {"a": None}], 2.5, 2**70, {"deep": [[[[["x"]]]]]}, None])
def test_check_trace_ignores_the_requests_value(value: JsonValue) -> None:
    commits, _ = awaiting_run("t1", "r1", "ticket-approval-0001", request=PROMPT)
    lines = [commit_to_json(c) for c in commits]
    lines[-1]["batch"]["calls"][0]["wait"]["request"] = value
    finding = check_lines(json.dumps(line).encode() for line in lines)
    assert finding.verdict is Verdict.LEGAL, finding
    # and a round trip through the codec keeps it (export stays what was committed)
    assert commit_to_json(commit_from_json(lines[-1]))["batch"]["calls"][0]["wait"].get("request") == value


def _nested(depth: int) -> JsonValue:
    value: JsonValue = "bottom"
    for _ in range(depth):
        value = [value]
    return value


@pytest.mark.parametrize(
    ("request_value", "accepted"),
    [
        (PROMPT, True),
        (_nested(REQUEST_MAX_DEPTH), True),
        (_nested(REQUEST_MAX_DEPTH + 1), False),
        (2**53 - 1, True),
        (2**53, False),  # not I-JSON: readers in other languages would not agree on it
        ("x" * (REQUEST_MAX_BYTES - 2), True),
        ("x" * (REQUEST_MAX_BYTES - 1), False),
        (float("nan"), False),
    ],
)
def test_the_kernel_commits_only_a_request_within_the_line_limits(request_value: JsonValue, accepted: bool) -> None:
    call = ProposedCall("c1", "pay", {"amount": 1}, "op1")
    run = Builder("t1").start("r1").feed(InferenceResult("paying", (call,), "b1"))
    verdict = GateVerdict("c1", RequireWait(WaitKind.APPROVAL, "ticket-0001", request_value))
    if accepted:
        status = run.feed(verdict).snapshot.batch.calls[0].status  # type: ignore[union-attr]
        assert isinstance(status, CallAwaiting) and status.wait.request == request_value
    else:
        refused = run.refused(verdict)
        assert isinstance(refused, Rejection) and refused.rule is Rule.UNEXPECTED_INPUT


@pytest.mark.parametrize("kind", SHELLS)
def test_waitfor_shows_the_request_and_a_new_driver_after_a_crash_shows_it_again(kind: str) -> None:
    store = MemoryStore()
    world = World({1: Reply("pay?", (("pay", {"amount": 5}),)), 2: Reply("done", end=EndCauseKind.COMPLETED)})
    driver = make_shell(kind, store)
    waiting = play(driver, driver.start(["go"], thread_id="t1", run_id="r1"), world)
    assert isinstance(waiting, WaitFor) and waiting.request == {"tool": "pay"}
    del driver  # the host crashes: only the store is left
    again = make_shell(kind, store).pick_up("r1")
    assert isinstance(again, WaitFor) and again.request == {"tool": "pay"}
    assert again.ticket == waiting.ticket


# --- leases ---------------------------------------------------------------------------


class Clock:
    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def _lease_line(store: MemoryStore, run_id: str = "r1") -> str:
    snapshot = store.run(run_id)
    assert snapshot is not None
    text = inspect_text(store, snapshot)
    return text.splitlines()[4].strip()  # under "Is execution still running ...": state, then lease


def test_inspect_says_who_holds_the_lease_until_when_by_the_stores_clock() -> None:
    clock = Clock(1_000.0)
    store = MemoryStore(clock=clock)
    for commit in Builder("t1").start("r1").commits:
        store.append(commit)
    figures = []
    assert _lease_line(store) == "unleased"
    store.acquire_lease("r1", "w1", 30)
    assert _lease_line(store) == "leased by w1 (epoch 1) until 1970-01-01T00:17:10Z, in 30 s"
    clock.now = 1_006.0
    assert _lease_line(store) == "leased by w1 (epoch 1) until 1970-01-01T00:17:10Z, in 24 s"
    figures.append(_lease_line(store))
    clock.now = 1_031.0  # the worker died: nobody renewed it
    assert _lease_line(store) == "lease of w1 (epoch 1) expired 1970-01-01T00:17:10Z: the next poll takes it over"
    figures.append(_lease_line(store))
    snapshot = store.run("r1")
    assert snapshot is not None
    assert inspect_json(store, snapshot)["lease"] == {
        "state": "expired", "worker_id": "w1", "epoch": 1, "expires_at": "1970-01-01T00:17:10Z", "expires_in": -1.0,
    }
    lease = store.acquire_lease("r1", "w2", 30)  # the take-over
    assert _lease_line(store) == "leased by w2 (epoch 2) until 1970-01-01T00:17:41Z, in 30 s"
    store.release_lease(lease)
    assert _lease_line(store) == "unleased (last held by w2 (epoch 2), released)"
    figures.append(_lease_line(store))
    print("lease lines:", *figures, sep="\n  ")


def test_runs_shows_each_runs_lease_in_text_and_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "s.db"
    store = SqliteStore(path)
    for run_id in ("held", "expired", "free"):
        for commit in Builder(f"t-{run_id}").start(run_id).commits:
            store.append(commit)
    store.acquire_lease("held", "w1", 3600)
    store.acquire_lease("expired", "w2", 0)
    store.close()
    code, out, _ = cli(capsys, "runs", "--store", url(path), "--format", "json")
    leases: dict[str, Any] = {r["run_id"]: r["lease"] for r in json.loads(out)}
    assert code == 0 and leases["free"] == {"state": "unleased"}
    assert leases["held"]["state"] == "held" and leases["held"]["worker_id"] == "w1" and leases["held"]["epoch"] == 1
    assert 3590 < leases["held"]["expires_in"] <= 3600
    assert leases["expired"]["state"] == "expired" and leases["expired"]["expires_in"] <= 0
    code, out, _ = cli(capsys, "runs", "--store", url(path))
    rows = {line.split()[0]: line for line in out.splitlines()[1:]}
    assert out.splitlines()[0].split()[8] == "LEASE"  # after APP VERSION
    assert re.search(r"\bw1/1 \d+ s left\b", rows["held"]) and " expired " in rows["expired"]
    code, out, _ = cli(capsys, "inspect", "--store", url(path), "held")
    assert re.search(r"leased by w1 \(epoch 1\) until \S+Z, in 3[56]\d\d s", out), out
    code, out, _ = cli(capsys, "inspect", "--store", url(path), "expired")
    assert "lease of w2 (epoch 1) expired" in out and "the next poll takes it over" in out


def test_runs_reads_leases_a_page_per_query_never_one_per_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """450 Runs listed: their leases come from 3 keyed queries (pages of 200), not 450."""
    path = tmp_path / "s.db"
    store = SqliteStore(path)
    run_ids = [f"r{n:03d}" for n in range(450)]
    for run_id in run_ids:
        for commit in Builder(f"t-{run_id}").start(run_id).commits:
            store.append(commit)
    store.acquire_lease("r007", "w1", 3600)
    store.close()
    pages: list[int] = []
    real_statuses = SqliteStore.lease_statuses

    def counted(self: SqliteStore, ids: Any) -> Any:
        pages.append(len(ids))
        return real_statuses(self, ids)

    def one_by_one(self: SqliteStore, run_id: str) -> Any:
        raise AssertionError(f"runs read the lease of {run_id} alone")

    monkeypatch.setattr(SqliteStore, "lease_statuses", counted)
    monkeypatch.setattr(SqliteStore, "lease_status", one_by_one)
    code, out, _ = cli(capsys, "runs", "--store", url(path), "--format", "json")
    listed = json.loads(out)
    print(f"runs over {len(listed)} Runs: {len(pages)} lease queries of {pages} Runs")
    assert code == 0 and sorted(pages, reverse=True) == [200, 200, 50]
    assert sorted(r["run_id"] for r in listed) == run_ids
    held = [r["run_id"] for r in listed if r["lease"]["state"] == "held"]
    assert held == ["r007"]


# --- resume --call, duplicates ---------------------------------------------------------


def test_resume_by_call_id_resolves_the_committed_ticket(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = url(_store_with(tmp_path / "s.db", PROMPT))
    code, out, err = cli(capsys, "resume", "--store", db, "r1", "--call", "r1-c1", "--approve")
    assert (code, out) == (0, "queued command 1 for run r1; the runtime driving it applies it\n"), err
    store = SqliteStore(tmp_path / "s.db", read_only=True)
    [entry] = store.pending_commands("r1")
    store.close()
    assert entry.body["command"]["ticket_id"] == "ticket-approval-0001"
    code, _, err = cli(capsys, "resume", "--store", db, "r1", "--call", "r1-c9", "--approve")
    assert code == 1 and "refused: ticket-mismatch: call 'r1-c9' does not wait" in err and "r1-c1" in err
    code, _, err = cli(capsys, "resume", "--store", db, "r1", "--call", "r1-c1", "--ticket", "x", "--approve")
    assert code == 2
    code, _, err = cli(capsys, "resume", "--store", db, "r1", "--call", "r1-c1", "--input", "no")
    assert code == 1 and "wait-kind-mismatch" in err, err


def test_resume_by_call_id_on_a_run_that_does_not_wait_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = SqliteStore(tmp_path / "s.db")
    for commit in Builder("t1").start("r1").commits:
        store.append(commit)
    store.close()
    code, _, err = cli(capsys, "resume", "--store", url(tmp_path / "s.db"), "r1", "--call", "c1", "--approve")
    assert code == 1 and "run-not-awaiting: run 'r1' is Running" in err


def test_a_command_identical_to_a_queued_one_is_not_queued_again(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = url(_store_with(tmp_path / "s.db"))
    approve = ("resume", "--store", db, "r1", "--ticket", "ticket-approval-0001", "--approve")
    assert cli(capsys, *approve)[1] == "queued command 1 for run r1; the runtime driving it applies it\n"
    code, out, _ = cli(capsys, *approve)
    assert (code, out) == (0, "already queued as command 1 for run r1; nothing new queued\n")
    code, out, _ = cli(capsys, "resume", "--store", db, "r1", "--call", "r1-c1", "--approve")
    assert (code, out) == (0, "already queued as command 1 for run r1; nothing new queued\n"), "the same command"
    code, out, err = cli(capsys, "resume", "--store", db, "r1", "--ticket", "ticket-approval-0001", "--deny")
    assert (code, out) == (1, ""), "another answer to the same wait: a wait takes one"
    assert err == "runkernel resume: already answered by command 1 (approve) for run r1; nothing new queued\n"
    assert cli(capsys, "cancel", "--store", db, "r1")[1] == "queued cancel 2 for run r1; the runtime driving it applies it\n"
    code, out, _ = cli(capsys, "cancel", "--store", db, "r1")
    assert (code, out) == (0, "already queued as command 2 for run r1; nothing new queued\n")
    store = SqliteStore(tmp_path / "s.db", read_only=True)
    assert [e.entry_id for e in store.pending_commands("r1")] == [1, 2]
    store.close()
