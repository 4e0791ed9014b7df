"""Issue 36, item 5: a worker stops at once on what can never work (exit 2, one line):
an option libpq refuses (``sslmode=bogus``), an impossible port (99999), credentials the
server refuses (a role it does not have), a schema holding no store; and it rides out a
host name that does not resolve (yet) with a line of its own, where ``--once`` gives up
after its backoff cap."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from postgres_support import dsn, with_schema
from runkernel.adapters.worker.outage import StoreOutage, OutageBegan, OutageEvent
from runkernel.errors import HostUnresolved, StoreUnavailable

ROOT = Path(__file__).resolve().parent.parent.parent
#: seconds: only so that a worker that never stops fails the test instead of hanging it
HANG_GUARD = 120.0


def _worker(url: str, tmp_path: Path, *extra: str) -> tuple[int, str, str, float]:
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "runkernel.cli", "worker", "--store", url, "--app", "examples.demo_app:app", *extra],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(ROOT), "RUNKERNEL_DEMO_LEDGER": str(tmp_path / "ledger.db")},
        capture_output=True,
        text=True,
        timeout=HANG_GUARD,
    )
    return done.returncode, done.stdout, done.stderr, time.monotonic() - started


def _with(url: str, change: str) -> str:
    if change.startswith("?"):
        return url + ("&" if "?" in url else "?") + change[1:]
    return change


@pytest.mark.parametrize("once", [True, False], ids=["once", "run"])
@pytest.mark.parametrize(
    "case, says",
    [
        ("sslmode", 'invalid sslmode value: "bogus"'),
        ("port", 'invalid port number: "99999"'),
        ("role", 'role "rk_nobody" does not exist'),
        ("schema", "holds no runkernel store in schema 'rk_no_such_schema'"),
    ],
)
def test_the_worker_stops_with_exit_2_and_one_line_on_what_can_never_work(
    tmp_path: Path, case: str, says: str, once: bool
) -> None:
    base = dsn()
    url = {
        "sslmode": with_schema(base, "rk_x") + "&sslmode=bogus",
        "port": "postgresql://postgres@127.0.0.1:99999/test",
        "role": "postgresql://rk_nobody:S3cretPw@127.0.0.1:5432/test",
        "schema": with_schema(base, "rk_no_such_schema"),
    }[case]
    code, out, err, seconds = _worker(url, tmp_path, *(["--once"] if once else []))
    print(f"{case} ({'--once' if once else 'run'}): exit {code} after {seconds:.1f} s: {err.strip()}")
    assert code == 2 and out == "" and err.count("\n") == 1 and says in err, err
    assert "S3cretPw" not in err


def test_an_unresolved_host_is_ridden_out_with_its_own_line_and_once_gives_up_after_the_backoff_cap(
    tmp_path: Path,
) -> None:
    url = "postgresql://postgres@rk-not-yet.invalid:5432/test?connect_timeout=2"
    code, out, err, seconds = _worker(url, tmp_path, "--once")
    lines = err.splitlines()
    print(f"unresolved host, --once: exit {code} after {seconds:.1f} s")
    for line in lines:
        print(f"  {line}")
    assert code == 1 and out == ""
    assert lines[0].startswith("runkernel worker: host rk-not-yet.invalid does not resolve (yet): ")
    assert lines[-1].startswith("runkernel worker: host rk-not-yet.invalid still does not resolve after ")
    assert lines[-1].endswith("; --once gives up")
    assert len(lines) == 2, "one line when the outage began, one when --once gave up"


def test_once_gives_up_on_an_unresolved_host_only_after_its_backoff_reached_the_cap() -> None:
    now = [0.0]
    heard: list[OutageEvent] = []
    outage = StoreOutage(heard.append, monotonic=lambda: now[0], first_delay=0.5, max_delay=4.0)
    tries = 0
    while not outage.gives_up():
        outage.begin_pass()  # each try is a pass (a pass counts one retry)
        outage.failed(HostUnresolved("db.internal", "postgresql://db.internal/x: failed to resolve host"))
        tries += 1
        now[0] += outage.delay()
    print(f"an unresolved host: --once gave up after {tries} tries, {now[0]:.1f} s of backoff")
    assert tries == 5 and now[0] == 0.5 + 1 + 2 + 4 + 4  # 0.5 doubled up to the cap, then once more at the cap
    assert [type(e) for e in heard] == [OutageBegan]
    other = StoreOutage(monotonic=lambda: now[0], first_delay=0.5, max_delay=4.0)
    for _ in range(20):
        other.begin_pass()
        other.failed(StoreUnavailable("connection refused"))
    assert not other.gives_up(), "a refused connection is ridden out for ever"


@pytest.mark.parametrize(
    "said, kind",
    [
        ('connection failed: FATAL:  password authentication failed for user "app"', "BadStoreUrl"),
        ("connection failed: fe_sendauth: no password supplied", "BadStoreUrl"),
        ('connection failed: FATAL:  no pg_hba.conf entry for host "10.0.0.9", user "app"', "BadStoreUrl"),
        ('connection failed: FATAL:  database "agents" does not exist', "BadStoreUrl"),
        ('connection is bad: invalid sslmode value: "bogus"', "BadStoreUrl"),
        ("failed to resolve host 'db': [Errno -2] Name or service not known", "HostUnresolved"),
        ('could not translate host name "db" to address: Temporary failure in name resolution', "HostUnresolved"),
        ('connection failed: connection to server at "127.0.0.1", port 5432 failed: Connection refused', "StoreUnavailable"),
        ("connection failed: FATAL:  the database system is starting up", "StoreUnavailable"),
    ],
)
def test_a_failed_connection_is_told_apart_by_whether_it_can_ever_heal(said: str, kind: str) -> None:
    """The words libpq and the server use (a wrong password needs a server with password
    authentication, which the test server is not: its words are taken as they are)."""
    pytest.importorskip("psycopg", reason="the postgres extra (psycopg) is not installed")
    from runkernel.adapters.stores.postgres.schema import connect_failure

    found = connect_failure("postgresql://app:S3cretPw@db:5432/agents", "opening the store", RuntimeError(said))
    assert type(found).__name__ == kind and "S3cretPw" not in str(found), found
    if isinstance(found, HostUnresolved):
        assert found.host == "db"


def test_the_worker_stops_on_a_password_the_server_refuses(tmp_path: Path) -> None:
    """A cluster of the test's own that asks for passwords (scram-sha-256 over TCP): a
    wrong one stops the worker at once, exit 2, the password in no line."""
    pytest.importorskip("psycopg_pool", reason="the postgres extra (psycopg, psycopg-pool) is not installed")
    import psycopg

    from own_postgres import OwnCluster

    cluster = OwnCluster()
    try:
        cluster.start()
        with psycopg.connect(cluster.dsn(), autocommit=True) as conn:
            conn.execute("CREATE ROLE rk_app LOGIN PASSWORD 'Right-Pw-1'")
        cluster.stop_immediately()
        (cluster.data / "pg_hba.conf").write_text(
            "local all all trust\nhost all rk_app 127.0.0.1/32 scram-sha-256\nhost all all 127.0.0.1/32 trust\n"
        )
        cluster.start()
        url = f"postgresql://rk_app:Wr%40ng-Pw@127.0.0.1:{cluster.port}/postgres?schema=rk_x"
        code, out, err, seconds = _worker(url, tmp_path, "--once")
        print(f"a refused password: exit {code} after {seconds:.1f} s: {err.strip()}")
        assert code == 2 and out == "" and err.count("\n") == 1, err
        assert 'password authentication failed for user "rk_app"' in err
        assert "Wr%40ng-Pw" not in err and "Wr@ng-Pw" not in err
    finally:
        cluster.close()
