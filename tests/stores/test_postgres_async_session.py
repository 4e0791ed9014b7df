"""The PostgreSQL store's async session (``postgres.connection_async``, the source the
sync ``postgres.connection`` is generated from) does on an event loop what the sync one
does: it recognizes the schema before anything else, reads and writes through its one
pooled connection, repeats a read once on a new connection when the old one dropped,
wakes on LISTEN/NOTIFY, and keeps a read-only session in one snapshot."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

import pytest

from postgres_support import fresh_url, postgres_url  # noqa: F401 - a fixture

T = TypeVar("T")


def _run(main: Callable[[], Coroutine[Any, Any, T]]) -> T:
    return asyncio.run(main())


def _session(url: str, **options: Any) -> Any:
    from runkernel.adapters.stores.postgres.connection_async import AsyncPostgresConnection

    return AsyncPostgresConnection(url, **options)


def test_an_async_session_reads_writes_and_reads_again_after_its_connection_dropped(postgres_url: str) -> None:
    import psycopg

    async def main() -> tuple[list[Any], int, int, Any]:
        session = _session(postgres_url)
        await session._open()
        try:
            written = await session._execute("INSERT INTO checkpoints (run_id, step, data) VALUES (%s, 1, 'x')", ("r",))
            rows = await session._fetch_all("SELECT run_id, step FROM checkpoints", ())
            before = session._conn.info.backend_pid
            killer = await psycopg.AsyncConnection.connect(session._conninfo, autocommit=True)
            async with killer:
                await killer.execute("SELECT pg_terminate_backend(%s)", (before,))
            again = await session._fetch("SELECT count(*) FROM checkpoints", ())
            return rows, written, before, (again, session._conn.info.backend_pid)
        finally:
            await session.close()

    rows, written, before, (again, after) = _run(main)
    assert written == 1 and rows == [("r", 1)]
    assert again == (1,) and after != before  # read again on a connection made anew
    print(f"async session: backend {before} dropped, the read repeated on backend {after}")


def test_an_async_session_refuses_a_schema_that_holds_no_store() -> None:
    from runkernel.adapters.stores.contract import SchemaError

    url = fresh_url("async")

    async def main() -> None:
        await _session(url)._open()

    with pytest.raises(SchemaError, match="run `runkernel db init"):
        _run(main)


def test_an_async_session_wakes_on_notify_and_runs_on_the_loop_thread_alone(postgres_url: str) -> None:
    threads_before = {t.ident for t in threading.enumerate()}

    async def main() -> tuple[list[str], list[str], bool]:
        session = _session(postgres_url)
        await session._open()
        try:
            assert await session.wait_for_work(0) == []  # listening from now on
            await session._execute("SELECT pg_notify(%s, %s)", (session._channel, "run-1"))
            woken = await session.wait_for_work(5.0)
            reader = _session(postgres_url, read_only=True)
            await reader._open()
            try:
                seen = await reader._fetch("SELECT count(*) FROM runs", ())
                await session._execute(
                    "INSERT INTO runs (run_id, thread_id, snapshot, state, step, version) "
                    "VALUES ('r', 't', '{}', 'ended', 0, 1)",
                    (),
                )
                still = await reader._fetch("SELECT count(*) FROM runs", ())  # its one snapshot
            finally:
                await reader.close()
            # psycopg-pool's async pool runs its workers as tasks of this loop
            new_threads = {t.ident for t in threading.enumerate()} - threads_before
            return woken, [str(seen), str(still)], bool(new_threads)
        finally:
            await session.close()

    woken, counts, threads = _run(main)
    assert woken == ["run-1"]
    assert counts == ["(0,)", "(0,)"]
    assert not threads, "the async session started a thread"


def test_the_async_inbox_write_and_pick_up_read_what_the_sync_store_wrote(postgres_url: str) -> None:
    from runkernel.adapters.stores.contract import AnswerPending
    from runkernel.adapters.stores.postgres.inbox_async import put_command
    from runkernel.adapters.stores.postgres.pick_up_async import pick_up_rows
    from runkernel.adapters.stores.postgres.store import PostgresStore

    sync = PostgresStore(postgres_url)
    try:
        first = sync.put_command("r", {"type": "cancel"})
    finally:
        sync.close()
    answer = {"type": "resume", "command": {"ticket_id": "k", "payload": {"type": "approve"}}}

    async def main() -> tuple[int, str, list[list[tuple[Any, ...]]]]:
        session = _session(postgres_url)
        await session._open()
        try:
            put = await put_command(session._change, session.where, session._channel, "r", answer)
            try:
                await put_command(session._change, session.where, session._channel, "r", answer)
                refused = "queued twice"
            except AnswerPending as pending:
                refused = f"pending {pending.entry_id}"

            async def read(conn: Any) -> Any:
                return await pick_up_rows(conn, "r", read_only=False)

            rows = await session._attempt("a read", read)
            return put, refused, rows
        finally:
            await session.close()

    put, refused, rows = _run(main)
    assert put > first and refused == f"pending {put}"
    # no Run "r": no snapshot, no log, no checkpoint; its two pending commands in order
    assert [len(r) for r in rows[:3]] == [0, 0, 0]
    assert [int(r[0]) for r in rows[3]] == [first, put]


def test_the_async_commit_send_answers_its_first_and_last_rows_and_names_a_lost_connection(postgres_url: str) -> None:
    import psycopg

    from runkernel.adapters.stores.postgres.send_async import RIVAL_WRITE, ConnectionLost, send_commit

    statements = [(b"SELECT %s::int", (1,)), (b"SELECT 2", ()), (b"SELECT %s::text", ("last",))]
    rival = [(b"INSERT INTO threads (thread_id, version) VALUES ('t', 1)", ())] * 2

    def kill(conn: Any) -> None:
        with psycopg.connect(postgres_url.split("?")[0], autocommit=True) as killer:
            killer.execute("SELECT pg_terminate_backend(%s)", (conn.info.backend_pid,))

    async def main() -> tuple[Any, str, str]:
        session = _session(postgres_url)
        await session._open()
        try:
            rows = await send_commit(session._conn, statements, session.url)
            try:
                await send_commit(session._conn, rival, session.url)
                refused = "written twice"
            except RIVAL_WRITE as error:
                refused = type(error).__name__
            try:
                await send_commit(session._conn, statements, session.url, kill)
                lost = "answered"
            except ConnectionLost:
                lost = "lost"
            return rows, refused, lost
        finally:
            await session.close()

    rows, refused, lost = _run(main)
    assert rows == ([(1,)], [("last",)])
    assert refused == "UniqueViolation"  # one transaction: nothing of it written
    assert lost == "lost"
