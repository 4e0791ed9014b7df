"""Issue 36, item 4: every CLI command's ``--store`` URL, fuzzed over the shapes an
operator mistypes (brackets, ``@``, ``%40``, ``:`` and ``/`` in passwords, bad ports,
unknown query keys, unknown schemes, empty parts): one line on stderr, exit 1 or 2,
never a traceback, and the password in no form (as typed, percent-decoded,
percent-encoded). No URL here can connect: its user (``fz``, ``f``, ``f@z``) is no role
of the test server, its database none of it, and no SQLite URL names a file."""

from __future__ import annotations

import os
import subprocess
import sys
import urllib.parse
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from runkernel.cli.entry import main

REPO = Path(__file__).resolve().parents[2]

#: Every command that takes --store, with the rest of a command line it accepts (the
#: worker runs as a process of its own: it rides out what may heal).
COMMANDS: dict[str, tuple[str, ...]] = {
    "simulate": ("simulate", "--runs", "1"),
    "inspect": ("inspect", "r1"),
    "export": ("export", "t1"),
    "resume": ("resume", "r1", "--ticket", "tk1", "--approve"),
    "cancel": ("cancel", "r1"),
    "reconcile": ("reconcile", "op1", "--outcome", "applied"),
    "start": ("start", "--thread", "t1", "--app", "demo", "hello"),
    "runs": ("runs",),
    "db init": ("db", "init"),
    "db migrate": ("db", "migrate"),
    "ui": ("ui", "--port", "0"),
    "crashtest": ("crashtest", "--app", "examples.demo_app:app"),
    "upgrade-check": ("upgrade-check", "--app", "examples.demo_app:app"),
    "upgrade-check --accept": ("upgrade-check", "--app", "examples.demo_app:app", "--accept"),
}

#: The password: a marker no message holds otherwise, and the characters that move a
#: URL parser's idea of where it ends.
_TRICKY = "@:/%[]#?&=40aZ"
passwords = st.text(alphabet=_TRICKY, max_size=8).map(lambda middle: f"S3cr{middle}Qz")


@st.composite
def store_urls(draw: st.DrawFn) -> tuple[str, str]:
    """(a URL, its password) of a shape a PostgreSQL URL, a mistyped one or another
    scheme may take."""
    password = draw(passwords)
    encoded = draw(st.booleans())
    shown = urllib.parse.quote(password, safe="") if encoded else password
    mistyped = ["postgresql:/", "postgresql:", "mysql://", "http://", "sqlite://", ""]
    scheme = draw(st.sampled_from(["postgresql://"] * 6 + ["postgres://"] * 2 + mistyped))
    user = draw(st.sampled_from(["fz", "f%40z", "f:z"]))  # never empty: libpq would take the OS user
    host = draw(st.sampled_from(["127.0.0.1", "localhost", "[127.0.0.1", "[zz]", "[::1", "127.0.0.1]", ""]))
    port = draw(st.sampled_from(["", ":", ":5432", ":99999", ":abc", ":-1", ":0", ":65536"]))
    path = draw(st.sampled_from(["/fz_nodb", "/", "", "/fz/nodb", "/%zz"]))
    query = draw(
        st.sampled_from(
            ["", "?schema=fz_s", "?bogus=1", "?sslmode=bogus", "?schema=", "?schema=a-b", "?&=&", f"?password={shown}"]
        )
    )
    in_user_info = draw(st.booleans()) or not query.startswith("?password")
    user_info = f"{user}:{shown}@" if in_user_info else f"{user}@"
    return f"{scheme}{user_info}{host}{port}{path}{query}", password


def _forms(password: str) -> set[str]:
    return {password, urllib.parse.unquote(password), urllib.parse.quote(password, safe=""), "S3cr"}


def _check(command: str, url: str, password: str, code: int, out: str, err: str) -> None:
    said = out + err
    assert "Traceback" not in said, (command, url, err)
    assert code in (1, 2), (command, url, code, out, err)
    assert err.count("\n") == 1 and err.endswith("\n"), (command, url, err)
    leaked = [form for form in _forms(password) if form in said]
    assert not leaked, (command, url, leaked, said)


@pytest.mark.parametrize("command", sorted(COMMANDS))
@settings(max_examples=40, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(drawn=store_urls())
def test_a_fuzzed_store_url_is_one_line_without_traceback_or_secret(
    command: str, drawn: tuple[str, str], capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    url, password = drawn
    argv = [*COMMANDS[command], "--store", url]
    capsys.readouterr()  # the fixture lives across examples: only this one's output counts
    here = os.getcwd()
    os.chdir(tmp_path)  # a SQLite URL, if any, is relative to a scratch directory
    try:
        code = main(argv)
    finally:
        os.chdir(here)
    captured = capsys.readouterr()
    _check(command, url, password, code, captured.out, captured.err)


@settings(max_examples=15, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(drawn=store_urls())
def test_the_worker_refuses_a_fuzzed_store_url_or_rides_it_out_without_traceback_or_secret(
    drawn: tuple[str, str], tmp_path: Path
) -> None:
    """The worker stops (exit 2, one line) on a URL that can never work, and rides out
    one that may heal (a host that does not resolve, a refused connection): then it is
    still running after a few seconds, and has said so in outage lines only."""
    url, password = drawn
    worker = subprocess.Popen(
        [sys.executable, "-m", "runkernel.cli", "worker", "--store", url, "--app", "examples.demo_app:app", "--once"],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        out, err = worker.communicate(timeout=4)
        code = worker.returncode
    except subprocess.TimeoutExpired:
        worker.kill()
        out, err = worker.communicate()
        said = out + err
        assert "Traceback" not in said and not [f for f in _forms(password) if f in said], (url, said)
        outage = ("runkernel worker: store unavailable", "runkernel worker: host ")
        assert all(line.startswith(outage) for line in err.splitlines()), (url, err)
        return
    _check("worker", url, password, code, out, err)


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_a_sqlite_url_with_a_query_is_refused_and_creates_no_file(
    command: str, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    if command == "ui":
        pytest.importorskip("starlette", reason="the ui extra (pip install 'runkernel[ui]') is not installed")
    here = os.getcwd()
    os.chdir(tmp_path)
    try:
        code = main([*COMMANDS[command], "--store", "sqlite:///q.db?mode=rw"])
    finally:
        os.chdir(here)
    err = capsys.readouterr().err
    says = "db init is for server stores" if command == "db init" else "takes no query"
    assert code == 2 and says in err and err.count("\n") == 1, err
    assert list(tmp_path.iterdir()) == []
