"""Durable Pydantic AI agents recover: the nine prototype scenarios and the other crash
points, offline (``FunctionModel`` scripts on SQLite). Crashes are real: the agent runs in
a subprocess that SIGKILLs itself inside a tool body, between the model's answer and its
commit, mid-stream or before the end, and the Run is resumed from the store alone. Every
scenario checks the downstream record and that the exported trace passes check-trace.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

pytest.importorskip("pydantic_ai", reason="the pydantic-ai extra is not installed (pip install -e '.[pydantic-ai]')")

from pydantic_ai_app import build  # noqa: E402
from pydantic_ai_world import HAS_METADATA, World, once_each, status_of, world  # noqa: E402,F401 (world: the fixture)
from runkernel import EndCauseKind, OperationStatus, StatusReply  # noqa: E402
from runkernel.kernel import Ended, Role  # noqa: E402
from runkernel.adapters.stores.sqlite import SqliteStore  # noqa: E402
from runkernel.adapters.stores.contract import Checkpoint  # noqa: E402
from runkernel.integrations.pydantic_ai import RunEnded, StillRunning  # noqa: E402


def test_happy_path(world: World) -> None:
    assert world.play("happy") == {"deferred": False, "output": "done"}
    assert len(world.starts("search")) == len(world.starts("note")) == 1
    assert status_of(world.call("happy", "s1"))[0] == "output"
    world.check("happy")


def test_approval_approved(world: World) -> None:
    first = world.play("approval")
    assert first == {"deferred": True, "approvals": ["m1"], "calls": []}
    assert world.starts("send") == [] and len(world.starts("search")) == 1
    world.check("approval", None)
    done = world.play("approval", "resume", world.run_id("approval"), {"approvals": {"m1": True}})
    assert done == {"deferred": False, "output": "sent"}
    assert len(world.starts("send")) == 1 and len(world.starts("search")) == 1
    assert status_of(world.call("approval", "m1")) == ("output", "sent to bob")
    world.check("approval")


def test_approval_denied(world: World) -> None:
    world.play("approval")
    done = world.play("approval", "resume", world.run_id("approval"), {"approvals": {"m1": False}})
    assert done["output"] == "sent"
    assert world.starts("send") == []
    assert status_of(world.call("approval", "m1")) == ("denied", "The tool call was denied.")
    world.check("approval")


def test_crash_inside_an_indeterminate_tool(world: World) -> None:
    world.killed("indeterminate_crash", "tool:note:1")
    done = world.play("indeterminate_crash", "resume", world.run_id("indeterminate_crash"))
    assert done["output"] == "noted"
    assert len(world.starts("note")) == 1, "an indeterminate tool never runs again"
    assert status_of(world.call("indeterminate_crash", "n1")) == ("indeterminate", "outcome_unknown")
    shown = [m.content for m in world.store.messages("thread-indeterminate_crash") if m.role is Role.TOOL]
    assert shown and isinstance(shown[0], dict) and shown[0]["kind"] == "indeterminate" and shown[0]["reason"] == "outcome_unknown"
    assert "operation_id" in shown[0], "the model sees the operation id for reconciliation"
    world.check("indeterminate_crash")


def test_crash_inside_a_replay_tool(world: World) -> None:
    world.killed("replay_crash", "tool:search:1")
    assert world.play("replay_crash", "resume", world.run_id("replay_crash"))["output"] == "found"
    starts = world.starts("search")
    print("replay starts:", starts)
    assert [s["attempt"] for s in starts] == [1, 2]
    assert len({s["operation_id"] for s in starts}) == 1, "the operation id is the idempotency key"
    world.check("replay_crash")


def test_crash_inside_a_reconnect_tool(world: World) -> None:
    world.killed("reconnect_crash", "tool:charge:1")
    assert world.play("reconnect_crash", "resume", world.run_id("reconnect_crash"))["output"] == "charged"
    assert len(world.starts("charge")) == 1, "a reconnect tool is asked its status, never started again"
    assert status_of(world.call("reconnect_crash", "c1")) == ("output", {"charged": True})
    world.check("reconnect_crash")


def test_a_reconnect_tool_still_running_is_asked_again_never_restarted(world: World) -> None:
    world.killed("reconnect_crash", "tool:charge:1")
    agent, durable = build(world.url, str(world.record), "reconnect_crash")
    asked: list[str] = []

    def status(operation_id: str, lease_epoch: int | None) -> StatusReply:
        asked.append(operation_id)
        if len(asked) < 3:
            return StatusReply(OperationStatus.RUNNING)
        return StatusReply(OperationStatus.DONE, {"charged": True})

    durable.status, durable.poll_interval = {"charge": status}, 0.0
    assert asyncio.run(durable.resume(agent, world.run_id("reconnect_crash"))).output == "charged"
    print("status asked:", len(asked))
    assert len(asked) == 3 and len(set(asked)) == 1
    assert len(world.starts("charge")) == 1
    world.check("reconnect_crash")


def test_a_reconnect_tool_running_past_its_asks_leaves_the_run_as_committed(world: World) -> None:
    world.killed("reconnect_crash", "tool:charge:1")
    run_id = world.run_id("reconnect_crash")
    agent, durable = build(world.url, str(world.record), "reconnect_crash")
    asked: list[str] = []

    def running(operation_id: str, lease_epoch: int | None) -> StatusReply:
        asked.append(operation_id)
        return StatusReply(OperationStatus.RUNNING)

    durable.status, durable.poll_interval, durable.status_asks = {"charge": running}, 0.0, 2
    before = world.store.run(run_id)
    with pytest.raises(StillRunning, match="still running"):
        asyncio.run(durable.resume(agent, run_id))
    assert len(asked) == 2
    after = world.store.run(run_id)
    assert after is not None and before is not None and not isinstance(after.state, Ended)
    assert after.batch == before.batch, "the call is still Executing, as committed"
    durable.status = {"charge": lambda op, epoch: StatusReply(OperationStatus.DONE, {"charged": True})}
    assert asyncio.run(durable.resume(agent, run_id)).output == "charged"
    assert len(world.starts("charge")) == 1
    world.check("reconnect_crash")


def test_crash_in_the_second_call_of_a_batch(world: World) -> None:
    world.killed("second_call_crash", "tool:search:1")
    assert world.play("second_call_crash", "resume", world.run_id("second_call_crash"))["output"] == "both"
    assert len(world.starts("note")) == 1, "the finished first call is not run again"
    assert [s["attempt"] for s in world.starts("search")] == [1, 2]
    world.check("second_call_crash")


def test_crash_inside_an_approved_tool_during_the_resume(world: World) -> None:
    world.play("approval")
    run_id = world.run_id("approval")
    world.killed("approval", "tool:send:1", "resume", run_id, {"approvals": {"m1": True}})
    assert world.play("approval", "resume", run_id)["output"] == "sent"
    assert len(world.starts("send")) == 1
    assert status_of(world.call("approval", "m1")) == ("indeterminate", "outcome_unknown")
    world.check("approval")


def test_a_second_run_in_one_thread(world: World) -> None:
    agent, durable = build(world.url, str(world.record), "happy")

    async def two_runs() -> tuple[Any, Any]:
        first = await agent.run("go", conversation_id="thread-happy")
        second = await agent.run("again", message_history=first.all_messages())
        return first, second

    first, second = asyncio.run(two_runs())
    assert first.output == "done" and second.output == "done"
    runs = {c.run_id for c in world.commits("happy")}
    assert len(runs) == 2
    assert len(world.starts("search")) == 1, "the script's third reply is text: the second Run calls no tool"
    assert once_each(world.starts("search"))
    world.check("happy")


@pytest.mark.parametrize("step", [1, 2])
def test_a_crash_between_the_models_answer_and_its_commit(world: World, step: int) -> None:
    world.killed("model_crash", f"model:{step}")
    before = world.store.run(world.run_id("model_crash"))
    assert before is not None and before.step == step - 1, "the answer was never committed"
    assert world.play("model_crash", "resume", world.run_id("model_crash"))["output"] == "after"
    assert len(world.starts("note")) == 1
    world.check("model_crash")


def test_an_indeterminate_call_can_end_the_run_with_its_operation_id(world: World) -> None:
    world.killed("indeterminate_crash", "tool:note:1")
    agent, durable = build(world.url, str(world.record), "indeterminate_crash", end_on_indeterminate=True)
    run_id = world.run_id("indeterminate_crash")
    with pytest.raises(RunEnded) as ended:
        asyncio.run(durable.resume(agent, run_id))
    call = world.call("indeterminate_crash", "n1")
    assert ended.value.cause is EndCauseKind.OUTCOME_UNKNOWN and ended.value.operation_ids == (call.operation_id,)
    assert len(world.starts("note")) == 1
    world.check("indeterminate_crash", EndCauseKind.OUTCOME_UNKNOWN)


def test_a_crash_mid_stream_loses_only_the_deltas(world: World) -> None:
    world.killed("streamed", "stream:2", "stream")
    run_id = world.run_id("streamed")
    state = world.store.run(run_id)
    assert state is not None and state.step == 1, "nothing of the streamed reply was committed"
    assert world.play("streamed", "resume", run_id)["output"] == "the answer is forty two"
    assert len(world.starts("search")) == 1
    world.check("streamed")


def test_a_crash_after_the_final_answer_commits_and_before_the_end(world: World) -> None:
    world.killed("happy", "after_run")
    state = world.store.run(world.run_id("happy"))
    assert state is not None and not isinstance(state.state, Ended) and state.step == 2
    assert world.play("happy", "resume", world.run_id("happy"))["output"] == "done"
    assert state.step == world.store.run(world.run_id("happy")).step, "the model is not asked again"  # type: ignore[union-attr]
    assert len(world.starts("search")) == len(world.starts("note")) == 1
    world.check("happy")


def test_resuming_an_ended_run_redelivers_its_answer_and_commits_nothing(world: World) -> None:
    world.play("happy")
    before = len(world.commits("happy"))
    assert world.play("happy", "resume", world.run_id("happy"))["output"] == "done"
    assert len(world.commits("happy")) == before
    assert len(world.starts("search")) == 1
    world.check("happy")


def test_a_stream_checkpoint_is_best_effort_and_never_truth(world: World, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CHECKPOINT_EVERY", "2")
    world.killed("streamed", "stream:2:4", "stream")
    run_id = world.run_id("streamed")
    saved = world.store.load_checkpoint(run_id)
    print("checkpoint before the crash:", saved)
    assert saved is not None and saved.step == 2
    assert isinstance(saved.data, dict) and "the answer is forty two".startswith(str(saved.data["text"]))
    assert saved.data["text"] != "the answer is forty two", "only part of the stream was saved"
    state = world.store.run(run_id)
    assert state is not None and state.step == 1, "the checkpoint is not a commit"
    assert world.play("streamed", "resume", run_id)["output"] == "the answer is forty two", "the model is asked again"
    assert world.store.load_checkpoint(run_id) is None, "dropped once the complete response is committed"
    assert len(world.starts("search")) == 1
    world.check("streamed")


def test_a_streamed_run_commits_the_complete_response_and_no_delta(world: World, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CHECKPOINT_EVERY", "1")
    saved: list[Checkpoint] = []
    save = SqliteStore.save_checkpoint

    def saving(store: SqliteStore, checkpoint: Checkpoint) -> None:
        saved.append(checkpoint)
        save(store, checkpoint)

    monkeypatch.setattr(SqliteStore, "save_checkpoint", saving)
    done = world.play("streamed", "stream")
    print("streamed:", done, "checkpoints:", [c.data for c in saved])
    assert done["output"] == "the answer is forty two"
    texts = [c.data["text"] for c in saved if c.step == 2 and isinstance(c.data, dict)]
    assert len(texts) == 5 and texts[-1] == "the answer is forty two", "one checkpoint per delta"
    final = [m for m in world.store.messages("thread-streamed") if m.role is Role.ASSISTANT][-1]
    assert final.content == "the answer is forty two"
    if HAS_METADATA:
        assert [p["content"] for p in final.metadata["parts"]] == ["the answer is forty two"]
    assert world.store.load_checkpoint(world.run_id("streamed")) is None
    world.check("streamed")
