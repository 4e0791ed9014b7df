"""History facts live in indexed rows, not in the snapshot (Cost model).

Used tickets, closed batch ids and applied resumes are answered by key from rows the
commit's transaction inserts; the latest-state row keeps only the current batch and
counters, so its size and the work of a commit do not grow with the Run. Budgets here
are counts (bytes, statements, SQLite VM steps), never durations.
"""

from __future__ import annotations

import json
import re
import shutil
import sqlite3
from collections.abc import Callable, Iterator
from pathlib import Path

import attrs
import pytest

from history_facts import logged_history
from runkernel.adapters.drive.inbox import submit_resume
from runkernel.adapters.stores.memory import MemoryStore
from runkernel.adapters.stores.serial import dumps
from runkernel.adapters.stores.sqlite.migrate import migrate_sqlite
from runkernel.adapters.stores.sqlite import SqliteStore
from runkernel.adapters.stores.sqlite.schema import SCHEMA_VERSION
from runkernel.adapters.stores.contract import IllegalCommit, SchemaError, Store
from runkernel.cli.entry import main
from runkernel.kernel.codec import upgrade_v1_line
from runkernel.kernel.decide import decide
from runkernel.kernel.protocol import (
    Activate,
    Allow,
    Approve,
    Block,
    Commit,
    Decision,
    GateVerdict,
    InferenceResult,
    Input,
    ProposedCall,
    ProvideInput,
    ResumeCommand,
    ToolFinished,
    ToolOutput,
)
from runkernel.kernel.recover import recover
from runkernel.kernel.rules import Rejection, Rule
from runkernel.kernel.state import Message, RunSnapshot
from runkernel.kernel.values import Role, WaitKind
from runkernel.specs.checker import Verdict, check_commits
from runkernel.testing import awaiting_run, tool_run

FIXTURE = Path(__file__).parent.parent / "data" / "stores" / "schema1.sqlite"


@pytest.fixture(params=["memory", "sqlite"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    made: Store = MemoryStore() if request.param == "memory" else SqliteStore(tmp_path / "store.db")
    yield made
    made.close()


class Host:
    """Feeds ``decide`` with the store's snapshot and history and appends its commits."""

    def __init__(self, store: Store, thread_id: str, run_id: str) -> None:
        self.store, self.run_id = store, run_id
        head = store.thread_head(thread_id)
        self.state: RunSnapshot | None = None
        self.feed(Activate(thread_id, run_id, head.version if head else 0, (Message(Role.USER, "go"),)))

    def feed(self, event: Input) -> Decision | Rejection:
        outcome = decide(self.state, event, history=self.store.history(self.run_id))
        if isinstance(outcome, Decision):
            for effect in outcome.effects:
                if isinstance(effect, Commit):
                    self.state = self.store.append(effect.commit)
            assert self.state == outcome.state
        return outcome

    def tool_step(self, n: int) -> None:
        """One Step with one tool call (three commits); ids of fixed width."""
        call = ProposedCall(f"c{n:06d}", "lookup", {"n": 1}, f"op{n:06d}")
        for event in (
            InferenceResult("use a tool", (call,), f"b{n:06d}"),
            GateVerdict(call.call_id, Allow()),
            ToolFinished(call.call_id, 1, ToolOutput("ok")),
        ):
            assert isinstance(self.feed(event), Decision), event


# --- the store's history is the log's ---------------------------------------------


def test_store_history_answers_what_the_log_committed(store: Store) -> None:
    commits, _ = awaiting_run("t1", "r1", "ticket-1")
    for commit in commits:
        store.append(commit)
    host = Host(store, "t2", "r2")
    host.tool_step(1)
    host.tool_step(2)
    facts = logged_history(store, "r1")
    assert facts.tickets == {"ticket-1"}
    history = store.history("r1")
    assert history.ticket_used("ticket-1") and not history.ticket_used("ticket-2")
    for run_id in ("r1", "r2"):
        expected = logged_history(store, run_id)
        history = store.history(run_id)
        for batch_id in expected.closed_batches | {"b000001", "b000002", "b-never"}:
            assert history.batch_closed(batch_id) == (batch_id in expected.closed_batches), (run_id, batch_id)
    assert store.history("r2").batch_closed("b000002")
    assert not store.history("r1").batch_closed("b000002"), "history is per Run"
    assert not store.history("nobody").ticket_used("ticket-1")


def test_a_resume_is_remembered_by_ticket_and_a_repeat_is_refused(store: Store) -> None:
    commits, state = awaiting_run("t1", "r1", "ticket-1")
    for commit in commits:
        store.append(commit)
    command = ResumeCommand("r1", "ticket-1", WaitKind.APPROVAL, Approve())
    assert store.history("r1").applied_digest("ticket-1") is None
    outcome = decide(state, command, history=store.history("r1"))
    assert isinstance(outcome, Decision) and outcome.commit is not None
    store.append(outcome.commit)
    assert store.history("r1").applied_digest("ticket-1") == command.digest()
    repeat = submit_resume(store, command)
    assert isinstance(repeat, Rejection) and repeat.rule is Rule.ALREADY_APPLIED
    assert logged_history(store, "r1").resumes[0].digest == command.digest()


def test_a_closed_batch_id_is_refused_by_key(store: Store) -> None:
    host = Host(store, "t1", "r1")
    host.tool_step(1)
    host.tool_step(2)  # b000001 is no longer the Run's current batch: only history knows it
    reused = decide(
        host.state,
        InferenceResult("again", (ProposedCall("c9", "lookup", {}, "op9"),), "b000001"),
        history=store.history("r1"),
    )
    assert isinstance(reused, Rejection) and reused.rule is Rule.BATCH_IDENTITY
    # the store judges by its rows too: the same commit built without that history is refused
    blind = decide(host.state, InferenceResult("again", (ProposedCall("c9", "lookup", {}, "op9"),), "b000001"))
    assert isinstance(blind, Decision) and blind.commit is not None
    with pytest.raises(IllegalCommit) as raised:
        store.append(blind.commit)
    assert raised.value.rejection.rule is Rule.BATCH_IDENTITY


# --- nothing on the commit path grows with history ---------------------------------


def _snapshot_row(path: Path, run_id: str) -> bytes:
    db = sqlite3.connect(path)
    try:
        row = db.execute("SELECT CAST(snapshot AS BLOB) FROM runs WHERE run_id = ?", (run_id,)).fetchone()
    finally:
        db.close()
    return bytes(row[0])


def _shape(row: bytes) -> bytes:
    """The row with every number written as 0: what is left may not grow."""
    return re.sub(rb"[0-9]+", b"0", row)


class WorkCounter:
    """Counts the SQL statements and SQLite VM steps a store's connection runs."""

    def __init__(self, store: SqliteStore) -> None:
        self.db = store._db
        self.statements: list[str] = []
        self.steps = 0

    def _step(self) -> int:
        self.steps += 1
        return 0

    def count(self, action: Callable[[], object]) -> tuple[list[str], int]:
        self.statements, self.steps = [], 0
        self.db.set_trace_callback(self.statements.append)
        self.db.set_progress_handler(self._step, 1)
        try:
            action()
        finally:
            self.db.set_trace_callback(None)
            self.db.set_progress_handler(None, 1)
        return self.statements, self.steps


def test_snapshot_row_and_work_per_commit_do_not_grow_with_the_run(tmp_path: Path) -> None:
    path = tmp_path / "long.db"
    store = SqliteStore(path, synchronous="NORMAL")
    host = Host(store, "t1", "r1")
    counter = WorkCounter(store)
    figures: dict[int, tuple[bytes, list[str], int]] = {}
    checkpoints = (4, 3334)  # steps: commits 13 and 10,003
    for n in range(1, checkpoints[-1] + 1):
        if n in checkpoints:
            row = _snapshot_row(path, "r1")
            statements, steps = counter.count(lambda: host.tool_step(n))
            figures[n] = (row, statements, steps)
        else:
            host.tool_step(n)
    assert host.state is not None and host.state.version == 1 + 3 * checkpoints[-1]
    (early_row, early_sql, early_steps), (late_row, late_sql, late_steps) = (figures[c] for c in checkpoints)
    print(
        f"\nsnapshot row: {len(early_row)} B at commit {1 + 3 * (checkpoints[0] - 1)}, "
        f"{len(late_row)} B at commit {1 + 3 * (checkpoints[-1] - 1)}; per tool step: "
        f"{len(early_sql)} vs {len(late_sql)} statements, {early_steps} vs {late_steps} VM steps"
    )
    # only the counters (version, step, the batch's step) gained digits: 3 each here
    assert _shape(late_row) == _shape(early_row), "the latest-state row grew with the Run"
    assert len(late_row) - len(early_row) == 9
    assert [re.sub(r"[0-9]+", "0", s) for s in late_sql] == [re.sub(r"[0-9]+", "0", s) for s in early_sql]
    assert late_steps == early_steps, "a commit does more work late in the Run"
    store.close()


def test_reading_the_latest_state_and_recover_do_not_grow_with_the_run(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "long.db", synchronous="NORMAL")
    host = Host(store, "t1", "r1")
    counter = WorkCounter(store)
    work: list[tuple[int, int]] = []
    for n in range(1, 3334):
        host.tool_step(n)
        if n in (4, 3333):
            statements, steps = counter.count(lambda: recover(_read(store, "r1")))
            work.append((len(statements), steps))
    print(f"\nrun() + recover: {work[0]} at commit 13, {work[1]} at commit 10,000 (statements, VM steps)")
    assert work[0] == work[1] and work[0][0] == 1
    store.close()


def _read(store: Store, run_id: str) -> RunSnapshot:
    snapshot = store.run(run_id)
    assert snapshot is not None
    return snapshot


# --- schema 1 files: refused, then migrated ------------------------------------------


@pytest.fixture
def old_store(tmp_path: Path) -> Path:
    """A copy of a schema-1 store written by the runkernel of commit 289e1e7."""
    copy = tmp_path / "old.sqlite"
    shutil.copyfile(FIXTURE, copy)
    return copy


def test_an_old_schema_is_refused_naming_the_migration(old_store: Path) -> None:
    with pytest.raises(SchemaError) as raised:
        SqliteStore(old_store)
    assert "runkernel db migrate" in str(raised.value) and "\n" not in str(raised.value)


@pytest.mark.parametrize(
    "argv",
    [
        ["inspect", "run-1"],
        ["export", "thread-1"],
        ["cancel", "run-2"],
        ["resume", "run-2", "--ticket", "ticket-input-2", "--input", "x"],
        ["reconcile", "op-1", "--outcome", "applied"],
        ["simulate", "--runs", "1", "--no-progress"],
    ],
)
def test_every_store_command_refuses_an_old_schema_in_one_line(
    old_store: Path, argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    before = _dump(old_store)
    code = main([*argv, "--store", f"sqlite:///{old_store}"])
    err = capsys.readouterr().err
    assert code != 0
    assert err.count("\n") == 1 and "runkernel db migrate" in err, err
    assert _dump(old_store) == before, "a refused command changed what the file holds"


def _dump(path: Path) -> list[str]:
    db = sqlite3.connect(path)
    try:
        return list(db.iterdump())
    finally:
        db.close()


def test_migrate_moves_the_history_into_rows_and_keeps_every_fact(
    old_store: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    legacy = sqlite3.connect(old_store)
    old_lines = legacy.execute("SELECT thread_id, version, line FROM commits ORDER BY 1, 2").fetchall()
    legacy.close()
    assert main(["db", "migrate", "--store", f"sqlite:///{old_store}"]) == 0
    assert f"migrated schema version 1 to {SCHEMA_VERSION}" in capsys.readouterr().out
    store = SqliteStore(old_store)
    # the runkernel/1 lines become runkernel/2 (the resumed digests recomputed by RFC 8785), and judge legal
    upgraded = [(t, v, dumps(upgrade_v1_line(json.loads(line)))) for t, v, line in old_lines]
    assert [tuple(r) for r in store._db.execute("SELECT thread_id, version, line FROM commits ORDER BY 1, 2")] == upgraded
    assert all(check_commits(store.commits(t)).verdict is Verdict.LEGAL for t in store.thread_ids())
    for snapshot_text, in store._db.execute("SELECT snapshot FROM runs"):
        assert "tickets_used" not in snapshot_text and "closed_batch_ids" not in snapshot_text
    for run_id in ("run-1", "run-2"):
        expected = logged_history(store, run_id)
        history = store.history(run_id)
        assert all(history.ticket_used(t) for t in expected.tickets)
        assert all(history.batch_closed(b) for b in expected.closed_batches)
        assert all(history.applied_digest(a.ticket_id) == a.digest for a in expected.resumes)
    assert logged_history(store, "run-1").closed_batches == {"batch-1", "batch-2"}
    assert store.history("run-1").applied_digest("ticket-approve-1") is not None
    assert not store.history("run-2").batch_closed("batch-1")
    # the migrated store goes on: the open wait of run-2 takes its resume, once
    command = ResumeCommand("run-2", "ticket-input-2", WaitKind.INPUT, ProvideInput("the red one"))
    assert isinstance(submit_resume(store, command), int)
    repeat = ResumeCommand("run-1", "ticket-approve-1", WaitKind.APPROVAL, Approve())
    refused = submit_resume(store, repeat)
    assert isinstance(refused, Rejection) and refused.rule is Rule.ALREADY_APPLIED
    store.close()
    assert main(["db", "migrate", "--store", f"sqlite:///{old_store}"]) == 0
    assert "nothing to migrate" in capsys.readouterr().out


def test_migrate_refuses_what_is_not_a_sqlite_store(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["db", "migrate", "--store", "memory:"]) != 0
    missing = tmp_path / "missing.db"
    assert main(["db", "migrate", "--store", f"sqlite:///{missing}"]) != 0
    assert not missing.exists(), "migrate created a file"
    junk = tmp_path / "junk.db"
    junk.write_bytes(b"not a database at all" * 100)
    assert main(["db", "migrate", "--store", f"sqlite:///{junk}"]) != 0
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 3 and all(line.startswith("runkernel db migrate: ") for line in lines), lines


def test_a_fresh_store_needs_no_migration(tmp_path: Path) -> None:
    path = tmp_path / "new.db"
    store = SqliteStore(path)
    for commit in tool_run("t1", "r1"):
        store.append(commit)
    store.close()
    assert migrate_sqlite(path) == (SCHEMA_VERSION, SCHEMA_VERSION)


def test_a_commit_is_judged_against_the_row_even_after_another_connection_wrote_it(tmp_path: Path) -> None:
    """The store keeps the snapshot it wrote last to skip decoding it again; a write by
    another connection in between must be seen, not the kept copy."""
    path = tmp_path / "shared.db"
    first, second = SqliteStore(path), SqliteStore(path)
    host = Host(first, "t1", "r1")
    call = ProposedCall("c1", "lookup", {}, "op1")
    assert isinstance(host.feed(InferenceResult("go", (call,), "b1")), Decision)
    requested = host.state
    assert requested is not None
    started = decide(requested, GateVerdict("c1", Allow()), history=second.history("r1"))
    assert isinstance(started, Decision) and started.commit is not None
    second.append(started.commit)  # the call is Executing now, written by the other connection
    blocked = decide(requested, GateVerdict("c1", Block("no")), history=first.history("r1"))
    assert isinstance(blocked, Decision) and blocked.commit is not None
    stale = attrs.evolve(blocked.commit, expected_version=started.commit.version)  # legal only on the old state
    with pytest.raises(IllegalCommit):
        first.append(stale)
    first.close()
    second.close()
