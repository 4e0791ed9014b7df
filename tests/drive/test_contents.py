"""The content check: committed messages must be what the model and tools answered."""

from __future__ import annotations

import attrs

from runkernel.adapters.stores.memory import MemoryStore
from runkernel.kernel.state import Message, ThreadCommit
from runkernel.kernel.values import Role
from runkernel.testing import CHECKPOINT_MARK
from runkernel.testing.simulation.contents import check_contents
from runkernel.testing.simulation.engine import ScenarioRun, Trial
from runkernel.testing.simulation.scenarios import catalogue


def played(name: str) -> tuple[Trial, dict[str, list[ThreadCommit]]]:
    scenario = next(s for s in catalogue() if s.name == name)
    store = MemoryStore()
    trial = ScenarioRun(store, scenario, 0, ()).play()
    return trial, {t: list(store.commits(t)) for t in trial.thread_ids}


def scenario_with_tools() -> str:
    return next(s.name for s in catalogue() if s.tools)


def test_an_honest_history_passes() -> None:
    trial, logs = played(scenario_with_tools())
    assert check_contents(trial.world, logs) == []
    assert any(m.role is Role.TOOL for log in logs.values() for c in log for m in c.messages)


def test_a_reply_the_model_never_gave_and_a_tool_value_never_returned_are_found() -> None:
    trial, logs = played(scenario_with_tools())
    trial.world.replies.clear()
    trial.world.answered.clear()
    problems = check_contents(trial.world, logs)
    assert any("assistant message the model never replied" in p for p in problems)
    assert any("is not what its tool answered" in p for p in problems)


def test_checkpoint_content_in_a_committed_message_is_an_i10_violation() -> None:
    trial, logs = played(scenario_with_tools())
    thread_id, log = next(iter(logs.items()))
    leaked = Message(Role.USER, {"deep": [f"{CHECKPOINT_MARK} partial"]})
    log[0] = attrs.evolve(log[0], messages=log[0].messages + (leaked,))
    problems = check_contents(trial.world, logs)
    assert any(p.startswith("I10 ") and "stream checkpoint" in p for p in problems)
