"""A durable Pydantic AI agent as the app of ``runkernel worker``: Runs started with
``runkernel start --app pai``, a worker killed inside a tool, the take-over by another
worker (its tools see the higher lease epoch), an approval answered with ``runkernel
resume``. Offline: the scripted ``FunctionModel`` agent of ``pydantic_ai_app`` on SQLite.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys

import pytest

pytest.importorskip("pydantic_ai", reason="the pydantic-ai extra is not installed (pip install -e '.[pydantic-ai]')")

from pydantic_ai_app import worker_app  # noqa: E402
from pydantic_ai_world import ROOT, World, status_of, world  # noqa: E402,F401 (world: the fixture)
from runkernel import OperationStatus, StatusReply, Worker  # noqa: E402
from runkernel.adapters.worker.apps import AsyncPushApp, load_app  # noqa: E402
from runkernel.kernel import Awaiting, Ended  # noqa: E402
from runkernel.adapters.stores.sqlite import SqliteStore  # noqa: E402
from runkernel.cli.entry import main  # noqa: E402
from runkernel.integrations.pydantic_ai import RunkernelDurability  # noqa: E402

TESTS = ROOT / "tests"
#: so long that no machine load runs it out before the worker reaches its crash point;
#: after the kill, the test moves its expiry to now instead of waiting it out
KILLED_LEASE = 3600.0


def _env(world: World, script: str) -> dict[str, str]:
    return {"PAI_STORE": world.url, "PAI_RECORD": str(world.record), "PAI_SCRIPT": script}


def _start(world: World, script: str, run_id: str) -> None:
    argv = ["start", "--store", world.url, "--thread", f"thread-{script}", "--run", run_id, "--app", "pai", "go"]
    assert main(argv) == 0


def _ticket(world: World, run_id: str) -> str:
    state = world.store.run(run_id)
    assert state is not None and isinstance(state.state, Awaiting), state
    return state.state.ticket.ticket_id


def _worker(world: World, script: str, *, crash: str = "", lease: float = 30.0) -> subprocess.CompletedProcess[str]:
    """``runkernel worker --once`` in a subprocess (which SIGKILLs itself at ``crash``)."""
    argv = [sys.executable, "-m", "runkernel.cli", "worker", "--store", world.url,
            "--app", "pydantic_ai_app:worker_app", "--once", "--lease", str(lease)]
    env = {**os.environ, **_env(world, script), "CRASH": crash, "PYTHONPATH": f"{ROOT}{os.pathsep}{TESTS}"}
    done = subprocess.run(argv, capture_output=True, text=True, timeout=120, env=env, cwd=TESTS)
    print(f"worker (crash={crash or '-'}): rc {done.returncode} {done.stdout.strip()}")
    return done


def _killed(world: World, script: str, crash: str) -> None:
    """A worker killed at ``crash`` holding its lease, and that lease run out."""
    killed = _worker(world, script, crash=crash, lease=KILLED_LEASE)
    assert killed.returncode == -9, (killed.stdout, killed.stderr)
    store = world.store
    assert isinstance(store, SqliteStore)
    held = store.current_lease("r1")
    assert held is not None, "the dead worker's lease was released"
    # what waiting out the lease would do: its expiry is the store's clock now
    ran_out = sqlite3.connect(store.path, timeout=30.0)
    with ran_out:
        ran_out.execute("UPDATE leases SET expires_at = ? WHERE run_id = 'r1'", (store.store_time(),))
    ran_out.close()
    assert store.current_lease("r1") is None
    store.close()


def test_the_app_loads_as_an_async_push_app(world: World, monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in _env(world, "happy").items():
        monkeypatch.setenv(name, value)
    monkeypatch.chdir(TESTS)
    app = load_app("pydantic_ai_app:worker_app")
    assert isinstance(app, AsyncPushApp) and app.name == "pai"
    assert set(app.tools) >= {"search", "send", "charge"}


def test_a_worker_drives_a_cli_started_run_through_an_approval_answered_from_the_cli(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, value in _env(world, "approval").items():
        monkeypatch.setenv(name, value)
    _start(world, "approval", "r1")
    store = world.store
    first = Worker(store, worker_app(), worker_id="w1").run_once()
    print("first drive:", first)
    ticket = _ticket(world, "r1")
    assert world.starts("send") == [] and len(world.starts("search")) == 1
    assert Worker(store, worker_app(), worker_id="w2").run_once().drives == 0, "an Awaiting Run has no work"
    assert main(["resume", "--store", world.url, "r1", "--ticket", ticket, "--approve"]) == 0
    second = Worker(store, worker_app(), worker_id="w3").run_once()
    print("second drive:", second)
    assert status_of(world.call("approval", "m1")) == ("output", "sent to bob")
    assert [m.content for m in store.messages("thread-approval")][-1] == "sent"
    epochs = [s["lease_epoch"] for s in world.starts("search") + world.starts("send")]
    print("lease epochs seen by the tools:", epochs)
    assert all(isinstance(e, int) for e in epochs) and epochs == sorted(epochs)
    assert store.current_lease("r1") is None
    assert first.commits + second.commits == len(world.commits("approval")) - 1, "all but the CLI's activation"
    world.check("approval")


def test_a_killed_worker_is_taken_over_and_the_tools_see_the_epoch_rise(world: World) -> None:
    _start(world, "approval", "r1")
    _killed(world, "approval", "tool:search:1")
    store = world.store
    taken = _worker(world, "approval")
    assert taken.returncode == 0, taken.stderr
    assert " 1 take-over," in taken.stdout, taken.stdout
    ticket = _ticket(world, "r1")
    searches = world.starts("search")
    print("search starts:", [(s["attempt"], s["lease_epoch"]) for s in searches])
    assert [s["attempt"] for s in searches] == [1, 2] and len({s["operation_id"] for s in searches}) == 1
    assert searches[0]["lease_epoch"] < searches[1]["lease_epoch"], "the fencing token rises after a take-over"
    assert main(["resume", "--store", world.url, "r1", "--ticket", ticket, "--approve"]) == 0
    assert _worker(world, "approval").returncode == 0
    sends = world.starts("send")
    assert len(sends) == 1 and sends[0]["lease_epoch"] > searches[1]["lease_epoch"]
    state = store.run("r1")
    assert state is not None and isinstance(state.state, Ended)
    world.check("approval")


def test_a_worker_killed_inside_an_indeterminate_tool_never_runs_it_again(world: World) -> None:
    _start(world, "indeterminate_crash", "r1")
    _killed(world, "indeterminate_crash", "tool:note:1")
    store = world.store
    assert _worker(world, "indeterminate_crash").returncode == 0
    assert len(world.starts("note")) == 1, "an indeterminate tool never runs again"
    assert status_of(world.call("indeterminate_crash", "n1")) == ("indeterminate", "outcome_unknown")
    shown = json.dumps([m.content for m in store.messages("thread-indeterminate_crash")])
    assert world.call("indeterminate_crash", "n1").operation_id in shown, "the model sees the operation id"
    world.check("indeterminate_crash")


def test_a_reconnect_tool_still_running_lets_the_worker_go_on(world: World, monkeypatch: pytest.MonkeyPatch) -> None:
    _start(world, "reconnect_crash", "r1")
    _killed(world, "reconnect_crash", "tool:charge:1")
    store = world.store
    for name, value in _env(world, "reconnect_crash").items():
        monkeypatch.setenv(name, value)
    app = worker_app()
    durability = app.durability
    assert isinstance(durability, RunkernelDurability)
    durability.status = {"charge": lambda op, epoch: StatusReply(OperationStatus.RUNNING)}
    durability.status_asks, durability.poll_interval = 2, 0.0
    report = Worker(store, app, worker_id="w2").run_once()
    print("still running:", report)
    state = store.run("r1")
    assert state is not None and not isinstance(state.state, Ended) and report.failures == 0
    assert report.drives == 1, "run_once does not retry a Run that made no progress"
    assert store.current_lease("r1") is None, "released: another poll may ask again"
    assert _worker(world, "reconnect_crash").returncode == 0  # the app's own status finds the charge
    assert len(world.starts("charge")) == 1
    world.check("reconnect_crash")
