"""A worker app whose tool is a terminal-only delegation (``runkernel worker --app
delegating_app:app`` with this directory on the import path). A parent's first step
asks for two ``research`` delegations and one ordinary ``fetch`` (the calls
``runkernel.conformance.delegating_run`` commits too); each child, a Run whose first
message is its call's arguments, calls ``slow`` once, then answers and ends; the
parent then sums up and ends. ``slow`` takes ``RUNKERNEL_DELEG_TOOL_SECONDS``."""

from __future__ import annotations

import os
import time

from runkernel.adapters.drive.ports import (
    GatePort,
    InferenceRequest,
    ModelReply,
    Returned,
    StatusReply,
    Tool,
    ToolRegistry,
    ToolReply,
)
from runkernel import CallRequest, RunCall
from runkernel.adapters.worker.apps import RuntimeApp
from runkernel.kernel.policies import RecoveryMode, ToolPolicy, ToolRecoveryPolicy
from runkernel.kernel.values import EndCauseKind, JsonValue

NAME = "deleg"
REPLAY = ToolPolicy(ToolRecoveryPolicy(RecoveryMode.REPLAY))


def topic_of(request: InferenceRequest) -> JsonValue | None:
    """A child's topic (its first message is its call's arguments); None for a parent."""
    first = request.messages[0].content if request.messages else None
    return first.get("topic") if isinstance(first, dict) else None


class DelegatingModel:
    def infer(self, request: InferenceRequest) -> ModelReply:
        topic = topic_of(request)
        if topic is not None:
            if request.step == 1:
                return ModelReply("checking", (CallRequest("slow", {"topic": topic}),))
            return ModelReply(f"answer about {topic}", end=EndCauseKind.COMPLETED)
        if request.step == 1:
            calls = (("d1", "research"), ("d2", "research"), ("o3", "fetch"))
            return ModelReply("", tuple(CallRequest(tool, {"topic": call_id}, call_id) for call_id, tool in calls))
        return ModelReply("summary", end=EndCauseKind.COMPLETED)


class Research:
    """The delegation: its executor is the child's activation, so ``run`` never runs."""

    policy = ToolPolicy(terminal_only_delegation=True)

    def run(self, invocation: RunCall) -> ToolReply:
        raise AssertionError("a terminal-only delegation's executor is its child's activation")

    def status(self, operation_id: str, lease_epoch: int | None) -> StatusReply:
        raise AssertionError("not a reconnect tool")


class Counted:
    """An ordinary replay tool that counts its starts and takes ``seconds``."""

    policy = REPLAY

    def __init__(self, seconds: float = 0.0) -> None:
        self.seconds = seconds
        self.starts: list[str] = []

    def run(self, invocation: RunCall) -> ToolReply:
        self.starts.append(invocation.operation_id)
        if self.seconds:
            time.sleep(self.seconds)
        return Returned({"done": invocation.call_id})

    def status(self, operation_id: str, lease_epoch: int | None) -> StatusReply:
        raise AssertionError("not a reconnect tool")


def make_app(gate: GatePort | None = None, seconds: float = 0.0) -> RuntimeApp:
    """The app, with its own tool objects (their ``starts`` count one test's calls)."""
    tools: dict[str, Tool] = {"research": Research(), "fetch": Counted(), "slow": Counted(seconds)}
    return RuntimeApp(NAME, DelegatingModel(), ToolRegistry(tools, max_steps=5), gate=gate)


def app() -> RuntimeApp:
    """What ``runkernel worker --app delegating_app:app`` loads (a factory)."""
    return make_app(seconds=float(os.environ.get("RUNKERNEL_DELEG_TOOL_SECONDS", "0")))
