"""The worker's account of itself and its stops:

- a SQLite lock held longer than the busy timeout is one outage, ridden out: one report
  when it began, one when it ended, no failed drive, every Run ends;
- a Run a push host ended ``failed`` is counted and reported (any app kind), apart from
  failed drives and tool exceptions;
- the signal handlers are there before the app is imported: a SIGTERM at that very
  moment (the app's import says so on stdout, and waits on stdin) exits 0;
- the first SIGINT says what the worker waits for, the second abandons (exit 130) and
  leaves the lease to expire.
"""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from held_points import POLL, HeldPoints
from runkernel.adapters.drive.actions import Action, Done, WaitFor
from runkernel.adapters.drive.driver import Driver
from runkernel.adapters.stores.sqlite import SqliteStore
from runkernel.adapters.worker.loop import Worker
from runkernel.adapters.worker.outage import OutageBegan, OutageEnded, OutageEvent
from runkernel.cli.entry import main
from runkernel.kernel.state import EndCause, Ended, TypedError
from runkernel.kernel.values import EndCauseKind

ROOT = Path(__file__).resolve().parent.parent.parent
HANG_GUARD = 120.0  # seconds: only so that a broken test fails instead of hanging CI


def _start(url: str, runs: int, app: str) -> None:
    for index in range(runs):
        assert main(["start", "--store", url, "--thread", f"t{index}", "--run", f"r{index}", "--app", app, "go"]) == 0


def _ended(store: SqliteStore, runs: int) -> int:
    return sum(1 for i in range(runs) if isinstance(getattr(store.run(f"r{i}"), "state", None), Ended))


@pytest.mark.parametrize("concurrency", [1, 32], ids=["one-slot", "slots"])
def test_a_sqlite_lock_held_past_the_busy_timeout_is_one_outage_ridden_out(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], concurrency: int
) -> None:
    # one slot: the drive itself meets the lock (its failure is told apart as an outage);
    # slots: the dispatcher's take of several leases at once meets it first
    from race_app import app

    monkeypatch.setenv("RUNKERNEL_DEMO_LEDGER", str(tmp_path / "ledger.db"))
    path = tmp_path / "store.db"
    runs = 10
    _start(f"sqlite:///{path}", runs, "race")
    capsys.readouterr()
    events: list[OutageEvent] = []
    began = threading.Event()
    made: list[Worker] = []

    def heard(event: OutageEvent) -> None:
        events.append(event)
        if isinstance(event, OutageBegan):
            began.set()

    failed: list[BaseException] = []

    def failed_drive(_run_id: str, error: BaseException) -> None:
        failed.append(error)  # the lock taken for a failed drive: the test stops at once
        began.set()

    def work() -> None:
        # a store per thread of control: the worker's is its own thread's
        own = SqliteStore(path, create=False, busy_timeout=0.2)
        made.append(Worker(
            own, app, worker_id="w-lock", poll_interval=0.05, on_outage=heard, on_failure=failed_drive,
            concurrency=concurrency,
        ))
        try:
            made[0].run()
        finally:
            own.close()

    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")  # the write lock, held until the worker said it met it
    thread = threading.Thread(target=work)
    thread.start()
    store = SqliteStore(path, create=False)
    try:
        assert began.wait(HANG_GUARD), "the worker never reported the lock"
        assert failed == [], f"the lock was taken for a failed drive: {failed}"
        holder.execute("ROLLBACK")
        deadline = time.monotonic() + HANG_GUARD
        while _ended(store, runs) < runs or not any(isinstance(e, OutageEnded) for e in events):
            assert time.monotonic() < deadline, "hang guard: the Runs never ended after the lock was released"
            time.sleep(POLL)  # the next look at the condition
    finally:
        if made:
            made[0].shutdown()
        thread.join(timeout=60)
        holder.close()
    worker = made[0]
    report = worker.report
    print(f"\nSQLite lock past a 0.2 s busy timeout: {events}; report {report}")
    assert [type(e) for e in events] == [OutageBegan, OutageEnded]
    assert isinstance(events[0], OutageBegan) and "locked" in events[0].error
    assert report.outages == 1 and report.failures == 0 and _ended(store, runs) == runs
    store.close()


class FailingHost:
    """A push host that ends every Run ``failed`` (as an agent framework does when its
    model raises), then returns: the drive itself went fine."""

    name = "failing"
    tools: dict[str, str] = {}

    def serve(self, driver: Driver, action: Action) -> None:
        if not isinstance(action, (WaitFor, Done)):
            driver.end(EndCauseKind.FAILED, TypedError("ModelHTTPError", "status_code: 400, the model refused"))


def test_a_run_a_push_host_ended_failed_is_counted_and_reported(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    url = f"sqlite:///{tmp_path / 'store.db'}"
    _start(url, 2, "failing")
    capsys.readouterr()
    store = SqliteStore(tmp_path / "store.db", create=False)
    told: list[tuple[str, EndCause]] = []
    worker = Worker(store, FailingHost(), worker_id="w", on_run_failed=lambda run, cause: told.append((run, cause)))
    report = worker.run_once()
    store.close()
    print(f"\nruns ended failed by a push host: {report}; told {told}")
    assert report.runs_failed == 2 and report.failures == 0 and report.tool_exceptions == 0
    assert sorted(run for run, _ in told) == ["r0", "r1"]
    assert all(cause.error is not None and cause.error.type == "ModelHTTPError" for _, cause in told)


def _worker_process(url: str, app: str, env: dict[str, str]) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "runkernel.cli", "worker", "--store", url, "--app", app, "--lease", "30", "--poll", "0.05"],
        cwd=ROOT, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )


def test_a_sigterm_while_the_app_is_imported_stops_the_worker_cleanly(tmp_path: Path) -> None:
    (tmp_path / "slow_import_app.py").write_text(
        "import sys\nprint('importing', flush=True)\nsys.stdin.readline()\nfrom race_app import app\n"
    )
    url = f"sqlite:///{tmp_path / 'store.db'}"
    assert main(["start", "--store", url, "--thread", "t", "--app", "race", "go"]) == 0
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(tmp_path), str(ROOT), str(ROOT / "tests")]),
               RUNKERNEL_DEMO_LEDGER=str(tmp_path / "ledger.db"))
    process = _worker_process(url, "slow_import_app:app", env)
    assert process.stdout is not None and process.stdin is not None
    assert process.stdout.readline() == "importing\n"  # the worker's readiness: the app is being imported
    process.send_signal(signal.SIGTERM)
    out, err = process.communicate("\n", timeout=HANG_GUARD)  # the import goes on only now, after the signal
    print(f"\nSIGTERM during the app's import: exit {process.returncode}; stderr {err.strip()!r}")
    assert process.returncode == 0, err


def test_a_sigterm_while_the_worker_is_built_stops_it_before_its_first_pass(tmp_path: Path) -> None:
    """The signal lands after the store opened and before the worker object is known to
    the handler (a window that load widens): the worker must still stop, not run on."""
    url = f"sqlite:///{tmp_path / 'store.db'}"
    assert main(["start", "--store", url, "--thread", "t", "--app", "race", "go"]) == 0
    (tmp_path / "signal_while_built.py").write_text(
        "import os, signal, sys\n"
        "from runkernel.adapters.worker.loop import Worker\n"
        "from runkernel.cli.entry import main\n"
        "built = Worker.__init__\n"
        "def built_then_signalled(self, *args, **kwargs):\n"
        "    built(self, *args, **kwargs)\n"
        "    os.kill(os.getpid(), signal.SIGTERM)\n"
        "Worker.__init__ = built_then_signalled\n"
        "sys.exit(main(sys.argv[1:]))\n"
    )
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), str(ROOT / "tests")]),
               RUNKERNEL_DEMO_LEDGER=str(tmp_path / "ledger.db"))
    argv = [sys.executable, str(tmp_path / "signal_while_built.py"), "worker", "--store", url,
            "--app", "race_app:app", "--lease", "30", "--poll", "0.05"]
    try:
        done = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=HANG_GUARD)
    except subprocess.TimeoutExpired:
        raise AssertionError("a SIGTERM while the worker was built did not stop it") from None
    print(f"\nSIGTERM while the worker is built: exit {done.returncode}; stdout {done.stdout.strip()!r}")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("worker ") and ": 0 drives" in done.stdout, done.stdout


def test_the_first_sigint_says_what_it_waits_for_and_the_second_abandons(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'store.db'}"
    assert main(["start", "--store", url, "--thread", "t", "--run", "r", "--app", "race", "go"]) == 0
    points = HeldPoints(tmp_path / "points", ["lookup:before:1"])
    env = dict(os.environ, PYTHONPATH=f"{ROOT}{os.pathsep}{ROOT / 'tests'}",
               RUNKERNEL_DEMO_LEDGER=str(tmp_path / "ledger.db"), **points.env())
    process = _worker_process(url, "ride_out_app:app", env)
    assert process.stderr is not None
    try:
        deadline = time.monotonic() + HANG_GUARD
        while not points.arrivals():  # the worker is inside the tool, holding its lease
            assert time.monotonic() < deadline and process.poll() is None, "the tool was never reached"
            time.sleep(POLL)
        process.send_signal(signal.SIGINT)
        first = process.stderr.readline()
        process.send_signal(signal.SIGINT)
        process.wait(timeout=HANG_GUARD)
        rest = process.stderr.read()
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    store = SqliteStore(tmp_path / "store.db", create=False)
    lease = store.current_lease("r")
    store.close()
    print(f"\nfirst SIGINT: {first.strip()!r}\nsecond: {rest.strip()!r}; exit {process.returncode}; lease kept {lease}")
    assert first.startswith("runkernel worker: SIGINT: stopping: waiting for run r: its tool lookup (call ")
    assert "a second SIGINT or SIGTERM abandons" in first
    assert "abandoning" in rest and process.returncode == 130
    assert lease is not None and lease.worker_id != "" and not getattr(lease, "released", False)


_RAISING_AGENT = '''
import os
from pydantic_ai import Agent
from pydantic_ai.models.function import FunctionModel
from runkernel.integrations.pydantic_ai import RunkernelDurability


def broken(messages, info):
    raise ValueError("the model is broken")


durable = RunkernelDurability(os.environ["RAISING_STORE"])
app = durable.worker_app(Agent(FunctionModel(broken), capabilities=[durable]), name="pai")
'''


def test_a_pydantic_ai_model_that_raises_is_counted_and_told(tmp_path: Path) -> None:
    pytest.importorskip("pydantic_ai", reason="the pydantic-ai extra is not installed (pip install -e '.[pydantic-ai]')")
    (tmp_path / "raising_agent.py").write_text(_RAISING_AGENT)
    url = f"sqlite:///{tmp_path / 'store.db'}"
    _start(url, 1, "pai")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(tmp_path), str(ROOT)]), RAISING_STORE=url)
    done = subprocess.run(
        [sys.executable, "-m", "runkernel.cli", "worker", "--store", url, "--app", "raising_agent:app", "--once"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=HANG_GUARD,
    )
    store = SqliteStore(tmp_path / "store.db", create=False)
    snapshot = store.run("r0")
    store.close()
    told = [line for line in done.stderr.splitlines() if line.startswith("runkernel worker: run r0: ")]
    print(f"\nPydantic AI model that raises: exit {done.returncode}; {done.stdout.strip()}; told {told}")
    assert done.returncode == 1, done.stderr  # --once: a Run it drove ended failed
    assert snapshot is not None and isinstance(snapshot.state, Ended) and snapshot.state.cause.kind is EndCauseKind.FAILED
    assert ", 1 run failed," in done.stdout
    # one line: the model failure's own (it says the Run ends failed), or the Run's end
    assert len(told) == 1 and "ValueError: the model is broken" in told[0], done.stderr
    assert "the Run ends failed" in told[0] or "ended failed: " in told[0], done.stderr


def test_an_outage_is_told_once_and_its_backoff_is_capped() -> None:
    from runkernel.adapters.stores.contract import StoreUnavailable
    from runkernel.adapters.worker.outage import OUTAGE_MAX_DELAY, StoreOutage

    now = [0.0]
    heard: list[OutageEvent] = []
    outage = StoreOutage(heard.append, monotonic=lambda: now[0])
    delays = []
    for _ in range(8):  # eight passes, each failing
        outage.begin_pass()
        outage.failed(StoreUnavailable("db down\nsecond line"), drive=True)
        outage.end_pass()
        delays.append(outage.delay())
        now[0] += delays[-1]
    outage.begin_pass()
    outage.end_pass()  # a pass that met no outage ends it
    print(f"\ndelays between retries {delays}; told {heard}")
    assert delays == [0.5, 1.0, 2.0, 4.0, 8.0, OUTAGE_MAX_DELAY, OUTAGE_MAX_DELAY, OUTAGE_MAX_DELAY]
    assert heard == [OutageBegan("db down"), OutageEnded(sum(delays), 7, 8, 0)] and outage.count == 1
