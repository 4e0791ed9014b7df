"""A durable OpenAI Agents SDK agent as the app of ``runkernel worker``: a Run started
with ``runkernel start --app oa``, a worker killed inside a tool, the take-over by another
worker (its tools see the higher lease epoch), an approval answered with ``runkernel
resume``. Offline: the scripted agent of ``openai_agents_app`` on SQLite."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys

import pytest

pytest.importorskip("agents", reason="the openai-agents extra is not installed (pip install -e '.[openai-agents]')")

from openai_agents_world import ROOT, World, world  # noqa: E402,F401 (world: the fixture)
from runkernel import OperationStatus, StatusReply, Worker  # noqa: E402
from runkernel.adapters.worker.apps import AsyncPushApp, load_app  # noqa: E402
from runkernel.adapters.stores.sqlite import SqliteStore  # noqa: E402
from runkernel.cli.entry import main  # noqa: E402
from runkernel.kernel import Ended  # noqa: E402

TESTS = ROOT / "tests"
#: so long that no machine load runs it out before the worker reaches its crash point;
#: after the kill, the test moves its expiry to now instead of waiting it out
KILLED_LEASE = 3600.0


def _worker(world: World, script: str, *, crash: str = "", lease: float = 30.0) -> subprocess.CompletedProcess[str]:
    """``runkernel worker --once`` in a subprocess (which SIGKILLs itself at ``crash``)."""
    argv = [sys.executable, "-m", "runkernel.cli", "worker", "--store", world.url,
            "--app", "openai_agents_app:worker_app", "--once", "--lease", str(lease)]
    env = {**os.environ, "OA_STORE": world.url, "OA_RECORD": str(world.record), "OA_SCRIPT": script, "CRASH": crash,
           "PYTHONPATH": f"{ROOT}{os.pathsep}{TESTS}"}
    done = subprocess.run(argv, capture_output=True, text=True, timeout=120, env=env, cwd=TESTS)
    print(f"worker (crash={crash or '-'}): rc {done.returncode} {done.stdout.strip()}")
    return done


def _killed(world: World, script: str, crash: str) -> None:
    """Run r1 of ``script`` started with ``runkernel start --app oa``, a worker killed at
    ``crash`` holding its lease, and that lease run out."""
    argv = ["start", "--store", world.url, "--thread", f"thread-{script}", "--run", "r1", "--app", "oa", "go"]
    assert main(argv) == 0
    killed = _worker(world, script, crash=crash, lease=KILLED_LEASE)
    assert killed.returncode == -9, (killed.stdout, killed.stderr)
    store = world.store
    assert isinstance(store, SqliteStore) and store.current_lease("r1") is not None, "the dead worker's lease is held"
    ran_out = sqlite3.connect(store.path, timeout=30.0)  # what waiting out the lease would do
    with ran_out:
        ran_out.execute("UPDATE leases SET expires_at = ? WHERE run_id = 'r1'", (store.store_time(),))
    ran_out.close()


def test_the_app_loads_as_an_async_push_app(world: World, monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in {"OA_STORE": world.url, "OA_RECORD": str(world.record), "OA_SCRIPT": "handoff"}.items():
        monkeypatch.setenv(name, value)
    monkeypatch.chdir(TESTS)
    app = load_app("openai_agents_app:worker_app")
    assert isinstance(app, AsyncPushApp) and app.name == "oa"
    assert set(app.tools) >= {"search", "send", "charge", "transfer_to_billing"}


def test_a_killed_worker_is_taken_over_and_an_approval_comes_from_the_cli(world: World) -> None:
    _killed(world, "approval", "tool:search:1")
    taken = _worker(world, "approval")
    assert taken.returncode == 0, taken.stderr
    assert " 1 take-over," in taken.stdout, taken.stdout
    searches = world.starts("search")
    print("search starts:", [(s["attempt"], s["lease_epoch"]) for s in searches])
    assert [s["attempt"] for s in searches] == [1, 2] and len({s["operation_id"] for s in searches}) == 1
    assert searches[0]["lease_epoch"] < searches[1]["lease_epoch"], "the fencing token rises after a take-over"
    assert world.starts("send") == [], "send waits for its approval"
    assert main(["resume", "--store", world.url, "r1", "--ticket", world.ticket("approval"), "--approve"]) == 0
    assert _worker(world, "approval").returncode == 0
    sends = world.starts("send")
    assert len(sends) == 1 and sends[0]["lease_epoch"] > searches[1]["lease_epoch"]
    state = world.store.run("r1")
    assert state is not None and isinstance(state.state, Ended)
    assert [m.content for m in world.store.messages("thread-approval")][-1] == "sent"
    world.check("approval")


def test_a_reconnect_tool_still_running_lets_the_worker_go_on(world: World, monkeypatch: pytest.MonkeyPatch) -> None:
    _killed(world, "reconnect_crash", "tool:charge:1")
    for name, value in {"OA_STORE": world.url, "OA_RECORD": str(world.record), "OA_SCRIPT": "reconnect_crash"}.items():
        monkeypatch.setenv(name, value)
    from openai_agents_app import worker_app

    app = worker_app()
    app.runner.status = {"charge": lambda op, epoch: StatusReply(OperationStatus.RUNNING)}
    app.runner.status_asks, app.runner.poll_interval = 2, 0.0
    report = Worker(world.store, app, worker_id="w2").run_once()
    print("still running:", report)
    state = world.store.run(world.run_id("reconnect_crash"))
    assert state is not None and not isinstance(state.state, Ended) and report.failures == 0
    assert report.drives == 1 and world.store.current_lease("r1") is None, "released: another poll may ask again"
    assert _worker(world, "reconnect_crash").returncode == 0  # the app's own status finds the charge
    assert len(world.starts("charge")) == 1, "asked, never started again"
    world.check("reconnect_crash")
