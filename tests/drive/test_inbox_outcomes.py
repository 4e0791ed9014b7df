"""Inbox hygiene: every command's outcome is exact, and Ended Runs keep only what was applied."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from runkernel.adapters.drive.inbox import submit_end
from runkernel.adapters.stores.memory import MemoryStore
from runkernel.adapters.drive.ports import Hold, ToolRegistry
from runkernel.adapters.drive.runtime import CommandSettled, Runtime, RuntimeEvent
from runkernel.adapters.stores.serial import end_to_inbox
from runkernel.adapters.stores.sqlite import SqliteStore
from runkernel.adapters.stores.contract import Store
from runkernel.cli.entry import main
from runkernel.kernel.policies import RecoveryMode
from runkernel.kernel.protocol import EndRequest
from runkernel.kernel.state import Awaiting, EndCause, Ended, Message
from runkernel.kernel.values import EndCauseKind, Role, WaitKind
from runkernel.testing import (
    OK,
    Boundary,
    CountingIds,
    CrashAt,
    CrashingStore,
    Position,
    ScriptedGate,
    ScriptedModel,
    ScriptedTool,
    SimulatedCrash,
    StepScript,
    World,
)
from runkernel.testing.simulation.simulate import simulate

TASK = (Message(Role.USER, "do it"),)
CANCEL = EndRequest(EndCause(EndCauseKind.CANCELLED))
STEPS = (StepScript("calling", (("pay", {}),)), StepScript("done", end=EndCauseKind.COMPLETED))


def runtime(store: Store, settled: list[tuple[int, str]]) -> Runtime:
    world = World.new(store)
    tools = ToolRegistry({"pay": ScriptedTool("pay", world, mode=RecoveryMode.INDETERMINATE, replies=(OK,))})

    def record(event: RuntimeEvent) -> None:
        if isinstance(event, CommandSettled):
            settled.append((event.entry.entry_id, event.outcome))

    return Runtime(
        store, ScriptedModel({"r1": STEPS}), tools, gate=ScriptedGate({"pay": Hold(WaitKind.APPROVAL)}),
        ids=CountingIds("t"), on_event=record,
    )


def awaiting(store: Store) -> None:
    assert isinstance(runtime(store, []).start("t1", "r1", TASK).snapshot.state, Awaiting)


def stores(tmp_path: Path) -> list[Store]:
    return [MemoryStore(), SqliteStore(tmp_path / "inbox.db")]


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
def test_of_thirty_cancels_one_is_applied_and_the_others_name_it(tmp_path: Path, kind: str) -> None:
    store = stores(tmp_path)[0 if kind == "memory" else 1]
    awaiting(store)
    entries = [submit_end(store, "r1", CANCEL) for _ in range(30)]
    assert all(isinstance(e, int) for e in entries)
    settled: list[tuple[int, str]] = []
    outcome = runtime(store, settled).drive("r1")
    assert isinstance(outcome.snapshot.state, Ended)
    outcomes = dict(settled)
    applied = [e for e, o in outcomes.items() if o == "applied"]
    assert applied == [entries[0]]
    duplicates = {o for e, o in outcomes.items() if e != entries[0]}
    assert duplicates == {f"refused: already applied by command {entries[0]}"}
    assert len(outcomes) == 30
    # the Ended run's inbox keeps only what was applied
    assert [(e.entry_id, e.outcome) for e in store.commands("r1")] == [(entries[0], "applied")]
    print(f"30 cancels: 1 applied, {len(outcomes) - 1} refused naming command {entries[0]}; 1 row kept")
    store.close()


def test_after_a_crash_the_committed_command_is_applied_before_and_its_duplicates_name_it() -> None:
    store = MemoryStore()
    awaiting(store)
    first, second = submit_end(store, "r1", CANCEL), submit_end(store, "r1", CANCEL)
    with pytest.raises(SimulatedCrash):
        runtime(CrashingStore(store, CrashAt(Boundary.AFTER_WRITE, Position.END)), []).drive("r1")
    # the command was settled in the transaction of the commit that applied it, so the
    # crash after that commit leaves it applied, never pending
    assert isinstance(first, int)
    applied = store.inbox_entry(first)
    assert applied is not None and applied.outcome == "applied"
    settled: list[tuple[int, str]] = []
    runtime(store, settled).drive("r1")
    assert settled == [(second, f"refused: already applied by command {first}")]


def test_a_refusal_names_its_rule() -> None:
    store = MemoryStore()
    awaiting(store)
    # past pre-validation (as a command racing a state change would be): the runtime refuses it
    stop = store.put_command("r1", end_to_inbox(EndRequest(EndCause(EndCauseKind.COMPLETED))))
    settled: list[tuple[int, str]] = []
    runtime(store, settled).drive("r1")
    [(entry, outcome)] = settled
    assert entry == stop and outcome.startswith("refused: ") and "awaiting" in outcome.lower()


def test_a_simulation_leaves_a_bounded_inbox(tmp_path: Path) -> None:
    db = tmp_path / "sim.db"
    store = SqliteStore(db, synchronous="NORMAL")  # durability is not what is tested here
    report = simulate(store, 320, seed=0)
    store.close()
    assert report.complete and not report.violations
    connection = sqlite3.connect(db)
    (rows,) = connection.execute("SELECT count(*) FROM inbox").fetchone()
    (refused,) = connection.execute("SELECT count(*) FROM inbox WHERE outcome LIKE 'refused%'").fetchone()
    (pending,) = connection.execute("SELECT count(*) FROM inbox WHERE state = 'pending'").fetchone()
    (runs,) = connection.execute("SELECT count(*) FROM runs").fetchone()
    connection.close()
    print(f"after 320 simulated runs: {rows} inbox rows for {runs} runs ({refused} refused, {pending} pending)")
    assert refused == 0 and pending == 0
    assert rows <= runs


def test_inspect_shows_settled_commands_with_their_outcomes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import json

    store = SqliteStore(tmp_path / "inspect.db")
    awaiting(store)
    first = submit_end(store, "r1", CANCEL)
    runtime(store, []).drive("r1")
    store.close()
    assert main(["inspect", "--store", f"sqlite:///{tmp_path / 'inspect.db'}", "r1", "--format", "json"]) == 0
    view = json.loads(capsys.readouterr().out)
    assert view["settled_commands"] == [{"entry_id": first, "command": view["settled_commands"][0]["command"], "outcome": "applied"}]
    assert view["settled_commands"][0]["command"]["type"] == "end"
    assert main(["inspect", "--store", f"sqlite:///{tmp_path / 'inspect.db'}", "r1"]) == 0
    assert f"command {first}: applied" in capsys.readouterr().out
