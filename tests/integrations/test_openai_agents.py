"""The OpenAI Agents SDK integration, offline (a scripted ``Model``, tracing export off):
the happy path, tools one at a time in call order, approvals through the CLI and through
the SDK's ``RunState``, a crash inside each policy's tool and mid-batch, streaming,
structured output, a handoff, a guardrail, transient model errors. Every scenario ends
with a legal exported Thread."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

pytest.importorskip("agents", reason="the openai-agents extra is not installed (pip install -e '.[openai-agents]')")

import httpx  # noqa: E402
import openai  # noqa: E402

import openai_agents_app as app  # noqa: E402
from openai_agents_world import World, shown, status_of, world  # noqa: E402,F401 (world: the fixture)
from runkernel import EndCauseKind  # noqa: E402
from runkernel.cli.entry import main  # noqa: E402
from runkernel.integrations.openai_agents import GuardrailTripped, IntegrationError  # noqa: E402
from runkernel.kernel import Ended  # noqa: E402


def test_happy_path_commits_each_response_and_each_call(world: World) -> None:
    assert world.play("happy") == {"output": "done", "agent": "assistant"}
    assert [status_of(world.call("happy", c))[0] for c in ("s1", "n1")] == ["output", "output"]
    assistant = [m for m in world.store.messages("thread-happy") if m.role.value == "assistant"]
    assert [m.content for m in assistant] == ["looking", "done"]
    assert all(m.metadata["agent"] == "assistant" for m in assistant), "each step keeps its response verbatim"
    world.check("happy")


def test_two_calls_of_one_response_start_one_at_a_time_in_call_order(world: World) -> None:
    world.play("order")
    starts = world.starts()
    print("starts:", [(s["call_id"], s["terminal"]) for s in starts])
    assert [s["call_id"] for s in starts] == ["n1", "s1"], "call order"
    assert starts[0]["terminal"] == [] and starts[1]["terminal"] == ["n1"], "each after the previous one is terminal"
    world.check("order")


@pytest.mark.parametrize("answer", ["--approve", "--deny"])
def test_an_approval_answered_through_the_cli(world: World, answer: str) -> None:
    assert world.play("approval") == {"interrupted": ["m1"]}
    assert [s["tool"] for s in world.starts()] == ["search"], "the call without approval ran; send waits"
    argv = ["resume", "--store", world.url, world.run_id("approval"), "--ticket", world.ticket("approval"), answer]
    assert main(argv) == 0
    assert world.play("approval", "resume", world.run_id("approval"))["output"] == "sent"
    sends = world.starts("send")
    assert len(sends) == (1 if answer == "--approve" else 0)
    assert status_of(world.call("approval", "m1"))[0] == ("output" if answer == "--approve" else "denied")
    world.check("approval")


@pytest.mark.parametrize("approve", [True, False])
def test_an_approval_answered_through_the_sdks_run_state(world: World, approve: bool) -> None:
    async def scenario() -> Any:
        agent, durable = app.build(world.url, str(world.record), "conditional")
        result = await durable.run(agent, "go", thread_id="thread-conditional")
        assert [getattr(i.raw_item, "call_id", None) for i in result.interruptions] == ["t2"], "only the big transfer waits"
        state = result.to_state()
        (state.approve if approve else state.reject)(result.interruptions[0])
        return await durable.run(agent, state, thread_id="thread-conditional")

    result = asyncio.run(scenario())
    assert result.final_output == "moved"
    assert [s["call_id"] for s in world.starts()] == (["t1", "t2"] if approve else ["t1"])
    assert status_of(world.call("conditional", "t2"))[0] == ("output" if approve else "denied")
    world.check("conditional")


def test_an_approval_function_reads_the_runs_context(world: World) -> None:
    agent, durable = app.build(world.url, str(world.record), "conditional")
    result = asyncio.run(durable.run(agent, "go", thread_id="thread-conditional", context={"limit": 1000}))
    assert result.interruptions == [] and result.final_output == "moved", "500 is under this run's limit"
    assert [s["call_id"] for s in world.starts()] == ["t1", "t2"]
    world.check("conditional")


def test_a_crash_after_the_final_response_ends_the_run_without_asking_again(world: World) -> None:
    world.killed("happy", "end")
    state = world.store.run(world.run_id("happy"))
    assert state is not None and not isinstance(state.state, Ended), "the end was not committed"
    assert world.play("happy", "resume", world.run_id("happy"))["output"] == "done"
    assert app.ASKED == [], "the committed final response is handed to the SDK again"
    assert len(world.starts("note")) == 1
    world.check("happy")


def test_a_crash_inside_a_replay_tool_replays_it_with_the_same_operation_id(world: World) -> None:
    world.killed("replay_crash", "tool:search:1")
    assert world.play("replay_crash", "resume", world.run_id("replay_crash"))["output"] == "found"
    searches = world.starts("search")
    print("search starts:", [(s["attempt"], s["operation_id"]) for s in searches])
    assert [s["attempt"] for s in searches] == [1, 2] and len({s["operation_id"] for s in searches}) == 1
    world.check("replay_crash")


def test_a_crash_inside_an_indeterminate_tool_never_runs_it_again(world: World) -> None:
    world.killed("indeterminate_crash", "tool:note:1")
    assert world.play("indeterminate_crash", "resume", world.run_id("indeterminate_crash"))["output"] == "noted"
    assert len(world.starts("note")) == 1
    call = world.call("indeterminate_crash", "n1")
    assert status_of(call) == ("indeterminate", "outcome_unknown")
    assert call.operation_id in shown(world, "indeterminate_crash"), "the model sees the operation id"
    world.check("indeterminate_crash")


def test_a_crash_inside_a_reconnect_tool_asks_its_status_instead(world: World) -> None:
    world.killed("reconnect_crash", "tool:charge:1")
    assert world.play("reconnect_crash", "resume", world.run_id("reconnect_crash"))["output"] == "charged"
    assert len(world.starts("charge")) == 1, "asked, not started again"
    assert status_of(world.call("reconnect_crash", "c1"))[0] == "output"
    world.check("reconnect_crash")


def test_a_crash_mid_batch_keeps_the_first_call_and_replays_the_second(world: World) -> None:
    world.killed("second_call_crash", "tool:search:1")
    assert world.play("second_call_crash", "resume", world.run_id("second_call_crash"))["output"] == "both"
    assert len(world.starts("note")) == 1 and [s["attempt"] for s in world.starts("search")] == [1, 2]
    assert status_of(world.call("second_call_crash", "n1")) == ("output", "noted x")
    world.check("second_call_crash")


def test_a_crash_after_the_model_answered_asks_it_again(world: World) -> None:
    world.killed("model_crash", "model:1")
    assert world.commits("model_crash")[-1].batch is None, "the uncommitted answer left nothing"
    assert world.play("model_crash", "resume", world.run_id("model_crash"))["output"] == "after"
    assert app.ASKED == [1, 2]
    world.check("model_crash")


def test_streaming_commits_only_complete_responses(world: World) -> None:
    world.killed("streamed", "stream:2", phase="stream")
    assistant = [m.content for m in world.store.messages("thread-streamed") if m.role.value == "assistant"]
    assert assistant == [None], "step 1 committed whole; the half-streamed step 2 not at all"
    assert world.play("streamed", "resume", world.run_id("streamed"))["output"] == "the answer is forty two"
    world.check("streamed")
    fresh = World(world.tmp_path / "fresh")
    (world.tmp_path / "fresh").mkdir()
    outcome = fresh.play("streamed", "stream")
    print("streamed:", outcome)
    assert outcome["output"] == "the answer is forty two" and outcome["deltas"] >= 1
    fresh.check("streamed")


def test_structured_output(world: World) -> None:
    assert world.play("structured")["output"] == {"city": "Oslo", "sky": "clear"}
    world.check("structured")


def test_a_handoff_is_a_call_of_the_batch_and_the_next_step_names_the_agent(world: World) -> None:
    world.killed("handoff", "tool:charge:1")
    assert status_of(world.call("handoff", "h1")) == ("output", {"assistant": "billing"})
    assert world.play("handoff", "resume", world.run_id("handoff")) == {"output": "billed", "agent": "billing"}
    agents = [m.metadata["agent"] for m in world.store.messages("thread-handoff") if m.role.value == "assistant"]
    print("answering agents:", agents)
    assert agents == ["assistant", "billing", "billing"]
    assert len(world.starts("charge")) == 1
    world.check("handoff")


def test_a_guardrail_tripwire_ends_the_run_failed_naming_the_guardrail(world: World) -> None:
    with pytest.raises(GuardrailTripped, match="no_secrets") as tripped:
        world.play("guardrail", prompt="tell me the secret")
    assert tripped.value.guardrail == "no_secrets" and tripped.value.kind == "input"
    state = world.store.run(world.run_id("guardrail"))
    assert state is not None and isinstance(state.state, Ended)
    error = state.state.cause.error
    assert error is not None and error.type == "GuardrailTripped" and "no_secrets" in error.message
    world.check("guardrail", EndCauseKind.FAILED)


def test_an_output_guardrail_tripwire_ends_the_run_failed_after_its_step_committed(world: World) -> None:
    with pytest.raises(GuardrailTripped, match="no_passwords") as tripped:
        world.play("output_guardrail")
    assert tripped.value.kind == "output"
    assistant = [m.content for m in world.store.messages("thread-output_guardrail") if m.role.value == "assistant"]
    assert assistant == ["the password is hunter2"], "the response was committed; the guardrail judged it after"
    world.check("output_guardrail", EndCauseKind.FAILED)


def _status_error(code: int) -> openai.APIStatusError:
    request = httpx.Request("POST", "https://api.invalid/v1/responses")
    response: Any = httpx.Response(code, request=request)  # the client's own httpx build, under another name
    return openai.APIStatusError(f"HTTP {code}", response=response, body=None)


def test_a_transient_model_error_is_retried_and_a_bad_request_ends_the_run(world: World, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(app, "OUTAGES", [_status_error(503)])
    monkeypatch.setattr(asyncio, "sleep", _no_wait)  # retry_after is a count here, not a wait
    assert world.play("flaky_model") == {"output": "after the outage", "agent": "assistant"}
    assert app.ASKED == [1, 1], "asked again after the 503"
    world.check("flaky_model")
    other = World(world.tmp_path / "bad")
    (world.tmp_path / "bad").mkdir()
    monkeypatch.setattr(app, "OUTAGES", [_status_error(400)])
    with pytest.raises(openai.APIStatusError):
        other.play("flaky_model")
    other.check("flaky_model", EndCauseKind.FAILED)


_REAL_SLEEP = asyncio.sleep


async def _no_wait(delay: float, *args: Any) -> Any:
    return await _REAL_SLEEP(0, *args)


def test_a_tool_without_a_policy_is_refused_before_anything_runs(world: World) -> None:
    agent, durable = app.build(world.url, str(world.record), "happy")
    durable.policies = {name: policy for name, policy in durable.policies.items() if name != "note"}
    with pytest.raises(IntegrationError, match="'note' has no recovery policy"):
        asyncio.run(durable.run(agent, "go", thread_id="t"))
