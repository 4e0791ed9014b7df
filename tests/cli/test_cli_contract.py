"""The CLI held to its documented contract (docs/reference/commands.md) where it deviated:
passwords masked however malformed the URL, a zero-byte file refused by start, db
migrate's store failures exit 1, no -wal/-shm beside a refused newer-schema store, a
locked store named, usage errors in one line, integers outside 0..2^53-1 not a trace."""

from __future__ import annotations

import functools
import json
import os
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from runkernel.adapters.stores.sqlite import migrate as sqlite_migrate
from runkernel.adapters.stores.sqlite import store as sqlite_store
from runkernel.adapters.stores.redact import masked, redacted
from runkernel.adapters.stores.sqlite import SqliteStore
from runkernel.cli.entry import main
from runkernel.kernel.codec import commit_to_json
from runkernel.specs.schema import trace_line_schema
from runkernel.testing import awaiting_run

DATA = Path(__file__).parent.parent / "data" / "stores"


def url(path: Path) -> str:
    return f"sqlite:///{path}"


def one_line(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


# --- item 5: passwords ------------------------------------------------------------------

#: passwords with every character a URL parser splits on, unencoded
PASSWORDS = ["p@ss:w0rd/Zq", "s3c:ret", "s3c/ret", "s3c%ret", "s3c%2Fret", "a@b@c:d/e%f", "s3cret?x@y"]


def _fragments(secret: str) -> set[str]:
    return {secret[i:i + 3] for i in range(len(secret) - 2)} - {"***"}


def _store_urls() -> Iterator[tuple[str, str]]:
    for password in PASSWORDS:
        for host in ("127.0.0.1:1", "127.0.0.1:5432"):
            yield f"postgresql://u:{password}@{host}/test", password
            yield f"postgresql://u@{host}/test?password={password}", password
            yield f"postgresql://u@{host}/test?schema=s&sslpassword={password}&password={password}", password


@pytest.mark.parametrize("password", PASSWORDS)
def test_redacted_hides_every_character_of_a_malformed_password(password: str) -> None:
    for store, secret in _store_urls():
        if secret != password:
            continue
        shown = redacted(store)
        assert "***" in shown and not any(f in shown for f in _fragments(password)), (store, shown)
    assert redacted("postgresql://u:p@ss:w0rd/Zq@127.0.0.1:5432/test") == "postgresql://u:***@127.0.0.1:5432/test"
    assert redacted("postgresql://u@h/d?password=a@b:c/d%e&schema=x") == "postgresql://u@h/d?password=***&schema=x"


def test_masked_hides_the_pieces_a_parser_quotes_back() -> None:
    store = "postgresql://u:p@ss:w0rd/Zq@127.0.0.1:5432/test"
    libpq = 'invalid integer value "w0rd/Zq@127.0.0.1:5432" for connection option "port"'
    assert masked(libpq, store) == 'invalid integer value "***" for connection option "port"'
    assert masked(f"cannot reach {store}", store) == "cannot reach postgresql://u:***@127.0.0.1:5432/test"


@pytest.mark.parametrize("command", [["runs"], ["inspect", "r1"], ["cancel", "r1"], ["db", "migrate"]])
def test_a_password_is_masked_in_every_message_however_the_url_is_malformed(
    command: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("psycopg_pool")
    checked = 0
    for store, password in _store_urls():
        if "5432" in store and command != ["runs"]:
            continue  # the live server once per URL is enough
        argv = command[:1] + (command[1:2] if command[0] == "db" else []) + ["--store", store] + (
            [] if command[0] == "db" else command[1:]
        )
        code = main(argv)
        line = one_line(capsys)
        assert code in (1, 2), line
        leaked = [f for f in _fragments(password) if f in line]
        assert not leaked, (store, line)
        checked += 1
    print(f"{checked} malformed-password invocations of {' '.join(command)}: 0 leaks")


def test_a_usage_error_echoing_a_url_masks_its_password(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["runs", "postgresql://u:p@ss:w0rd/Zq@127.0.0.1:5432/test"]) == 2
    line = one_line(capsys)
    assert "unrecognized arguments" in line and "w0rd" not in line and "ss:w" not in line


# --- item 6: deviations ----------------------------------------------------------------


def test_start_refuses_a_zero_byte_file_and_leaves_it_empty(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "empty.db"
    path.write_bytes(b"")
    assert main(["start", "--store", url(path), "--thread", "t", "--app", "a", "hello"]) == 2
    assert "empty file" in one_line(capsys)
    assert path.read_bytes() == b"" and sorted(p.name for p in tmp_path.iterdir()) == ["empty.db"]
    assert main(["simulate", "--runs", "2", "--no-progress", "--store", url(path)]) == 2
    assert "empty file" in one_line(capsys) and path.read_bytes() == b""


@pytest.fixture
def schema1_store(tmp_path: Path) -> Path:
    path = tmp_path / "old.db"
    path.write_bytes((DATA / "schema1.sqlite").read_bytes())
    return path


def test_db_migrate_on_a_locked_store_exits_1_naming_it(
    schema1_store: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(sqlite_migrate, "BUSY_TIMEOUT", 0.05)  # the lock is held: no need to wait 30 s
    holder = sqlite3.connect(schema1_store, isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")
    try:
        code = main(["db", "migrate", "--store", url(schema1_store)])
        line = one_line(capsys)
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert code == 1, line
    assert line.startswith("runkernel db migrate: ") and f"{schema1_store} is locked" in line
    assert main(["db", "migrate", "--store", url(schema1_store)]) == 0, "once the lock is gone it migrates"


@pytest.fixture
def read_only_mount(tmp_path: Path) -> Iterator[Path]:
    """A small tmpfs remounted read-only (root only; skipped elsewhere)."""
    mount_point = tmp_path / "ro"
    mount_point.mkdir()
    if os.geteuid() != 0:
        pytest.skip("mounting a read-only file system needs root")
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(mount_point)], capture_output=True, check=False)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.decode(errors='replace').strip()}")
    try:
        yield mount_point
    finally:
        subprocess.run(["umount", "-l", str(mount_point)], check=False)


def test_db_migrate_on_read_only_media_exits_1(read_only_mount: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = read_only_mount / "old.db"
    path.write_bytes((DATA / "schema1.sqlite").read_bytes())
    subprocess.run(["mount", "-o", "remount,ro", str(read_only_mount)], check=True)
    assert main(["db", "migrate", "--store", url(path)]) == 1
    assert "read-only" in one_line(capsys)


def test_db_migrate_on_a_full_disk_exits_1(read_only_mount: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = read_only_mount / "old.db"
    path.write_bytes((DATA / "schema1.sqlite").read_bytes())
    filler = read_only_mount / "filler"
    descriptor = os.open(filler, os.O_WRONLY | os.O_CREAT)
    try:  # fill the 2 MB file system to the last byte
        for size in (65536, 4096, 512, 1):
            while True:
                try:
                    os.write(descriptor, b"\0" * size)
                except OSError:
                    break
    finally:
        os.close(descriptor)
    code = main(["db", "migrate", "--store", url(path)])
    line = one_line(capsys)
    assert code == 1 and str(path) in line, line


def test_a_read_command_leaves_no_wal_beside_a_refused_newer_schema_store(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "new.db"
    store = SqliteStore(path)
    for commit in awaiting_run("t1", "r1", "ticket-approval-0001")[0]:
        store.append(commit)
    store.close()
    db = sqlite3.connect(path)
    db.execute("UPDATE meta SET value = '99' WHERE key = 'version'")
    db.commit()
    db.close()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["new.db"]
    for argv in (["inspect", "r1"], ["export", "t1"], ["runs"]):
        assert main([*argv, "--store", url(path)]) == 2
        assert "upgrade runkernel" in one_line(capsys)
        assert sorted(p.name for p in tmp_path.iterdir()) == ["new.db"], argv


def test_start_on_a_locked_store_names_the_store(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "locked.db"
    SqliteStore(path).close()
    monkeypatch.setattr(sqlite_store, "SqliteStore", functools.partial(SqliteStore, busy_timeout=0.05))
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")  # another writer holds the store
    try:
        code = main(["start", "--store", url(path), "--thread", "t", "--app", "a", "hello"])
        line = one_line(capsys)
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert code == 1 and f"{path} is locked by another writer" in line, line


@pytest.mark.parametrize(
    "argv",
    [
        ["resume", "--store", "sqlite:///x.db", "r1", "--approve"],
        ["resume", "--store", "sqlite:///x.db", "r1", "--ticket", "t", "--call", "c", "--approve"],
        ["runs", "--state", "sleeping"],
        ["nosuch"],
        ["db"],
        ["inspect"],
        ["check-trace"],
    ],
    ids=lambda a: " ".join(a),
)
def test_a_usage_error_is_one_line_that_points_at_help(
    argv: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(argv) == 2
    line = one_line(capsys)
    assert line.startswith("runkernel") and line.endswith("--help)") and "usage:" not in line, line
    assert list(tmp_path.iterdir()) == []


def test_a_usage_error_from_the_installed_command_is_one_line() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "runkernel.cli", "resume", "r1", "--approve"], capture_output=True, text=True, check=False
    )
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert "one of the arguments --ticket --call is required" in done.stderr


@pytest.mark.parametrize(
    ("field", "value", "code"),
    [
        ("version", 2**70, 2),
        ("version", 2**53, 2),
        ("step", 2**53, 2),
        ("attempt", 2**64, 2),
        ("max_attempts", 2**53, 2),
        ("retries", -1, 2),
        ("batch_step", -1, 2),
        ("batch_step", 2**60, 2),
        ("version", 2**53 - 1, 1),  # within range: a trace, and an illegal line (a gap)
    ],
)
def test_an_integer_field_outside_0_to_2_53_minus_1_is_not_a_trace(
    field: str, value: int, code: int, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    commits, _ = awaiting_run("t1", "r1", "ticket-approval-0001")
    lines = [commit_to_json(c) for c in commits]
    target = lines[1]  # the inference that opened the batch
    call = target["batch"]["calls"][0]
    if field in ("version", "step"):
        target[field] = value
    elif field == "batch_step":
        target["batch"]["step"] = value
    elif field == "attempt":
        call[field] = value
    else:
        call["policy"][field] = value
    trace = tmp_path / "t.jsonl"
    trace.write_text("".join(json.dumps(line) + "\n" for line in lines))
    assert main(["check-trace", str(trace)]) == code
    if code == 2:
        assert "not-a-trace" in capsys.readouterr().err


def test_the_schema_states_the_integer_maximum() -> None:
    schema = trace_line_schema()
    maximum = 2**53 - 1
    assert schema["properties"]["version"]["maximum"] == maximum
    assert schema["properties"]["step"]["maximum"] == maximum
    call = schema["$defs"]["call"]["properties"]
    assert call["attempt"]["maximum"] == maximum
    assert call["policy"]["properties"]["max_attempts"]["maximum"] == maximum
    assert call["policy"]["properties"]["retries"]["maximum"] == maximum
    assert schema["$defs"]["batch"]["properties"]["step"]["maximum"] == maximum
