"""The CLI on PostgreSQL: ``db init`` and ``db migrate``, one-line refusals of a store
that is not initialized or of another schema version, read commands that never create
a schema, ``simulate`` with zero violations, and the LISTEN/NOTIFY wake-up."""

from __future__ import annotations

import pytest

psycopg = pytest.importorskip("psycopg", reason="the postgres extra (psycopg) is not installed")
sql = psycopg.sql

import subprocess
import sys

from postgres_support import fresh_url, postgres_url, with_schema
from runkernel.cli.entry import main
from runkernel.conformance import append_all
from runkernel.testing import text_run

__all__ = ["postgres_url"]

#: seconds: a hang guard only, a wait for work returns at its first wake-up
WAKE_GUARD = 60.0


def _tables(url: str) -> list[str]:
    from runkernel.adapters.stores.postgres.schema import split_url

    conninfo, schema = split_url(url)
    with psycopg.connect(conninfo) as conn:
        rows = conn.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = %s", (schema,)
        ).fetchall()
    return sorted(str(r[0]) for r in rows)


def test_an_uninitialized_store_is_refused_naming_db_init_and_reads_create_nothing(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from runkernel.adapters.stores.postgres.schema import drop_store

    url = fresh_url("cli")
    try:
        for argv in (["inspect", "--store", url, "r1"], ["export", "--store", url, "t1"],
                     ["simulate", "--store", url, "--runs", "1"], ["db", "migrate", "--store", url]):
            assert main(argv) in (1, 2)
            err = capsys.readouterr().err
            assert "run `runkernel db init --store URL`" in err and len(err.strip().splitlines()) == 1, err
        assert _tables(url) == []  # nothing was created by any of them
        assert main(["db", "init", "--store", url]) == 0
        assert "runkernel store created" in capsys.readouterr().out
        assert "leases" in _tables(url) and "commits" in _tables(url)
        assert main(["db", "init", "--store", url]) == 0
        assert "already initialized" in capsys.readouterr().out
        assert main(["db", "migrate", "--store", url]) == 0
        assert "nothing to migrate" in capsys.readouterr().out
    finally:
        drop_store(url)


def test_another_schema_version_is_refused_in_one_line(postgres_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    from runkernel.adapters.stores.postgres.schema import split_url

    conninfo, schema = split_url(postgres_url)
    with psycopg.connect(conninfo, autocommit=True) as conn:
        conn.execute(sql.SQL("UPDATE {}.meta SET value = '99' WHERE key = 'version'").format(sql.Identifier(schema)))
    for argv in (["inspect", "--store", postgres_url, "r1"], ["db", "migrate", "--store", postgres_url]):
        assert main(argv) in (1, 2)
        err = capsys.readouterr().err
        assert "schema version 99" in err and "upgrade runkernel" in err and len(err.strip().splitlines()) == 1


def test_another_applications_tables_are_not_a_store(capsys: pytest.CaptureFixture[str]) -> None:
    from runkernel.adapters.stores.postgres.schema import drop_store, split_url

    url = fresh_url("foreign")
    conninfo, schema = split_url(url)
    with psycopg.connect(conninfo, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(schema)))
        conn.execute(sql.SQL("CREATE TABLE {}.orders (id int)").format(sql.Identifier(schema)))
    try:
        # exit 2 like every other command on it: a store that is not one is bad input
        assert main(["db", "init", "--store", url]) == 2
        err = capsys.readouterr().err
        assert "holds orders but is not a runkernel store" in err and len(err.strip().splitlines()) == 1
        assert _tables(url) == ["orders"]
    finally:
        drop_store(url)


def test_simulate_on_postgres_exits_zero_with_zero_violations(
    postgres_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["simulate", "--store", postgres_url, "--runs", "64", "--seed", "7"]) == 0
    out = capsys.readouterr().out
    assert "verdict: PASS, zero violations" in out
    print(out.splitlines()[2:6])


def test_inspect_and_export_read_a_postgres_store(postgres_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    from runkernel.adapters.stores.postgres import PostgresStore

    store = PostgresStore(postgres_url)
    commits = text_run("t1", "r1", 3)
    append_all(store, commits)
    store.close()
    assert main(["export", "--store", postgres_url, "t1"]) == 0
    assert len(capsys.readouterr().out.splitlines()) == len(commits)
    assert main(["inspect", "--store", postgres_url, "r1"]) == 0
    assert "r1" in capsys.readouterr().out


def test_workers_are_woken_by_a_new_run_and_by_an_inbox_command(postgres_url: str) -> None:
    from runkernel.adapters.stores.postgres import PostgresStore

    worker = PostgresStore(postgres_url)
    client = PostgresStore(postgres_url)
    assert worker.wait_for_work(0) == []  # starts listening
    first, second, *_ = text_run("t1", "r1", 2)
    client.append(first)
    assert worker.wait_for_work(WAKE_GUARD) == ["r1"]  # a new Run
    client.append(second)
    # a commit of a Run already known wakes nobody: wake-ups come in commit order, so
    # one from it would come before the next new Run's
    client.append(text_run("t2", "r2", 1)[0])
    assert worker.wait_for_work(WAKE_GUARD) == ["r2"]
    client.put_command("r1", {"type": "end", "kind": "cancelled"})
    assert worker.wait_for_work(WAKE_GUARD) == ["r1"]
    worker.close()
    client.close()


def test_simulate_refuses_a_store_another_simulate_holds(postgres_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    from runkernel.adapters.stores.postgres.claim import SimulateClaim

    with SimulateClaim(postgres_url) as claim:
        assert claim.taken
        assert main(["simulate", "--store", postgres_url, "--runs", "2", "--no-progress"]) == 2
        captured = capsys.readouterr()
        assert "is in use by another simulate" in captured.err and len(captured.err.strip().splitlines()) == 1
        assert captured.out == ""
    # the claim ends with its session: the store is free again
    assert main(["simulate", "--store", postgres_url, "--runs", "2", "--no-progress"]) == 0


def test_two_simulations_started_together_on_postgres_do_not_both_run() -> None:
    from runkernel.adapters.stores.postgres.schema import drop_store, init_postgres

    for attempt in range(3):
        url = fresh_url("race")
        init_postgres(url)
        try:
            argv = [sys.executable, "-m", "runkernel.cli", "simulate", "--runs", "20", "--store", url, "--no-progress"]
            processes = [subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(2)]
            results = [(p.wait(timeout=600), p.communicate()) for p in processes]
        finally:
            drop_store(url)
        codes = sorted(code for code, _ in results)
        refused = [err for code, (_, err) in results if code != 0]
        print(f"attempt {attempt}: exit codes {codes}, the loser said {refused}")
        assert codes == [0, 2], results
        assert ("in use by another simulate" in refused[0] or "already holds" in refused[0]) and "Traceback" not in refused[0]


def test_a_bad_url_parameter_is_bad_usage_and_a_query_password_is_masked(capsys: pytest.CaptureFixture[str]) -> None:
    from postgres_support import dsn

    assert main(["runs", "--store", with_schema(dsn(), "x") + "&foo=bar"]) == 2
    assert 'invalid URI query parameter: "foo"' in capsys.readouterr().err
    assert main(["runs", "--store", with_schema(dsn(), "rk_none_here") + "&password=s3cret"]) == 2
    err = capsys.readouterr().err
    assert "holds no runkernel store" in err and "s3cret" not in err and "password=***" in err


def test_simulate_reset_on_postgres_deletes_only_what_simulate_wrote(
    postgres_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from runkernel.adapters.stores.postgres import PostgresStore

    store = PostgresStore(postgres_url)
    append_all(store, text_run("important", "r1", 2))
    store.close()
    assert main(["simulate", "--store", postgres_url, "--reset", "--runs", "2", "--no-progress"]) == 2
    assert "holds 1 thread that simulate did not create" in capsys.readouterr().err
    assert main(["export", "--store", postgres_url, "important"]) == 0  # still there
    capsys.readouterr()


def test_simulate_reset_on_postgres_empties_a_store_simulate_filled(
    postgres_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["simulate", "--store", postgres_url, "--runs", "2", "--no-progress"]) == 0
    assert main(["simulate", "--store", postgres_url, "--runs", "2", "--no-progress"]) == 2
    assert main(["simulate", "--store", postgres_url, "--reset", "--runs", "2", "--no-progress"]) == 0
    capsys.readouterr()
