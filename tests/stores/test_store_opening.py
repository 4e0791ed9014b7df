"""Opening a SQLite store: files runkernel does not own are refused and left unchanged;
read commands open read-only (and on read-only media); every failure is one line."""

from __future__ import annotations

import contextlib
import hashlib
import io
import os
import sqlite3
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from runkernel.adapters.stores.sqlite import SqliteStore
from runkernel.adapters.stores.contract import DamagedStore, SchemaError, StoreUnavailable
from runkernel.cli.entry import main
from runkernel.testing import awaiting_run, text_run

READ_AND_WRITE_COMMANDS = (
    ["inspect", "r1"],
    ["inspect", "r1", "--format", "json"],
    ["export", "t1"],
    ["cancel", "r1"],
    ["resume", "r1", "--ticket", "tk", "--approve"],
    ["reconcile", "op", "--outcome", "applied"],
    ["simulate", "--runs", "2", "--no-progress"],
    ["simulate", "--runs", "2", "--no-progress", "--reset"],
)


def url(path: Path) -> str:
    return f"sqlite:///{path}"


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def one_line_run(argv: list[str], path: Path) -> tuple[int, str]:
    """Run the CLI against ``path``: its exit code and its stderr, which must be one
    line (an exception escaping ``main`` would fail the test as a traceback would)."""
    errors, output = io.StringIO(), io.StringIO()
    with contextlib.redirect_stderr(errors), contextlib.redirect_stdout(output):
        code = main([*argv, "--store", url(path)])
    assert len(errors.getvalue().strip().splitlines()) == 1, errors.getvalue()
    return code, errors.getvalue()


@pytest.fixture
def waiting_store(tmp_path: Path) -> Path:
    path = tmp_path / "w.db"
    store = SqliteStore(path)
    for commit in awaiting_run("t1", "r1", "ticket-approval-0001")[0]:
        store.append(commit)
    store.close()
    return path


def foreign(path: Path, ddl: str) -> Path:
    db = sqlite3.connect(path)
    db.execute(ddl)
    db.commit()
    db.close()
    return path


@pytest.mark.parametrize("argv", READ_AND_WRITE_COMMANDS, ids=lambda a: " ".join(a))
@pytest.mark.parametrize("ddl", ["CREATE TABLE t (x)", "CREATE VIEW v AS SELECT 1"], ids=["table", "view"])
def test_another_applications_database_is_refused_and_left_unchanged(
    tmp_path: Path, argv: list[str], ddl: str
) -> None:
    path = foreign(tmp_path / "app.db", ddl)
    before = digest(path)
    code, error = one_line_run(argv, path)
    assert code == 2 and "is not a runkernel store" in error
    assert digest(path) == before
    db = sqlite3.connect(path)
    assert db.execute("PRAGMA journal_mode").fetchone() == ("delete",)
    assert [r[0] for r in db.execute("SELECT name FROM sqlite_master")] in (["t"], ["v"])
    db.close()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["app.db"]


@pytest.mark.parametrize("argv", READ_AND_WRITE_COMMANDS[:6], ids=lambda a: " ".join(a))
def test_an_empty_file_gets_no_schema_from_a_command_that_does_not_create(tmp_path: Path, argv: list[str]) -> None:
    path = tmp_path / "empty.db"
    path.write_bytes(b"")
    code, error = one_line_run(argv, path)
    assert code == 2 and "empty file" in error
    assert path.read_bytes() == b""


def test_an_empty_sqlite_database_is_not_given_a_schema_by_a_read(tmp_path: Path) -> None:
    path = tmp_path / "blank.db"
    db = sqlite3.connect(path)
    db.execute("PRAGMA user_version = 7")  # a valid SQLite file with no schema object
    db.close()
    before = digest(path)
    with pytest.raises(SchemaError, match="empty database"):
        SqliteStore(path, read_only=True)
    with pytest.raises(SchemaError, match="empty database"):
        SqliteStore(path, create=False)
    assert digest(path) == before


@pytest.mark.parametrize("argv", READ_AND_WRITE_COMMANDS, ids=lambda a: " ".join(a))
@pytest.mark.parametrize("kind", ["directory", "fifo", "garbled"])
def test_a_directory_a_fifo_or_garbage_is_one_line(tmp_path: Path, argv: list[str], kind: str) -> None:
    path = tmp_path / "store.db"
    if kind == "directory":
        path.mkdir()
    elif kind == "fifo":
        os.mkfifo(path)  # opening it would block: it must be refused before SQLite sees it
    else:
        path.write_bytes(b"\x00garbage" * 512)
    code, error = one_line_run(argv, path)
    expected = {"directory": "is a directory", "fifo": "not a regular file", "garbled": "not a SQLite database"}
    assert code == 2 and expected[kind] in error


@pytest.mark.parametrize("version, message", [(99, "upgrade runkernel"), (0, "older schema version 0")])
def test_a_newer_or_older_schema_is_refused_by_every_command(
    waiting_store: Path, version: int, message: str
) -> None:
    db = sqlite3.connect(waiting_store)
    db.execute("UPDATE meta SET value = ? WHERE key = 'version'", (str(version),))
    db.commit()
    db.close()
    before = digest(waiting_store)
    for argv in READ_AND_WRITE_COMMANDS:
        code, error = one_line_run(argv, waiting_store)
        assert code == 2 and message in error, (argv, error)
    assert digest(waiting_store) == before


def test_read_commands_do_not_change_a_store_file(waiting_store: Path, capsys: pytest.CaptureFixture[str]) -> None:
    before = digest(waiting_store)
    assert main(["inspect", "--store", url(waiting_store), "r1"]) == 0
    assert main(["inspect", "--store", url(waiting_store), "r1", "--format", "json"]) == 0
    assert main(["export", "--store", url(waiting_store), "t1"]) == 0
    assert digest(waiting_store) == before
    assert "version 3" in capsys.readouterr().out


def test_a_read_only_store_refuses_writes_and_keeps_one_snapshot(waiting_store: Path) -> None:
    reader = SqliteStore(waiting_store, read_only=True)
    assert reader.run("r1") is not None
    writer = SqliteStore(waiting_store)
    writer.append(text_run("t2", "r2", 1)[0])
    # the reader started its read transaction before the append: it still sees one
    # snapshot, so a command's reads never mix two versions of the store
    assert reader.thread_ids() == ["t1"]
    assert writer.thread_ids() == ["t1", "t2"]
    with pytest.raises(StoreUnavailable, match="read-only|readonly"):
        reader.put_command("r1", {"type": "end"})
    reader.close()
    writer.close()


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


def test_a_wal_store_on_read_only_media_can_be_read(read_only_mount: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = read_only_mount / "w.db"
    store = SqliteStore(path)
    for commit in awaiting_run("t1", "r1", "ticket-approval-0001")[0]:
        store.append(commit)
    store.close()
    subprocess.run(["mount", "-o", "remount,ro", str(read_only_mount)], check=True)
    with pytest.raises(sqlite3.OperationalError):  # what mode=ro alone does here
        sqlite3.connect(f"file:{path}?mode=ro", uri=True).execute("SELECT 1 FROM meta").fetchone()
    assert main(["inspect", "--store", url(path), "r1"]) == 0
    assert main(["export", "--store", url(path), "t1"]) == 0
    assert "version 3" in capsys.readouterr().out
    assert main(["cancel", "--store", url(path), "r1"]) == 1
    assert "read-only file system" in capsys.readouterr().err


def test_a_store_locked_beyond_the_busy_timeout_is_store_unavailable(waiting_store: Path) -> None:
    holder = sqlite3.connect(waiting_store, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    store = SqliteStore(waiting_store, busy_timeout=0.05)
    with pytest.raises(StoreUnavailable, match="locked by another writer"):
        store.reset()
    with pytest.raises(StoreUnavailable, match="locked by another writer"):
        store.put_command("r1", {"type": "end"})
    with pytest.raises(StoreUnavailable, match="locked"):
        store.claim_empty("test", reset=True)
    holder.execute("ROLLBACK")
    holder.close()
    assert store.thread_ids() == ["t1"]
    store.close()


def test_a_full_disk_is_store_unavailable(waiting_store: Path) -> None:
    store = SqliteStore(waiting_store)
    pages = store._db.execute("PRAGMA page_count").fetchone()[0]
    store._db.execute(f"PRAGMA max_page_count = {pages}")  # this connection only: a full disk
    with pytest.raises(StoreUnavailable, match="disk is full"):
        for index in range(200):
            store.put_command("r1", {"type": "end", "padding": "x" * 4000, "n": index})
    store.close()


# --- damage detected on read ------------------------------------------------------------


def damage(path: Path, sql: str) -> None:
    db = sqlite3.connect(path)
    db.execute(sql)
    db.commit()
    db.close()


DAMAGE = [
    ("DELETE FROM commits WHERE version = 2", "breaks the log"),
    ("UPDATE commits SET version = 4 WHERE version = 3", "breaks the log"),
    ("UPDATE commits SET line = (SELECT line FROM commits WHERE version = 1) WHERE version = 2", "breaks the log"),
    ("UPDATE commits SET line = '{}' WHERE version = 2", "commits row ('t1', 2) is damaged"),
    # r1 is active: its row holds the Thread's head version (schema 9, ``sqlite.heads``)
    ("UPDATE runs SET version = 9", "says version 9"),
    ("UPDATE runs SET version = 'x'", "threads row"),
    ("UPDATE runs SET snapshot = json_set(snapshot, '$.version', 'x')", "disagrees with its log"),
    ("UPDATE runs SET snapshot = json_set(snapshot, '$.version', 2)", "disagrees with its log"),
    ("UPDATE runs SET snapshot = '{not json'", "runs row 'r1' is damaged"),
]


@pytest.mark.parametrize("sql, message", DAMAGE, ids=[d[0][:40] for d in DAMAGE])
def test_damage_is_one_line_and_exit_1_never_a_partial_answer(waiting_store: Path, sql: str, message: str) -> None:
    damage(waiting_store, sql)
    for argv in (["inspect", "r1"], ["inspect", "r1", "--format", "json"], ["export", "t1"]):
        code, error = one_line_run(argv, waiting_store)
        assert code == 1 and message in error, (argv, error)


def test_damaged_inbox_and_checkpoint_rows_are_damaged_store_errors(waiting_store: Path) -> None:
    store = SqliteStore(waiting_store)
    entry = store.put_command("r1", {"type": "end"})
    store._db.execute("INSERT INTO checkpoints (run_id, step, data) VALUES ('r1', 1, '{bad')")
    store._db.execute("UPDATE inbox SET body = '{bad'")
    with pytest.raises(DamagedStore, match=f"inbox row {entry} is damaged"):
        store.pending_commands("r1")
    with pytest.raises(DamagedStore, match=f"inbox row {entry} is damaged"):
        store.inbox_entry(entry)
    with pytest.raises(DamagedStore, match="checkpoints row 'r1' is damaged"):
        store.load_checkpoint("r1")
    store.close()
    code, error = one_line_run(["inspect", "r1"], waiting_store)
    assert code == 1 and "inbox row" in error


def test_a_runs_row_holding_another_runs_state_is_damage(waiting_store: Path) -> None:
    damage(waiting_store, "UPDATE runs SET run_id = 'r9'")
    store = SqliteStore(waiting_store)
    with pytest.raises(DamagedStore, match="holds the state of run 'r1'"):
        store.run("r9")
    store.close()


def test_a_wal_that_immutable_would_ignore_is_refused_on_read_only_media(
    read_only_mount: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import shutil

    source = tmp_path / "live.db"
    writer = SqliteStore(source)  # kept open: its write-ahead log is not checkpointed
    for commit in awaiting_run("t1", "r1", "ticket-approval-0001")[0]:
        writer.append(commit)
    for suffix in ("", "-wal"):
        shutil.copy(f"{source}{suffix}", read_only_mount / f"w.db{suffix}")
    writer.close()
    subprocess.run(["mount", "-o", "remount,ro", str(read_only_mount)], check=True)
    assert main(["inspect", "--store", url(read_only_mount / "w.db"), "r1"]) == 1
    error = capsys.readouterr().err
    assert "uncheckpointed write-ahead log" in error and len(error.strip().splitlines()) == 1


def test_inspect_during_concurrent_appends_never_shows_a_torn_read(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import json
    import threading
    import time

    path = tmp_path / "busy.db"
    commits = text_run("t1", "r1", 120)
    store = SqliteStore(path, synchronous="NORMAL")
    store.append(commits[0])
    done = threading.Event()

    def write() -> None:
        writer = SqliteStore(path, synchronous="NORMAL")
        for commit in commits[1:]:
            writer.append(commit)
            time.sleep(0.002)  # spread the appends over many reads
        writer.close()
        done.set()

    thread = threading.Thread(target=write)
    thread.start()
    reads, torn = 0, []
    while not done.is_set() or reads < 5:
        assert main(["inspect", "--store", url(path), "r1", "--format", "json"]) == 0
        view = json.loads(capsys.readouterr().out)
        reads += 1
        if len(view["messages"]) != view["version"]:  # one message per commit in this run
            torn.append((view["version"], len(view["messages"])))
    thread.join()
    store.close()
    print(f"{reads} inspect reads during {len(commits) - 1} appends, {len(torn)} torn")
    assert torn == []


def make_unowned(path: Path, kind: str) -> None:
    """A file at ``path`` that is not a runkernel store of this schema."""
    if kind == "directory":
        path.mkdir()
    elif kind == "fifo":
        os.mkfifo(path)
    elif kind == "garbled":
        path.write_bytes(b"\x00garbage" * 512)
    elif kind == "truncated header":
        path.write_bytes(b"SQLite format 3\x00" + b"\xff" * 84)
    elif kind == "foreign":
        foreign(path, "CREATE TABLE t (x)")
    elif kind == "views only":
        foreign(path, "CREATE VIEW v AS SELECT 1")
    elif kind in ("newer", "older", "other schema"):
        SqliteStore(path).close()
        key, value = {"newer": ("version", "99"), "older": ("version", "0"), "other schema": ("schema", "x")}[kind]
        damage(path, f"UPDATE meta SET value = '{value}' WHERE key = '{key}'")
    else:
        raise AssertionError(kind)


UNOWNED = ["directory", "fifo", "garbled", "truncated header", "foreign", "views only", "newer", "older", "other schema"]


@pytest.mark.parametrize("kind", UNOWNED)
@pytest.mark.parametrize("access", ["read", "write", "create"])
def test_every_unowned_file_is_one_typed_line_at_the_store(tmp_path: Path, kind: str, access: str) -> None:
    path = tmp_path / "x.db"
    make_unowned(path, kind)
    before = digest(path) if path.is_file() else None
    with pytest.raises((SchemaError, DamagedStore)) as raised:
        SqliteStore(path, read_only=access == "read", create=access == "create")
    assert len(str(raised.value).splitlines()) == 1 and str(path) in str(raised.value)
    if before is not None:
        assert digest(path) == before


def test_stores_created_together_never_see_each_others_file_empty(tmp_path: Path) -> None:
    """Six openers with ``create`` released at once on a path that does not exist yet, ten
    times: each opens the store (the file appears only with its header written), and no
    scratch file is left beside it. Before, most saw another's file still empty and
    refused it as "an empty file, not a runkernel store"."""
    failures: list[str] = []
    for attempt in range(10):
        path = tmp_path / f"s{attempt}.db"
        barrier = threading.Barrier(6)

        def open_together() -> None:
            barrier.wait()
            try:
                SqliteStore(path, create=True).close()
            except Exception as error:  # noqa: BLE001 - every failure is the finding
                failures.append(str(error))

        openers = [threading.Thread(target=open_together) for _ in range(6)]
        for opener in openers:
            opener.start()
        for opener in openers:
            opener.join()
    left = sorted(name for name in os.listdir(tmp_path) if not name.startswith("s") or ".db" not in name)
    print(f"60 openers of 10 new stores: {len(failures)} refused; scratch files left: {left}")
    assert failures == [] and left == []


def test_a_new_store_file_has_the_mode_sqlite_gives_a_new_file(tmp_path: Path) -> None:
    """0666 less the umask, as a file SQLite creates itself: another user or group the
    umask lets in can open the store."""
    sqlite3.connect(tmp_path / "plain.db").execute("CREATE TABLE t (x)").connection.close()
    SqliteStore(tmp_path / "store.db", create=True).close()
    modes = {name: oct((tmp_path / name).stat().st_mode & 0o777) for name in ("plain.db", "store.db")}
    print(f"modes: {modes}")
    assert modes["store.db"] == modes["plain.db"]
