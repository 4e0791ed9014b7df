"""Real kills: a runtime process on a SQLite store is SIGKILLed mid-Run, repeatedly; a
fresh runtime finishes the Run from the store alone. The commit path under test is the
production one: one transaction per commit (its history rows inside), stream
checkpoints on their own connection that never waits for an fsync.

Each kill lands where it is planned, whatever the machine's speed: the child holds
still at the N-th ``COMMIT`` its durable connection is about to run (the commit's rows
written, not yet committed), or just after its N-th stream checkpoint, says so on its
standard output, and is killed there."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from pathlib import Path

from history_facts import logged_history
from runkernel.adapters.drive.ports import ToolRegistry
from runkernel.adapters.drive.runtime import Runtime
from runkernel.adapters.stores.sqlite import SqliteStore
from runkernel.kernel.state import Ended
from runkernel.specs.checker import Verdict, check_commits
from runkernel.testing import ScriptedModel
from test_runtime_costs import EchoTool, _script

STEPS = 120
#: where each child is killed: at its N-th durable COMMIT, or after its N-th checkpoint
KILLS = (("commit", 5), ("commit", 45), ("checkpoint", 30), ("commit", 100))
CHILD = f"""
import signal, sys
sys.path.insert(0, {str(Path(__file__).parent)!r})
from runkernel.adapters.drive.ports import ToolRegistry
from runkernel.adapters.drive.runtime import Runtime
from runkernel.adapters.stores.sqlite import SqliteStore
from runkernel.kernel.state import Message
from runkernel.kernel.values import Role
from runkernel.testing import ScriptedModel
from test_runtime_costs import EchoTool, _script

where, planned = sys.argv[2], int(sys.argv[3])


def hold(what):
    print(what, flush=True)  # the parent reads this line, then kills this process here
    while True:
        signal.pause()


class HeldStore(SqliteStore):
    checkpoints = 0

    def save_checkpoint(self, checkpoint):
        super().save_checkpoint(checkpoint)
        self.checkpoints += 1
        if where == "checkpoint" and self.checkpoints == planned:
            hold(f"held after checkpoint {{planned}}")


store = HeldStore(sys.argv[1], synchronous="NORMAL")
commits = 0


def traced(statement):
    global commits
    if statement == "COMMIT":
        commits += 1
        if where == "commit" and commits == planned:
            hold(f"held at COMMIT {{planned}}")


store._db.set_trace_callback(traced)  # the durable connection: every commit's transaction
runtime = Runtime(store, ScriptedModel({{"r1": _script({STEPS})}}), ToolRegistry({{"echo": EchoTool()}}))
if store.run("r1") is None:
    runtime.start("t1", "r1", (Message(Role.USER, "go"),))
else:
    runtime.drive("r1")
print("finished", flush=True)
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
    for where, planned in KILLS:
        child = subprocess.Popen(
            [sys.executable, "-c", CHILD, str(path), where, str(planned)], env=dict(os.environ), stdout=subprocess.PIPE,
            text=True,
        )
        assert child.stdout is not None
        said = child.stdout.readline().strip()  # blocks until the child holds at its point
        child.kill()
        child.wait()
        child.stdout.close()
        assert said.startswith("held "), f"the child did not reach {where} {planned}: {said!r}"
        kills.append(_committed(path))
    store = SqliteStore(path)
    outcome = Runtime(store, ScriptedModel({"r1": _script(STEPS)}), ToolRegistry({"echo": EchoTool()})).drive("r1")
    log = list(store.commits("t1"))
    print(f"\nkills {len(kills)} (planned {len(KILLS)}: {KILLS}), at commits {kills}; finished with {len(log)} commits")
    assert len(kills) >= 3, "the child finished before it could be killed"
    assert len(kills) == len(KILLS)
    assert isinstance(outcome.snapshot.state, Ended)
    assert check_commits(log).verdict is Verdict.LEGAL
    facts = logged_history(store, "r1")
    history = store.history("r1")
    assert len(facts.closed_batches) == STEPS
    assert all(history.batch_closed(b) for b in facts.closed_batches)
    assert store.load_checkpoint("r1") is None, "a checkpoint outlived the run"
    store.close()
