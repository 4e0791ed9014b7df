"""The CLI against a new user's findings (the probe's F1, F2, F4, F5, F8, F9, F10, F13,
F14, F15, F16): a host's exception does not kill ``worker``, user errors are one line
and exit 2 before any file is made, exit codes follow the commands table (docs/reference/commands.md), secrets and
control characters never reach the terminal as they are."""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from runkernel.adapters.stores.sqlite import SqliteStore
from runkernel.cli.entry import main
from runkernel.testing import awaiting_run

ROOT = Path(__file__).resolve().parents[2]

BOOM_APP = textwrap.dedent(
    """
    from runkernel import CallRequest
    from runkernel.adapters.drive.ports import ModelReply, Returned, Staging, StatusReply, ToolRegistry
    from runkernel.adapters.worker.apps import RuntimeApp
    from runkernel.kernel.policies import RecoveryMode, ToolPolicy, ToolRecoveryPolicy
    from runkernel.kernel.protocol import OperationStatus
    from runkernel.kernel.values import EndCauseKind

    class Model:
        def infer(self, request):
            if request.step == 1:
                return ModelReply("calling", (CallRequest("boom", {}),))
            return ModelReply("done", end=EndCauseKind.COMPLETED)

    class Boom:
        policy = ToolPolicy(ToolRecoveryPolicy(RecoveryMode.REPLAY))
        def run(self, inv):
            if inv.run_id == "rb":
                raise RuntimeError("tool exploded")
            return Returned({"ok": True})
        def status(self, op, epoch):
            return StatusReply(OperationStatus.UNKNOWN)

    class BadModel(Model):
        def infer(self, request):
            if request.run_id == "rb":
                raise ValueError("model exploded")
            return super().infer(request)

    class BadHooks:
        def before_inference(self, run_id, step, staged):
            if run_id == "rb":
                raise ValueError("hook exploded")
            return Staging()
        def after_tool(self, run_id, call_id, attempt, reply):
            return None

    app = RuntimeApp(name="boom", model=Model(), tools=ToolRegistry({"boom": Boom()}, max_steps=5))
    badmodel = RuntimeApp(name="boom", model=BadModel(), tools=ToolRegistry({"boom": Boom()}, max_steps=5))
    badhooks = RuntimeApp(
        name="boom", model=Model(), tools=ToolRegistry({"boom": Boom()}, max_steps=5), hooks=BadHooks()
    )
    """
)


def url(path: Path) -> str:
    return f"sqlite:///{path}"


@pytest.fixture
def waiting_store(tmp_path: Path) -> Path:
    path = tmp_path / "w.db"
    store = SqliteStore(path)
    for commit in awaiting_run("t1", "r1", "ticket-approval-0001")[0]:
        store.append(commit)
    store.close()
    return path


def _one_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert "Traceback" not in err
    return lines[0]


# --- F1 ---------------------------------------------------------------------------------


def _two_boom_runs_worked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], app: str, exit_code: int = 0
) -> tuple[str, str, SqliteStore]:
    """Runs ``rb`` and ``rb2`` started, one ``worker --once`` with ``boomapp:APP`` that
    exits ``exit_code`` (1 when a Run it drove ended failed): its stdout, its one stderr
    line, and the store."""
    (tmp_path / "boomapp.py").write_text(BOOM_APP)
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    store_url = url(tmp_path / "boom.db")
    for thread, run in (("tb", "rb"), ("tb2", "rb2")):
        assert main(["start", "--store", store_url, "--thread", thread, "--run", run, "--app", "boom", "go"]) == 0
    capsys.readouterr()
    assert main(["worker", "--store", store_url, "--app", f"boomapp:{app}", "--once"]) == exit_code
    captured = capsys.readouterr()
    return captured.out, _one_line(captured.err), SqliteStore(tmp_path / "boom.db")


def _ended(store: SqliteStore, run_id: str) -> bool:
    snapshot = store.run(run_id)
    return snapshot is not None and type(snapshot.state).__name__ == "Ended"


def test_a_tool_that_raises_is_one_line_its_call_is_committed_and_every_run_ends(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    out, line, store = _two_boom_runs_worked(tmp_path, monkeypatch, capsys, "app")
    assert line.startswith("runkernel worker: run rb: tool call ") and "raised RuntimeError: tool exploded" in line, line
    assert "0 failures" in out and out.startswith("worker "), out
    assert _ended(store, "rb") and _ended(store, "rb2")  # the replay tool's exception is its call's error
    assert store.current_lease("rb") is None
    store.close()
    print(f"worker with a raising tool: {out.strip()} / {line}")


def test_a_hook_that_raises_is_one_line_and_the_worker_drives_the_other_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    out, line, store = _two_boom_runs_worked(tmp_path, monkeypatch, capsys, "badhooks")
    assert line.startswith("runkernel worker: run rb: ") and "ValueError: hook exploded" in line, line
    assert "1 failure" in out, out
    assert _ended(store, "rb2") and not _ended(store, "rb")
    assert store.current_lease("rb") is None
    store.close()


def test_a_model_that_raises_a_non_transient_error_is_one_line_and_ends_its_run_failed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # until the transient model errors, this was a failed drive retried for ever
    out, line, store = _two_boom_runs_worked(tmp_path, monkeypatch, capsys, "badmodel", exit_code=1)
    assert line == (
        "runkernel worker: run rb: model call for step 1 attempt 1 raised ValueError: model exploded "
        "(nothing committed; the Run ends failed)"
    ), line
    assert "0 failures" in out, out
    assert _ended(store, "rb2") and _ended(store, "rb")
    snapshot = store.run("rb")
    assert snapshot is not None and repr(snapshot.state.cause.error) == (  # type: ignore[union-attr]
        "TypedError(type='ValueError', message='model exploded')"
    )
    assert store.current_lease("rb") is None
    store.close()
    print(f"worker with a raising model: {out.strip()} / {line}")


# --- F2, F14: user errors before anything is made ----------------------------------------


@pytest.mark.parametrize(
    "argv, message",
    [
        (["start", "--thread", "", "--app", "demo", "hello"], "--thread must not be empty"),
        (["start", "--thread", "t", "--run", "", "--app", "demo", "hello"], "--run must not be empty"),
        (["start", "--thread", "t", "--run", " ", "--app", "demo", "hello"], "--run must not be empty"),
        (["start", "--thread", "t", "--app", "", "hello"], "--app must not be empty"),
        (["start", "--thread", "t", "--app", "demo", "hello", ""], "MESSAGE must not be empty"),
        (["start", "--thread", "t\x1b[2J", "--app", "demo", "hello"], "--thread must not hold control characters"),
        (["worker", "--app", "examples.demo_app:app", "--once", "--lease", "0"], "--lease must be"),
        (["worker", "--app", "examples.demo_app:app", "--once", "--lease", "-1"], "--lease must be"),
        (["worker", "--app", "examples.demo_app:app", "--once", "--lease", "nan"], "--lease must be"),
        (["worker", "--app", "examples.demo_app:app", "--once", "--lease", "inf"], "--lease must be"),
        (["worker", "--app", "examples.demo_app:app", "--poll", "0", "--once"], "--poll must be"),
        (["worker", "--app", "examples.demo_app:app", "--poll", "nan", "--once"], "--poll must be"),
        (["worker", "--app", "examples.demo_app:app", "--poll", "-1", "--once"], "--poll must be"),
        (["worker", "--app", "examples.demo_app:app", "--worker-id", "", "--once"], "--worker-id must not be empty"),
        (["worker", "--app", "examples.demo_app:app", "--worker-id", "a\nb", "--once"], "--worker-id must not hold"),
        (["worker", "--app", "../etc:x", "--once"], "--app '../etc:x'"),
        (["worker", "--app", "json:loads", "--once"], "not a worker app"),
        (["runs", "--limit", "-1"], "--limit must be"),
        (["inspect", ""], "RUN_ID must not be empty"),
        (["resume", "r1", "--ticket", "", "--approve"], "--ticket must not be empty"),
        (["resume", "r1", "--ticket", "t", "--approve", "--reason", "x"], "--reason only with --deny"),
    ],
)
def test_user_errors_are_one_line_exit_2_and_create_nothing(
    argv: list[str], message: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(ROOT))
    store = ["--store", url(tmp_path / "fresh.db")]
    assert main([argv[0], *store, *argv[1:]]) == 2
    line = _one_line(capsys.readouterr().err)
    assert line.startswith(f"runkernel {argv[0]}: ") and message in line, line
    assert list(tmp_path.iterdir()) == []


def test_a_non_utf8_positional_is_named_by_its_metavar(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["inspect", "--store", "memory:", "r\udcff"]) == 2
    assert "RUN_ID is not valid UTF-8" in capsys.readouterr().err
    assert main(["start", "--store", "memory:", "--thread", "t", "--app", "a", "x\udced"]) == 2
    assert "MESSAGE is not valid UTF-8" in capsys.readouterr().err


# --- F10: which commands create a store ---------------------------------------------------


def test_worker_refuses_a_missing_store_and_start_creates_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(ROOT))
    missing = url(tmp_path / "typo.db")
    assert main(["worker", "--store", missing, "--app", "examples.demo_app:app", "--once"]) == 2
    assert "no store at" in _one_line(capsys.readouterr().err)
    assert list(tmp_path.iterdir()) == []
    assert main(["start", "--store", missing, "--thread", "t", "--app", "demo", "hi"]) == 0
    assert (tmp_path / "typo.db").exists()


# --- F8: exit codes -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "argv, message",
    [
        (["db", "init", "--store", "sqlite:///x.db"], "db init is for server stores"),
        (["db", "init", "--store", "memory:"], "db init is for server stores"),
        (["db", "migrate", "--store", "sqlite:///nosuch.db"], "no store at nosuch.db"),
        (["db", "migrate", "--store", "memory:"], "only a SQLite"),
    ],
)
def test_bad_usage_of_db_is_exit_2(
    argv: list[str], message: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(argv) == 2
    assert message in _one_line(capsys.readouterr().err)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    "option, value, message",
    [
        ("--external", "1e999", "not a finite number"),
        ("--external", "-1e999", "not a finite number"),
        ("--external", '{"a":1,"a":2}', "duplicate key 'a'"),
        ("--delegation", '[{"k":1,"k":1}]', "duplicate key 'k'"),
        ("--input-json", '{"x":1,"x":2}', "duplicate key 'x'"),
    ],
)
def test_bad_json_in_resume_is_exit_2_and_queues_nothing(
    option: str, value: str, message: str, waiting_store: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["resume", "--store", url(waiting_store), "r1", "--ticket", "ticket-approval-0001", f"{option}={value}"]
    assert main(argv) == 2
    assert message in _one_line(capsys.readouterr().err)
    store = SqliteStore(waiting_store)
    assert store.pending_commands("r1") == []
    store.close()


def test_input_json_sends_a_json_value_and_input_a_string() -> None:
    from runkernel.cli.entry import build_parser
    from runkernel.cli.commands import _payload
    from runkernel.kernel.protocol import ProvideInput

    parser = build_parser()
    args = parser.parse_args(["resume", "r1", "--ticket", "t", "--input-json", '{"a": [1, 2]}'])
    assert _payload(args)[1] == ProvideInput({"a": [1, 2]})
    args = parser.parse_args(["resume", "r1", "--ticket", "t", "--input", "42"])
    assert _payload(args)[1] == ProvideInput("42")
    assert parser._subparsers is not None
    choices = parser._subparsers._group_actions[0].choices
    assert isinstance(choices, dict)
    assert "as a string" in choices["resume"].format_help()


def test_a_refusal_carries_the_command_prefix(waiting_store: Path, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["resume", "--store", url(waiting_store), "r1", "--ticket", "forged", "--approve"]
    assert main(argv) == 1
    assert _one_line(capsys.readouterr().err).startswith("runkernel resume: refused: ")


def test_a_non_unicode_message_is_bad_input_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["start", "--store", url(tmp_path / "s.db"), "--thread", "t", "--app", "demo", "x\ud800"]
    assert main(argv) == 2
    assert "not valid UTF-8" in _one_line(capsys.readouterr().err)
    assert list(tmp_path.iterdir()) == []


# --- F4: passwords in URLs --------------------------------------------------------------


@pytest.mark.parametrize(
    "store",
    [
        "postgresql://postgres@127.0.0.1:1/test?password=s3cret",
        "postgresql://postgres@127.0.0.1:1/test?sslpassword=s3cret&password=s3cret",
        "postgresql://postgres:s3cret@127.0.0.1:1/test",
    ],
)
def test_a_password_in_the_url_is_masked_in_every_message(store: str, capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("psycopg_pool")
    assert main(["runs", "--store", store]) in (1, 2)
    line = _one_line(capsys.readouterr().err)
    assert "s3cret" not in line and "***" in line, line


def test_redacted_masks_the_user_info_and_the_query_password() -> None:
    from runkernel.adapters.stores.registry import redacted

    assert redacted("postgresql://u:pw@h:5/d?schema=s&password=pw") == "postgresql://u:***@h:5/d?schema=s&password=***"
    assert redacted("postgresql://u@h/d?PASSWORD=x") == "postgresql://u@h/d?PASSWORD=***"
    assert redacted("sqlite:///a.db") == "sqlite:///a.db"


# --- F5: control characters in text output --------------------------------------------------


def test_inspect_and_runs_escape_control_characters(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from runkernel.testing import step
    from runkernel.kernel.protocol import Activate
    from runkernel.kernel.state import Message
    from runkernel.kernel.values import Role

    path = tmp_path / "esc.db"
    store = SqliteStore(path)
    text = "hi \x1b]0;pwned\x07 \x1b[31mRED\r\x9b"
    decision = step(None, Activate("t\x1b[2J\tx\ny", "resc", 0, (Message(Role.USER, text),), "demo"))
    assert decision.commit is not None
    store.append(decision.commit)
    store.close()
    assert main(["inspect", "--store", url(path), "resc"]) == 0
    shown = capsys.readouterr().out
    assert "\x1b" not in shown and "\x07" not in shown and "\r" not in shown and "\x9b" not in shown
    assert "\\x1b]0;pwned\\x07" in shown
    assert main(["runs", "--store", url(path)]) == 0
    rows = capsys.readouterr().out.splitlines()
    assert len(rows) == 2, rows
    assert "t\\x1b[2J\\tx\\ny" in rows[1]
    assert main(["runs", "--store", url(path), "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)[0]["thread_id"] == "t\x1b[2J\tx\ny"


# --- F9: check-trace's output failing is not "illegal" ----------------------------------------


def _legal_trace(tmp_path: Path, n: int = 1) -> Path:
    """A legal trace file; files of different ``n`` are legal judged together too (their
    Threads, Runs and tickets differ)."""
    path = tmp_path / ("t.jsonl" if n == 1 else f"t{n}.jsonl")
    from runkernel.adapters.stores.serial import commit_text

    commits, _ = awaiting_run(f"t{n}", f"r{n}", f"ticket-approval-000{n}")
    path.write_text("".join(commit_text(c) + "\n" for c in commits))
    return path


@pytest.mark.parametrize("buffered", [True, False], ids=["buffered", "unbuffered"])
def test_check_trace_into_a_full_disk_is_exit_2_not_illegal(tmp_path: Path, buffered: bool) -> None:
    trace = _legal_trace(tmp_path)
    # buffered, the report still sits in stdout's buffer at exit, and the interpreter's
    # last flush must not fail again (exit 120)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
    if not buffered:
        env["PYTHONUNBUFFERED"] = "1"
    with open("/dev/full", "w") as full:
        result = subprocess.run(
            [sys.executable, "-m", "runkernel.cli", "check-trace", str(trace)],
            stdout=full, stderr=subprocess.PIPE, text=True, check=False, env=env,
        )
    print(f"check-trace > /dev/full ({'buffered' if buffered else 'unbuffered'}): exit {result.returncode}, "
          f"{result.stderr.strip()}")
    assert result.returncode == 2
    assert "cannot write" in _one_line(result.stderr)


def test_check_trace_into_a_closed_pipe_dies_like_sigpipe(tmp_path: Path) -> None:
    # two files that are one legal trace (the same file twice would be one trace twice:
    # illegal, whichever file's report the closed pipe cut)
    first, second = _legal_trace(tmp_path, 1), _legal_trace(tmp_path, 2)
    reader, writer = os.pipe()
    os.close(reader)
    try:
        result = subprocess.run(
            [sys.executable, "-m", "runkernel.cli", "check-trace", str(first), str(second)],
            stdout=writer, stderr=subprocess.PIPE, text=True, check=False,
        )
    finally:
        os.close(writer)
    print(f"check-trace into a closed pipe: exit {result.returncode}, stderr {result.stderr!r}")
    assert result.returncode == 141
    assert result.stderr == ""


# --- F15, F16 ------------------------------------------------------------------------------


def test_simulate_refuses_before_it_creates_the_export_directory(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "sim.db"
    assert main(["simulate", "--runs", "2", "--store", url(db), "--no-progress"]) == 0
    capsys.readouterr()
    assert main(["simulate", "--runs", "2", "--store", url(db), "--export", str(tmp_path / "newdir"), "--no-progress"]) == 2
    assert "pass --reset" in _one_line(capsys.readouterr().err)
    assert not (tmp_path / "newdir").exists()


def test_counts_in_messages_are_plural_only_when_they_are_many(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from runkernel.cli.text import plural

    assert (plural(1, "thread"), plural(2, "thread"), plural(0, "entry", "entries")) == (
        "1 thread", "2 threads", "0 entries",
    )
    out = tmp_path / "out"
    out.mkdir()
    (out / "a.jsonl").write_text("")
    assert main(["simulate", "--runs", "1", "--store", "memory:", "--export", str(out), "--no-progress"]) == 2
    assert "(1 entry)" in capsys.readouterr().err
    other = tmp_path / "other.db"
    import sqlite3

    db = sqlite3.connect(other)
    db.execute("CREATE TABLE foo (x)")
    db.close()
    assert main(["runs", "--store", url(other)]) == 2
    line = _one_line(capsys.readouterr().err)
    assert "holds foo but" in line and "[" not in line, line


def test_check_trace_exits_with_the_worst_verdict_of_its_files_in_every_order(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # docs/reference/commands.md: 0 legal, 1 illegal, 2 not a trace; with several files the highest wins
    from runkernel.adapters.stores.serial import commit_text

    legal = _legal_trace(tmp_path)
    lines = legal.read_bytes().splitlines(keepends=True)
    other, _ = awaiting_run("t2", "r2", "ticket-approval-0002")  # another Thread and ticket
    illegal = tmp_path / "illegal.jsonl"
    illegal.write_text("".join(commit_text(c) + "\n" for c in other + other[-1:]))  # the last version twice
    not_a_trace = tmp_path / "not-a-trace.jsonl"
    not_a_trace.write_bytes(lines[0][: len(lines[0]) // 2] + b"\n")  # a line cut in half
    verdicts = {legal: 0, illegal: 1, not_a_trace: 2}
    # the files of one call are one trace: a file given again repeats its Thread's
    # versions (illegal at its first line), a file that is not a trace stays one
    again = {legal: 1, illegal: 1, not_a_trace: 2}
    orders = list(itertools.product(verdicts, repeat=2)) + list(itertools.permutations(verdicts))
    for files in orders:
        code = main(["check-trace", *(str(f) for f in files)])
        captured = capsys.readouterr()
        expected = [(again if f in files[:n] else verdicts)[f] for n, f in enumerate(files)]
        assert code == max(expected), [f.name for f in files]
        # every file is judged and reported once, the legal ones on stdout
        assert captured.out.count("\n") == expected.count(0)
        assert captured.err.count("\n") == len(expected) - expected.count(0)
    print(f"check-trace over {len(orders)} orders of 2 and 3 files: each exited with its worst verdict")


def test_check_trace_refuses_standard_input_twice(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check-trace", "-", str(_legal_trace(tmp_path)), "-"]) == 2
    assert "- (standard input) may be given once" in _one_line(capsys.readouterr().err)


def test_inspect_labels_a_timers_due_time_apart_from_a_deadline(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from runkernel.kernel.values import WaitKind

    path = tmp_path / "timer.db"
    store = SqliteStore(path)
    for commit in awaiting_run("t1", "r1", "tk-timer", kind=WaitKind.SCHEDULED, due_at="2099-01-01T00:00:00Z")[0]:
        store.append(commit)
    for commit in awaiting_run("t2", "r2", "tk-approve", expires_at="2098-01-01T00:00:00Z")[0]:
        store.append(commit)
    store.close()
    assert main(["inspect", "--store", url(path), "r1"]) == 0
    shown = capsys.readouterr().out
    assert "  due at: 2099-01-01T00:00:00Z" in shown and "deadline:" not in shown
    assert main(["inspect", "--store", url(path), "r2"]) == 0
    assert "  deadline: 2098-01-01T00:00:00Z" in capsys.readouterr().out


def test_inspect_numbers_pending_commands_as_resume_printed_them(
    waiting_store: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    base = ["resume", "--store", url(waiting_store), "r1", "--ticket", "ticket-approval-0001"]
    assert main([*base, "--approve"]) == 0
    assert main([*base, "--deny", "--reason", "too pricey"]) == 1, "a wait takes one answer"
    assert main(["cancel", "--store", url(waiting_store), "r1"]) == 0
    numbers = [line.split()[2] for line in capsys.readouterr().out.splitlines()]
    assert main(["inspect", "--store", url(waiting_store), "r1"]) == 0
    shown = capsys.readouterr().out
    assert f'  - command {numbers[0]}: {{"type":"resume"' in shown and f"  - command {numbers[1]}: " in shown, shown
    assert main(["inspect", "--store", url(waiting_store), "r1", "--format", "json"]) == 0
    pending = json.loads(capsys.readouterr().out)["pending_commands"]
    assert [str(p["entry_id"]) for p in pending] == numbers
    assert pending[0]["command"]["command"]["payload"] == {"type": "approve"}
    assert pending[1]["command"] == {"type": "end", "kind": "cancelled"}
