"""Real kills: a runtime process on a SQLite store is SIGKILLed mid-Run, repeatedly; a
fresh runtime finishes the Run from the store alone. The commit path under test is the
production one: one transaction per commit (its history rows inside), stream
checkpoints on their own connection that never waits for an fsync."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

from history_facts import logged_history
from runkernel.adapters.ports import ToolRegistry
from runkernel.adapters.runtime import Runtime
from runkernel.adapters.sqlite_store import SqliteStore
from runkernel.kernel.state import Ended
from runkernel.specs.checker import Verdict, check_commits
from test_runtime_costs import EchoTool, _script
from runkernel.simulation.actors import ScriptedModel

STEPS = 120
CHILD = f"""
import sys
sys.path.insert(0, {str(Path(__file__).parent)!r})
from runkernel.adapters.ports import ToolRegistry
from runkernel.adapters.runtime import Runtime
from runkernel.adapters.sqlite_store import SqliteStore
from runkernel.adapters.store import UnknownRun
from runkernel.kernel.state import Message
from runkernel.kernel.values import Role
from runkernel.simulation.actors import ScriptedModel
from test_runtime_costs import EchoTool, _script

store = SqliteStore(sys.argv[1], synchronous="NORMAL")
runtime = Runtime(store, ScriptedModel({{"r1": _script({STEPS})}}), ToolRegistry({{"echo": EchoTool()}}))
if store.run("r1") is None:
    runtime.start("t1", "r1", (Message(Role.USER, "go"),))
else:
    runtime.drive("r1")
"""


def _committed(path: Path) -> int:
    db = sqlite3.connect(path, timeout=30.0)
    try:
        row = db.execute("SELECT count(*) FROM commits").fetchone()
    except sqlite3.OperationalError:
        return 0
    finally:
        db.close()
    return int(row[0])


def test_a_runtime_killed_mid_run_again_and_again_leaves_a_store_that_finishes(tmp_path: Path) -> None:
    path = tmp_path / "killed.db"
    SqliteStore(path, synchronous="NORMAL").close()
    kills: list[int] = []
    for target in (5, 50, 150, 300):
        child = subprocess.Popen([sys.executable, "-c", CHILD, str(path)], env=dict(os.environ))
        deadline = time.monotonic() + 60
        while _committed(path) < target and child.poll() is None and time.monotonic() < deadline:
            time.sleep(0.002)
        if child.poll() is None:
            child.send_signal(signal.SIGKILL)
            child.wait()
            kills.append(_committed(path))
    store = SqliteStore(path)
    outcome = Runtime(store, ScriptedModel({"r1": _script(STEPS)}), ToolRegistry({"echo": EchoTool()})).drive("r1")
    log = list(store.commits("t1"))
    print(f"\nkilled at commits {kills}; finished with {len(log)} commits")
    assert len(kills) >= 3, "the child finished before it could be killed"
    assert isinstance(outcome.snapshot.state, Ended)
    assert check_commits(log).verdict is Verdict.LEGAL
    facts = logged_history(store, "r1")
    history = store.history("r1")
    assert len(facts.closed_batches) == STEPS
    assert all(history.batch_closed(b) for b in facts.closed_batches)
    assert store.load_checkpoint("r1") is None, "a checkpoint outlived the run"
    store.close()
