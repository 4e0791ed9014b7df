"""Issue 36, item 2: one answer per wait. The store refuses a second pending answer for
a ticket atomically (a unique key on the pending answer), on every store; ``db
migrate`` settles the duplicates an older store holds first; 50 racing answers,
conflicting and identical, queue exactly one."""

from __future__ import annotations

import json
import sqlite3
import threading
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from postgres_support import fresh_url
from runkernel.adapters.drive.inbox import AlreadyAnswered, AlreadyQueued, queue_resume, submit_resume
from runkernel.adapters.stores.contract import AnswerPending, SchemaError, Store
from runkernel.adapters.stores.memory import MemoryStore
from runkernel.adapters.stores.serial import resume_to_inbox
from runkernel.adapters.stores.sqlite import SqliteStore
from runkernel.adapters.stores.sqlite.migrate import migrate_sqlite
from runkernel.adapters.stores.sqlite.schema import SCHEMA_VERSION
from runkernel.cli.entry import main
from runkernel.kernel.protocol import Approve, Deny, ResumeCommand
from runkernel.kernel.rules import Rejection, Rule
from runkernel.kernel.values import WaitKind
from runkernel.testing import awaiting_run

APPROVE = ResumeCommand("r1", "tk1", WaitKind.APPROVAL, Approve())
DENY = ResumeCommand("r1", "tk1", WaitKind.APPROVAL, Deny("too dear"))


def _fill(store: Store) -> Store:
    for commit in awaiting_run("t1", "r1", "tk1")[0]:
        store.append(commit)
    return store


@pytest.fixture(params=["memory", "sqlite", "postgres"])
def opener(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Callable[[], Store]]:
    """Opens one more connection to one store holding Run r1, awaiting ticket tk1."""
    if request.param == "memory":
        shared = _fill(MemoryStore())
        yield lambda: shared
    elif request.param == "sqlite":
        _fill(SqliteStore(tmp_path / "s.db")).close()
        yield lambda: SqliteStore(tmp_path / "s.db")
    else:
        from runkernel.adapters.stores.postgres import PostgresStore
        from runkernel.adapters.stores.postgres.schema import drop_store, init_postgres

        url = fresh_url("answer")
        init_postgres(url)
        try:
            _fill(PostgresStore(url)).close()
            yield lambda: PostgresStore(url)
        finally:
            drop_store(url)


def test_the_store_refuses_a_second_pending_answer_and_takes_one_after_the_first_is_settled(
    opener: Callable[[], Store],
) -> None:
    store = opener()
    first = store.put_command("r1", resume_to_inbox(APPROVE))
    for body in (resume_to_inbox(DENY), resume_to_inbox(APPROVE)):
        with pytest.raises(AnswerPending) as refused:
            store.put_command("r1", body)
        assert refused.value.entry_id == first and refused.value.ticket_id == "tk1"
    cancel = store.put_command("r1", {"type": "end", "kind": "cancelled"})  # not an answer: no key
    assert [e.entry_id for e in store.pending_commands("r1")] == [first, cancel]
    store.settle_command(first, "refused: for this test")
    assert store.put_command("r1", resume_to_inbox(DENY)) > cancel


def test_queue_resume_says_already_queued_for_the_same_answer_and_already_answered_for_another(
    opener: Callable[[], Store],
) -> None:
    store = opener()
    first = queue_resume(store, APPROVE)
    assert isinstance(first, int)
    assert queue_resume(store, APPROVE) == AlreadyQueued(first)
    other = queue_resume(store, DENY)
    assert other == AlreadyAnswered(first, "approve") and str(other) == f"already answered by command {first} (approve)"
    refused = submit_resume(store, DENY)
    assert isinstance(refused, Rejection) and refused.rule is Rule.STALE_COMMAND, refused
    assert [e.entry_id for e in store.pending_commands("r1")] == [first]


def test_fifty_racing_answers_conflicting_and_identical_queue_exactly_one(opener: Callable[[], Store]) -> None:
    racers = 50
    start = threading.Barrier(racers)
    results: list[object] = [None] * racers

    def answer(i: int) -> None:
        store = opener()  # a connection of its own, opened in its own thread
        try:
            start.wait()
            results[i] = queue_resume(store, APPROVE if i % 2 == 0 else DENY)
        finally:
            store.close()

    threads = [threading.Thread(target=answer, args=(i,)) for i in range(racers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    reader = opener()
    pending = reader.pending_commands("r1")
    reader.close()
    kinds = Counter(type(r).__name__ for r in results)
    print(f"{racers} racing answers (25 approve, 25 deny): {dict(kinds)}; pending in the store: {len(pending)}")
    assert len(pending) == 1 and kinds["int"] == 1, kinds
    (winner,) = [r for r in results if isinstance(r, int)]
    assert pending[0].entry_id == winner
    won = "approve" if pending[0].body == resume_to_inbox(APPROVE) else "deny"
    for i, result in enumerate(results):
        mine = "approve" if i % 2 == 0 else "deny"
        if isinstance(result, int):
            continue
        expected = AlreadyQueued(winner) if mine == won else AlreadyAnswered(winner, won)
        assert result == expected, (i, result)


def test_the_cli_refuses_a_second_answer_naming_the_first(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _fill(SqliteStore(tmp_path / "s.db")).close()
    url = f"sqlite:///{tmp_path / 's.db'}"
    assert main(["resume", "--store", url, "r1", "--ticket", "tk1", "--approve"]) == 0
    capsys.readouterr()
    assert main(["resume", "--store", url, "r1", "--ticket", "tk1", "--deny", "--reason", "no"]) == 1
    assert capsys.readouterr().err == (
        "runkernel resume: already answered by command 1 (approve) for run r1; nothing new queued\n"
    )


# --- db migrate settles the duplicates of an older store -------------------------------


def _older_sqlite_with_duplicates(path: Path) -> None:
    """A schema-6 file (no key, no ticket column) holding three pending answers to one
    ticket and a cancel, as stores before the key could."""
    _fill(SqliteStore(path)).close()
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("DROP INDEX inbox_one_answer")
    db.execute("ALTER TABLE inbox DROP COLUMN ticket_id")
    for body in (resume_to_inbox(DENY), resume_to_inbox(APPROVE), resume_to_inbox(DENY)):
        db.execute("INSERT INTO inbox (run_id, body) VALUES ('r1', ?)", (json.dumps(body),))
    db.execute("INSERT INTO inbox (run_id, body) VALUES ('r1', '{\"type\": \"end\", \"kind\": \"cancelled\"}')")
    db.execute("UPDATE meta SET value = '6' WHERE key = 'version'")
    db.close()


def test_db_migrate_settles_a_tickets_later_pending_answers_then_keys_them(tmp_path: Path) -> None:
    path = tmp_path / "six.db"
    _older_sqlite_with_duplicates(path)
    with pytest.raises(SchemaError, match="db migrate"):
        SqliteStore(path)
    assert migrate_sqlite(path) == (6, SCHEMA_VERSION)
    store = SqliteStore(path)
    try:
        assert [e.entry_id for e in store.pending_commands("r1")] == [1, 4], "the oldest answer and the cancel"
        settled = {e.entry_id: e.outcome for e in store.commands("r1") if e.state == "settled"}
        outcome = "refused: already answered by command 1 (deny); a wait takes one answer"
        assert settled == {2: outcome, 3: outcome}
        assert queue_resume(store, APPROVE) == AlreadyAnswered(1, "deny")
        assert queue_resume(store, DENY) == AlreadyQueued(1)
    finally:
        store.close()
    assert migrate_sqlite(path) == (SCHEMA_VERSION, SCHEMA_VERSION)


def test_db_migrate_settles_a_postgres_stores_duplicate_answers(capsys: pytest.CaptureFixture[str]) -> None:
    psycopg = pytest.importorskip("psycopg", reason="the postgres extra (psycopg) is not installed")
    from runkernel.adapters.stores.postgres import PostgresStore
    from runkernel.adapters.stores.postgres.schema import SCHEMA_VERSION as PG_VERSION
    from runkernel.adapters.stores.postgres.schema import drop_store, init_postgres, split_url
    from runkernel.adapters.stores.serial import dumps

    url = fresh_url("answer_migrate")
    init_postgres(url)
    try:
        _fill(PostgresStore(url)).close()
        conninfo, schema = split_url(url)
        with psycopg.connect(conninfo, autocommit=True) as conn:
            conn.execute(psycopg.sql.SQL("SET search_path TO {}").format(psycopg.sql.Identifier(schema)))
            conn.execute("DROP INDEX inbox_one_answer")
            conn.execute("ALTER TABLE inbox DROP COLUMN ticket_id")
            for body in (resume_to_inbox(APPROVE), resume_to_inbox(DENY), resume_to_inbox(APPROVE)):
                conn.execute("INSERT INTO inbox (run_id, body) VALUES ('r1', %s)", (dumps(body),))
            conn.execute("UPDATE meta SET value = '3' WHERE key = 'version'")
        with pytest.raises(SchemaError, match="db migrate"):
            PostgresStore(url)
        assert main(["db", "migrate", "--store", url]) == 0
        assert f"migrated schema version 3 to {PG_VERSION}" in capsys.readouterr().out
        store = PostgresStore(url)
        (kept,) = store.pending_commands("r1")
        outcomes = [e.outcome for e in store.commands("r1") if e.state == "settled"]
        assert outcomes == [f"refused: already answered by command {kept.entry_id} (approve); a wait takes one answer"] * 2
        assert queue_resume(store, DENY) == AlreadyAnswered(kept.entry_id, "approve")
        store.close()
    finally:
        drop_store(url)
